#!/usr/bin/env bash
# The lab course (docs/lab/README.md) stays gradable: for every exercise,
# `make lab-check EX=n` must FAIL on the student skeleton in docs/lab/ and
# PASS on the reference solution in tests/lab/solutions/. Each run must get
# as far as its verdict line, so that a checker that breaks (a missing
# program, a build error) is not mistaken for a skeleton that fails.
# About two minutes on two cores, most of it exercise 02's conformance runs.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
command -v python3 >/dev/null || { echo "check_lab: exercises 01 and 03 need python3"; exit 77; }

# The checks run make inside make check: give it a clean slate of flags.
lab() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory lab-check "$@" 2>&1; }

failed=0
for ex in 1 2 3 4 5 6; do
  nn=$(printf '%02d' "$ex")
  out=$(lab EX=$ex)
  if grep -qE "^== lab exercise $nn: [0-9]+ of [0-9]+ checks FAILED" <<<"$out"; then
    echo "ok   exercise $nn: the skeleton fails its checks ($(grep -c '^  FAIL' <<<"$out") failed)"
  else
    echo "FAIL exercise $nn: the skeleton in docs/lab/ was not graded as failing:"
    tail -n 15 <<<"$out" | sed 's/^/     /'
    failed=1
  fi
  out=$(lab EX=$ex LAB_DIR=tests/lab/solutions)
  if grep -qE "^== lab exercise $nn: all [0-9]+ checks passed" <<<"$out"; then
    echo "ok   exercise $nn: the reference solution passes ($(grep -c '^  PASS' <<<"$out") checks)"
  else
    echo "FAIL exercise $nn: the reference solution in tests/lab/solutions/ did not pass:"
    grep -E '^  FAIL' <<<"$out" | head -n 10 | sed 's/^/     /'
    tail -n 15 <<<"$out" | sed 's/^/     /'
    failed=1
  fi
done
exit $failed
