#!/usr/bin/env bash
# Execution traces (RCOLL_TRACE=dir, docs/trace.md). A 4-rank ring all-reduce,
# on threads (-t 4) and on processes launched from the environment over the
# socket transport, writes one Trace Event JSON per rank; scripts/rcoll-trace-merge
# aligns and merges them into a file that validates (every event has its
# fields, each rank's calls in order, every step posted before done, every
# send matched by its receive), and tests/trace_pipeline.py finds the
# pipeline overlap of the ring on every rank. With RCOLL_TRACE unset or empty
# no file is written; one rank tracing alone still runs; a directory that
# cannot be written only warns; the event cap holds and says so; and the
# checkers reject broken or serialized traces (so these checks can fail).
# Exit 77 (skip) without python3.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

command -v python3 >/dev/null || { echo "SKIP: python3 is missing (the merge script needs it)"; exit 77; }
# Absolute, since one step runs from another directory (make check passes
# an absolute BENCH_DIR, a developer may pass a relative one).
BENCH=$(cd "${BENCH_DIR:-bench}" 2>/dev/null && pwd) || BENCH=${BENCH_DIR:-bench}
[[ -x $BENCH/allreduce_perf ]] || { echo "$BENCH/allreduce_perf is missing: run make first" >&2; exit 1; }
MERGE=scripts/rcoll-trace-merge

TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT

export RCOLL_TIMEOUT=60 RCOLL_SOCKET_IFNAME=lo RCOLL_SOCKET_FAMILY=AF_INET
unset RCOLL_TRACE RCOLL_TRACE_EVENTS
failed=0
fail() { echo "   FAILED: $*"; failed=1; }
count() { find "$1" -name 'rcoll-trace-*.json' 2>/dev/null | wc -l; }
# 4 MiB in 256 KiB chunks: 4 chunks per ring segment, so the pipeline has depth.
RING=(env RCOLL_ALGO=ring RCOLL_CHUNK_SIZE=256K)
BENCH_ARGS=(-b 4M -e 4M -n 2 -w 1 -c 1)

# Runs NRANKS processes of allreduce_perf launched from the environment;
# TRACE_OF_RANK <r> prints the RCOLL_TRACE value rank r gets.
run_procs() { # nranks out_prefix extra_env...
  local n=$1 out=$2 port=${PORT:-$((20000 + RANDOM % 12000))}
  shift 2
  local pids=()
  for ((r = 0; r < n; r++)); do
    env RCOLL_COMM_ID=127.0.0.1:$port WORLD_SIZE=$n RANK=$r RCOLL_TRACE="$(trace_of_rank $r)" "$@" \
      timeout -k 5 90 "$BENCH/allreduce_perf" "${BENCH_ARGS[@]}" >"$out.$r.out" 2>"$out.$r.err" &
    pids+=($!)
    PIDS+=($!)
  done
  local rc=0 r=0
  for p in "${pids[@]}"; do
    wait "$p" || { rc=1; echo "   rank $r exited $?: $(grep -v WARN "$out.$r.out" "$out.$r.err" | tail -3)"; }
    r=$((r + 1))
  done
  return $rc
}

merge_and_check() { # dir label
  "$MERGE" "$1" -o "$1.merged.json" || { fail "$2: the merge reports problems (above)"; return; }
  "$MERGE" --validate "$1.merged.json" || fail "$2: the merged file does not validate"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["displayTimeUnit"]=="ns"' \
    "$1.merged.json" || fail "$2: the merged file is not a Trace Event object"
  python3 tests/trace_pipeline.py "$1.merged.json" 4 || fail "$2: no ring pipeline overlap"
}

echo "-- the checkers reject what they must"
python3 tests/trace_pipeline.py --selftest || fail "trace_pipeline.py's self-test"

echo "-- 4 ranks on threads: the directory made, one file per rank, merged, valid, pipelined"
RCOLL_TRACE=$TMP/threads "${RING[@]}" timeout -k 5 90 "$BENCH/allreduce_perf" -t 4 "${BENCH_ARGS[@]}" \
  >"$TMP/threads.out" 2>&1 || fail "the traced bench failed: $(tail -3 "$TMP/threads.out")"
[[ $(count "$TMP/threads") == 4 ]] || fail "$(count "$TMP/threads") trace files, expected 4"
merge_and_check "$TMP/threads" threads

echo "-- 4 processes over sockets: clocks aligned over the bootstrap"
trace_of_rank() { echo "$TMP/procs"; }
run_procs 4 "$TMP/procs" "${RING[@]}" RCOLL_NET=socket ||
  fail "a traced rank failed"
[[ $(count "$TMP/procs") == 4 ]] || fail "$(count "$TMP/procs") trace files, expected 4"
merge_and_check "$TMP/procs" processes
python3 - "$TMP/procs" <<'EOF' || fail "the rank files' clock metadata"
import glob, json, sys
metas = [json.load(open(f))["otherData"]["rcoll"] for f in glob.glob(sys.argv[1] + "/*.json")]
assert len({m["pid"] for m in metas}) == 4, "four processes"
assert all(m["clock_sync"].startswith("ring ping-pong") for m in metas), metas
assert [m["clock_offset_ns"] for m in metas if m["rank"] == 0] == [0], "rank 0 is the reference"
# One machine, one CLOCK_MONOTONIC: a measured offset is an error, and must be small.
assert all(abs(m["clock_offset_ns"]) < 5_000_000 for m in metas), metas
assert any(e.get("name") == "reduce" for f in glob.glob(sys.argv[1] + "/*.json")
           for e in json.load(open(f))["traceEvents"]), "socket: reductions from staging slots"
EOF

echo "-- a rerun with the same RCOLL_COMM_ID into the same directory: a communicator apart"
PORT=$((20000 + RANDOM % 12000)) # below the ephemeral ports (32768-)
BENCH_ARGS=(-b 8 -e 8 -n 2 -w 1 -c 1)
trace_of_rank() { echo "$TMP/rerun"; }
PORT=$PORT run_procs 2 "$TMP/rerun" || fail "the first run failed"
PORT=$PORT run_procs 2 "$TMP/rerun" || fail "the rerun failed"
hashes=$(ls "$TMP/rerun" | sed 's/rcoll-trace-\([0-9a-f]*\)-.*/\1/' | sort -u)
[[ $(count "$TMP/rerun") == 4 && $(wc -w <<<"$hashes") == 2 ]] ||
  fail "two runs of one id: $(ls "$TMP/rerun" | tr '\n' ' ')"
for h in $hashes; do
  "$MERGE" "$TMP/rerun" --comm "$h" -o "$TMP/rerun.$h.json" >/dev/null || fail "run $h does not merge"
done
cp "$(ls "$TMP"/rerun/*rank1.json | head -1)" "$TMP/rerun/rcoll-trace-${hashes%%$'\n'*}-rank1-2.json"
"$MERGE" "$TMP/rerun" --comm "${hashes%%$'\n'*}" -o "$TMP/rerun.json" 2>"$TMP/rerun.err" >/dev/null &&
  fail "a rank twice in one communicator merged"
grep -q "in more than one file" "$TMP/rerun.err" || fail "the merge did not name the twice-seen rank"
BENCH_ARGS=(-b 4M -e 4M -n 2 -w 1 -c 1)

echo "-- RCOLL_TRACE unset or empty: no file"
mkdir -p "$TMP/off" && cd "$TMP/off" || exit 1
for v in unset empty; do
  if [[ $v == unset ]]; then
    env -u RCOLL_TRACE HOME="$TMP/off" timeout -k 5 60 "$BENCH/allreduce_perf" -t 4 \
      -b 8 -e 8 -n 2 -w 1 >"$TMP/off.$v.out" 2>&1 || fail "bench without a trace failed"
  else
    RCOLL_TRACE= HOME="$TMP/off" timeout -k 5 60 "$BENCH/allreduce_perf" -t 4 \
      -b 8 -e 8 -n 2 -w 1 >"$TMP/off.$v.out" 2>&1 || fail "bench with RCOLL_TRACE= failed"
  fi
  n=$(find "$TMP/off" /tmp -maxdepth 1 -newer "$TMP/off.$v.out" -name 'rcoll-trace-*' 2>/dev/null | wc -l)
  [[ $n == 0 && $(count "$TMP/off") == 0 ]] || fail "RCOLL_TRACE $v: trace files were written"
done
cd "$OLDPWD" || exit 1

echo "-- only rank 1 traces: the others run as usual, its file says the clocks are not aligned"
trace_of_rank() { [[ $1 == 1 ]] && echo "$TMP/one"; }
BENCH_ARGS=(-b 8 -e 64K -n 2 -w 1 -c 1)
run_procs 4 "$TMP/one" || fail "a rank failed when only rank 1 traces"
[[ $(count "$TMP/one") == 1 ]] || fail "$(count "$TMP/one") trace files, expected rank 1's"
grep -q '"clock_sync":"none: not every rank sets RCOLL_TRACE"' "$TMP"/one/*rank1.json ||
  fail "rank 1's file does not say its clock is not aligned"

echo "-- a directory that cannot be made: warned once per rank, the calls succeed"
touch "$TMP/afile"
RCOLL_TRACE=$TMP/afile/dir timeout -k 5 60 "$BENCH/allreduce_perf" -t 4 -b 8 -e 8 -n 2 -w 1 \
  >"$TMP/nodir.out" 2>&1 || fail "bench failed on an unwritable trace directory"
w=$(grep -c "RCOLL_TRACE: cannot create" "$TMP/nodir.out")
[[ $w == 4 ]] || fail "$w warnings about the trace directory, expected one per rank (4)"

echo "-- the event cap: RCOLL_TRACE_EVENTS=40 keeps 40 and says how many it dropped"
RCOLL_TRACE=$TMP/cap RCOLL_TRACE_EVENTS=40 timeout -k 5 60 "$BENCH/allreduce_perf" -t 4 -b 8 -e 8K \
  -n 2 -w 1 >"$TMP/cap.out" 2>&1 || fail "bench with a capped trace failed"
python3 - "$TMP/cap" <<'EOF' || fail "a capped trace"
import glob, json, sys
files = glob.glob(sys.argv[1] + "/*.json")
assert len(files) == 4, files
for f in files:
    d = json.load(open(f))
    m = d["otherData"]["rcoll"]
    assert m["events"] == 40 and m["events_dropped"] > 0, m
    assert any(e["name"] == "trace full" for e in d["traceEvents"]), "no 'trace full' event"
EOF
"$MERGE" "$TMP/cap" -o "$TMP/cap.json" >/dev/null || fail "a capped trace does not merge"

echo "-- the merge refuses a broken rank file"
mkdir -p "$TMP/broken"
cp "$TMP"/threads/*.json "$TMP/broken/"
f=$(ls "$TMP"/broken/*rank2.json)
python3 - "$f" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
next(e for e in d["traceEvents"] if e.get("cat") == "step").pop("ts")
json.dump(d, open(sys.argv[1], "w"))
EOF
"$MERGE" "$TMP/broken" -o "$TMP/broken.json" 2>"$TMP/broken.err" && fail "a step without ts merged"
grep -q "missing ts" "$TMP/broken.err" || fail "the merge did not name the missing field"
cp "$TMP"/threads/*rank2.json "$TMP/broken/"
python3 - "$f" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["traceEvents"].remove(next(e for e in d["traceEvents"] if e.get("ph") == "f"))
json.dump(d, open(sys.argv[1], "w"))
EOF
"$MERGE" "$TMP/broken" -o "$TMP/broken.json" 2>"$TMP/broken.err" && fail "a message without its receive merged"
grep -q "send without a receive" "$TMP/broken.err" || fail "the merge did not notice a lone send"
rm "$f"
"$MERGE" "$TMP/broken" -o "$TMP/broken.json" 2>"$TMP/broken.err" && fail "a missing rank merged"
grep -q "no file from rank(s) \[2\] of 4" "$TMP/broken.err" || fail "the merge did not notice a missing rank"

if ((failed)); then
  echo "check_trace: FAILED"
  exit 1
fi
echo "check_trace: all passed"
