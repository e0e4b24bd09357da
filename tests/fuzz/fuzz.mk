# Fuzzing: tests/fuzz/fuzz_<target>.c are libFuzzer harnesses for the code
# that parses bytes from outside (docs/fuzzing.md). Built with clang, ASan and
# UBSan in build-fuzz/, the library's objects with coverage instrumentation
# (-fsanitize=fuzzer-no-link) and without the CUDA fatbin (no device code is
# parsed there). Included by the Makefile; the rules below run in a sub-make
# whose BUILD is build-fuzz.
#
#   make fuzz-build                 the harnesses, build-fuzz/bin/fuzz_<target>
#   make fuzz-corpus                rewrite the seeds in tests/fuzz/corpus/ (gen_corpus.c)
#   make fuzz [FUZZ_SECONDS=600]    each for that long (FUZZ_JOBS=2 at a time),
#             [FUZZ_TARGETS="uid settings"]   crashes saved in build/fuzz/crashes/<target>/
# tests/check_fuzz.sh (make check) runs each for a few seconds.
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=build-fuzz/bin/%)
FUZZ_CC ?= clang
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_MAKE = $(SUBMAKE) BUILD=build-fuzz LIBOUT=build-fuzz/lib TESTBIN=build-fuzz/tests/bin CC=$(FUZZ_CC) \
            RCOLL_HAVE_CUDA=0 SAN_FLAGS='-fsanitize=fuzzer-no-link $(FUZZ_SAN)'
FUZZ_SECONDS ?= 600
FUZZ_JOBS ?= 2

fuzz-build:
	+@$(FUZZ_MAKE) fuzz-bins

fuzz-bins: $(FUZZ_BINS)

# Only the plugin's harness links the plugin's objects (they define the
# ncclNetPlugin_v* tables).
build-fuzz/bin/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(LIB_INTERNAL) $(PLUGIN_OBJS)
	@mkdir -p $(dir $@)
	$(call msg,LD,$@)$(CC) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $< \
	  $(if $(filter plugin,$*),$(PLUGIN_OBJS)) $(LIB_INTERNAL) $(LDFLAGS) $(LIB_LDLIBS) $(LDLIBS)

# The seeds of tests/fuzz/corpus/<target>/ (gen_corpus.c says what they are).
build-fuzz/bin/gen_corpus: $(BUILD)/tests/fuzz/gen_corpus.o $(LIB_INTERNAL)
	@mkdir -p $(dir $@)
	$(call msg,LD,$@)$(CC) $(FUZZ_SAN) -o $@ $< $(LIB_INTERNAL) $(LDFLAGS) $(LIB_LDLIBS) $(LDLIBS)

fuzz-corpus: fuzz-build
	+@$(FUZZ_MAKE) build-fuzz/bin/gen_corpus
	build-fuzz/bin/gen_corpus tests/fuzz/corpus

fuzz: fuzz-build
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) $(if $(FUZZ_TARGETS),FUZZ_TARGETS='$(FUZZ_TARGETS)') \
	  tests/check_fuzz.sh

clean: clean-fuzz
clean-fuzz:
	rm -rf build-fuzz build/fuzz

-include $(FUZZ_SRCS:%.c=$(BUILD)/%.d)
.PHONY: fuzz fuzz-build fuzz-bins fuzz-corpus clean-fuzz
