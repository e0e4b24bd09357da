#!/usr/bin/env bash
# rcollGroupSimulateEnd against bench/rcoll_tune: n ranks of one process
# (tests/bin/simulate: rcollCommInitAll over shared memory) simulate a group
# of one all-reduce each; the estimate must be the time bench/rcoll_tune
# prints for the algorithm it chooses for that size on the same placement
# (one node, shm; -p ranks-per-core when the ranks outnumber the cores, as
# the communicator sees it), and both must choose the same algorithm. The driver also fails
# when the simulated group ran (a buffer changed) or left the communicators
# unusable.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
SIM=tests/bin/simulate TUNE=bench/rcoll_tune
[[ -x $SIM && -x $TUNE ]] || { echo "check_simulate: FAILED: build $SIM and $TUNE first (make && make tests)"; exit 1; }
export RCOLL_TIMEOUT=${RCOLL_TIMEOUT:-60}
cores=$(nproc)
failed=0
for n in 2 4; do
  shared=; [[ $n -gt $cores ]] && shared="-p $(awk -v n="$n" -v c="$cores" 'BEGIN {print n / c}')"
  for bytes in 8 65536 16777216; do
    out=$(timeout 300 "$SIM" "$n" "$bytes" 2>&1) || { echo "   FAILED: $n ranks, $bytes B: $out"; failed=1; continue; }
    read -r est algo < <(awk '/^estimated_us/ {print $2, $4}' <<<"$out")
    # shellcheck disable=SC2086 # $shared is an option and its value, or nothing
    table=$("$TUNE" -n "$n" -N 1 -i shm $shared -c allreduce -b "$bytes" -e "$bytes")
    # The header names the columns; the row has bytes, one time per column, choice, chunk.
    read -r want choice < <(awk '/^# +bytes/ {for (i = 3; i <= NF; i++) col[i - 2] = $i; next}
      /^ +[0-9]/ {for (c in col) if (col[c] == $(NF - 1)) print $(c + 1), $(NF - 1)}' <<<"$table")
    if [[ -z ${want:-} || -z ${est:-} ]]; then
      echo "   FAILED: $n ranks, $bytes B: cannot read the estimate or the table"; echo "$out"; echo "$table"; failed=1
    elif [[ $algo != "$choice" ]]; then
      echo "   FAILED: $n ranks, $bytes B: the communicator chose $algo, rcoll_tune $choice"; failed=1
    elif ! awk -v a="$est" -v b="$want" 'BEGIN {d = a - b; exit !(d <= 0.051 && d >= -0.051)}'; then
      echo "   FAILED: $n ranks, $bytes B: simulated $est us, rcoll_tune predicts $want us ($choice)"; failed=1
    else
      echo "   $n ranks, $bytes B: simulated $est us = rcoll_tune's $want us ($choice), nothing ran"
    fi
  done
done
[[ $failed -eq 0 ]] && echo "PASS: check_simulate" || echo "FAIL: check_simulate"
exit $failed
