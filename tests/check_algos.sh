#!/usr/bin/env bash
# Every algorithm through the real library:
#   1. the conformance sweep (tests/conformance.c: every collective, type, op,
#      root, count, in place or not) with RCOLL_ALGO forced to each algorithm,
#      ranks as threads 1,2,3,4,5,8 and as processes 3 and 4; collectives an
#      algorithm does not implement use their default, so each run also
#      checks the per-collective fallback;
#   2. the same with RCOLL_DETERMINISTIC=1; recursive doubling also at the
#      rank counts the loop skips and with small chunks, the star with
#      small chunks;
#   3. tests/algo_check.c: processes placed on several "nodes" (RCOLL_HOSTID
#      per rank: shared memory inside a node, sockets between nodes, so the
#      hierarchical algorithm really runs hierarchically), every algorithm,
#      and deterministic mode compared bit for bit with the rank-order float
#      sum for several algorithms, chunk sizes and placements.
# RCOLL_TIMEOUT bounds every wait in the library and `timeout` every run, so
# a hang fails the check instead of stalling `make check`.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

BIN_DIR=${TEST_BIN_DIR:-tests/bin}
# The Makefile knows what the static library needs (UCX, verbs, CUDA...).
for prog in conformance algo_check; do
  make --no-print-directory TESTBIN="$BIN_DIR" "$BIN_DIR/$prog" >/dev/null || exit 1
done

export RCOLL_TIMEOUT=${RCOLL_TIMEOUT:-60}
failed=0

run() { # label, time limit in seconds, then the command
  local label=$1 limit=$2 out rc
  shift 2
  echo "-- algorithms: $label"
  out=$(timeout -k 5 "$limit" "$@" 2>&1)
  rc=$?
  echo "$out" | grep -E '^(FAIL|conformance:|algo_check: [0-9])' | head -n 40
  if [[ $rc -ne 0 ]]; then
    [[ $rc -eq 124 || $rc -eq 137 ]] && echo "   (timed out after ${limit}s)"
    grep -qE '^(conformance|algo_check):' <<<"$out" || echo "$out" | grep -v 'rcoll \(WARN\|NOTE\)' | tail -n 40
    echo "   $label: FAILED (exit status $rc)"
    failed=1
  fi
}

CONF=$BIN_DIR/conformance
# Every algorithm of the table (lib/algo.h), as rcoll_info lists them: a new
# algorithm file is tested here without being named.
ALGOS=$(make --no-print-directory bench/rcoll_info >/dev/null && bench/rcoll_info --algo-names) || exit 1
[[ -n $ALGOS ]] || { echo "rcoll_info --algo-names listed no algorithm"; exit 1; }
for algo in $ALGOS; do
  run "RCOLL_ALGO=$algo, threads 1,2,3,4,5,8" 300 env RCOLL_ALGO=$algo "$CONF" -t 1,2,3,4,5,8 -s sweep,types
  run "RCOLL_ALGO=$algo, processes 3,4" 200 env RCOLL_ALGO=$algo "$CONF" -p 3,4 -s sweep -c 0,1,7,100003
done
# Recursive doubling folds a different number of pairs at each rank count
# that is not a power of two: the counts the loop above skips (6, 7 threads,
# 5 processes), and small chunks, so that a call is many chunks in flight.
run "RCOLL_ALGO=recdbl, threads 6,7, processes 5" 300 sh -c \
  "RCOLL_ALGO=recdbl '$CONF' -t 6,7 -s sweep,types && RCOLL_ALGO=recdbl '$CONF' -p 5 -s sweep -c 0,1,4,4099"
run "RCOLL_ALGO=recdbl, 4 KiB chunks, threads 3,5,8" 200 \
  env RCOLL_ALGO=recdbl RCOLL_CHUNK_SIZE=4096 "$CONF" -t 3,5,8 -s sweep -c 1,7,100003
# The star all-reduce with many chunks in flight, its reductions waiting
# on each other in rank order.
run "RCOLL_ALGO=star, 4 KiB chunks, threads 3,5,8, processes 5" 200 sh -c \
  "RCOLL_ALGO=star RCOLL_CHUNK_SIZE=4096 '$CONF' -t 3,5,8 -s sweep -c 1,7,100003 &&
   RCOLL_ALGO=star RCOLL_CHUNK_SIZE=4096 '$CONF' -p 5 -s sweep -c 1,7,100003"
run "RCOLL_DETERMINISTIC=1, threads 1,2,3,4,5,8" 300 env RCOLL_DETERMINISTIC=1 "$CONF" -t 1,2,3,4,5,8 \
  -s sweep,types
run "RCOLL_DETERMINISTIC=1, small chunks, processes 3,5" 200 \
  env RCOLL_DETERMINISTIC=1 RCOLL_CHUNK_SIZE=4096 "$CONF" -p 3,5 -s sweep -c 1,7,100003

AC=$BIN_DIR/algo_check
run "4 ranks on 2 nodes" 300 "$AC" -p 4 -N 2
run "4 ranks on 2 nodes, round robin" 300 "$AC" -p 4 -N 2 -r
run "6 ranks on 3 nodes" 300 "$AC" -p 6 -N 3
run "5 ranks on 2 nodes, uneven (hier falls back to ring)" 300 "$AC" -p 5 -N 2 -u
run "3 ranks on 3 nodes" 300 "$AC" -p 3 -N 3
run "8 ranks on 2 nodes, round robin" 400 "$AC" -p 8 -N 2 -r

exit $failed
