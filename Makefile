# rcoll — non-recursive build. `./configure` writes config.mk (optional
# dependencies found); without it the defaults below build the host library.
-include config.mk

CC ?= cc
PREFIX ?= /usr/local
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g -fPIC -pthread \
               -fvisibility=hidden -Iinclude -Ilib -DRCOLL_BUILDING_LIBRARY
CFLAGS += $(CFLAGS_BASE) $(EXTRA_CFLAGS)
LDLIBS += -pthread -lm

LIB_SRCS := $(wildcard lib/*.c) $(wildcard transports/*/*.c) $(wildcard algorithms/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=build/%.o)

all: lib/librcoll.so lib/librcoll.a

build/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

lib/librcoll.so: $(LIB_OBJS)
	$(CC) -shared -Wl,-soname,librcoll.so.0 -o $@ $^ $(LDFLAGS) $(LDLIBS)

lib/librcoll.a: $(LIB_OBJS)
	rm -f $@; ar rcs $@ $^

clean:
	rm -rf build lib/librcoll.so lib/librcoll.a

-include $(LIB_OBJS:.o=.d)
.PHONY: all clean
