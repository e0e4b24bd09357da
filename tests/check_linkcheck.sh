#!/bin/bash
# bench/rcoll_linkcheck finds the slow link:
#   1. flags: bad values are refused with status 2 and a line naming them;
#      --print-schedule N pairs every two ranks exactly once, each rank in
#      at most one pair per round, for N = 2..12;
#   2. threads over shm (-t 3, a bye each round): status 0 and JSON in the
#      documented schema, its ratios agreeing with its medians;
#   3. four "nodes" (network namespaces on a bridge, RCOLL_NET=socket), one
#      rank each, where the path between rank 1's and rank 2's namespaces
#      goes through tests/netns/wire.c with a 2 ms delay and a 100 Mbit/s
#      cap (host routes send only that pair's traffic over it): status 1,
#      and the outlier lines and the JSON name that link, both ways, for
#      bandwidth and latency, and no other link or node; -T 3 in the middle
#      of that pair ends the run and says so;
#   4. the same four "nodes" with all of one node's traffic slowed: every
#      link of its rank, and that node alone, are named.
# Parts 3 and 4 need root, iproute2 and /dev/net/tun; without them it is skipped
# (status 77 when nothing else failed). The thresholds leave a wide margin
# on a shared machine: here the slowed link measures about 300x under the
# others' bandwidth and 200x over their latency, while the test flags 10x
# (parts 3, 4) or 20x (part 2), and busy-host noise stays within 3x; the
# numbers themselves are never asserted.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
make --no-print-directory bench/rcoll_linkcheck >/dev/null || exit 1
TOOL=${BENCH_DIR:-$ROOT/bench}/rcoll_linkcheck
command -v python3 >/dev/null || { echo "check_linkcheck: SKIP: no python3"; exit 77; }
SCRATCH=$(mktemp -d /tmp/rcoll-check-linkcheck.XXXXXX)
# Our own wire.c switches stop before the namespaces go (netns_down would
# kill -9 them, and bash would report it).
WIRES=()
stop_wires() {
  local p
  for p in "${WIRES[@]}"; do
    kill "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  WIRES=()
}
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() { stop_wires; [[ ${NETNS_NODES:-0} != 0 ]] && netns_down; rm -rf "$SCRATCH"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
failed=0
fail() { echo "FAIL: $*"; failed=1; }
T0=$SECONDS

# ---------------------------------------------------------------- 1. flags
echo "-- flags"
refused() { # label pattern args...: status 2 and the pattern on stderr
  local label=$1 pattern=$2 out rc
  shift 2
  out=$(timeout 60 "$TOOL" "$@" 2>&1 >/dev/null)
  rc=$?
  if ((rc != 2)) || ! grep -q -- "$pattern" <<<"$out"; then
    fail "$label: want status 2 and '$pattern', got $rc: $out"
  fi
}
refused "threshold 0" "--threshold '0'" --threshold 0
refused "threshold 1.5" "--threshold '1.5'" --threshold 1.5
refused "threshold text" "--threshold 'half'" --threshold half
refused "bytes 0" "-b '0'" -b 0
refused "bytes suffix" "-b '4Q'" -b 4Q
refused "iterations 0" "-n '0'" -n 0
refused "threads 0" "-t '0'" -t 0
refused "stray argument" "unexpected argument 'extra'" extra
refused "one rank" "a link needs two" -t 1
refused "unwritable JSON" "/nonexistent-dir/x.json" -t 2 -b 64K -n 1 -k 4 -J /nonexistent-dir/x.json
# -T: a rank whose peer never comes is ended after 2 s, saying where it was.
port=$((20000 + RANDOM % 20000))
out=$(RANK=0 WORLD_SIZE=2 RCOLL_COMM_ID=127.0.0.1:$port RCOLL_COMM_SECRET=linkcheck$$ RCOLL_TIMEOUT=60 \
      timeout 60 "$TOOL" -T 2 2>&1)
rc=$?
if ((rc != 2)) || ! grep -q -- "-T 2 s passed: thread 0 was setting up its communicator" <<<"$out"; then
  fail "-T 2 with a missing rank: status $rc, want 2 and the watchdog's line: $out"
fi
"$TOOL" --help | grep -q -- "--threshold F" || fail "--help does not describe --threshold"
for n in $(seq 2 12); do
  "$TOOL" --print-schedule "$n" >"$SCRATCH/sched.$n" || fail "--print-schedule $n: status $?"
done
python3 - "$SCRATCH" <<'PY' || fail "--print-schedule: a pair missed, repeated, or a rank twice in a round"
import itertools, re, sys
for n in range(2, 13):
    rounds = [l for l in open(f"{sys.argv[1]}/sched.{n}") if l.startswith("round")]
    assert len(rounds) == (n if n % 2 else n - 1), (n, len(rounds))
    seen = []
    for line in rounds:
        pairs = [tuple(map(int, p)) for p in re.findall(r" (\d+)-(\d+)", line)]
        ranks = [r for p in pairs for r in p]
        assert len(ranks) == len(set(ranks)), (n, line)       # one pair per rank per round
        assert len(pairs) == n // 2, (n, line)                 # everybody plays but the bye
        seen += pairs
    want = set(itertools.combinations(range(n), 2))
    assert len(seen) == len(want) and set(seen) == want, (n, sorted(seen))
PY

# ------------------------------------------------------------ JSON checker
# check_json FILE RANKS TRANSPORT "SRC-DST ..." : the schema, and exactly
# the given ordered links among the outliers (empty: none).
check_json() {
  python3 - "$@" <<'PY'
import json, math, sys
path, ranks, transport, want = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
d = json.load(open(path))
keys = ["tool", "version", "ranks", "hosts", "bytes", "threshold", "median", "links",
        "outliers", "slow_nodes", "seconds"]
for k in keys:
    assert k in d, f"missing {k}"
assert d["tool"] == "rcoll_linkcheck" and d["version"] == 1 and d["ranks"] == ranks, d["tool"]
assert len(d["hosts"]) == ranks and d["seconds"] > 0 and d["bytes"] > 0
assert set(d["median"]) == {"latency_us", "bandwidth_gbps"}
links = d["links"]
assert sorted((l["src"], l["dst"]) for l in links) == \
    [(s, t) for s in range(ranks) for t in range(ranks) if s != t], "not every ordered pair"
by_transport = d["medians_by_transport"]
for l in links:
    for k in ("src_host", "dst_host", "transport", "latency_us", "bandwidth_gbps", "bw_ratio",
              "lat_ratio"):
        assert k in l, f"link lacks {k}"
    assert l["transport"] == transport, l
    assert l["src_host"] == d["hosts"][l["src"]] and l["dst_host"] == d["hosts"][l["dst"]]
    assert l["latency_us"] > 0 and l["bandwidth_gbps"] > 0, l
    m = by_transport[l["transport"]]
    assert math.isclose(l["bw_ratio"], l["bandwidth_gbps"] / m["bandwidth_gbps"], rel_tol=1e-3), l
    assert math.isclose(l["lat_ratio"], l["latency_us"] / m["latency_us"], rel_tol=1e-3), l
    out = any(o["src"] == l["src"] and o["dst"] == l["dst"] for o in d["outliers"])
    slow = l["bw_ratio"] < d["threshold"] or l["lat_ratio"] > 1 / d["threshold"]
    assert out == slow, ("outliers disagree with the ratios", l)
for o in d["outliers"]:
    assert o["what"] in ("bandwidth", "latency"), o
    arrow = f"rank {o['src']} ({d['hosts'][o['src']]}) \u2192 rank {o['dst']} ({d['hosts'][o['dst']]}): "
    assert o["text"].startswith(arrow) and o["text"].endswith(f"median {o['what']}"), o
got = {f"{o['src']}-{o['dst']}" for o in d["outliers"]}
assert got == set(want.split()), f"outliers {sorted(got)}, want {want.split()}"
assert d["slow_nodes"] == [], d["slow_nodes"]
PY
}

# ---------------------------------------------------------------- 2. threads
echo "-- threads over shm"
out=$(RCOLL_TIMEOUT=120 timeout 300 "$TOOL" -t 3 -b 1M -n 9 --threshold 0.05 -T 240 \
      -J "$SCRATCH/threads.json" 2>&1)
rc=$?
echo "$out" | grep -E '^# (Median|OK|FAILED|Run time)|^rank '
((rc == 0)) || fail "threads: status $rc, want 0"
check_json "$SCRATCH/threads.json" 3 shm "" || fail "threads: JSON"

# ---------------------------------------------------------------- 3. namespaces
netns_skip=
[[ $(id -u) == 0 ]] || netns_skip="needs root for ip netns"
command -v ip >/dev/null || netns_skip="iproute2 (ip) missing"
[[ -e /dev/net/tun ]] || netns_skip="no /dev/net/tun for tests/netns/wire.c"
if [[ -n $netns_skip ]]; then
  echo "check_linkcheck: SKIP namespaces: $netns_skip"
  ((failed)) && exit 1
  exit 77
fi

NETNS_PREFIX=linkcheck$$
source tests/netns/netns.sh
SUB=$NETNS_SUBNET
HUB=$NETNS_PREFIX-hub

# slow_path A B SPEC: a second wire.c switch with two ports, one in node A's
# namespace and one in node B's, and host routes that send A<->B traffic
# through it (the bridge still carries everything else).
slow_path() {
  local a=$1 b=$2 spec=$3 tries
  netns_wire_build || return 1
  # shellcheck disable=SC2086 # spec is a list of key=value words
  ip netns exec "$HUB" "$NETNS_WIRE" $spec lcs$a lcs$b >"$SCRATCH/slow.out" 2>"$SCRATCH/slow.log" &
  WIRES+=($!)
  for ((tries = 0; tries < 100; tries++)); do
    grep -q ready "$SCRATCH/slow.out" 2>/dev/null && break
    sleep 0.05
  done
  grep -q ready "$SCRATCH/slow.out" || { cat "$SCRATCH/slow.log"; return 1; }
  ip -n "$HUB" link set "lcs$a" netns "$NETNS_PREFIX-n$a" || return 1
  ip -n "$HUB" link set "lcs$b" netns "$NETNS_PREFIX-n$b" || return 1
  ip -n "$NETNS_PREFIX-n$a" link set "lcs$a" up
  ip -n "$NETNS_PREFIX-n$b" link set "lcs$b" up
  ip -n "$NETNS_PREFIX-n$a" route add "$SUB.$b/32" dev "lcs$a" src "$SUB.$a" || return 1
  ip -n "$NETNS_PREFIX-n$b" route add "$SUB.$a/32" dev "lcs$b" src "$SUB.$b" || return 1
}

echo "-- 4 namespaces, rank 1 <-> rank 2 through wire.c (delay=2ms rate=100mbit)"
netns_up 4 || { fail "cannot create namespaces"; exit 1; }
slow_path 2 3 "delay=2ms rate=100mbit" || { fail "cannot slow the path between nodes 2 and 3"; exit 1; }
# The routes do what they should: node 2 -> 3 takes the 2 ms wire, 1 -> 2 does not.
slow_rtt=$(netns_ping 2 3 20 2000 | awk '{for (i = 1; i < NF; i++) if ($i == "median") print int($(i + 1))}')
fast_rtt=$(netns_ping 1 2 20 2000 | awk '{for (i = 1; i < NF; i++) if ($i == "median") print int($(i + 1))}')
echo "   UDP round trip: node 2 -> 3 ${slow_rtt:-?} us, node 1 -> 2 ${fast_rtt:-?} us"
((${slow_rtt:-0} >= 4000 && ${fast_rtt:-999999} < 4000)) || fail "the slowed path is not where it should be"

port=$((20000 + RANDOM % 20000))
hosts=(node-a node-b node-c node-d)
t_start=$SECONDS
pids=()
for r in 0 1 2 3; do
  ip netns exec "$NETNS_PREFIX-n$((r + 1))" env RANK=$r WORLD_SIZE=4 RCOLL_COMM_ID="$SUB.1:$port" \
    RCOLL_NET=socket RCOLL_HOSTID="${hosts[r]}" RCOLL_TIMEOUT=120 RCOLL_COMM_SECRET=linkcheck$$ \
    timeout 400 "$TOOL" -b 1M -n 5 -k 50 --threshold 0.1 -T 300 -J "$SCRATCH/ns.json" \
    >"$SCRATCH/rank$r.out" 2>&1 &
  pids+=($!)
done
for r in 0 1 2 3; do
  wait "${pids[r]}"
  rc=$?
  ((rc == 1)) || { fail "namespaces: rank $r status $rc, want 1"; tail -n 5 "$SCRATCH/rank$r.out"; }
done
echo "   4 ranks in namespaces: $((SECONDS - t_start)) s from launch to exit"
grep -E '^# (Median|FAILED|OK|Run time)|^(rank|node) ' "$SCRATCH/rank0.out" | sed 's/^/   /'
python3 - "$SCRATCH/rank0.out" <<'PY' || { fail "namespaces: the outlier lines are not exactly the slowed link's, both ways"; cat "$SCRATCH/rank0.out"; }
import re, sys
lines = [l.rstrip("\n") for l in open(sys.argv[1]) if re.match(r"rank \d+ \(", l)]
want = [(a, b, w) for a, b in (("rank 1 (node-b)", "rank 2 (node-c)"), ("rank 2 (node-c)", "rank 1 (node-b)"))
        for w in (r"0\.\d+ of median bandwidth", r"\d+\.\d× median latency")]
assert len(lines) == len(want), lines
for line, (a, b, w) in zip(lines, want):
    assert re.fullmatch(re.escape(f"{a} → {b}: ") + w, line), (line, a, b, w)
PY
grep -qE '^node ' "$SCRATCH/rank0.out" && fail "namespaces: a node named slow"
check_json "$SCRATCH/ns.json" 4 socket "1-2 2-1" || fail "namespaces: JSON"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["hosts"]==["node-a","node-b","node-c","node-d"], d["hosts"]' \
  "$SCRATCH/ns.json" || fail "namespaces: hosts in JSON"

# -T in the middle of the slow pair's measurements: round 1 pairs 0-3 and
# 1-2 (--print-schedule 4), and 1-2's 40 messages each way take 7 s over
# 100 Mbit/s, so 3 s after the start ranks 1 and 2 are still at it.
echo "-- -T 3 while rank 1 and rank 2 measure their link"
pids=()
for r in 0 1 2 3; do
  ip netns exec "$NETNS_PREFIX-n$((r + 1))" env RANK=$r WORLD_SIZE=4 RCOLL_COMM_ID="$SUB.1:$((port + 1))" \
    RCOLL_NET=socket RCOLL_HOSTID="${hosts[r]}" RCOLL_TIMEOUT=120 RCOLL_COMM_SECRET=linkcheck$$ \
    timeout 120 "$TOOL" -b 1M -n 40 -k 10 -T 3 >"$SCRATCH/t$r.out" 2>&1 &
  pids+=($!)
done
for r in 0 1 2 3; do
  wait "${pids[r]}"
  rc=$?
  ((rc == 2)) || fail "-T 3: rank $r status $rc, want 2"
done
# The first of the pair whose limit passes ends; its partner may then see
# the connection close before its own limit, and say so instead, naming the
# same measurement.
for r in 1 2; do
  grep -E -- "(-T 3 s passed: rank $r was|^rank $r: rcoll(Send|Recv) with rank $((3 - r)) failed while) measuring (latency|bandwidth) with rank $((3 - r)) in round 1 of 3" \
    "$SCRATCH/t$r.out" || { fail "-T 3: rank $r does not say it was measuring with rank $((3 - r))"; cat "$SCRATCH/t$r.out"; }
done
grep -q -- "-T 3 s passed" "$SCRATCH/t1.out" "$SCRATCH/t2.out" || fail "-T 3: no watchdog line from rank 1 or 2"

# ------------------------------------------------- 4. a slow node
# Node 4 leaves the bridge: its veth is replaced by a wire.c port whose
# other end is a TAP in the hub's bridge, so all of rank 3's traffic is
# slowed. Every link of rank 3 is out of line, and node-d is named as a
# slow node; no other node is (each has 2 slow links out of 6).
echo "-- 4 namespaces, all of node 4's path through wire.c (delay=2ms rate=100mbit)"
stop_wires
netns_down
NETNS_PREFIX=linkcheck$$n
HUB=$NETNS_PREFIX-hub
netns_up 4 || { fail "cannot create namespaces"; exit 1; }
slow_node() { # N SPEC
  local n=$1 spec=$2 tries
  ip -n "$HUB" link del "h$n" || return 1 # and v$n with it
  # shellcheck disable=SC2086 # spec is a list of key=value words
  ip netns exec "$HUB" "$NETNS_WIRE" $spec lcn$n lcb$n >"$SCRATCH/node.out" 2>"$SCRATCH/node.log" &
  WIRES+=($!)
  for ((tries = 0; tries < 100; tries++)); do
    grep -q ready "$SCRATCH/node.out" 2>/dev/null && break
    sleep 0.05
  done
  grep -q ready "$SCRATCH/node.out" || { cat "$SCRATCH/node.log"; return 1; }
  ip -n "$HUB" link set "lcb$n" master br0 || return 1
  ip -n "$HUB" link set "lcb$n" up
  ip -n "$HUB" link set "lcn$n" netns "$NETNS_PREFIX-n$n" || return 1
  ip -n "$NETNS_PREFIX-n$n" addr add "$SUB.$n/24" dev "lcn$n"
  ip -n "$NETNS_PREFIX-n$n" link set "lcn$n" up
}
slow_node 4 "delay=2ms rate=100mbit" || { fail "cannot slow node 4's path"; exit 1; }
t_start=$SECONDS
pids=()
for r in 0 1 2 3; do
  ip netns exec "$NETNS_PREFIX-n$((r + 1))" env RANK=$r WORLD_SIZE=4 RCOLL_COMM_ID="$SUB.1:$((port + 2))" \
    RCOLL_NET=socket RCOLL_HOSTID="${hosts[r]}" RCOLL_TIMEOUT=120 RCOLL_COMM_SECRET=linkcheck$$ \
    timeout 400 "$TOOL" -b 1M -n 3 -k 20 --threshold 0.1 -T 300 -J "$SCRATCH/node.json" \
    >"$SCRATCH/node$r.out" 2>&1 &
  pids+=($!)
done
for r in 0 1 2 3; do
  wait "${pids[r]}"
  rc=$?
  ((rc == 1)) || { fail "slow node: rank $r status $rc, want 1"; tail -n 5 "$SCRATCH/node$r.out"; }
done
echo "   4 ranks, one slow node: $((SECONDS - t_start)) s from launch to exit"
grep -E '^# (Median|FAILED|OK|Run time)|^(rank|node) ' "$SCRATCH/node0.out" | sed 's/^/   /'
python3 - "$SCRATCH/node.json" <<'PY' || { fail "slow node: JSON"; cat "$SCRATCH/node0.out"; }
import json, sys
d = json.load(open(sys.argv[1]))
got = {(o["src"], o["dst"], o["what"]) for o in d["outliers"]}
want = {(s, t, w) for s, t in [(3, 0), (3, 1), (3, 2), (0, 3), (1, 3), (2, 3)]
        for w in ("bandwidth", "latency")}
assert got == want, sorted(got ^ want)
nodes = sorted((n["host"], n["ranks"], n["what"]) for n in d["slow_nodes"])
assert nodes == [("node-d", [3], "bandwidth"), ("node-d", [3], "latency")], nodes
for n in d["slow_nodes"]:
    assert n["links"] == 6 and n["text"].startswith("node node-d (rank 3): "), n
PY

echo "check_linkcheck: $((SECONDS - T0)) s in all"
exit $failed
