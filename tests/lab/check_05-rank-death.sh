#!/usr/bin/env bash
# Lab exercise 05 (docs/lab/05-rank-death): the student's lab_on_failure()
# (survivor.c) runs in every surviving rank of tests/lab/lab_rank_death.c
# when one rank is SIGKILLed (3 ranks) or SIGSTOPped (4 ranks: only
# RCOLL_TIMEOUT frees the others) inside an all-reduce. `timeout` turns a
# hang into a failure; no time is graded beyond RCOLL_TIMEOUT plus a margin.
set -uo pipefail
source tests/lab/lab_lib.sh
EXDIR=$1
W=$LAB_WORK
[[ -f $EXDIR/survivor.c ]] || { lab_fail "$EXDIR/survivor.c is missing"; lab_done 05; }
if ! $LAB_CC $LAB_CFLAGS -c "$EXDIR/survivor.c" -o "$W/survivor.o" 2>"$W/cc.log"; then
  lab_fail "$EXDIR/survivor.c does not compile:"; lab_show < "$W/cc.log"
  lab_done 05
fi
if ! lab_link "$W/lab_rank_death" "$BUILD_DIR/librcoll-internal.a" tests/lab/lab_rank_death.c \
     "$W/survivor.o" > "$W/ld.log" 2>&1; then
  lab_fail "the experiment does not link with your survivor.c:"; lab_show < "$W/ld.log"
  lab_done 05
fi
export RCOLL_TIMEOUT=5
for args in "-n 3 -d 1 -m kill" "-n 4 -d 2 -m stop"; do
  lab_run 90 "$W/lab_rank_death" $args > "$W/run.log" 2>"$W/lib.log"
  rc=$?
  lab_show < "$W/run.log"
  what="lab_rank_death $args (RCOLL_TIMEOUT=$RCOLL_TIMEOUT)"
  case $rc in
    0) lab_pass "$what: every survivor reported, and the dead rank was named" ;;
    124|137) lab_fail "$what: still running after 90 s (a survivor hung?)" ;;
    *) lab_fail "$what (see the lines marked FAIL)" ;;
  esac
done
lab_done 05
