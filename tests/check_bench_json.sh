#!/usr/bin/env bash
# bench -J writes nccl-tests' JSON (file version 3) that their
# tools/analyze_perf_json.py and dashboards built on it read unchanged.
# tests/bench_json_schema.py holds the schema as read from nccl-tests 2.19.6
# and checks each file against it, and that the -I summary agrees with the
# raw per-iteration times:
#   1. threads (-t 3): plain rows; -I 1 -K 2 -m 2 per-iteration objects
#      (no per-process rows: one process, as nccl-tests); -C 1's cpu_time;
#   2. three processes launched from the environment (RANK/WORLD_SIZE):
#      -I 1 gives per_process_max_times_us, one row per process, whose max
#      is times_us, and one config.devices entry per process;
#   3. an existing file is not overwritten: the output goes to FILE.0;
#   4. rcoll's fields: the header's transport line and each result's
#      algorithm and chunk are what the library's own calls log (RCOLL_DEBUG
#      COLL: "via ALGO/TRANSPORT, chunk N"), with shm and with RCOLL_NET=socket;
#      four processes on two "nodes" (RCOLL_HOSTID) name a line per class of peer;
#   5. NCCL_TESTS_ANALYZER=/path/to/analyze_perf_json.py (a copy of nccl-tests'
#      tool, kept outside this repository) also runs it with --straggler and
#      --all on the three-process file.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
make --no-print-directory bench/allreduce_perf bench/reduce_scatter_perf >/dev/null || exit 1
BIN=${BENCH_DIR:-bench}
command -v python3 >/dev/null || { echo "SKIP: no python3 (scripts/setup-deps.sh installs it)"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

schema() { # file args...
  local out
  out=$(python3 tests/bench_json_schema.py "$@" 2>&1) || { fail "schema: $1"; echo "$out" | head -n 20; }
}

run() { # name: bench args...
  local name=$1 out
  shift
  out=$("$@" 2>&1) || { fail "$name: exit status $?"; echo "$out" | tail -n 5; }
}

echo "-- threads"
run plain "$BIN/allreduce_perf" -t 3 -b 8 -e 4K -f 8 -n 4 -w 1 -J "$TMP/plain.json"
schema "$TMP/plain.json" --rows 4
run per-iter "$BIN/allreduce_perf" -t 3 -b 8 -e 4K -f 8 -n 6 -w 1 -m 2 -I 1 -K 2 -J "$TMP/iter.json"
schema "$TMP/iter.json" --per-iter --rows 4
run cputime "$BIN/reduce_scatter_perf" -t 2 -b 64 -e 64 -n 3 -w 0 -C 1 -o all -J "$TMP/cpu.json"
schema "$TMP/cpu.json" --cputime --rows 5
python3 - "$TMP/iter.json" <<'PY' || fail "per-iteration content"
import json, sys
d = json.load(open(sys.argv[1]))
c = d["config"]
assert c["per_iter_timing"] == "true" and c["per_iter_skip"] == 2, c
assert c["aggregated_iterations"] == 2 and c["iterations"] == 6, c
assert [r["size"] for r in d["results"]] == [8, 64, 512, 4096], [r["size"] for r in d["results"]]
for r in d["results"]:
    for k in ("out_of_place_per_iter", "in_place_per_iter"):
        assert len(r[k]["times_us"]) == 6 and "per_process_max_times_us" not in r[k], r[k]
assert d["config"]["rcoll"]["collective"] == "all_reduce"
PY

echo "-- three processes from the environment"
port=$((20000 + RANDOM % 20000))
pids=()
for r in 0 1 2; do
  RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RCOLL_COMM_SECRET=check-bench-json \
    timeout -k 5 120 "$BIN/allreduce_perf" -b 8 -e 32K -f 64 -n 8 -w 1 -I 1 -K 1 \
    -J "$TMP/procs.json" >"$TMP/procs.$r.out" 2>&1 &
  pids+=($!)
done
for i in 0 1 2; do
  wait "${pids[$i]}" || { fail "process $i: exit status $?"; tail -n 5 "$TMP/procs.$i.out"; }
done
schema "$TMP/procs.json" --per-iter --procs 3 --rows 3
[[ ! -e "$TMP/procs.json.0" ]] || fail "a process other than rank 0 wrote JSON"

echo "-- an existing file is kept"
echo keep >"$TMP/exists.json"
run exists "$BIN/allreduce_perf" -t 2 -b 8 -e 8 -n 1 -w 0 -J "$TMP/exists.json"
[[ $(cat "$TMP/exists.json") == keep ]] || fail "-J overwrote an existing file"
schema "$TMP/exists.json.0" --rows 1

echo "-- transports and algorithms: as the library's calls log them"
for net in shm socket; do
  out=$(RCOLL_NET=$net RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=COLL "$BIN/allreduce_perf" -t 4 -b 8 \
        -e 8M -f 16 -n 1 -w 0 -c 0 -J "$TMP/plan-$net.json" 2>&1) || fail "$net: exit status $?"
  grep -q "^# Transport to node-local peers : $net.* (3 peers of rank 0)" <<<"$out" ||
    fail "$net: no header line naming the transport: $(grep '^# Transport' <<<"$out")"
  [[ $(grep -c '^# Algorithm ' <<<"$out") -ge 1 ]] || fail "$net: no algorithm line"
  printf '%s\n' "$out" >"$TMP/plan-$net.log"
  python3 - "$TMP/plan-$net.json" "$net" "$TMP/plan-$net.log" <<'PY' || fail "$net: JSON algorithms differ from the log"
import json, re, sys
d = json.load(open(sys.argv[1]))
logged = {}
for line in open(sys.argv[3]):
    m = re.search(r"\[0\] rcoll INFO rcollAllReduce: (\d+) x float32 sum root 0 via (\w+)/(\w+), chunk (\d+)", line)
    if m:
        logged[int(m.group(1)) * 4] = (m.group(2), m.group(3), int(m.group(4)))
t = d["config"]["rcoll"]["transports"]
assert [c["class"] for c in t] == ["node-local"] and t[0]["transport"].split()[0] == sys.argv[2], t
assert len(d["results"]) == 6, len(d["results"])
for r in d["results"]:
    algo, net, chunk = logged[r["size"]]
    assert (r["rcoll"]["algorithm"], r["rcoll"]["chunk"], net) == (algo, chunk, sys.argv[2]), (r, logged[r["size"]])
PY
done

echo "-- two classes of peers: four processes, RCOLL_HOSTID node0 node0 node1 node1"
port=$((20000 + RANDOM % 20000))
pids=()
for r in 0 1 2 3; do
  RANK=$r WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RCOLL_COMM_SECRET=check-bench-json \
    RCOLL_HOSTID=node$((r / 2)) timeout -k 5 120 "$BIN/allreduce_perf" -b 8 -e 8 -n 2 -w 0 \
    -J "$TMP/nodes.json" >"$TMP/nodes.$r.out" 2>&1 &
  pids+=($!)
done
for i in 0 1 2 3; do
  wait "${pids[$i]}" || { fail "process $i: exit status $?"; tail -n 5 "$TMP/nodes.$i.out"; }
done
grep -q '^# Transport to node-local peers : [a-z]* .*(1 peer of rank 0)$' "$TMP/nodes.0.out" ||
  fail "no node-local line for 1 peer: $(grep '^# Transport' "$TMP/nodes.0.out")"
grep -q '^# Transport to remote     peers : [a-z]* .*(2 peers of rank 0)$' "$TMP/nodes.0.out" ||
  fail "no remote line for 2 peers: $(grep '^# Transport' "$TMP/nodes.0.out")"
schema "$TMP/nodes.json" --procs 4 --rows 1
python3 - "$TMP/nodes.json" <<'PY' || fail "JSON transports of two nodes"
import json, sys
t = json.load(open(sys.argv[1]))["config"]["rcoll"]["transports"]
assert sorted((c["class"], c["peers"]) for c in t) == [("node-local", 1), ("remote", 2)], t
PY

if [[ -n "${NCCL_TESTS_ANALYZER:-}" ]]; then
  echo "-- nccl-tests' analyzer: $NCCL_TESTS_ANALYZER"
  out=$(python3 "$NCCL_TESTS_ANALYZER" "$TMP/procs.json" --straggler --all 2>&1) ||
    { fail "analyzer: exit status $?"; echo "$out" | tail -n 5; }
  grep -q 'Consistency .*: PASS' <<<"$out" || fail "analyzer: consistency not PASS"
  grep -q 'Process rows: 3' <<<"$out" || fail "analyzer: not 3 process rows"
  grep -q 'PER-PROCESS STRAGGLER ANALYSIS' <<<"$out" || fail "analyzer: no straggler analysis"
  grep -q 'fastest=process' <<<"$out" || fail "analyzer: no straggler rows"
fi

[[ $failed -eq 0 ]] && echo "PASS: check_bench_json"
exit $failed
