# rcoll — non-recursive build. `./configure` writes config.mk (which optional
# dependencies were found, the version, the install directories) and
# pkgconfig/rcoll.pc; `make` runs `autoconf && ./configure` itself when
# config.mk is missing. `make help` lists the targets; docs/BUILD.md explains
# the layout and the hooks for new directories.

# Goals that must work before configure can run (a fresh machine has no
# autoconf until `make deps` installs it) do not read config.mk; check and demo
# install the dependencies first and then re-invoke make, which configures.
NOCONFIG_GOALS := deps check demo clean distclean help
ifneq ($(filter-out $(NOCONFIG_GOALS),$(or $(MAKECMDGOALS),all)),)
CONFIGURED := yes
include config.mk
# A config.mk from before configure wrote VERSION lacks DEP_LIBS and more:
# remake it (once) even where the timestamps say it is up to date.
ifeq ($(VERSION)$(MAKE_RESTARTS),)
config.mk: FORCE
endif
endif

# `make` alone builds everything, whatever rule comes first below.
.DEFAULT_GOAL := all

CC ?= cc
# Every rule is spelled out below; the built-in ones (e.g. `%: %.c`) would
# only compete with them.
MAKEFLAGS += --no-builtin-rules
.SUFFIXES:
AR ?= ar
OBJCOPY ?= objcopy
AUTOCONF ?= autoconf

# Install directories: configure's (--prefix, --libdir, ... in config.mk, where
# libdir may read ${exec_prefix}/lib), which `make install` can override:
# PREFIX=/x (or prefix=/x) moves every one derived from the prefix, LIBDIR=,
# BINDIR=, INCLUDEDIR=, PKGCONFIGDIR= move one.
ifneq ($(filter command line environment,$(origin PREFIX)),)
prefix := $(PREFIX)
endif
prefix ?= /usr/local
exec_prefix ?= $(prefix)
bindir ?= $(exec_prefix)/bin
libdir ?= $(exec_prefix)/lib
includedir ?= $(prefix)/include
BINDIR ?= $(bindir)
LIBDIR ?= $(libdir)
INCLUDEDIR ?= $(includedir)
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
# Whether any of them was overridden here rather than given to configure:
# then the configured rcoll.pc names the wrong directories (see install-pc).
DIRS_OVERRIDDEN := $(strip $(foreach v,PREFIX BINDIR LIBDIR INCLUDEDIR PKGCONFIGDIR,\
                     $(if $(filter command line environment,$(origin $(v))),$(v))) \
                   $(foreach v,prefix exec_prefix libdir includedir,\
                     $(if $(filter command line,$(origin $(v))),$(v))))

# VERSION comes from config.mk: configure reads it from include/rcoll.h.
SONAME := librcoll.so.$(firstword $(subst ., ,$(VERSION)))

# `make V=1` prints every command; by default one short line per step.
ifeq ($(V),1)
Q :=
msg =
else
Q := @
msg = @printf '  %-5s %s\n' '$(1)' '$(2)';
endif

# Where things go. check-asan re-invokes make with all three pointing into
# build-asan/, so the sanitized tree never mixes with the normal one.
BUILD ?= build
LIBOUT ?= lib
TESTBIN ?= tests/bin
SAN_FLAGS ?=
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer

# Flags. CFLAGS is the user's and comes last, so per-target additions (such as
# reduce.o's -O3 below) and `make CFLAGS=...` override the defaults.
# -Werror follows ./configure --enable-werror: on in a git checkout (and so in
# CI and `make check` there), off in a release tarball.
WERROR := $(if $(filter yes,$(ENABLE_WERROR)),-Werror)
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -O2 -g -pthread \
               -Iinclude -Ilib $(CONFIG_DEFS) $(SAN_FLAGS) $(CONFIG_CFLAGS) $(EXTRA_CFLAGS)
# DEP_CFLAGS and DEP_LIBS (config.mk) hold every optional library configure
# found: its own checks and those of transports/*/configure.m4.
LIB_CFLAGS := $(CFLAGS_BASE) $(DEP_CFLAGS) -fPIC -fvisibility=hidden -DRCOLL_BUILDING_LIBRARY
LDFLAGS_BASE := $(SAN_FLAGS) $(CONFIG_LDFLAGS)

# Every optional library configure found is offered to the linker, but
# --as-needed keeps only those some object really calls: a transport that uses
# UCX pulls in -lucp without this file naming transport directories.
LIB_LDLIBS := -Wl,--as-needed $(DEP_LIBS) -Wl,--no-as-needed -pthread -lm

# ------------------------------------------------------------------ library
LIB_SRCS := $(wildcard lib/*.c) $(wildcard lib/cuda/*.c) $(wildcard transports/*/*.c) \
            $(wildcard algorithms/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)

# CUDA hook: lib/cuda/*.c are host code, built everywhere (they load the CUDA
# libraries with dlopen, so the library needs none of them to load). Device
# code is lib/cuda/kernels.cu (which may #include other lib/cuda/*.cu): with a
# toolkit found, nvcc compiles it into one fatbin that is embedded in the
# library as bytes (lib/cuda/embed_fatbin.sh) and loaded through the driver
# API on first use; nothing needs the CUDA runtime's registration at load
# time. Without a toolkit the embedded image is empty.
CU_MAIN := lib/cuda/kernels.cu
CU_EMBED := $(BUILD)/lib/cuda/rcoll_kernels_embed
LIB_OBJS += $(CU_EMBED).o
NVCC_GENCODE ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
                -gencode arch=compute_90,code=compute_90
NVCC_FLAGS ?= -O3 -std=c++17 $(NVCC_GENCODE)

# The table of algorithms, generated from the descriptors of algorithms/*.c
# (lib/algo.h): adding an algorithm is adding its file.
ALGO_SRCS := $(wildcard algorithms/*.c)
ALGO_TABLE := $(BUILD)/gen/algorithms
LIB_OBJS += $(ALGO_TABLE).o
$(ALGO_TABLE).c: $(ALGO_SRCS) scripts/gen-algorithms.sh $(BUILD)/lib-objects.list
	@mkdir -p $(dir $@)
	$(call msg,GEN,$@)scripts/gen-algorithms.sh $(ALGO_SRCS) > $@.tmp && mv $@.tmp $@
$(ALGO_TABLE).o: $(ALGO_TABLE).c
	$(call msg,CC,$@)$(CC) $(LIB_CFLAGS) $(CFLAGS) -c $< -o $@

LIB_SO := $(LIBOUT)/librcoll.so
LIB_A := $(LIBOUT)/librcoll.a
# The same objects in a plain archive, for programs that call internal
# functions: the tests, rcoll_info, rcoll_tune, the NCCL plugin. Never
# installed; see "static libraries" below for why LIB_A is not enough.
LIB_INTERNAL := $(BUILD)/librcoll-internal.a

# Every object depends on this file, which changes only when the compile or
# link flags do (a new dependency found, another compiler...), not on every
# rerun of configure: reconfiguring with another --prefix rebuilds nothing.
FLAGS_STAMP := $(BUILD)/build-flags

# ------------------------------------------------------------------ bench, tools, examples
# bench/X_perf comes from bench/X_perf.c plus the shared driver (every other
# bench/*.c except rcoll_info.c). With MPI found the bench is built by mpicc so
# that mpiexec can launch it; the library itself never links MPI.
BENCH_BINS := $(patsubst %.c,%,$(wildcard bench/*_perf.c))
BENCH_COMMON_SRCS := $(filter-out bench/%_perf.c bench/rcoll_info.c bench/rcoll_tune.c bench/rcoll_sched%.c bench/rcoll_linkcheck%.c,$(wildcard bench/*.c))
BENCH_COMMON_OBJS := $(BENCH_COMMON_SRCS:%.c=$(BUILD)/%.o)
ifeq ($(RCOLL_HAVE_MPI),1)
BENCH_CC := $(MPICC)
BENCH_DEFS := -DRCOLL_HAVE_MPI=1
else
BENCH_CC := $(CC)
BENCH_DEFS :=
endif
INFO_BIN := $(if $(wildcard bench/rcoll_info.c),bench/rcoll_info) \
            $(if $(wildcard bench/rcoll_tune.c),bench/rcoll_tune) \
            $(if $(wildcard bench/rcoll_sched.c),bench/rcoll_sched) \
            $(if $(wildcard bench/rcoll_linkcheck.c),bench/rcoll_linkcheck)
EXAMPLE_BINS := $(patsubst examples/%.c,examples/bin/%,$(wildcard examples/*.c))
# An MPI example needs mpicc (its rules are with the other examples' below).
ifneq ($(RCOLL_HAVE_MPI),1)
EXAMPLE_BINS := $(filter-out examples/bin/mpi_allreduce,$(EXAMPLE_BINS))
endif

# ------------------------------------------------------------------ tests
# tests/test_X.c is one Criterion binary, TESTBIN/test_X. Any other
# tests/Y.c is a stand-alone program (a driver for a tests/check_*.sh script,
# a micro-benchmark) built into TESTBIN/Y without Criterion. tests/support/*.c
# are the harnesses they share, each compiled once into one archive that every
# test binary and program links: the linker takes only the members a program
# uses, so a program without Criterion links the same archive as long as it
# uses no member that asserts, and a harness that needs UCX, verbs or the
# plugin comes only into the tests that drive it. All link the internal
# archive so that they reach internal (hidden) functions.
TEST_SRCS := $(wildcard tests/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(TESTBIN)/%)
TEST_SUPPORT_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/support/*.c))
TEST_SUPPORT_A := $(BUILD)/tests/libtestsupport.a
TEST_PROG_SRCS := $(filter-out tests/test_%.c,$(wildcard tests/*.c))
TEST_PROGS := $(TEST_PROG_SRCS:tests/%.c=$(TESTBIN)/%)
CHECK_SCRIPTS := $(sort $(wildcard tests/check_*.sh))
# Criterion runs one test at a time by default: the machines have 2 cores and
# many tests start several ranks of their own.
TEST_JOBS ?= 1

all: $(LIB_SO) $(LIB_A) $(BENCH_BINS) $(INFO_BIN) $(EXAMPLE_BINS)

# Reductions are the inner loop of every collective: let the compiler vectorize.
$(BUILD)/lib/reduce.o: CFLAGS += -O3 -funroll-loops

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call msg,CC,$@)$(CC) $(LIB_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

ifeq ($(RCOLL_HAVE_CUDA),1)
$(BUILD)/lib/cuda/rcoll_kernels.fatbin: $(wildcard lib/cuda/*.cu) lib/reduce_math.h lib/cuda/direct_kernel.h lib/cuda/direct_p2p_kernel.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call msg,NVCC,$@)$(NVCC) $(NVCC_FLAGS) -fatbin -Iinclude -Ilib -o $@ $(CU_MAIN)
$(CU_EMBED).c: $(BUILD)/lib/cuda/rcoll_kernels.fatbin lib/cuda/embed_fatbin.sh
	$(call msg,EMBED,$@)lib/cuda/embed_fatbin.sh $< > $@.tmp && mv $@.tmp $@
else
$(CU_EMBED).c: lib/cuda/embed_fatbin.sh $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call msg,EMBED,$@ (no CUDA))lib/cuda/embed_fatbin.sh > $@.tmp && mv $@.tmp $@
endif
$(CU_EMBED).o: $(CU_EMBED).c
	$(call msg,CC,$@)$(CC) $(LIB_CFLAGS) $(CFLAGS) -c $< -o $@

# The real file carries the full version; the soname link is what programs
# load at run time, the plain .so what the linker finds with -lrcoll.
$(LIB_SO): $(LIB_OBJS) $(BUILD)/lib-objects.list
	@mkdir -p $(dir $@)
	$(call msg,LD,$@)$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--no-undefined -o $@.$(VERSION) $(LIB_OBJS) \
	  $(LDFLAGS_BASE) $(LDFLAGS) $(LIB_LDLIBS) $(LDLIBS)
	$(Q)ln -sf librcoll.so.$(VERSION) $(LIBOUT)/$(SONAME)
	$(Q)ln -sf librcoll.so.$(VERSION) $@

# ------------------------------------------------------------------ static libraries
# The shared library exports only RCOLL_API functions (-fvisibility=hidden),
# but in a plain archive every internal function (ib_*, shm_*, socket_*, ...)
# stays a global symbol that could collide with a program's own. So LIB_A,
# the archive users link, holds one object: all library objects joined by a
# relocatable link (ld -r), after which objcopy makes every hidden symbol
# local. Only the RCOLL_API ones remain global (tests/check_symbols.sh checks
# that). Internal programs link LIB_INTERNAL instead.
$(LIB_A): $(BUILD)/librcoll-joined.o
	@mkdir -p $(dir $@)
	$(call msg,LOCAL,$@)$(OBJCOPY) --localize-hidden $< $(BUILD)/rcoll.o
	$(Q)rm -f $@; $(AR) rcs $@ $(BUILD)/rcoll.o

$(BUILD)/librcoll-joined.o: $(LIB_OBJS) $(BUILD)/lib-objects.list
	$(call msg,LD,$@ (-r))$(CC) -nostdlib -r -o $@ $(LIB_OBJS)

$(LIB_INTERNAL): $(LIB_OBJS) $(BUILD)/lib-objects.list
	$(call msg,AR,$@)rm -f $@; $(AR) rcs $@ $(LIB_OBJS)

# Rewritten only when the set of library sources changes, so that deleting or
# renaming a file relinks the libraries without its stale object.
$(BUILD)/lib-objects.list: FORCE
	@mkdir -p $(dir $@)
	@echo '$(LIB_OBJS)' | cmp -s - $@ || echo '$(LIB_OBJS)' > $@

FORCE:

$(BUILD)/bench/%.o: bench/%.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call msg,CC,$@)$(BENCH_CC) $(CFLAGS_BASE) $(BENCH_DEFS) $(CFLAGS) -MMD -MP -c $< -o $@

# rcoll_info, rcoll_tune and rcoll_sched print internal tables, so they link
# the internal archive and need neither MPI nor the shared library.
$(BUILD)/bench/rcoll_info.o $(BUILD)/bench/rcoll_tune.o $(BUILD)/bench/rcoll_sched%.o: BENCH_CC := $(CC)
$(BUILD)/bench/rcoll_info.o $(BUILD)/bench/rcoll_tune.o $(BUILD)/bench/rcoll_sched%.o: BENCH_DEFS :=

bench/%_perf: $(BUILD)/bench/%_perf.o $(BENCH_COMMON_OBJS) $(LIB_SO)
	$(call msg,LD,$@)$(BENCH_CC) -o $@ $(filter %.o,$^) -L$(LIBOUT) -lrcoll -Wl,-rpath,'$$ORIGIN/../lib' \
	  $(LDFLAGS_BASE) $(LDFLAGS) -pthread -lm $(LDLIBS)

bench/rcoll_info: $(BUILD)/bench/rcoll_info.o $(LIB_INTERNAL)
	$(call msg,LD,$@)$(CC) -o $@ $^ $(LDFLAGS_BASE) $(LDFLAGS) $(LIB_LDLIBS) $(LDLIBS)

# rcoll_tune prints the tuner's model for a topology (internal API too).
bench/rcoll_tune: $(BUILD)/bench/rcoll_tune.o $(LIB_INTERNAL)
	$(call msg,LD,$@)$(CC) -o $@ $^ $(LDFLAGS_BASE) $(LDFLAGS) $(LIB_LDLIBS) $(LDLIBS)

# rcoll_sched prints and draws every rank's plan of one call (internal API too).
bench/rcoll_sched: $(BUILD)/bench/rcoll_sched.o $(BUILD)/bench/rcoll_sched_svg.o $(LIB_INTERNAL)
	$(call msg,LD,$@)$(CC) -o $@ $^ $(LDFLAGS_BASE) $(LDFLAGS) $(LIB_LDLIBS) $(LDLIBS)
-include $(BUILD)/bench/rcoll_sched_svg.d

# rcoll_linkcheck measures every pair's link over the public API, launched
# as the benches are (their world and watchdog code, with MPI when found).
LINKCHECK_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(wildcard bench/rcoll_linkcheck*.c))
bench/rcoll_linkcheck: $(LINKCHECK_OBJS) $(BENCH_COMMON_OBJS) $(LIB_SO)
	$(call msg,LD,$@)$(BENCH_CC) -o $@ $(filter %.o,$^) -L$(LIBOUT) -lrcoll -Wl,-rpath,'$$ORIGIN/../lib' \
	  $(LDFLAGS_BASE) $(LDFLAGS) -pthread -lm $(LDLIBS)
-include $(LINKCHECK_OBJS:.o=.d)

examples/bin/%: $(BUILD)/examples/%.o $(LIB_SO)
	@mkdir -p $(dir $@)
	$(call msg,LD,$@)$(CC) -o $@ $< -L$(LIBOUT) -lrcoll -Wl,-rpath,'$$ORIGIN/../../lib' \
	  $(LDFLAGS_BASE) $(LDFLAGS) -pthread -lm $(LDLIBS)

$(BUILD)/examples/%.o: examples/%.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call msg,CC,$@)$(CC) $(CFLAGS_BASE) $(CFLAGS) -MMD -MP -c $< -o $@

# Examples that need more than the library. mpi_allreduce includes <mpi.h>:
# the MPI compiler wrapper configure found builds it, and without one it is
# not built (EXAMPLE_BINS above). device_buffers is built always: with the
# CUDA runtime (-DWITH_CUDA) where configure found a toolkit, else as a
# program that says it needs a GPU. Explicit rules with their own flags, as
# target-specific variables would reach the library (a prerequisite) too.
$(BUILD)/examples/mpi_allreduce.o: examples/mpi_allreduce.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call msg,CC,$@)$(MPICC) $(CFLAGS_BASE) $(CFLAGS) -MMD -MP -c $< -o $@
examples/bin/mpi_allreduce: $(BUILD)/examples/mpi_allreduce.o $(LIB_SO)
	@mkdir -p $(dir $@)
	$(call msg,LD,$@)$(MPICC) -o $@ $< -L$(LIBOUT) -lrcoll -Wl,-rpath,'$$ORIGIN/../../lib' \
	  $(LDFLAGS_BASE) $(LDFLAGS) -pthread $(LDLIBS)
ifeq ($(RCOLL_HAVE_CUDA),1)
$(BUILD)/examples/device_buffers.o: examples/device_buffers.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call msg,CC,$@)$(CC) $(CFLAGS_BASE) -DWITH_CUDA $(CUDA_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@
examples/bin/device_buffers: $(BUILD)/examples/device_buffers.o $(LIB_SO)
	@mkdir -p $(dir $@)
	$(call msg,LD,$@)$(CC) -o $@ $< -L$(LIBOUT) -lrcoll -Wl,-rpath,'$$ORIGIN/../../lib' \
	  $(LDFLAGS_BASE) $(LDFLAGS) $(CUDA_LIBS) -pthread $(LDLIBS)
endif

$(BUILD)/tests/%.o: tests/%.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call msg,CC,$@)$(CC) $(CFLAGS_BASE) $(DEP_CFLAGS) $(CRITERION_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(TEST_SUPPORT_A): $(TEST_SUPPORT_OBJS) $(BUILD)/tests/support-objects.list
	@mkdir -p $(dir $@)
	$(call msg,AR,$@)rm -f $@; ar rcs $@ $(TEST_SUPPORT_OBJS)

# As lib-objects.list: a deleted support file leaves no stale member behind.
$(BUILD)/tests/support-objects.list: FORCE
	@mkdir -p $(dir $@)
	@echo '$(TEST_SUPPORT_OBJS)' | cmp -s - $@ || echo '$(TEST_SUPPORT_OBJS)' > $@

$(TESTBIN)/test_%: $(BUILD)/tests/test_%.o $(TEST_SUPPORT_A) $(LIB_INTERNAL)
	@mkdir -p $(dir $@)
	$(call msg,LD,$@)$(CC) -o $@ $< $(TEST_SUPPORT_A) $(LIB_INTERNAL) $(LDFLAGS_BASE) $(LDFLAGS) \
	  $(or $(CRITERION_LIBS),-lcriterion) $(LIB_LDLIBS) $(LDLIBS)

$(TESTBIN)/%: $(BUILD)/tests/%.o $(TEST_SUPPORT_A) $(LIB_INTERNAL)
	@mkdir -p $(dir $@)
	$(call msg,LD,$@)$(CC) -o $@ $< $(TEST_SUPPORT_A) $(LIB_INTERNAL) $(LDFLAGS_BASE) $(LDFLAGS) $(LIB_LDLIBS) $(LDLIBS)

tests: $(TEST_BINS) $(TEST_PROGS)

# ------------------------------------------------------------------ NCCL net plugin
# lib/libnccl-net-rcoll.so (NCCL_NET_PLUGIN=rcoll): the ncclNet adapter in
# plugin/ over the library's own transport objects, which the linker takes
# from the internal archive as the adapter needs them (one copy of the
# transport code).
# --exclude-libs keeps every symbol of those objects, librcoll's public ones
# included, out of the plugin's exports: only ncclNetPlugin_v8..v11 remain.
# -z nodelete keeps its code mapped when NCCL unloads it, should a transport
# helper thread still be finishing. The plugin's test and benchmark dlopen it
# from $(LIBOUT), so they wait for it (in build-asan/ too: a sanitized test
# loads a sanitized plugin).
PLUGIN_SRCS := $(wildcard plugin/*.c)
PLUGIN_OBJS := $(PLUGIN_SRCS:%.c=$(BUILD)/%.o)
PLUGIN_SO := $(if $(PLUGIN_SRCS),$(LIBOUT)/libnccl-net-rcoll.so)

all: $(PLUGIN_SO)

$(PLUGIN_SO): $(PLUGIN_OBJS) $(LIB_INTERNAL)
	@mkdir -p $(dir $@)
	$(call msg,LD,$@)$(CC) -shared -Wl,-soname,libnccl-net-rcoll.so -Wl,--no-undefined -Wl,-z,nodelete \
	  -Wl,--exclude-libs,ALL -o $@ $(PLUGIN_OBJS) $(LIB_INTERNAL) $(LDFLAGS_BASE) $(LDFLAGS) $(LIB_LDLIBS) $(LDLIBS)

$(TESTBIN)/test_nccl_plugin $(TESTBIN)/bench_nccl_plugin: | $(PLUGIN_SO)

install: install-plugin
install-plugin: $(PLUGIN_SO)
	$(if $(PLUGIN_SO),install -d $(DESTDIR)$(LIBDIR) && install -m 755 $(PLUGIN_SO) $(DESTDIR)$(LIBDIR)/)
uninstall: uninstall-plugin
uninstall-plugin:
	rm -f $(DESTDIR)$(LIBDIR)/libnccl-net-rcoll.so
clean: clean-plugin
clean-plugin:
	rm -f lib/libnccl-net-rcoll.so

-include $(PLUGIN_OBJS:.o=.d)
.PHONY: install-plugin uninstall-plugin clean-plugin

# ------------------------------------------------------------------ fuzzing
# libFuzzer harnesses and `make fuzz` (tests/fuzz/fuzz.mk, docs/fuzzing.md).
include tests/fuzz/fuzz.mk

# ------------------------------------------------------------------ configure
# config.mk is rebuilt when configure's inputs change; an existing
# config.status keeps the options of the last ./configure run. Autoconf alone
# makes configure (configure.ac includes its m4 files itself: no aclocal.m4,
# no automake). include/rcoll.h is an input because configure takes the
# version from it. A release tarball ships configure: should its timestamps
# say otherwise where autoconf is missing, the shipped one is used.
configure: configure.ac $(wildcard m4/*.m4) $(wildcard transports/*/configure.m4) include/rcoll.h
	@if command -v $(AUTOCONF) >/dev/null 2>&1; then \
	  echo "$(AUTOCONF)"; $(AUTOCONF) && touch $@; \
	elif [ -x $@ ] && [ ! -e .git ]; then \
	  echo "warning: $(AUTOCONF) not found; using the configure shipped in this tarball" >&2; touch $@; \
	else \
	  echo "$(AUTOCONF) not found: run 'make deps' (or scripts/setup-deps.sh) first" >&2; exit 1; \
	fi

# CONFIGURE_FLAGS are the options of that first ./configure, when make runs it
# (.ci/run passes --enable-werror, so CI never depends on finding .git).
config.mk: configure config.mk.in pkgconfig/rcoll.pc.in
	@if [ -x config.status ]; then ./config.status --recheck && ./config.status; \
	 else ./configure $(CONFIGURE_FLAGS); fi
pkgconfig/rcoll.pc: config.mk
	./config.status $@

# ------------------------------------------------------------------ check, demo, deps
deps:
	@scripts/setup-deps.sh

# Builds in parallel on every core unless the caller chose -j already. Lazy
# (=), because make shows -j in MAKEFLAGS only while recipes run.
BUILD_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 2))
SUBMAKE := $(MAKE) --no-print-directory

check:
	@scripts/setup-deps.sh
	+@$(SUBMAKE) check-configured
	+@$(SUBMAKE) $(BUILD_JOBS) check-build
	+@$(SUBMAKE) check-run

# A config.mk written before `make deps` installed Criterion lacks it: redo
# the checks once so that the test binaries can be built.
check-configured:
	@if [ "$(HAVE_CRITERION)" != 1 ]; then \
	  echo "Criterion was not found when configure last ran; re-running configure"; \
	  ./config.status --recheck && ./config.status; \
	fi

check-build: all tests asan-build

ifneq ($(HAVE_CRITERION),1)
$(TEST_BINS) asan-tests: criterion-missing
endif
criterion-missing:
	@echo "Criterion is needed for the tests: run 'make deps' (installs libcriterion-dev), then ./configure" >&2
	@exit 1

RESULTS := $(BUILD)/check-results
ASAN_MAKE = $(SUBMAKE) BUILD=build-asan LIBOUT=build-asan/lib TESTBIN=build-asan/tests/bin \
            SAN_FLAGS='$(ASAN_FLAGS)'
# Sanitizers stop the test at the first report, so that a finding fails it.
SAN_ENV := UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
           ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
RUN_CHECKS := TEST_JOBS=$(TEST_JOBS) scripts/run-checks.sh

check-run:
	@rm -rf $(RESULTS); mkdir -p $(RESULTS)
	@$(RUN_CHECKS) criterion $(RESULTS) $(TEST_BINS)
	@BENCH_DIR=$(CURDIR)/bench TEST_BIN_DIR=$(CURDIR)/$(TESTBIN) \
	  $(if $(MPIEXEC),MPIEXEC=$(MPIEXEC)) RCOLL_ROOT=$(CURDIR) \
	  $(RUN_CHECKS) scripts $(RESULTS) $(CHECK_SCRIPTS)
	@$(SAN_ENV) $(RUN_CHECKS) criterion $(RESULTS) $(TEST_SRCS:tests/%.c=build-asan/tests/bin/%)
	@scripts/run-checks.sh summary $(RESULTS)

# The sanitized library and Criterion tests, in build-asan/.
asan-build:
	+@$(ASAN_MAKE) asan-tests

asan-tests: $(LIB_A) $(TEST_BINS)

check-asan: asan-build
	@rm -rf build-asan/check-results; mkdir -p build-asan/check-results
	@$(SAN_ENV) $(RUN_CHECKS) criterion build-asan/check-results $(TEST_SRCS:tests/%.c=build-asan/tests/bin/%)
	@scripts/run-checks.sh summary build-asan/check-results

# ThreadSanitizer, in build-tsan/: the library, the Criterion tests that run
# ranks or transport ends on threads (TSAN_TESTS), and the programs that run
# ranks as threads of one process (conformance, lifetimes), run by
# scripts/run-tsan.sh with tests/tsan.supp, whose every entry says why it is
# there. Not part of `make check` (it rebuilds everything once more;
# scripts/run-tsan.sh prints its time).
# One variant of each reduction loop: target_clones' ifunc resolvers run
# while the dynamic loader relocates, before TSan's runtime is up, and GCC
# instruments them (the program dies with SIGSEGV before main).
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer -DRCOLL_REDUCE_NO_CLONES
TSAN_MAKE = $(SUBMAKE) BUILD=build-tsan LIBOUT=build-tsan/lib TESTBIN=build-tsan/tests/bin \
            SAN_FLAGS='$(TSAN_FLAGS)'
TSAN_TESTS := $(filter $(TEST_BINS),$(addprefix $(TESTBIN)/,test_api test_split test_redop test_tuner_agree \
              test_trace test_socket test_socket_multi test_shm test_shm_faults test_shm_reduce test_sockutil \
              test_bootstrap test_bootstrap_strays test_hello_pending test_ucx test_ucx_multi))
# Preloaded into the Criterion binaries (tests/tsan/arena_shim.c says why);
# not instrumented, since it stands between them and TSan's mmap.
TSAN_SHIM := $(BUILD)/tsan/arena_shim.so
$(TSAN_SHIM): tests/tsan/arena_shim.c
	@mkdir -p $(dir $@)
	$(call msg,CC,$@)$(CC) -shared -fPIC -O2 -Wall -Wextra $(WERROR) -o $@ $< -ldl
tsan-build:
	+@$(TSAN_MAKE) tsan-tests
tsan-tests: $(LIB_A) $(TSAN_TESTS) $(TESTBIN)/conformance $(TESTBIN)/lifetimes $(TSAN_SHIM)
check-tsan: tsan-build
	@TSAN_TESTS='$(patsubst $(TESTBIN)/%,build-tsan/tests/bin/%,$(TSAN_TESTS))' scripts/run-tsan.sh
clean: clean-tsan
clean-tsan:
	rm -rf build-tsan
.PHONY: tsan-build tsan-tests check-tsan clean-tsan

# The verbs transport on Soft-RoCE in QEMU VMs (installs QEMU and a Debian
# kernel as root when missing, else skips); `make check` runs it too.
check-rxe: $(LIB_A)
	@tests/check_rxe.sh
.PHONY: check-rxe

# The lab course (docs/lab/README.md): `make lab-check EX=n` grades exercise
# n in LAB_DIR (the student's copy, docs/lab, by default; tests/check_lab.sh
# also grades the reference solutions, LAB_DIR=tests/lab/solutions).
# tests/lab/lab-check.sh builds what an exercise needs from these objects
# under $(BUILD)/lab/, never in the source tree.
LAB_DIR ?= docs/lab
lab-check: all $(LIB_INTERNAL) $(TEST_SUPPORT_A) $(TESTBIN)/conformance
	@LAB_CC='$(CC)' LAB_CFLAGS='$(CFLAGS_BASE) $(DEP_CFLAGS) $(CFLAGS)' \
	  LAB_LIB_CFLAGS='$(LIB_CFLAGS) $(CFLAGS)' LAB_LDLIBS='$(LDFLAGS_BASE) $(LDFLAGS) $(LIB_LDLIBS) $(LDLIBS)' \
	  LAB_BUILD='$(BUILD)' tests/lab/lab-check.sh '$(EX)' '$(LAB_DIR)'
.PHONY: lab-check

# The library and the Criterion tests built and run as on a machine without
# any optional library (no CUDA, verbs, UCX, hwloc), in build-nodeps/: CI
# installs them all, so `make check` never sees this build. Not part of
# `make check` (it rebuilds everything once more).
NODEPS_MAKE = $(SUBMAKE) BUILD=build-nodeps LIBOUT=build-nodeps/lib TESTBIN=build-nodeps/tests/bin \
              CONFIG_DEFS= DEP_CFLAGS= DEP_LIBS= RCOLL_HAVE_CUDA=0
check-without-deps:
	+@$(NODEPS_MAKE) $(BUILD_JOBS) nodeps-build
	@rm -rf build-nodeps/check-results; mkdir -p build-nodeps/check-results
	@$(RUN_CHECKS) criterion build-nodeps/check-results $(TEST_SRCS:tests/%.c=build-nodeps/tests/bin/%)
	@scripts/run-checks.sh summary build-nodeps/check-results
nodeps-build: $(LIB_SO) $(LIB_A) $(PLUGIN_SO) $(TEST_BINS)
.PHONY: check-without-deps nodeps-build

DEMO_CMD := bench/allreduce_perf -t 2 -b 8 -e 128M -f 4

demo:
	@scripts/setup-deps.sh
	+@$(SUBMAKE) $(BUILD_JOBS) all
	+@$(SUBMAKE) demo-run

# The run's -J file, plotted by scripts/rcoll-plot (exit status 3: no
# matplotlib, which skips the plot and not the demo). The bench never
# overwrites a JSON file (nccl-tests' habit), so the last one goes first.
DEMO_JSON := $(BUILD)/demo/allreduce.json
DEMO_PLOT := $(BUILD)/demo/allreduce.png
demo-run: bench/allreduce_perf
	@echo "== $(DEMO_CMD)   (2 ranks as threads in one process)"
	@mkdir -p $(dir $(DEMO_JSON)) && rm -f $(DEMO_JSON)
	@$(DEMO_CMD) -J $(DEMO_JSON)
	@scripts/rcoll-plot $(DEMO_JSON) -o $(DEMO_PLOT) >/dev/null; rc=$$?; \
	 if [ $$rc = 0 ]; then echo "== plot of this run: $(DEMO_PLOT)"; \
	 elif [ $$rc = 3 ] || [ $$rc = 126 ] || [ $$rc = 127 ]; then \
	   echo "== no plot: scripts/rcoll-plot needs /usr/bin/python3 with matplotlib (apt-get install python3-matplotlib)"; \
	 else exit $$rc; fi

# ------------------------------------------------------------------ install
# pkgconfig/rcoll.pc is written by configure (its Libs.private from the
# libraries configure found and registered as called by rcoll's code). Only
# when `make install` was given other directories than configure (PREFIX=,
# LIBDIR=, ...) are its directory lines replaced by those.
install: all install-pc
	install -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(BINDIR)
	install -m 644 include/rcoll.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 755 $(LIB_SO).$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf librcoll.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf librcoll.so.$(VERSION) $(DESTDIR)$(LIBDIR)/librcoll.so
	install -m 644 $(LIB_A) $(DESTDIR)$(LIBDIR)/
	$(if $(strip $(BENCH_BINS) $(INFO_BIN)),install -m 755 $(BENCH_BINS) $(INFO_BIN) $(DESTDIR)$(BINDIR)/)

install-pc: pkgconfig/rcoll.pc
	install -d $(DESTDIR)$(PKGCONFIGDIR)
ifeq ($(DIRS_OVERRIDDEN),)
	install -m 644 pkgconfig/rcoll.pc $(DESTDIR)$(PKGCONFIGDIR)/rcoll.pc
else
	sed -e 's|^prefix=.*|prefix=$(prefix)|' -e 's|^exec_prefix=.*|exec_prefix=$(exec_prefix)|' \
	    -e 's|^libdir=.*|libdir=$(LIBDIR)|' -e 's|^includedir=.*|includedir=$(INCLUDEDIR)|' \
	    pkgconfig/rcoll.pc > $(DESTDIR)$(PKGCONFIGDIR)/rcoll.pc
endif

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/rcoll.h $(DESTDIR)$(PKGCONFIGDIR)/rcoll.pc \
	  $(DESTDIR)$(LIBDIR)/librcoll.so $(DESTDIR)$(LIBDIR)/librcoll.so.* $(DESTDIR)$(LIBDIR)/librcoll.a \
	  $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(BENCH_BINS) $(INFO_BIN)))

# ------------------------------------------------------------------ dist
# rcoll-VERSION.tar.gz: the files git tracks (as they are in the work tree)
# plus the generated configure, so that `./configure && make` needs no
# autotools. No .git in it, so -Werror is off there by default.
# `make distcheck` unpacks it in $(BUILD)/distcheck and builds it with
# autoconf unavailable.
DIST_NAME = rcoll-$(VERSION)
DIST_DIR = $(BUILD)/dist/$(DIST_NAME)

dist: configure
	@[ -e .git ] || { echo "make dist works in a git checkout" >&2; exit 1; }
	$(Q)rm -rf $(BUILD)/dist; mkdir -p $(DIST_DIR)
	$(Q)git ls-files -z | xargs -0 sh -c 'for f; do [ -e "$$f" ] && printf "%s\0" "$$f"; done' sh | \
	  tar -c --null --no-recursion -T - | tar -x -C $(DIST_DIR)
	$(Q)cp configure $(DIST_DIR)/ && touch $(DIST_DIR)/configure
	$(call msg,DIST,$(DIST_NAME).tar.gz)tar -czf $(DIST_NAME).tar.gz -C $(BUILD)/dist $(DIST_NAME)
	$(Q)rm -rf $(BUILD)/dist

distcheck: dist
	rm -rf $(BUILD)/distcheck; mkdir -p $(BUILD)/distcheck
	tar -xzf $(DIST_NAME).tar.gz -C $(BUILD)/distcheck
	cd $(BUILD)/distcheck/$(DIST_NAME) && ./configure && $(SUBMAKE) AUTOCONF=false $(BUILD_JOBS)
	@echo "$(DIST_NAME).tar.gz builds with ./configure && make"

# ------------------------------------------------------------------ housekeeping
clean:
	rm -rf build build-asan build-nodeps lib/librcoll.so lib/librcoll.so.* lib/librcoll.a tests/bin examples/bin \
	  $(patsubst %.c,%,$(wildcard bench/*_perf.c)) bench/rcoll_info bench/rcoll_tune bench/rcoll_sched bench/rcoll_linkcheck

distclean: clean
	rm -rf config.mk config.status config.log configure autom4te.cache pkgconfig/rcoll.pc rcoll-*.tar.gz

# Link flags a program needs with lib/librcoll.a (scripts that build their
# own test programs ask for them).
print-ldlibs:
	@echo $(LIB_LDLIBS)

help:
	@echo "make            build lib/librcoll.so, lib/librcoll.a, bench/*_perf, bench/rcoll_info, examples"
	@echo "make demo       install deps if needed, build, run a 2-rank all-reduce benchmark and plot it"
	@echo "make check      install deps if needed, build, run all tests (Criterion, tests/check_*.sh, ASan)"
	@echo "make check-asan only the sanitized Criterion tests (build-asan/)"
	@echo "make check-tsan the threaded tests and conformance under ThreadSanitizer (build-tsan/)"
	@echo "make check-without-deps  library and Criterion tests built without CUDA, verbs, UCX, hwloc (build-nodeps/)"
	@echo "make tests      build the Criterion test binaries into tests/bin/"
	@echo "make lab-check EX=n  grade exercise n of the lab course (docs/lab/README.md)"
	@echo "make deps       install the Debian packages the build and tests need (scripts/setup-deps.sh)"
	@echo "make install    [DESTDIR=] into configure's --prefix/--libdir/--includedir/--bindir (default"
	@echo "                /usr/local/...), or PREFIX=, LIBDIR=, INCLUDEDIR=, BINDIR= given here:"
	@echo "                headers, libraries, rcoll.pc, bench programs, the NCCL net plugin"
	@echo "make fuzz       [FUZZ_SECONDS=600] build the libFuzzer harnesses (clang) and run each (docs/fuzzing.md)"
	@echo "make dist       rcoll-<version>.tar.gz, which builds with ./configure && make (no autotools)"
	@echo "make distcheck  make dist, then build the tarball in build/distcheck/"
	@echo "make clean | distclean"
	@echo "./configure --help   options; --disable-werror / --enable-werror (default: on in a git checkout)"

-include $(LIB_OBJS:.o=.d) $(BENCH_COMMON_OBJS:.o=.d) $(TEST_SUPPORT_OBJS:.o=.d) \
         $(patsubst %,$(BUILD)/%.d,$(BENCH_BINS) $(INFO_BIN)) \
         $(TEST_SRCS:%.c=$(BUILD)/%.d) $(TEST_PROG_SRCS:%.c=$(BUILD)/%.d) $(patsubst %.c,$(BUILD)/%.d,$(wildcard examples/*.c))
.PHONY: FORCE all tests install install-pc uninstall clean distclean help deps check check-configured \
        check-build check-run check-asan asan-build asan-tests demo demo-run criterion-missing dist distcheck
# The flags every object is built with, written to FLAGS_STAMP when make
# reads this file and they differ from the file's (make's own file functions:
# no shell quoting, and `make -n` shows only what would really be rebuilt).
BUILD_FLAGS = $(strip $(CC) $(LIB_CFLAGS) $(BENCH_CC) $(BENCH_DEFS) $(CRITERION_CFLAGS) $(CFLAGS) \
              $(NVCC) $(NVCC_FLAGS) $(RCOLL_HAVE_CUDA) $(LDFLAGS_BASE) $(LDFLAGS) $(LIB_LDLIBS) $(LDLIBS))
ifeq ($(CONFIGURED),yes)
ifneq ($(file <$(FLAGS_STAMP)),$(BUILD_FLAGS))
$(shell mkdir -p $(BUILD))
$(file >$(FLAGS_STAMP),$(BUILD_FLAGS))
endif
endif

.DELETE_ON_ERROR:
# Keep objects made through pattern-rule chains (bench, tests): no rebuilds.
.SECONDARY:
