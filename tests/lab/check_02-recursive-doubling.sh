#!/usr/bin/env bash
# Lab exercise 02 (docs/lab/02-recursive-doubling): the student's
# allreduce_recdbl.c, built into a copy of the library's table of algorithms
# under $LAB_WORK (algorithms/ is not touched), checked by
#   1. the plan simulator (tests/lab/grade_recdbl.c over lib/plan_sim.c):
#      1..9 ranks, results, deadlock freedom with unbuffered connections;
#   2. the per-rank totals against traffic() and recursive doubling's formula;
#   3. the conformance program (tests/conformance.c) with RCOLL_ALGO=recdbl,
#      threads at 1..8 ranks and processes at 3 and 5;
#   4. bench/rcoll_sched drawing it (the SVG is left in $LAB_WORK).
set -uo pipefail
source tests/lab/lab_lib.sh
EXDIR=$1
SRC=$EXDIR/allreduce_recdbl.c
W=$LAB_WORK

if [[ ! -f $SRC ]]; then
  lab_fail "$SRC is missing"
  lab_done 02
fi
if ! $LAB_CC $LAB_LIB_CFLAGS -c "$SRC" -o "$W/allreduce_recdbl.o" 2>"$W/cc.log"; then
  lab_fail "$SRC does not compile:"; lab_show < "$W/cc.log"
  lab_done 02
fi
lab_pass "$SRC compiles with the library's flags (-Wall -Wextra -Werror)"
if ! EXTRA_ALGOS=$SRC lab_archive "$W/librcoll-lab.a" "$W/allreduce_recdbl.o" >"$W/ar.log" 2>&1 ||
   ! lab_link "$W/grade_recdbl" "$W/librcoll-lab.a" tests/lab/grade_recdbl.c >>"$W/ar.log" 2>&1 ||
   ! lab_link "$W/conformance" "$W/librcoll-lab.a" "$BUILD_DIR/tests/conformance.o" >>"$W/ar.log" 2>&1 ||
   ! lab_link "$W/rcoll_sched" "$W/librcoll-lab.a" "$BUILD_DIR/bench/rcoll_sched.o" \
       "$BUILD_DIR/bench/rcoll_sched_svg.o" >>"$W/ar.log" 2>&1; then
  lab_fail "the library with your algorithm added does not link (does the RCOLL_ALGORITHM line name allreduce_recdbl?):"
  lab_show < "$W/ar.log"
  lab_done 02
fi

for part in plans formula; do
  lab_run 300 "$W/grade_recdbl" $part > "$W/$part.log" 2>&1
  rc=$?
  lab_show < "$W/$part.log"
  if [[ $rc -eq 0 ]]; then
    lab_pass "plan simulator, $part"
  else
    lab_fail "plan simulator, $part (exit status $rc$([[ $rc -eq 124 ]] && echo ': it ran past 300 s'))"
  fi
done

# The library's conformance sweep with the algorithm forced: every
# collective, type, op, count and in/out of place, on real communicators.
conform() {
  local what=$1; shift
  RCOLL_ALGO=recdbl lab_run 300 "$W/conformance" "$@" > "$W/conf.log" 2>&1
  local rc=$?
  grep -E '^(FAIL|conformance:)' "$W/conf.log" | head -n 20 | lab_show
  if [[ $rc -eq 0 ]]; then lab_pass "conformance with RCOLL_ALGO=recdbl, $what"
  else lab_fail "conformance with RCOLL_ALGO=recdbl, $what (exit status $rc)"; tail -n 5 "$W/conf.log" | lab_show; fi
}
if [[ $LAB_FAILED -eq 0 ]]; then
  conform "threads 1..8" -t 1,2,3,4,5,6,7,8 -s sweep -c 0,1,7,1031,65537
  conform "processes 3 and 5" -p 3,5 -s sweep -c 0,1,4099
  # The library logs the algorithm of each call: make sure it was ours, not
  # a fallback (an applies() that refuses, a name that does not match).
  RCOLL_ALGO=recdbl RCOLL_DEBUG=INFO lab_run 60 "$W/conformance" -t 3 -s sweep -c 100 > "$W/info.log" 2>&1
  if grep -q 'rcollAllReduce: .* via recdbl/' "$W/info.log"; then
    lab_pass "the library really ran recdbl (RCOLL_DEBUG=INFO logs \"rcollAllReduce ... via recdbl\")"
  else
    lab_fail "with RCOLL_ALGO=recdbl the library's log shows no all-reduce run by recdbl"
  fi
else
  lab_fail "conformance not run: the plans must pass first (a wrong plan can hang real ranks)"
fi

# rcoll_sched prints every rank's plan and its totals against the formula,
# and draws it.
if lab_run 60 "$W/rcoll_sched" --coll allreduce --algo recdbl --ranks 6 --bytes 6144 --chunk 1024 \
     --svg "$W/recdbl.svg" > "$W/sched.log" 2>&1 && [[ -s $W/recdbl.svg ]]; then
  grep -E '^rank [0-9]+:' "$W/sched.log" | lab_show
  lab_pass "bench/rcoll_sched --coll allreduce --algo recdbl --ranks 6 drew $W/recdbl.svg"
else
  tail -n 10 "$W/sched.log" | lab_show
  lab_fail "bench/rcoll_sched could not print or draw recdbl"
fi
lab_done 02
