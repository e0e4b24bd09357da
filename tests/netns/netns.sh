# Several "nodes" on one machine: network namespaces joined by a bridge.
# Source this file; it defines netns_up / netns_netem / netns_down / netns_run.
#
# Layout for N nodes (prefix P, unique per run):
#   P-hub   holds bridge br0 with 198.18.7.254 (mpiexec runs here, so that the
#           hydra proxies in the nodes can reach it)
#   P-nI    node I (1..N), veth vI with 198.18.7.I, its peer enslaved to br0
# 198.18.0.0/15 is reserved for network benchmarks (RFC 2544): it can never
# be somebody else's address, and it only exists inside these namespaces.

NETNS_SUBNET=198.18.7
NETNS_PREFIX=${NETNS_PREFIX:-rcoll$$}
NETNS_NODES=0
NETNS_DIR=

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
  export RCOLL_NETNS_HOSTS=$NETNS_DIR/hosts
}

# netns_netem "delay 1ms loss 1%": shape every node's link (both directions
# leave through some node's veth, so shaping the node side covers all).
netns_netem() {
  local i
  for ((i = 1; i <= NETNS_NODES; i++)); do
    ip netns exec "$NETNS_PREFIX-n$i" tc qdisc replace dev "v$i" root netem "$@" || return 1
  done
}

netns_down() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NETNS_PREFIX-"); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  [[ -n $NETNS_DIR ]] && rm -rf "$NETNS_DIR"
  NETNS_NODES=0
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
