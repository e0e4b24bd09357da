#!/usr/bin/env bash
# The flight recorder (lib/flight_recorder.c, docs/faults.md) and its
# analyzer (scripts/rcoll-fr-analyze), on real runs:
#   - RCOLL_FR_SIGNAL (SIGUSR2 here) makes a running process dump every
#     communicator's ring to RCOLL_FR_DUMP_FILE (%r: one file per rank),
#     and the process lives on;
#   - a rank that stops calling (alive, tests/rank_death.c -m hang): the
#     others time out and dump ("timeout"), it dumps on SIGUSR1, and the
#     analyzer says it never started the call the others wait in;
#   - a SIGKILLed rank: dumps in the log (no RCOLL_FR_DUMP_FILE), and the
#     analyzer, reading the log, says that rank's dump is missing;
#   - mismatched calls: the analyzer names both;
#   - RCOLL_FR_ENTRIES=0: no dump at all.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

command -v python3 >/dev/null || { echo "SKIP: python3 is missing (the analyzer needs it)"; exit 77; }
BENCH=${BENCH_DIR:-bench}
BIN_DIR=${TEST_BIN_DIR:-tests/bin}
[[ -x $BENCH/allreduce_perf ]] || { echo "$BENCH/allreduce_perf is missing: run make first" >&2; exit 1; }
PROG=$BIN_DIR/rank_death
if [[ ! -x $PROG || tests/rank_death.c -nt $PROG || lib/librcoll.a -nt $PROG ]]; then
  mkdir -p "$BIN_DIR"
  ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g -pthread -Iinclude -Ilib \
    tests/rank_death.c lib/librcoll.a $(make --no-print-directory -s print-ldlibs 2>/dev/null ||
                                         echo "-pthread -lm") -o "$PROG" || exit 1
fi
ANALYZE=scripts/rcoll-fr-analyze
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
export RCOLL_SOCKET_IFNAME=lo RCOLL_SOCKET_FAMILY=AF_INET
unset RCOLL_FR_DUMP_FILE RCOLL_FR_ENTRIES
failed=0
fail() { echo "   FAILED: $*"; failed=1; }

# The bench links MPICH, whose MPI_Init takes SIGUSR1: RCOLL_FR_SIGNAL
# moves the dump to SIGUSR2 (the stuck rank below dumps on SIGUSR1).
echo "-- RCOLL_FR_SIGNAL=SIGUSR2: a running bench dumps both ranks' rings and goes on"
# Not under `timeout`: the signal must reach the bench itself (the cleanup
# trap ends it).
RCOLL_FR_SIGNAL=SIGUSR2 RCOLL_FR_DUMP_FILE="$TMP/sig-%r.txt" "$BENCH/allreduce_perf" -t 2 -b 8 -e 8 -n 100000000 -w 1 \
  >"$TMP/sig.out" 2>&1 &
pid=$!
PIDS+=($pid)
# Until both communicators exist: the table's header comes after them, and
# the first row only after the whole timed loop (1e8 calls: minutes, which
# the trap cuts short), so the bench is still calling when the signal comes.
for ((i = 0; i < 100; i++)); do
  grep -q "(B) *(elements)" "$TMP/sig.out" 2>/dev/null && break
  ls /proc/$pid >/dev/null 2>&1 || break
  sleep 0.2
done
sleep 1
kill -USR2 $pid
for ((i = 0; i < 50; i++)); do
  [[ -s $TMP/sig-0.txt && -s $TMP/sig-1.txt ]] && grep -q rcoll-fr-end "$TMP/sig-1.txt" && break
  sleep 0.2
done
kill -0 $pid 2>/dev/null || fail "the bench did not survive SIGUSR2: $(tail -3 "$TMP/sig.out")"
kill $pid 2>/dev/null
wait $pid 2>/dev/null
for r in 0 1; do
  f=$TMP/sig-$r.txt
  [[ -s $f ]] || { fail "no dump file $f"; continue; }
  grep -q "rcoll-fr-dump .*rank=$r nranks=2 .*reason=SIGUSR2" "$f" || fail "rank $r: no SIGUSR2 header in $f"
  n=$(grep -c "^rcoll-fr .*state=[a-z]* kind=allreduce " "$f")
  [[ $n -ge 1 ]] || fail "rank $r: no all-reduce entries in $f"
  grep -q "rcoll-fr-end comm=.* rank=$r" "$f" || fail "rank $r: the dump has no end line"
  echo "   rank $r: $n entries, last: $(grep '^rcoll-fr ' "$f" | tail -1 | sed 's/.*call=//')"
done

echo "-- a rank that stops calling: the others' timeout dumps and its SIGUSR1 dump name it"
mkdir -p "$TMP/hang"
RCOLL_TIMEOUT=5 RCOLL_FR_DUMP_FILE="$TMP/hang/fr-%r.txt" timeout -k 5 120 "$PROG" -n 3 -d 1 -m hang \
  >"$TMP/hang.out" 2>"$TMP/hang.err" || fail "rank_death -m hang: $(cat "$TMP/hang.out")"
# The stuck rank's neighbour times out; the other survivor may see that one
# leave first ("error").
grep -q "reason=timeout" "$TMP/hang/fr-0.txt" "$TMP/hang/fr-2.txt" 2>/dev/null || fail "no survivor wrote a timeout dump"
grep -q "reason=SIGUSR1" "$TMP/hang/fr-1.txt" 2>/dev/null || fail "the stuck rank 1 wrote no SIGUSR1 dump"
verdict=$("$ANALYZE" "$TMP/hang")
echo "$verdict" | sed 's/^/   /'
grep -q "rank 1 never started allreduce #4" <<<"$verdict" || fail "the analyzer does not say rank 1 never started allreduce #4"
grep -q "ranks 0,2 are waiting in allreduce #4 .* for rank 1" <<<"$verdict" ||
  fail "the analyzer does not say ranks 0,2 wait for rank 1"

echo "-- a killed rank, dumps in the log: the analyzer reads the log"
RCOLL_TIMEOUT=10 timeout -k 5 120 "$PROG" -n 4 -d 2 -m kill -c >"$TMP/kill.out" 2>"$TMP/kill.log" ||
  fail "rank_death -m kill: $(cat "$TMP/kill.out")"
verdict=$("$ANALYZE" "$TMP/kill.log")
echo "$verdict" | sed 's/^/   /'
grep -q "rank 2's dump is missing" <<<"$verdict" || fail "the analyzer does not name the killed rank 2"

echo "-- mismatched calls: the analyzer names both"
if [[ -x $BIN_DIR/test_mismatch ]]; then
  "$BIN_DIR/test_mismatch" --filter 'mismatch/count' >"$TMP/mm.log" 2>&1 || fail "test_mismatch count failed"
  verdict=$("$ANALYZE" "$TMP/mm.log")
  echo "$verdict" | sed 's/^/   /'
  grep -q "mismatch at collective #4: rank 0 called allreduce #4 (600 x float32 sum.*rank 1 called allreduce #4 (700 x float32 sum" \
    <<<"$verdict" || fail "the analyzer does not name both calls"
else
  echo "   ($BIN_DIR/test_mismatch not built: run make tests)"
fi

echo "-- RCOLL_FR_ENTRIES=0: no recorder, no dump"
RCOLL_FR_ENTRIES=0 RCOLL_TIMEOUT=10 timeout -k 5 120 "$PROG" -n 2 -d 1 -m kill >"$TMP/off.out" 2>"$TMP/off.log" ||
  fail "rank_death without a recorder: $(cat "$TMP/off.out")"
grep -q "rcoll-fr" "$TMP/off.log" && fail "a dump was written with RCOLL_FR_ENTRIES=0"
"$ANALYZE" "$TMP/off.log" >/dev/null && fail "the analyzer found a dump where there is none"

exit $failed
