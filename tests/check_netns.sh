#!/bin/bash
# Multi-node tests on one machine: ranks in network namespaces ("nodes")
# joined by a bridge, launched by MPICH's mpiexec through tests/netns/nsexec.sh.
# Runs the conformance sweep for 2 nodes x 2 ranks and 3 nodes x 1 rank with
# every algorithm forced (RCOLL_ALGO) and the automatic choice, then again
# with 1 ms delay and 1% loss on every link. Namespaces are removed on exit,
# whatever happens. Needs root (ip netns), iproute2 (tc) and MPICH.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${TEST_BIN_DIR:-$ROOT/tests/bin}
MPIEXEC=${MPIEXEC:-$(command -v mpiexec.mpich || true)}

skip() { echo "check_netns: SKIP: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "needs root for ip netns"
command -v ip >/dev/null && command -v tc >/dev/null || skip "iproute2 (ip, tc) missing"
[[ -n $MPIEXEC ]] || skip "MPICH mpiexec not found"
export MPIEXEC

PROG=$BIN/conformance
if [[ ! -x $PROG || tests/conformance.c -nt $PROG ]]; then
  mkdir -p "$BIN"
  ${CC:-cc} -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Ilib tests/conformance.c lib/librcoll.a \
    -pthread -lm -o "$PROG" || exit 1
fi

source tests/netns/netns.sh
trap netns_down EXIT INT TERM
# Algorithms to force, beside the automatic choice (RCOLL_ALGO unset).
ALGOS=${RCOLL_TEST_ALGOS:-ring tree hier rabenseifner}
COUNTS=${RCOLL_TEST_COUNTS:-0,1,7,65537}
export RCOLL_TIMEOUT=${RCOLL_TIMEOUT:-60}

failed=0
run() { # label ppn np [env...]
  local label=$1 ppn=$2 np=$3 out rc
  shift 3
  echo "-- netns: $label"
  out=$(timeout 600 env "$@" bash -c "source tests/netns/netns.sh; NETNS_NODES=$NODES; \
        NETNS_PREFIX=$NETNS_PREFIX; netns_run $ppn $np $PROG -x -s sweep -c $COUNTS" 2>&1)
  rc=$?
  echo "$out" | grep -E '^(FAIL|conformance:)' | sort | uniq -c | head -n 20
  if ((rc != 0)) || ! echo "$out" | grep -q '^conformance: [0-9]* passed, 0 failed'; then
    echo "$out" | grep -vE '^(FAIL|conformance:)' | tail -n 15
    echo "   $label: FAILED (exit status $rc)"
    failed=1
  fi
}

layouts=("2 2 4" "3 1 3")
for layout in "${layouts[@]}"; do
  read -r NODES ppn np <<<"$layout"
  netns_up "$NODES" || { echo "check_netns: cannot create namespaces"; exit 1; }
  for algo in auto $ALGOS; do
    if [[ $algo == auto ]]; then
      run "$NODES nodes x $ppn ranks, automatic algorithm" "$ppn" "$np"
    else
      run "$NODES nodes x $ppn ranks, RCOLL_ALGO=$algo" "$ppn" "$np" RCOLL_ALGO=$algo
    fi
  done
  if [[ $layout == "2 2 4" ]]; then
    # Kernels without sch_netem (this CI's) cannot add delay or loss here.
    if netns_netem delay 1ms loss 1% 2>/dev/null; then
      run "$NODES nodes x $ppn ranks, 1 ms delay and 1% loss" "$ppn" "$np"
    else
      echo "-- netns: delay/loss pass not run: this kernel has no netem qdisc"
    fi
  fi
  netns_down
done
exit $failed
