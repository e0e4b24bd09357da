#!/usr/bin/env bash
# Lab exercise 04 (docs/lab/04-determinism): the student answers, for five
# comparisons of all-reduce results, "same" or "differ" (answers.txt), and
# writes the rank-order sum the deterministic algorithms promise
# (rank_order.c). tests/lab/lab_float_sums.c runs the all-reduces here (five
# ranks as threads, RCOLL_ALGO and RCOLL_DETERMINISTIC set per run) and
# prints what it observed; the answers are compared with that, never with a
# list kept here.
set -uo pipefail
source tests/lab/lab_lib.sh
EXDIR=$1
W=$LAB_WORK
for f in answers.txt rank_order.c; do
  [[ -f $EXDIR/$f ]] || { lab_fail "$EXDIR/$f is missing"; lab_done 04; }
done
if ! $LAB_CC $LAB_CFLAGS -c "$EXDIR/rank_order.c" -o "$W/rank_order.o" 2>"$W/cc.log"; then
  lab_fail "$EXDIR/rank_order.c does not compile:"; lab_show < "$W/cc.log"
  lab_done 04
fi
if ! lab_link "$W/lab_float_sums" "$BUILD_DIR/librcoll-internal.a" tests/lab/lab_float_sums.c \
     "$W/rank_order.o" > "$W/ld.log" 2>&1; then
  lab_fail "the experiment does not link with your rank_order.c:"; lab_show < "$W/ld.log"
  lab_done 04
fi
if ! lab_run 120 "$W/lab_float_sums" > "$W/observed.txt" 2> "$W/run.log"; then
  lab_fail "the experiment failed:"; tail -n 8 "$W/run.log" | lab_show
  lab_done 04
fi
echo "  observed here ($W/observed.txt):"
lab_show < "$W/observed.txt"
while IFS=' =' read -r name value; do
  [[ -z $name || $name == \#* ]] && continue
  if [[ $name == deterministic_vs_rank_order ]]; then
    if [[ $value == same ]]; then
      lab_pass "your lab_rank_order_sum() gives the deterministic all-reduce's result bit for bit"
    else
      lab_fail "your lab_rank_order_sum() differs from the deterministic all-reduce's result (README: the order, and float)"
    fi
    continue
  fi
  answer=$(sed -n "s/^[[:space:]]*$name[[:space:]]*=[[:space:]]*\([a-z?]*\).*/\1/p" "$EXDIR/answers.txt" | head -n 1)
  if [[ $answer == "$value" ]]; then
    lab_pass "$name: you said $answer, and so it is"
  elif [[ -z $answer ]]; then
    lab_fail "$name: answers.txt has no line \"$name = same\" or \"$name = differ\""
  else
    lab_fail "$name: you said \"$answer\"; here they $([[ $value == same ]] && echo 'are the same' || echo differ)"
  fi
done < "$W/observed.txt"
lab_done 04
