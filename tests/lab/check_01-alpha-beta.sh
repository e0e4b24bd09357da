#!/usr/bin/env bash
# Lab exercise 01 (docs/lab/01-alpha-beta): the student's fit.py reads
# bench tables and fits t = alpha + beta S. The tables: one the grader makes
# up with known numbers, and two measured here (bench/sendrecv_perf and
# bench/allreduce_perf, 2 ranks as threads). tests/lab/grade_fit.py
# compares the student's fit with least squares on the same rows.
set -uo pipefail
source tests/lab/lab_lib.sh
EXDIR=$1
W=$LAB_WORK
BENCH=${BENCH_DIR:-bench}
[[ -f $EXDIR/fit.py ]] || { lab_fail "$EXDIR/fit.py is missing"; lab_done 01; }
command -v python3 >/dev/null || { echo "lab exercise 01 needs python3"; exit 77; }
tables=()
for b in sendrecv allreduce; do
  if lab_run 120 "$BENCH/${b}_perf" -t 2 -b 8 -e 8M -f 4 -n 20 -w 5 > "$W/$b.txt" 2>&1; then
    tables+=("$W/$b.txt")
    echo "  measured: $BENCH/${b}_perf -t 2 -b 8 -e 8M -f 4 -n 20 -w 5 > $W/$b.txt"
  else
    lab_fail "$BENCH/${b}_perf did not run (make first?)"; tail -n 5 "$W/$b.txt" | lab_show
  fi
done
python3 tests/lab/grade_fit.py "$EXDIR/fit.py" "${tables[@]}" > "$W/grade.log" 2>&1
cat "$W/grade.log"
LAB_PASSED=$((LAB_PASSED + $(grep -c '^  PASS' "$W/grade.log")))
LAB_FAILED=$((LAB_FAILED + $(grep -c '^  FAIL' "$W/grade.log")))
grep -q '^  \(PASS\|FAIL\)' "$W/grade.log" || lab_fail "the grader stopped before it checked anything"
lab_done 01
