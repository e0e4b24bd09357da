#!/usr/bin/env bash
# make check-tsan: runs the ThreadSanitizer build (build-tsan/, made by
# `make tsan-build`): the threaded Criterion tests named in TSAN_TESTS, then
# tests/tsan/conformance.sh (conformance with ranks as threads) and
# tests/check_lifetimes.sh's thread runs, totalled like `make check`. A race
# report makes the program exit with status 66, which fails its test.
# tests/tsan.supp lists what is suppressed, and why.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

RESULTS=build-tsan/check-results
rm -rf "$RESULTS"
mkdir -p "$RESULTS"
# history_size=4: the "previous access" of a report survives longer runs.
# die_after_fork=0: tests that kill a rank fork it from a process that has
# threads already (a transport's), and the child starts threads of its own.
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 history_size=4 die_after_fork=0 \
suppressions=$PWD/tests/tsan.supp ${TSAN_OPTIONS:-}"
# UCX's memory hooks (libucm patches mmap, madvise...) run inside TSan's own
# thread start-up, before TSan knows the thread, and crash it; rcoll needs
# none of them (it registers no memory with UCX's cache).
export UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no
# Every wait inside the library is bounded; TSan makes everything slower.
export RCOLL_TIMEOUT=${RCOLL_TIMEOUT:-120}
t0=$SECONDS
# Criterion's runner needs tests/tsan/arena_shim.c under TSan.
# shellcheck disable=SC2086 # a word list on purpose
LD_PRELOAD=$PWD/build-tsan/tsan/arena_shim.so scripts/run-checks.sh criterion "$RESULTS" ${TSAN_TESTS:-}
TEST_BIN_DIR=build-tsan/tests/bin LIFETIMES_CYCLES=${LIFETIMES_CYCLES:-30} LIFETIMES_MODES=threads \
  scripts/run-checks.sh scripts "$RESULTS" tests/tsan/conformance.sh tests/check_lifetimes.sh
echo "check-tsan: $((SECONDS - t0)) s"
scripts/run-checks.sh summary "$RESULTS"
