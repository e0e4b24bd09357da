#!/usr/bin/env bash
# Runs every libFuzzer harness of tests/fuzz/ (docs/fuzzing.md) from its
# committed corpus for FUZZ_SECONDS each (5 here, so that `make check` spends
# well under a minute on it; `make fuzz` passes 600). Fails if any harness
# finds a crash, a leak, undefined behaviour or a broken invariant; the input
# is saved under build/fuzz/crashes/<target>/. Skips (77) where clang cannot
# link a libFuzzer program.
#
#   FUZZ_SECONDS=5      run time of each harness
#   FUZZ_JOBS=2         harnesses at a time (the machines have 2 cores)
#   FUZZ_TARGETS="..."  only these (names after fuzz_), default all
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

FUZZ_SECONDS=${FUZZ_SECONDS:-5}
FUZZ_JOBS=${FUZZ_JOBS:-2}
FUZZ_CC=${FUZZ_CC:-clang}
OUT=build/fuzz

if ! command -v "$FUZZ_CC" >/dev/null 2>&1; then
  echo "SKIP: $FUZZ_CC is not installed (scripts/setup-deps.sh installs clang and libclang-rt-dev)"
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
  >"$probe/p.c"
if ! "$FUZZ_CC" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2>"$probe/err"; then
  echo "SKIP: $FUZZ_CC cannot link a libFuzzer program (install libclang-rt-dev): $(head -n 3 "$probe/err")"
  exit 77
fi

echo "== building the harnesses (build-fuzz/)"
make --no-print-directory -j"${FUZZ_BUILD_JOBS:-2}" fuzz-build || { echo "FAIL: the harnesses do not build"; exit 1; }

targets=()
if [[ -n ${FUZZ_TARGETS:-} ]]; then
  read -r -a targets <<<"$FUZZ_TARGETS"
else
  for src in tests/fuzz/fuzz_*.c; do
    t=${src#tests/fuzz/fuzz_}
    targets+=("${t%.c}")
  done
fi

# One harness: new inputs go to build/fuzz/corpus/<t> (the first directory),
# the committed seeds and reproducers are only read.
run_one() {
  local t=$1 bin=build-fuzz/bin/fuzz_$1
  mkdir -p "$OUT/corpus/$t" "$OUT/crashes/$t" "$OUT/logs" "tests/fuzz/corpus/$t"
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    nice -n 19 "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$OUT/crashes/$t/" "$OUT/corpus/$t" "tests/fuzz/corpus/$t" >"$OUT/logs/$t.log" 2>&1
}

declare -A pids
for t in "${targets[@]}"; do
  [[ -x build-fuzz/bin/fuzz_$t ]] || { echo "FAIL: no harness fuzz_$t"; exit 1; }
  while (($(jobs -rp | wc -l) >= FUZZ_JOBS)); do wait -n; done
  echo "== fuzz_$t for ${FUZZ_SECONDS} s"
  run_one "$t" &
  pids[$t]=$!
done

failed=0
printf '%-10s %12s %8s %s\n' target executions seconds result
for t in "${targets[@]}"; do
  wait "${pids[$t]}"
  rc=$?
  log=$OUT/logs/$t.log
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
  if ((rc == 0)); then
    result=ok
  else
    result="FAILED (exit $rc): $(grep -a -m1 -E 'ERROR:|invariant broken' "$log"); input in $OUT/crashes/$t/, log $log"
    failed=1
  fi
  printf '%-10s %12s %8s %s\n' "$t" "${execs:-?}" "${secs:-?}" "$result"
done
exit $failed
