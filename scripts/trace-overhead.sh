#!/usr/bin/env bash
# What execution traces cost: bench/allreduce_perf -t 2 at 8 B and 16 MiB,
# and -t 1 at 8 B (one rank: the call, the plan and the engine's loop with no
# peer to wait for, so the machine's scheduling hardly matters and the
# engine's own cost shows), in alternating rounds of three builds/settings:
#   before  the commit before tracing was added, built in a /tmp worktree
#   off     this tree, RCOLL_TRACE unset
#   on      this tree, RCOLL_TRACE=<tmp dir>
# Prints each round's out-of-place time (us) and the median of each, and
# how far off and on are from before. Alternating rounds spread a busy
# machine's noise over all three; still, run it on a quiet machine (the
# numbers go with `uptime`).
#
#   scripts/trace-overhead.sh [ROUNDS]      (default 7; env BASE=<commit> to compare another)
#
# The baseline is a git worktree, /tmp/rcoll-trace-base-<commit> (BASE_TREE),
# built once and kept for reruns; `git worktree remove --force` it when done.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-7}
FIRST=$(git log --diff-filter=A --format=%H -- lib/trace.c | tail -1)
BASE=${BASE:-$(git rev-parse "${FIRST:?lib/trace.c is not committed}^")}
BASE_TREE=${BASE_TREE:-/tmp/rcoll-trace-base-${BASE:0:10}}

if [[ ! -x $BASE_TREE/bench/allreduce_perf ]]; then
  echo "# building the baseline $BASE in $BASE_TREE"
  [[ -d $BASE_TREE ]] || git worktree add --detach "$BASE_TREE" "$BASE" >/dev/null
  make -C "$BASE_TREE" -j2 all >"$BASE_TREE.build.log" 2>&1 ||
    { echo "baseline build failed: $BASE_TREE.build.log" >&2; exit 1; }
fi
[[ -x bench/allreduce_perf ]] || make -j2 all >/dev/null

TRACE_DIR=$(mktemp -d)
trap 'rm -rf "$TRACE_DIR"' EXIT
export RCOLL_SOCKET_IFNAME=${RCOLL_SOCKET_IFNAME:-lo}
unset RCOLL_TRACE

# One run: prints the out-of-place time in us of the single size.
run() { # variant ranks size iters warmup
  local bin=bench/allreduce_perf
  [[ $1 == before ]] && bin=$BASE_TREE/bench/allreduce_perf
  if [[ $1 == on ]]; then
    rm -rf "${TRACE_DIR:?}"/*
    RCOLL_TRACE=$TRACE_DIR "$bin" -t "$2" -b "$3" -e "$3" -n "$4" -w "$5" -c 0
  else
    "$bin" -t "$2" -b "$3" -e "$3" -n "$4" -w "$5" -c 0
  fi | awk '$1 ~ /^[0-9]+$/ {print $6; exit}'
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "# $(date -u '+%F %T UTC'), $(nproc) CPUs, uptime:$(uptime | sed 's/.*load/ load/')"
echo "# baseline $BASE; this tree $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (modified)')"
# ranks:size:iterations:warmup
CASES="2:8:2000:200 2:16M:20:5 1:8:100000:1000"
declare -A T
for c in $CASES; do
  IFS=: read -r ranks size iters warm <<<"$c"
  for ((r = 1; r <= ROUNDS; r++)); do
    line="$ranks ranks, $size B, round $r:"
    for v in before off on; do
      t=$(run $v "$ranks" "$size" "$iters" "$warm")
      T[$c.$v]+="$t "
      line+=" $v $t"
    done
    echo "# $line"
  done
done
echo
# The median, and the minimum: a busy machine adds delays (a rank that loses
# its core waits a scheduler tick), never removes them, so the minimum is
# the closer to what the code itself costs.
printf '%-5s %-6s %-7s %12s %12s %12s %9s %9s\n' ranks size stat "before(us)" "off(us)" "on(us)" \
  "off/bef" "on/bef"
for c in $CASES; do
  IFS=: read -r ranks size _ _ <<<"$c"
  for stat in median min; do
    pick() {
      tr ' ' '\n' <<<"${T[$c.$1]}" | grep . | if [[ $stat == min ]]; then sort -g | head -1; else median; fi
    }
    b=$(pick before) o=$(pick off) n=$(pick on)
    awk -v r="$ranks" -v s="$size" -v st=$stat -v b="$b" -v o="$o" -v n="$n" 'BEGIN {
      printf "%-5s %-6s %-7s %12.2f %12.2f %12.2f %8.1f%% %8.1f%%\n", r, s, st, b, o, n,
             100 * (o / b - 1), 100 * (n / b - 1)}'
  done
done
