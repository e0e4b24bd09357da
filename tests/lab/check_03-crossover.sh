#!/usr/bin/env bash
# Lab exercise 03 (docs/lab/03-crossover): the student's crossover.py
# predicts where a ring all-reduce overtakes a tree. Graded against the
# textbook formulas and against the crossover of the library's cost model
# (bench/rcoll_tune with the link's alpha and bandwidth set), which needs no
# root and takes no time: tests/lab/grade_crossover.py. A measured crossover
# is never a grade (timings on a shared machine are not repeatable); with
# LAB_MEASURE=1 and root, tests/netns/bench_delay.sh also measures ring and
# tree across two namespace "nodes" with emulated delay, for the student to
# compare (README: "see it for real").
set -uo pipefail
source tests/lab/lab_lib.sh
EXDIR=$1
W=$LAB_WORK
BENCH=${BENCH_DIR:-bench}
[[ -f $EXDIR/crossover.py ]] || { lab_fail "$EXDIR/crossover.py is missing"; lab_done 03; }
command -v python3 >/dev/null || { echo "lab exercise 03 needs python3"; exit 77; }
lab_run 300 python3 tests/lab/grade_crossover.py "$EXDIR/crossover.py" "$BENCH/rcoll_tune" > "$W/grade.log" 2>&1
cat "$W/grade.log"
LAB_PASSED=$((LAB_PASSED + $(grep -c '^  PASS' "$W/grade.log")))
LAB_FAILED=$((LAB_FAILED + $(grep -c '^  FAIL' "$W/grade.log")))
grep -q '^  \(PASS\|FAIL\)' "$W/grade.log" || lab_fail "the grader stopped before it checked anything"
if [[ ${LAB_MEASURE:-0} == 1 ]]; then
  if [[ $(id -u) == 0 ]]; then
    echo "  measuring (not graded): ring and tree, 2 namespace nodes x 2 ranks, 1ms per link"
    DELAY=1ms ALGOS="ring tree" BENCH_ARGS="-b 1K -e 16M -f 4 -n 5 -w 2 -c 0" EXTRA_ARGS= \
      lab_run 600 tests/netns/bench_delay.sh 2>&1 | lab_show
  else
    echo "  LAB_MEASURE=1: skipped, the namespace harness needs root"
  fi
fi
lab_done 03
