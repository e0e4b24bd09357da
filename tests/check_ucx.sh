#!/usr/bin/env bash
# The UCX transport through the whole library (RCOLL_NET=ucx), under
# UCX_TLS=tcp,self and UCX_TLS=posix,cma,self:
#
#   1. the conformance sweep (tests/conformance.c) with ranks as threads
#      (2, 3, 4 ranks; sweep and all types and ops), as processes (2, 3 ranks)
#      and through rcollCommInitAll with one thread driving every rank; its
#      random mixes of calls, some grouped (-s mix: 1, 2, 3 and 5 ranks as
#      threads, 3 as processes)
#   2. bench/allreduce_perf with -c 1, 2 ranks as threads and (with MPICH)
#      2 processes under mpiexec: exit status 0, "#wrong" 0 in every row,
#      "Out of bounds values : 0 OK"
#   3. with root, iproute2 and MPICH: two network namespaces ("nodes"), one
#      rank each, UCX_TLS=tcp; the connection between the nodes must use peer
#      failure handling, as between machines
#
# Skips (exit 77) when configure found no UCX. RCOLL_TIMEOUT bounds every
# wait in the library and `timeout` every run, so a hang fails the check.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

grep -q '^RCOLL_HAVE_UCX *= *1' config.mk 2>/dev/null || { echo "check_ucx: SKIP: built without UCX"; exit 77; }

BIN_DIR=${TEST_BIN_DIR:-tests/bin}
BENCH=${BENCH_DIR:-bench}/allreduce_perf
PROG=$BIN_DIR/conformance
# The Makefile links it with the libraries librcoll.a needs (UCX among them).
if [[ ! -x $PROG || -n $(find tests/conformance.c tests/support/conformance_* lib/librcoll.a -newer "$PROG") ]]; then
  make --no-print-directory TESTBIN="$BIN_DIR" "$PROG" >/dev/null || exit 1
fi
[[ -x $BENCH ]] || { echo "check_ucx: $BENCH is missing: run make first" >&2; exit 1; }

MPIEXEC=${MPIEXEC:-$(command -v mpiexec.mpich || true)}
export RCOLL_NET=ucx
export RCOLL_TIMEOUT=${RCOLL_TIMEOUT:-60}
failed=0

run() { # label, time limit in seconds, then the command
  local label=$1 limit=$2 out rc
  shift 2
  echo "-- ucx: $label"
  out=$(timeout -k 5 "$limit" "$@" 2>&1)
  rc=$?
  echo "$out" | grep -E '^(FAIL|conformance:)' | head -n 20
  if [[ $rc -ne 0 ]] || ! grep -q '^conformance: [0-9]* passed, 0 failed' <<<"$out"; then
    [[ $rc -eq 124 || $rc -eq 137 ]] && echo "   (timed out after ${limit}s)"
    grep -vE '^(FAIL|conformance:)' <<<"$out" | tail -n 10
    echo "   $label: FAILED (exit status $rc)"
    failed=1
  fi
}

# The bench checks every element itself; this reads its verdicts.
bench() { # label, then the command
  local label=$1 out rc bad
  shift
  echo "-- ucx: $label"
  out=$(timeout -k 5 120 "$@" 2>&1)
  rc=$?
  # Data rows: size count type redop root time algbw busbw #wrong (twice).
  bad=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 && ($9 != 0 || $13 != 0)' <<<"$out")
  grep -E '^# (Out of bounds|Avg bus)' <<<"$out" | sed 's/^/   /'
  if [[ $rc -ne 0 || -n $bad ]] || ! grep -q 'Out of bounds values : 0 OK' <<<"$out" ||
     [[ $(awk '$1 ~ /^[0-9]+$/ && NF >= 13' <<<"$out" | wc -l) -eq 0 ]]; then
    echo "$bad" | head -n 5
    tail -n 5 <<<"$out"
    echo "   $label: FAILED (exit status $rc)"
    failed=1
  fi
}

for tls in tcp,self posix,cma,self; do
  export UCX_TLS=$tls
  run "UCX_TLS=$tls: threads, ranks 2,3,4" 300 "$PROG" -t 2,3,4 -s sweep,types
  run "UCX_TLS=$tls: processes, ranks 2,3" 300 "$PROG" -p 2,3 -s sweep
  run "UCX_TLS=$tls: random mixes of calls, threads, ranks 1,2,3,5" 300 "$PROG" -t 1,2,3,5 -s mix
  run "UCX_TLS=$tls: random mixes of calls, processes, 3 ranks" 300 "$PROG" -p 3 -s mix
  run "UCX_TLS=$tls: rcollCommInitAll, one thread drives all ranks" 120 \
    env RCOLL_TIMEOUT=20 "$PROG" -t 2,3 -s initall
  bench "UCX_TLS=$tls: allreduce_perf -t 2 -c 1" "$BENCH" -t 2 -b 8 -e 32M -f 8 -c 1 -n 5 -w 2
  # Under mpiexec the bench takes its rank from MPI: without MPI built in, each
  # process would wait for RCOLL_COMM_ID instead.
  if [[ -n $MPIEXEC ]] && grep -q '^RCOLL_HAVE_MPI *= *1' config.mk 2>/dev/null; then
    bench "UCX_TLS=$tls: mpiexec -n 2 allreduce_perf -c 1" \
      "$MPIEXEC" -n 2 "$BENCH" -b 8 -e 32M -f 8 -c 1 -n 5 -w 2
  else
    echo "-- ucx: UCX_TLS=$tls: mpiexec -n 2 allreduce_perf: skipped (no mpiexec, or the bench was built without MPI)"
  fi
done
unset UCX_TLS

netns_pass() {
  local out rc
  if [[ $(id -u) != 0 || -z $MPIEXEC ]] || ! command -v ip >/dev/null; then
    echo "-- ucx: network namespaces: skipped (needs root, iproute2 and MPICH)"
    return
  fi
  export MPIEXEC
  # shellcheck source=tests/netns/netns.sh
  source tests/netns/netns.sh
  trap 'netns_down' EXIT
  echo "-- ucx: UCX_TLS=tcp: 2 network namespaces x 1 rank"
  if ! netns_up 2; then
    echo "   cannot create namespaces: FAILED"
    failed=1
    return
  fi
  out=$(timeout -k 5 300 env UCX_TLS=tcp RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=NET \
        bash -c "source tests/netns/netns.sh; NETNS_NODES=2; NETNS_PREFIX=$NETNS_PREFIX; \
                 netns_run 1 2 $PROG -x -s sweep -c 0,1,7,65537" 2>&1)
  rc=$?
  netns_down
  trap - EXIT
  echo "$out" | grep -E '^(FAIL|conformance:)' | sort | uniq -c | head -n 20
  grep -o 'connected to 198.18.7.[0-9]*:[0-9]* ([^)]*) over [^;]*; peer failure [A-Za-z ]*' <<<"$out" |
    sort -u | sed 's/^/   /' | head -n 4
  if ((rc != 0)) || ! grep -q '^conformance: [0-9]* passed, 0 failed' <<<"$out"; then
    grep -vE '^(FAIL|conformance:)|rcoll INFO' <<<"$out" | tail -n 10
    echo "   network namespaces: FAILED (exit status $rc)"
    failed=1
  elif ! grep -q 'connected to 198.18.7.2:[0-9]* (connection [0-9]*) over tcp/v1.*peer failure handled by UCX' \
         <<<"$out"; then
    echo "   the connection from node 1 to node 2 did not use peer failure handling over v1: FAILED"
    failed=1
  fi
}
netns_pass

exit $failed
