#!/bin/bash
# All-reduce across "nodes" with slow links: 2 network namespaces x 2 ranks,
# DELAY added to every link (netem where the kernel has it, else
# tests/netns/wire.c), bench/allreduce_perf for the automatic choice and for
# every algorithm forced with RCOLL_ALGO. Prints one table: per size, the
# out-of-place busbw and time of each, the best forced algorithm and how
# the automatic choice's time compares with it. Not part of `make check`.
#
#   tests/netns/bench_delay.sh              200us per link, 8 B .. 64 MiB
#   DELAY=1ms ALGOS="ring hier" BENCH_ARGS="-b 1M -e 16M -f 2 -n 5" EXTRA_ARGS= tests/netns/bench_delay.sh
#
# -b 8 -f 4 never lands on 64 MiB (8 x 4^k), so EXTRA_ARGS adds that size in
# a second run per algorithm (empty: none). Over netns_wire the frames are
# up to 64 KiB (WIRE_OPTS, default mtu=65000): netem on a veth delays TCP's
# 64 KiB segmentation-offload frames whole, and with 1500-byte frames the
# userspace switch, not the algorithm, would bound the large sizes. Needs
# root, MPICH, and `make` run first. LOGS=DIR keeps each run's output there
# (with RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=TUNE: the tuner's choices).
set -u
cd "$(dirname "$0")/../.." || exit 1
BENCH=${BENCH_DIR:-$PWD/bench}/allreduce_perf
DELAY=${DELAY:-200us}
ALGOS=${ALGOS:-ring tree hier rabenseifner}
BENCH_ARGS=${BENCH_ARGS:--b 8 -e 64M -f 4 -c 0}
EXTRA_ARGS=${EXTRA_ARGS--b 64M -e 64M -c 0}
export NETNS_WIRE_OPTS=${WIRE_OPTS:-mtu=65000}
export MPIEXEC=${MPIEXEC:-$(command -v mpiexec.mpich || true)}
export RCOLL_TIMEOUT=${RCOLL_TIMEOUT:-120}

[[ $(id -u) == 0 ]] || { echo "bench_delay: needs root for ip netns" >&2; exit 1; }
[[ -n $MPIEXEC && -x $BENCH ]] || { echo "bench_delay: needs MPICH and $BENCH (make)" >&2; exit 1; }

source tests/netns/netns.sh
SCRATCH=$(mktemp -d /tmp/rcoll-bench-delay.XXXXXX)
RUN_PID=
trap 'netns_down; rm -rf "$SCRATCH"' EXIT
trap 'kill $RUN_PID 2>/dev/null; exit 130' INT
trap 'kill $RUN_PID 2>/dev/null; exit 143' TERM

netns_up 2 || exit 1
netns_netem delay "$DELAY" || exit 1
link=$([[ $NETNS_LAYOUT == wire ]] && echo "netns_wire $NETNS_WIRE_OPTS" || echo netem)

# bench ALGO ARGS...: one benchmark run; its rows are added to SCRATCH/ALGO
# as "size time busbw" (out-of-place columns). `wait` keeps traps responsive.
bench() {
  local algo=$1 force=()
  shift
  [[ $algo != auto ]] && force=("RCOLL_ALGO=$algo")
  echo "bench_delay: RCOLL_ALGO=$algo $*" >&2
  env "${force[@]}" bash -c \
    "source tests/netns/netns.sh; NETNS_NODES=2; NETNS_PREFIX=$NETNS_PREFIX; netns_run 2 4 $BENCH $*" \
    >"$SCRATCH/$algo.log" 2>&1 &
  RUN_PID=$!
  wait "$RUN_PID" || { echo "bench_delay: RCOLL_ALGO=$algo failed:" >&2; tail -n 5 "$SCRATCH/$algo.log" >&2; }
  awk '$1 ~ /^[0-9]+$/ && NF >= 9 {print $1, $6, $8}' "$SCRATCH/$algo.log" >>"$SCRATCH/$algo"
  [[ -n ${LOGS:-} ]] && mkdir -p "$LOGS" && cat "$SCRATCH/$algo.log" >>"$LOGS/$algo.log"
}

for algo in auto $ALGOS; do
  # shellcheck disable=SC2086 # the arguments are lists of flags
  bench "$algo" $BENCH_ARGS
  # shellcheck disable=SC2086
  [[ -n $EXTRA_ARGS ]] && bench "$algo" $EXTRA_ARGS
done

echo "# allreduce_perf $BENCH_ARGS${EXTRA_ARGS:+, then $EXTRA_ARGS}: 2 nodes x 2 ranks, $DELAY added per link ($link)"
echo "# per algorithm: out-of-place busbw GB/s / time us; auto/best: auto's time over the best forced time"
# shellcheck disable=SC2086 # ALGOS is a list
awk -v algos="auto $ALGOS" -v dir="$SCRATCH" '
  BEGIN {
    n = split(algos, names, " ")
    for (a = 1; a <= n; a++) {
      file = dir "/" names[a]
      while ((getline line < file) > 0) {
        split(line, f, " ")
        if (!(f[1] in seen)) { seen[f[1]] = 1; sizes[++nsizes] = f[1] }
        time[f[1], a] = f[2]; bw[f[1], a] = f[3]
      }
    }
    for (i = 2; i <= nsizes; i++)   # the extra run may add sizes in between
      for (j = i; j > 1 && sizes[j - 1] + 0 > sizes[j] + 0; j--) {
        t = sizes[j]; sizes[j] = sizes[j - 1]; sizes[j - 1] = t
      }
    printf "%10s", "size"
    for (a = 1; a <= n; a++) printf " %17s", names[a]
    printf " %13s %9s\n", "best forced", "auto/best"
    for (s = 1; s <= nsizes; s++) {
      z = sizes[s]; best = 0
      printf "%10s", z
      for (a = 1; a <= n; a++) {
        if ((z, a) in time) {
          printf " %7.3f/%9.1f", bw[z, a], time[z, a]
          if (a > 1 && (!best || time[z, a] < time[z, best])) best = a
        } else {
          printf " %17s", "-"
        }
      }
      if (best && ((z, 1) in time)) printf " %13s %9.2f\n", names[best], time[z, 1] / time[z, best]
      else printf " %13s %9s\n", "-", "-"
    }
  }'
