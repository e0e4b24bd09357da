# shellcheck shell=bash disable=SC2034 # NETNS_LAYOUT is read by the scripts that source this
# Several "nodes" on one machine: network namespaces joined by a bridge, or
# by tests/netns/wire.c, a userspace switch that delays and drops frames.
# Source this file; it defines netns_up / netns_up_wire / netns_netem /
# netns_down / netns_run.
#
# Layout for N nodes (prefix P, unique per run):
#   P-hub   holds bridge br0 with 198.18.7.254 (mpiexec runs here, so that the
#           hydra proxies in the nodes can reach it)
#   P-nI    node I (1..N), veth vI with 198.18.7.I, its peer enslaved to br0
# The wire layout (netns_up_wire) has the same namespaces and addresses, but
# vI is a TAP device of one netns_wire process running in P-hub, and the
# hub's own port w0 (198.18.7.254) replaces br0.
# 198.18.0.0/15 is reserved for network benchmarks (RFC 2544): it can never
# be somebody else's address, and it only exists inside these namespaces.

NETNS_SUBNET=198.18.7
NETNS_PREFIX=${NETNS_PREFIX:-rcoll$$}
NETNS_NODES=0
NETNS_DIR=
NETNS_LAYOUT=
NETNS_WIRE_PID=
NETNS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NETNS_WIRE=${NETNS_WIRE:-${TEST_BIN_DIR:-$NETNS_ROOT/tests/bin}/netns_wire}

netns_up() {
  local n=$1 i
  NETNS_NODES=$n
  NETNS_DIR=$(mktemp -d /tmp/rcoll-netns.XXXXXX)
  : >"$NETNS_DIR/hosts"
  ip netns add "$NETNS_PREFIX-hub" || return 1
  ip -n "$NETNS_PREFIX-hub" link set lo up
  ip -n "$NETNS_PREFIX-hub" link add br0 type bridge
  ip -n "$NETNS_PREFIX-hub" addr add "$NETNS_SUBNET.254/24" dev br0
  ip -n "$NETNS_PREFIX-hub" link set br0 up
  for ((i = 1; i <= n; i++)); do
    local ns=$NETNS_PREFIX-n$i
    ip netns add "$ns" || return 1
    ip -n "$ns" link set lo up
    ip link add "v$i" netns "$ns" type veth peer name "h$i" netns "$NETNS_PREFIX-hub" || return 1
    ip -n "$ns" addr add "$NETNS_SUBNET.$i/24" dev "v$i"
    ip -n "$ns" link set "v$i" up
    ip -n "$NETNS_PREFIX-hub" link set "h$i" master br0
    ip -n "$NETNS_PREFIX-hub" link set "h$i" up
    echo "$NETNS_SUBNET.$i $ns" >>"$NETNS_DIR/hosts"
  done
  NETNS_LAYOUT=bridge
  export RCOLL_NETNS_HOSTS=$NETNS_DIR/hosts
}

# Builds the link emulator when it is missing or older than its source (it
# needs only libc, so the library's build state does not matter).
netns_wire_build() {
  local src=$NETNS_ROOT/tests/netns/wire.c
  [[ -x $NETNS_WIRE && ! $src -nt $NETNS_WIRE ]] && return 0
  mkdir -p "$(dirname "$NETNS_WIRE")"
  ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g "$src" -lm -o "$NETNS_WIRE"
}

# netns_up_wire N "delay=1ms jitter=0 loss=1% rate=1gbit limit=1000 mtu=1500":
# the layout above over netns_wire, which applies the shaping to every frame
# it forwards (once per direction: delay=1ms is a 2 ms round trip). Call it
# in the script's own shell, not in $(...) or a pipeline: the switch stops
# when the shell that started it exits, so a killed test leaves none behind.
netns_up_wire() {
  local n=$1 spec=${2:-} i ports=(w0) hub=$NETNS_PREFIX-hub
  netns_wire_build || return 1
  NETNS_NODES=$n
  NETNS_DIR=$(mktemp -d /tmp/rcoll-netns.XXXXXX)
  : >"$NETNS_DIR/hosts"
  ip netns add "$hub" || return 1
  ip -n "$hub" link set lo up
  for ((i = 1; i <= n; i++)); do
    ip netns add "$NETNS_PREFIX-n$i" || return 1
    ip -n "$NETNS_PREFIX-n$i" link set lo up
    ports+=("v$i")
  done
  # The TAP devices are made in the hub, then each node's is moved into its
  # namespace; the switch's open file stays attached to it.
  # shellcheck disable=SC2086 # spec is a list of key=value words
  ip netns exec "$hub" "$NETNS_WIRE" $spec "${ports[@]}" >"$NETNS_DIR/wire.out" 2>"$NETNS_DIR/wire.log" &
  NETNS_WIRE_PID=$!
  NETNS_LAYOUT=wire
  netns_wire_wait_ready || return 1
  ip -n "$hub" addr add "$NETNS_SUBNET.254/24" dev w0
  ip -n "$hub" link set w0 up
  for ((i = 1; i <= n; i++)); do
    local ns=$NETNS_PREFIX-n$i
    ip -n "$hub" link set "v$i" netns "$ns" || return 1
    ip -n "$ns" addr add "$NETNS_SUBNET.$i/24" dev "v$i"
    ip -n "$ns" link set "v$i" up
    echo "$NETNS_SUBNET.$i $ns" >>"$NETNS_DIR/hosts"
  done
  export RCOLL_NETNS_HOSTS=$NETNS_DIR/hosts
}

netns_wire_wait_ready() {
  local tries
  for ((tries = 0; tries < 100; tries++)); do
    grep -q ready "$NETNS_DIR/wire.out" 2>/dev/null && return 0
    kill -0 "$NETNS_WIRE_PID" 2>/dev/null || break
    sleep 0.05
  done
  echo "netns: netns_wire did not start:" >&2
  cat "$NETNS_DIR/wire.log" >&2
  return 1
}

# Stops the switch with SIGTERM, so that its per-port counts (frames
# forwarded, lost, dropped) reach $NETNS_DIR/wire.log; prints them when
# NETNS_WIRE_REPORT=1.
netns_wire_stop() {
  local tries
  [[ -n $NETNS_WIRE_PID ]] || return 0
  kill "$NETNS_WIRE_PID" 2>/dev/null
  for ((tries = 0; tries < 40; tries++)); do
    kill -0 "$NETNS_WIRE_PID" 2>/dev/null || break
    sleep 0.05
  done
  wait "$NETNS_WIRE_PID" 2>/dev/null
  [[ ${NETNS_WIRE_REPORT:-0} == 1 && -f $NETNS_DIR/wire.log ]] && cat "$NETNS_DIR/wire.log" >&2
  NETNS_WIRE_PID=
}

# Translates netem's words ("delay 1ms 100us loss 1% rate 1gbit limit N")
# into netns_wire options; fails on what the wire cannot do (reorder,
# duplicate, corrupt, correlations, distributions).
netns_netem_to_wire() {
  local out=()
  while (($#)); do
    case $1 in
      delay)
        out+=("delay=$2")
        shift 2
        if [[ ${1:-} =~ ^[0-9.]+(s|ms|us|ns|sec|msec|usec|nsec)?$ ]]; then
          out+=("jitter=$1")
          shift
        fi ;;
      loss)
        [[ ${2:-} == random ]] && shift
        out+=("loss=$2")
        shift 2 ;;
      rate | limit)
        out+=("$1=$2")
        shift 2 ;;
      *)
        echo "netns: netem option '$1' is not emulated by netns_wire" >&2
        return 1 ;;
    esac
  done
  echo "${out[*]}"
}

# netns_netem delay 1ms loss 1%: shape every node's link (both directions
# leave through some node's vI, so shaping the node side covers all). When
# the kernel has no sch_netem (or NETNS_USE_WIRE=1), the layout is made
# again over netns_wire with the same shaping: namespaces, addresses and
# RCOLL_NETNS_HOSTS stay as they were, running processes do not.
# NETNS_WIRE_OPTS adds netns_wire options that netem lacks ("mtu=9000").
netns_netem() {
  local i spec n=$NETNS_NODES
  if [[ ${NETNS_USE_WIRE:-0} != 1 ]]; then
    for ((i = 1; i <= n; i++)); do
      ip netns exec "$NETNS_PREFIX-n$i" tc qdisc replace dev "v$i" root netem "$@" 2>/dev/null || break
    done
    ((i > n)) && return 0
  fi
  spec=$(netns_netem_to_wire "$@") || return 1
  spec="$spec${NETNS_WIRE_OPTS:+ $NETNS_WIRE_OPTS}"
  echo "netns: links shaped by netns_wire ($spec):" \
    "$([[ ${NETNS_USE_WIRE:-0} == 1 ]] && echo NETNS_USE_WIRE=1 || echo no netem qdisc in this kernel)" >&2
  netns_down
  netns_up_wire "$n" "$spec"
}

netns_down() {
  local ns
  netns_wire_stop
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NETNS_PREFIX-"); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  [[ -n $NETNS_DIR ]] && rm -rf "$NETNS_DIR"
  NETNS_NODES=0
  NETNS_LAYOUT=
}

# netns_run PPN NP cmd...: mpiexec from the hub, PPN ranks per node, NP in all.
# Ranks meet through RCOLL_COMM_ID on node 1 (rcollCommInitFromEnv).
netns_run() {
  local ppn=$1 np=$2 hosts i
  shift 2
  hosts=$(seq -s, -f "$NETNS_SUBNET.%g" 1 "$NETNS_NODES")
  ip netns exec "$NETNS_PREFIX-hub" "${MPIEXEC:-mpiexec.mpich}" \
    -launcher ssh -launcher-exec "$(dirname "${BASH_SOURCE[0]}")/nsexec.sh" \
    -localhost "$NETNS_SUBNET.254" -hosts "$hosts" -ppn "$ppn" -n "$np" \
    -genv RCOLL_COMM_ID "$NETNS_SUBNET.1:$((20000 + RANDOM % 20000))" -genvall -wdir "$PWD" "$@"
}

# netns_ping FROM TO COUNT INTERVAL_US: UDP round trips from node FROM to
# node TO (netns_wire udp-ping against udp-echo); prints one line:
# "sent N received N lost X% oneway_loss X% rtt_us min M median M avg M max M".
netns_ping() {
  local from=$1 to=$2 count=$3 interval=$4 port=$((40000 + RANDOM % 20000)) echo_pid rc
  netns_wire_build || return 1
  ip netns exec "$NETNS_PREFIX-n$to" "$NETNS_WIRE" udp-echo "$port" &
  echo_pid=$!
  sleep 0.1 # the echo binds its port
  ip netns exec "$NETNS_PREFIX-n$from" "$NETNS_WIRE" udp-ping "$NETNS_SUBNET.$to" "$port" "$count" "$interval"
  rc=$?
  kill "$echo_pid" 2>/dev/null
  wait "$echo_pid" 2>/dev/null
  return $rc
}
