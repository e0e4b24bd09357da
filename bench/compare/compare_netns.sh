#!/usr/bin/env bash
# rcoll's all-reduce beside MPICH's between two "nodes": two network
# namespaces joined by veth links and a bridge (tests/netns/netns.sh, no
# added delay), one rank each, float32 sum. Both are launched by MPICH's
# hydra through tests/netns/nsexec.sh (ranks really run in the namespaces);
# rcoll over its socket transport, MPICH over UCX's tcp transport
# (UCX_TLS=tcp,self: without it UCX finds the other namespace's process on
# the same machine and uses shared memory, 1.6 us at 8 B). A TCP ping-pong
# over the same link (tests/netns/tcp_pingpong.c) is the reference for the
# inter-node latency the tuner logs at creation.
#
#   bench/compare/compare_netns.sh             8 B .. 64 MiB, x8, 5 rounds
#   ROUNDS=7 MAX=2M bench/compare/compare_netns.sh
#
# Environment knobs (defaults in brackets):
#   MIN [8] MAX [64M] FACTOR [8]   sizes, as allreduce_perf -b/-e/-f
#   ITERS [20] WARMUP [5]          timed and warm-up calls per size (both tools)
#   ROUNDS [5]                     alternating rounds (rcoll, MPICH; then the other
#                                  way round); each size's median over rounds is compared
#   PINGS [2000]                   ping-pong round trips per round
#   RUN_TIMEOUT [300]              seconds before one run is killed (an mpiexec
#                                  whose ranks printed everything but hung at exit
#                                  once kept this script waiting for 14 minutes)
#   TCP_CC [the system's]           TCP congestion control of both nodes' namespaces, for both
#                                  libraries (e.g. TCP_CC=reno): with bbr, senders over veth stall
#                                  6-12 ms at times (docs/execution.md, "TCP congestion control")
#   BIND [0]                       1: rank r of both libraries runs on core r mod cores
#                                  (tests/netns/pin_rank.sh, Open MPI's default binding): the
#                                  same table with placement taken out of it (docs/execution.md,
#                                  "Two ranks on one core")
#   NO_BUILD [0]                   1: do not run make
#   OUTDIR [mktemp -d]             every run's output is kept there
#   NETNS_PREFIX [rcollcmp<pid>]   namespace names; removed however the script exits
# Prints per-size medians, the verdicts "rcoll <= MPICH at every size" and
# "inter latency within 2x of ping-pong", and the tuner's predictions beside
# rcoll's measured times (bench/rcoll_tune -m). Exit 0 when every run
# worked (the verdicts are printed, not the status), 1 when one failed, 77
# (skip) without root, network namespaces, iproute2 or MPICH.
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || exit 1
MIN=${MIN:-8} MAX=${MAX:-64M} FACTOR=${FACTOR:-8}
ITERS=${ITERS:-20} WARMUP=${WARMUP:-5} ROUNDS=${ROUNDS:-5} PINGS=${PINGS:-2000}
case ${BIND:-0} in
  0) PIN="" ;;
  1) PIN=$ROOT/tests/netns/pin_rank.sh ;;
  *) echo "compare_netns: BIND is 0 or 1, not '$BIND'"; exit 2 ;;
esac
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
OUTDIR=${OUTDIR:-$(mktemp -d /tmp/rcoll-compare-netns.XXXXXX)}
RCOLL_BENCH=$ROOT/bench/allreduce_perf
TUNE=$ROOT/bench/rcoll_tune
MPI_BENCH=$ROOT/build/compare/mpi_allreduce
PINGPONG=$ROOT/build/compare/tcp_pingpong
WAKE_PLACE=$ROOT/build/compare/wake_place
export NETNS_PREFIX=${NETNS_PREFIX:-rcollcmp$$}
export MPIEXEC=${MPIEXEC:-$(command -v mpiexec.mpich || true)}
export RCOLL_TIMEOUT=${RCOLL_TIMEOUT:-60}
STATUS=0
mkdir -p "$OUTDIR"

. "$HERE/common.sh"

skip() { echo "compare_netns: SKIP: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "needs root for ip netns"
command -v ip >/dev/null || skip "iproute2 (ip) missing"
[[ -n $MPIEXEC ]] || skip "MPICH mpiexec not found (apt-get install -y mpich)"
command -v mpicc.mpich >/dev/null || skip "mpicc.mpich not found"

source "$ROOT/tests/netns/netns.sh"
RUN_PID=
cleanup() {
  [[ -n $RUN_PID ]] && kill "$RUN_PID" 2>/dev/null
  netns_down
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ------------------------------------------------------------------ build
if [[ ${NO_BUILD:-0} != 1 ]]; then
  note "building rcoll: make -C $ROOT"
  make -C "$ROOT" >"$OUTDIR/make.log" 2>&1 || note "make failed (see $OUTDIR/make.log); using what exists"
fi
mkdir -p "$(dirname "$MPI_BENCH")"
mpicc.mpich -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -o "$MPI_BENCH" "$HERE/mpi_allreduce.c" -lm \
  >"$OUTDIR/mpicc.log" 2>&1 || { echo "compare_netns: mpicc.mpich failed (see $OUTDIR/mpicc.log)"; exit 1; }
${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -o "$PINGPONG" "$ROOT/tests/netns/tcp_pingpong.c" \
  >"$OUTDIR/cc.log" 2>&1 || { echo "compare_netns: building tcp_pingpong failed (see $OUTDIR/cc.log)"; exit 1; }
${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -o "$WAKE_PLACE" "$ROOT/tests/netns/wake_place.c" \
  >>"$OUTDIR/cc.log" 2>&1 || { echo "compare_netns: building wake_place failed (see $OUTDIR/cc.log)"; exit 1; }
[[ -x $RCOLL_BENCH ]] || { echo "compare_netns: $RCOLL_BENCH missing (make)"; exit 1; }

# An unprivileged container may be root without the right to make namespaces.
netns_up 2 2>"$OUTDIR/netns.log" || skip "cannot create network namespaces ($(head -c 200 "$OUTDIR/netns.log"))"
if [[ -n ${TCP_CC:-} ]]; then
  for n in n1 n2; do
    ip netns exec "$NETNS_PREFIX-$n" sysctl -q -w "net.ipv4.tcp_congestion_control=$TCP_CC" 2>>"$OUTDIR/netns.log" ||
      { echo "compare_netns: cannot set TCP_CC=$TCP_CC in the namespaces ($(tail -n 1 "$OUTDIR/netns.log"))"; exit 1; }
  done
fi
CC_USED=$(ip netns exec "$NETNS_PREFIX-n1" cat /proc/sys/net/ipv4/tcp_congestion_control)

# ------------------------------------------------------------------ runs
# Bytes node 1 sent over its veth: each tool's traffic must cross the link.
veth_tx() { ip netns exec "$NETNS_PREFIX-n1" cat /sys/class/net/v1/statistics/tx_bytes; }

# bg_run LOG CMD...: runs in the background and waits, so that a signal is
# handled at once (the EXIT trap then removes the namespaces and the ranks).
bg_run() {
  local log=$1 rc
  shift
  timeout -k 10 "$RUN_TIMEOUT" "$@" >"$log" 2>&1 &
  RUN_PID=$!
  wait "$RUN_PID"
  rc=$?
  RUN_PID=
  return $rc
}

declare -A TX
# run_failed TOOL ROUND STATUS LOG ROW-AWK WRONG-AWK: a run fails when its rows
# are missing or wrong; one that printed every row and then did not exit
# (killed by RUN_TIMEOUT) is only noted.
run_failed() {
  local tool=$1 round=$2 rc=$3 log=$4 rows
  rows=$(awk "$5 {n++} END {print n + 0}" "$log")
  if ((rows == 0)) || awk "$5 && $6 {bad = 1} END {exit !bad}" "$log"; then
    note "$tool round $round failed (exit status $rc, $rows rows, or wrong results): see $log"
    tail -n 5 "$log" | sed 's/^/#   | /'
    STATUS=1
  elif ((rc != 0)); then
    note "$tool round $round: every row printed, but the run ended with status $rc (124: killed after ${RUN_TIMEOUT} s)"
  fi
}
# The ping-pong waits as the libraries do, spinning 50 us before it sleeps
# (the reference), and once blocking at once (spin 0), which is printed
# beside it: asleep in poll, the two processes can end up on one core
# (tests/netns/tcp_pingpong.c says what that measured).
run_pingpong() { # round spin_us file
  local port=$((40000 + RANDOM % 20000)) log=$OUTDIR/pingpong_$1_spin$2.log server
  ip netns exec "$NETNS_PREFIX-n2" timeout 60 "$PINGPONG" server "$port" "$2" >/dev/null 2>&1 &
  server=$!
  if bg_run "$log" ip netns exec "$NETNS_PREFIX-n1" timeout 60 "$PINGPONG" client "$NETNS_SUBNET.2" "$port" "$PINGS" 8 "$2"; then
    awk '{for (i = 1; i < NF; i++) if ($i == "median") print $(i + 1)}' "$log" >>"$OUTDIR/$3"
  else
    note "ping-pong failed: $(tail -n 2 "$log")"
    STATUS=1
  fi
  wait "$server" 2>/dev/null
}

# RCOLL_DEBUG_SUBSYS=INIT prints the tuner's agreed figures once per rank
# (TUNE would log every call's choice and bypass the tuner's cache).
run_rcoll() { # round
  local log=$OUTDIR/rcoll_$1.log before
  before=$(veth_tx)
  bg_run "$log" env RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT bash -c "source tests/netns/netns.sh; \
      NETNS_NODES=2; netns_run 1 2 $PIN $RCOLL_BENCH -b $MIN -e $MAX -f $FACTOR -n $ITERS -w $WARMUP -c 0"
  run_failed rcoll "$1" $? "$log" '$1 ~ /^[0-9]+$/ && NF >= 9' '$9 != "N/A" && $9 != 0'
  TX[rcoll]=$(($(veth_tx) - before))
  awk '$1 ~ /^[0-9]+$/ && NF >= 9 {print $1, $6}' "$log" >>"$OUTDIR/rcoll"
  grep -m1 'tune: rank 0:' "$log" |
    sed -nE 's/.*inter socket ([0-9.]+) us.*link measured ([0-9.]+) us.*/\1 \2/p' >>"$OUTDIR/inter"
}

run_mpich() { # round
  local log=$OUTDIR/mpich_$1.log before
  before=$(veth_tx)
  bg_run "$log" env UCX_TLS=tcp,self bash -c "source tests/netns/netns.sh; NETNS_NODES=2; \
      netns_run 1 2 $PIN $MPI_BENCH -b $MIN -e $MAX -f $FACTOR -n $ITERS -w $WARMUP"
  run_failed MPICH "$1" $? "$log" '$1 ~ /^[0-9]+$/ && NF >= 5' '$6 != "-" && $6 != 0'
  TX[mpich]=$(($(veth_tx) - before))
  awk '$1 ~ /^[0-9]+$/ && NF >= 5 {print $1, $3}' "$log" >>"$OUTDIR/mpich"
}

note "compare_netns: $(date -u +%FT%TZ) on $(uname -n), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
note "2 namespaces ($NETNS_PREFIX-n1, -n2) over veth + bridge, 1 rank each; $ROUNDS rounds; logs in $OUTDIR"
[[ -n $PIN ]] && note "  BIND=1: rank r of both libraries on core r mod $(nproc) ($PIN)"
# Whether this kernel packs a woken rank beside its waker while a core
# idles: then, unbound, both ranks can share one core (docs/execution.md).
note "  $("$WAKE_PLACE" 2>&1 | tail -n 1)"
cc_why="the system default"
[[ -n ${TCP_CC:-} ]] && cc_why="TCP_CC=$TCP_CC"
note "  TCP congestion control in both namespaces: $CC_USED ($cc_why)"
note "  rcoll: RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT netns_run 1 2 $PIN $RCOLL_BENCH -b $MIN -e $MAX -f $FACTOR -n $ITERS -w $WARMUP -c 0"
note "  MPICH: UCX_TLS=tcp,self netns_run 1 2 $PIN $MPI_BENCH -b $MIN -e $MAX -f $FACTOR -n $ITERS -w $WARMUP"
note "  ping-pong: $PINGPONG client $NETNS_SUBNET.2 PORT $PINGS 8 SPIN (server in n2 with the same SPIN; 50: the reference, 0: blocking)"
note "  (netns_run: tests/netns/netns.sh, mpiexec.mpich from the hub namespace through tests/netns/nsexec.sh)"
for ((round = 1; round <= ROUNDS; round++)); do
  run_pingpong "$round" 50 pp
  run_pingpong "$round" 0 pp_block
  if ((round % 2)); then run_rcoll "$round"; run_mpich "$round"; else run_mpich "$round"; run_rcoll "$round"; fi
done

# ------------------------------------------------------------------ report
# median FILE KEY: the median of the values after KEY (or of every line's
# only field with KEY empty).
median() {
  awk -v k="$2" '(k == "" && NF == 1) || $1 == k {v[n++] = (k == "" ? $1 : $2)}
    END { if (!n) { print "n/a"; exit }
          for (i = 1; i < n; i++) for (j = i; j > 0 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
          print v[int(n / 2)] }' "$1" 2>/dev/null || echo n/a
}
range() { # FILE KEY, as median
  awk -v k="$2" '(k == "" && NF == 1) || $1 == k {x = (k == "" ? $1 : $2) + 0; if (!n++ || x < lo) lo = x; if (n == 1 || x > hi) hi = x}
    END { if (n) printf "%.1f-%.1f", lo, hi; else print "n/a" }' "$1" 2>/dev/null
}

echo
echo "## all-reduce float32 sum, 2 namespaces x 1 rank over veth: time per call (us), median of $ROUNDS rounds"
printf '%10s | %10s %19s | %10s %19s | %11s\n' size rcoll "(range)" mpich-tcp "(range)" rcoll/mpich
worse=""
for size in $(awk '{print $1}' "$OUTDIR/rcoll" "$OUTDIR/mpich" 2>/dev/null | sort -n | uniq); do
  r=$(median "$OUTDIR/rcoll" "$size") m=$(median "$OUTDIR/mpich" "$size")
  q=$(awk -v a="$r" -v b="$m" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }')
  printf '%10s | %10s %19s | %10s %19s | %11s\n' "$size" "$r" "($(range "$OUTDIR/rcoll" "$size"))" \
    "$m" "($(range "$OUTDIR/mpich" "$size"))" "$q"
  awk -v q="$q" 'BEGIN { exit !(q == "n/a" || q + 0 > 1) }' && worse="$worse $size"
done
note "bytes node 1 sent over its veth in the last round: rcoll $((${TX[rcoll]:-0} >> 20)) MiB, MPICH $((${TX[mpich]:-0} >> 20)) MiB" \
  "(both must cross the link; rcoll's bench also runs in place and warms up at every doubling, about 3x the traffic)"
if [[ -z $worse ]]; then echo "VERDICT: rcoll <= MPICH at every size: yes"
else echo "VERDICT: rcoll <= MPICH at every size: no (slower or missing at:$worse)"; fi

# The tuner's figure is one-way (a message's latency); a ping-pong's round
# trip is two of them.
rtt=$(median "$OUTDIR/pp" "")
model=$(awk '{print $1}' "$OUTDIR/inter" 2>/dev/null | sort -n | awk '{v[n++] = $1} END {if (n) print v[int(n / 2)]; else print "n/a"}')
link=$(awk '{print $2}' "$OUTDIR/inter" 2>/dev/null | sort -n | awk '{v[n++] = $1} END {if (n) print v[int(n / 2)]; else print "n/a"}')
echo
echo "## inter-node latency: TCP ping-pong median round trip $rtt us (one way $(awk -v r="$rtt" 'BEGIN {printf "%.1f", r / 2}') us;" \
  "blocking at once, without the spin: $(median "$OUTDIR/pp_block" "") us, range $(range "$OUTDIR/pp_block" ""));"
echo "## tuner at creation (median of $ROUNDS): link measured $link us one way, model's inter latency $model us" \
  "(the socket transport's own figure is its floor)"
ratio=$(awk -v l="$link" -v r="$rtt" 'BEGIN { if (l + 0 > 0 && r + 0 > 0) printf "%.2f", l / (r / 2); else print "n/a" }')
if awk -v q="$ratio" 'BEGIN { exit !(q != "n/a" && q >= 0.5 && q <= 2) }'; then
  echo "VERDICT: inter latency within 2x of ping-pong: yes (measured / ping-pong one way = $ratio)"
else
  echo "VERDICT: inter latency within 2x of ping-pong: no (measured / ping-pong one way = $ratio)"
fi

# The model beside the last rcoll round, with the agreed inter latency.
if [[ -x $TUNE && $model != n/a ]]; then
  echo
  RCOLL_TUNE_ALPHA=inter=$model "$TUNE" -n 2 -N 2 -t socket -b "$MIN" -e "$MAX" -f "$FACTOR" \
    -m "$OUTDIR/rcoll_$ROUNDS.log" | sed -n '/measured in/,$p'
fi
note "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $STATUS
