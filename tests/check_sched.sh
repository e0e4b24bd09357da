#!/usr/bin/env bash
# bench/rcoll_sched, run as a student would:
#   1. every collective and algorithm that `--algo list` shows, at 2..8 ranks
#      on one node and (from 4 ranks) on two: it exits 0, prints one
#      "rank R: sent ..." and one "formula R: ..." line per rank, and says
#      every rank moves exactly what the formula says (sizes that split evenly);
#   2. bad input is refused with exit status 2 and a message naming the
#      known choices;
#   3. --svg writes an SVG with a lane per rank, and a PNG beside it when
#      rsvg-convert is installed; with no converter on PATH it says so and
#      writes only the SVG.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

# Built by its relative name, the one the Makefile's rule has (make check
# passes BENCH_DIR as an absolute path to the same directory).
make --no-print-directory bench/rcoll_sched >/dev/null || exit 1
BIN=${BENCH_DIR:-bench}/rcoll_sched
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failed=0

fail() {
  echo "FAIL: $*"
  failed=1
}

# 840 elements split evenly for every rank count up to 8, its powers of two
# and its placements; all-gather, reduce-scatter, all-to-all, gather and
# scatter take n blocks of them.
check_one() { # coll algo ranks nodes
  local coll=$1 algo=$2 n=$3 nodes=$4 bytes=3360 out rc
  [[ $coll =~ ^(allgather|reduce_scatter|alltoall|gather|scatter)$ ]] && bytes=$((3360 * n))
  out=$("$BIN" --coll "$coll" --algo "$algo" --ranks "$n" --nodes "$nodes" --root $((n - 1)) --bytes $bytes -q 2>&1)
  rc=$?
  local what="$coll $algo n=$n nodes=$nodes"
  [[ $rc -eq 0 ]] || { fail "$what: exit status $rc"; echo "$out" | tail -n 5; return; }
  [[ $(grep -c '^rank [0-9]*: sent [0-9]* bytes, received [0-9]* bytes, reduced [0-9]* elements$' <<<"$out") -eq $n ]] ||
    fail "$what: not one totals line per rank"
  [[ $(grep -c '^formula [0-9]*: sent' <<<"$out") -eq $n ]] || fail "$what: not one formula line per rank"
  grep -q '^# every rank moves exactly what the formula says' <<<"$out" ||
    { fail "$what: totals differ from the formula"; grep -E '^(rank|formula|# diff)' <<<"$out"; }
  grep -q '^simulated: [0-9.]* us' <<<"$out" || fail "$what: no simulated time"
  grep -qE '^predicted: ([0-9.]* us|none)' <<<"$out" || fail "$what: no tuner prediction line"
}

echo "-- every algorithm at 2..8 ranks"
algos=$("$BIN" --algo list | awk '!/^#/ && $1 != "recv" {print $1 ":" $2}')
[[ $(wc -l <<<"$algos") -ge 10 ]] || fail "--algo list shows too few algorithms: $algos"
runs=0
for ca in $algos; do
  for n in 2 3 4 5 6 7 8; do
    for nodes in 1 2; do
      [[ $nodes -eq 2 && $n -lt 4 ]] && continue
      check_one "${ca%%:*}" "${ca#*:}" "$n" "$nodes"
      runs=$((runs + 1))
    done
  done
done
echo "   $runs runs"

echo "-- bad input"
refuse() { # expected text, then the arguments
  local want=$1 out rc
  shift
  out=$("$BIN" "$@" 2>&1)
  rc=$?
  [[ $rc -eq 2 ]] || fail "rcoll_sched $*: exit status $rc, want 2"
  grep -q -- "$want" <<<"$out" || fail "rcoll_sched $*: says \"$out\", want \"$want\""
}
refuse 'known: allreduce, broadcast' --coll allreduc --algo ring
refuse 'broadcast has: chain, tree' --coll broadcast --algo ring
refuse 'from 1 to 16' --coll allreduce --algo ring --ranks 17
refuse 'a multiple of 64' --coll allreduce --algo ring --chunk 100
refuse 'not a size' --coll allreduce --algo ring --bytes lots
refuse 'known: int8' --coll allreduce --algo ring --type float33
refuse 'a rank below --ranks' --coll broadcast --algo tree --ranks 4 --root 4
refuse 'TUNE_ALPHA' --coll allreduce --algo ring -a slow

echo "-- pictures"
out=$("$BIN" --coll allreduce --algo ring --ranks 8 --bytes 8K --svg "$TMP/ring.svg" 2>&1) || fail "--svg: $out"
head -c 5 "$TMP/ring.svg" | grep -q '<?xml' || fail "ring.svg is not an SVG"
[[ $(grep -o '>rank [0-9]<' "$TMP/ring.svg" | sort -u | wc -l) -eq 8 ]] || fail "ring.svg: not 8 lanes"
if command -v rsvg-convert >/dev/null; then
  head -c 4 "$TMP/ring.png" 2>/dev/null | grep -q 'PNG' || fail "rsvg-convert is installed but no ring.png: $out"
else
  echo "   (rsvg-convert not installed: the PNG is not checked)"
fi
out=$(PATH=/nonexistent "$(cd "$(dirname "$BIN")" && pwd)/rcoll_sched" --coll broadcast --algo tree --ranks 4 \
      --bytes 4K --svg "$TMP/bare.svg" 2>&1) || fail "--svg without a converter: $out"
grep -q 'no SVG converter found' <<<"$out" || fail "without a converter it does not say so: $out"
[[ -s $TMP/bare.svg && ! -e $TMP/bare.png ]] || fail "without a converter: want bare.svg and no bare.png"

[[ $failed -eq 0 ]] && echo "check_sched: OK" || echo "check_sched: FAILED"
exit $failed
