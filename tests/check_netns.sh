#!/bin/bash
# Multi-node tests on one machine: ranks in network namespaces ("nodes")
# joined by a bridge, launched by MPICH's mpiexec through tests/netns/nsexec.sh.
# Runs the conformance sweep for 2 nodes x 2 ranks and 3 nodes x 1 rank with
# every algorithm forced (RCOLL_ALGO) and the automatic choice, then again
# with 1 ms delay and 1% loss on every link: netem where the kernel has it,
# else tests/netns/wire.c, a userspace switch with the same shaping (whose
# delay, loss and own overhead are measured first, with UDP round trips).
# Namespaces and the switch are removed on exit, whatever happens. Needs root
# (ip netns), iproute2 and MPICH; /dev/net/tun where netem is missing.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
BIN=${TEST_BIN_DIR:-$ROOT/tests/bin}
MPIEXEC=${MPIEXEC:-$(command -v mpiexec.mpich || true)}

skip() { echo "check_netns: SKIP: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "needs root for ip netns"
command -v ip >/dev/null || skip "iproute2 (ip) missing"
[[ -n $MPIEXEC ]] || skip "MPICH mpiexec not found"
export MPIEXEC

# The Makefile knows the libraries that librcoll.a needs (UCX, verbs...).
PROG=$BIN/conformance
if [[ ! -x $PROG || -n $(find tests/conformance.c tests/support/conformance_* -newer "$PROG") ]]; then
  make --no-print-directory TESTBIN="$BIN" "$PROG" >/dev/null || exit 1
fi

source tests/netns/netns.sh
# A run waits in `wait`, which a signal interrupts (a foreground command
# would hold the traps back until it ended): the exit then removes the
# namespaces, and with them every process still running inside them.
SCRATCH=$(mktemp -d /tmp/rcoll-check-netns.XXXXXX)
RUN_PID=
trap 'netns_down; rm -rf "$SCRATCH"' EXIT
trap 'kill $RUN_PID 2>/dev/null; exit 130' INT
trap 'kill $RUN_PID 2>/dev/null; exit 143' TERM
# Algorithms to force, beside the automatic choice (RCOLL_ALGO unset).
ALGOS=${RCOLL_TEST_ALGOS-ring tree hier rabenseifner}
COUNTS=${RCOLL_TEST_COUNTS:-0,1,7,65537}
# Under delay and loss every call takes round trips of milliseconds (and
# TCP's retransmission timeouts): small counts keep the pass short.
LOSSY_COUNTS=${RCOLL_TEST_LOSSY_COUNTS:-0,1,7,4099}
export RCOLL_TIMEOUT=${RCOLL_TIMEOUT:-60}

failed=0
fail() { echo "   $1: FAILED"; failed=1; }

run() { # label ppn np counts [env...]
  local label=$1 ppn=$2 np=$3 counts=$4 out rc
  shift 4
  echo "-- netns: $label"
  timeout 600 env "$@" bash -c "source tests/netns/netns.sh; NETNS_NODES=$NODES; \
        NETNS_PREFIX=$NETNS_PREFIX; netns_run $ppn $np $PROG -x -s sweep -c $counts" >"$SCRATCH/run.log" 2>&1 &
  RUN_PID=$!
  wait "$RUN_PID"
  rc=$?
  RUN_PID=
  out=$(<"$SCRATCH/run.log")
  echo "$out" | grep -E '^(FAIL|conformance:)' | sort | uniq -c | head -n 20
  if ((rc != 0)) || ! echo "$out" | grep -q '^conformance: [0-9]* passed, 0 failed'; then
    echo "$out" | grep -vE '^(FAIL|conformance:)' | tail -n 15
    fail "$label (exit status $rc)"
  fi
}

# ping_field LINE NAME: the number after NAME in a netns_ping line.
ping_field() { awk -v k="$2" '{for (i = 1; i < NF; i++) if ($i == k) {print $(i + 1); exit}}' <<<"$1"; }

# ping_check LABEL COUNT AWK-CONDITION: UDP round trips from node 1 to node 2;
# the condition sees sent, received, lost (round-trip %), oneway (%), min
# and median (us). Prints the line and the median in $PING_MEDIAN.
ping_check() {
  local label=$1 count=$2 cond=$3 line
  line=$(netns_ping 1 2 "$count" 200 2>&1)
  echo "   $label: $line"
  PING_MEDIAN=$(ping_field "$line" median)
  awk -v sent="$(ping_field "$line" sent)" -v received="$(ping_field "$line" received)" \
      -v oneway="$(ping_field "$line" oneway_loss | tr -d %)" -v min="$(ping_field "$line" min)" \
      -v median="$PING_MEDIAN" "BEGIN {exit !(sent > 0 && ($cond))}" || fail "$label: want $cond"
}

# The switch on its own: nothing lost without loss, its added round trip
# next to the bridge's, TCP through it, and no CPU while the links are idle.
wire_checks() {
  local bridge_median=$1 t0 t1 server
  echo "-- netns: netns_wire without shaping (bridge round trip: ${bridge_median} us median)"
  netns_up_wire 2 "" || { fail "netns_up_wire"; return; }
  ping_check "wire, no delay" 1000 "received == sent && median < 2000"
  echo "   netns_wire adds $((${PING_MEDIAN%.*} - ${bridge_median%.*})) us to the round trip"
  if command -v iperf3 >/dev/null; then
    ip netns exec "$NETNS_PREFIX-n2" timeout 15 iperf3 -s -1 >/dev/null 2>&1 &
    server=$!
    sleep 0.2
    ip netns exec "$NETNS_PREFIX-n1" timeout 10 iperf3 -c "$NETNS_SUBNET.2" -t 1 2>&1 |
      awk '/receiver/ {print "   TCP through the wire: " $7 " " $8}' | grep . || fail "TCP through the wire (iperf3)"
    wait "$server"
  fi
  t0=$(awk '{print $14 + $15}' "/proc/$NETNS_WIRE_PID/stat")
  sleep 1
  t1=$(awk '{print $14 + $15}' "/proc/$NETNS_WIRE_PID/stat")
  echo "   idle for 1 s: netns_wire used $((t1 - t0)) clock ticks"
  ((t1 - t0 <= 5)) || fail "netns_wire busy while idle"
  netns_down
}

# 1 ms each way and 1% loss: the probes see at least a 2 ms round trip, and
# a one-way loss that 2000 probes put within [0.4%, 1.8%] unless something
# is off (the bounds are more than 4 standard deviations wide).
lossy_pass() {
  local bridge_median
  ping_check "bridge" 1000 "received == sent"
  bridge_median=$PING_MEDIAN
  if ! netns_netem delay 1ms loss 1%; then
    fail "delay/loss pass: cannot shape the links"
    return
  fi
  echo "-- netns: links have 1 ms delay and 1% loss ($([[ $NETNS_LAYOUT == wire ]] && echo netns_wire || echo netem))"
  ping_check "1 ms, 1%" 2000 "min >= 2000 && median < 4000 && oneway >= 0.4 && oneway <= 1.8"
  run "$NODES nodes x $ppn ranks, 1 ms delay and 1% loss" "$ppn" "$np" "$LOSSY_COUNTS"
  netns_down
  [[ -e /dev/net/tun ]] && wire_checks "$bridge_median"
}

layouts=("2 2 4" "3 1 3")
for layout in "${layouts[@]}"; do
  read -r NODES ppn np <<<"$layout"
  netns_up "$NODES" || { echo "check_netns: cannot create namespaces"; exit 1; }
  for algo in auto $ALGOS; do
    if [[ $algo == auto ]]; then
      run "$NODES nodes x $ppn ranks, automatic algorithm" "$ppn" "$np" "$COUNTS"
    else
      run "$NODES nodes x $ppn ranks, RCOLL_ALGO=$algo" "$ppn" "$np" "$COUNTS" "RCOLL_ALGO=$algo"
    fi
  done
  [[ $layout == "2 2 4" ]] && lossy_pass
  netns_down
done
exit $failed
