#!/usr/bin/env bash
# Puts rcoll's all-reduce over its shared-memory transport beside MPICH and
# Open MPI over theirs, on one machine, as processes, float32 sum, the same
# sizes and timing, all in one run; prints busbw and time per size and the
# ratios rcoll/Open MPI and rcoll/MPICH, then the issues' targets.
#
#   bench/compare/compare_shm.sh                 # 8 1M 16M 128M, 2 ranks
#   bench/compare/compare_shm.sh 8 64K 4M        # other sizes
#   bench/compare/compare_shm.sh --small         # 8 B..64 KiB at 2, 4, 8 ranks
#
# Environment knobs (defaults in brackets):
#   SIZES ["8 1M 16M 128M"]   sizes when none are given as arguments
#   RANKS ["2"]               rank counts (processes; more than the cores is
#                             fine: Open MPI then gets --oversubscribe)
#   ITERS, WARMUP [by size]   timed and warm-up calls; by default about
#                             1 GiB of traffic per size, 20..10000 calls
#   CHECK [1]                 result check after the timed calls (untimed),
#                             for every tool; 0 skips it
#   REPEATS [5]               rounds; each round runs every tool once at
#                             every rank count and size, the tools taking
#                             turns, and the median of the rounds is kept
#   RUN_TIMEOUT [120]         seconds before one run is killed
#   NO_BUILD [0]              1: do not run make or mpicc
#   NO_INSTALL [0]            1: do not apt-get missing MPI packages
#   OMPI_PATH [vader]         vader: --mca pml ob1 --mca btl vader,self (Open
#                             MPI's shared-memory BTL, forced); default: no
#                             --mca at all, Open MPI chooses
#   OUTDIR [mktemp -d]        where every run's full output is kept
#   STRICT [0]                1: also exit 3 when rcoll misses a target
# Exit status: 0 when every run succeeded with no wrong result, 1 when a run
# failed, timed out, printed no row, reported wrong results or a tool could
# not be set up, 3 (STRICT=1 only) when all ran but a target was missed.
# The run_* functions are called by name ("run_$tool"), which shellcheck
# cannot follow.
# shellcheck disable=SC2317
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
NRANKS=2 # the rank count being run (RANKS lists them)
RCOLL_BENCH="$ROOT/bench/allreduce_perf"
MPICH_BENCH="$ROOT/build/compare/mpi_allreduce_mpich"
OMPI_BENCH="$ROOT/build/compare/mpi_allreduce_openmpi"
OUTDIR=${OUTDIR:-$(mktemp -d /tmp/rcoll-compare-shm.XXXXXX)}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
REPEATS=${REPEATS:-5}
CHECK=${CHECK:-1}
OMPI_PATH=${OMPI_PATH:-vader}
RANKS=${RANKS:-2}
if [ "${1:-}" = --small ]; then
  shift
  SIZES="8 64 512 4K 64K"
  RANKS="2 4 8"
fi
if [ $# -gt 0 ]; then SIZES="$*"; else SIZES=${SIZES:-"8 1M 16M 128M"}; fi
STATUS=0
FAILURES=()
mkdir -p "$OUTDIR"
trap 'exit 130' INT TERM

. "$(dirname "$0")/common.sh"
fail() { note "FAILED: $*"; FAILURES+=("$*"); STATUS=1; }

# Calls per size: about 1 GiB through the all-reduce, 20..10000 calls. Shared
# memory is fast, so this is still well under a second per run, and the 8 B
# latency is the mean of 10000 calls rather than of a few scheduler ticks.
# With more ranks than cores a call takes tens of microseconds, and MPICH's
# milliseconds (it busy-waits without yielding): there at most 2000 calls,
# and MPICH (tool $2) at most 200. Fewer calls would let the first ones,
# which meet ranks still spinning in the bench's MPI barrier, weigh in:
# rcoll at 4 ranks, 8 B, 15-36 us at 200 calls, 7-9 at 1000.
iters_for() {
  local i=$(( (1 << 30) / ($1 > 0 ? $1 : 1) )) max=10000
  [ "$NRANKS" -gt "$(nproc)" ] && max=2000
  [ "$NRANKS" -gt "$(nproc)" ] && [ "${2:-}" = mpich ] && max=200
  [ "$i" -lt 20 ] && i=20
  [ "$i" -gt "$max" ] && i=$max
  echo "${ITERS:-$i}"
}

# ------------------------------------------------------------------ install
# Only this benchmark needs Open MPI, so it is installed here rather than by
# scripts/setup-deps.sh. Installing it makes Debian's generic names (mpicc,
# mpiexec, the mpi.h include directory) point at Open MPI, which would
# silently change what the rest of the project builds with; whatever they
# pointed at before is put back.
ALTS=(mpi mpirun mpi-x86_64-linux-gnu)
alt_value() { update-alternatives --query "$1" 2>/dev/null | awk '/^Value:/ { print $2 }'; }

apt_install() {
  local before=() i now
  for i in "${!ALTS[@]}"; do before[i]=$(alt_value "${ALTS[i]}"); done
  note "installing $*"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y --no-install-recommends "$@" ||
    { apt-get update -q && apt-get install -y --no-install-recommends "$@"; }
  } >>"$OUTDIR/apt.log" 2>&1 || { note "apt-get failed (see $OUTDIR/apt.log)"; return 1; }
  for i in "${!ALTS[@]}"; do
    now=$(alt_value "${ALTS[i]}")
    if [ -n "${before[i]}" ] && [ "$now" != "${before[i]}" ]; then
      update-alternatives --set "${ALTS[i]}" "${before[i]}" >>"$OUTDIR/apt.log" 2>&1 &&
        note "kept ${ALTS[i]} -> ${before[i]} (the install had moved it to $now)"
    fi
  done
}

install_missing() {
  local pkgs=()
  command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null ||
    pkgs+=(mpich libmpich-dev)
  command -v mpicc.openmpi >/dev/null && command -v mpiexec.openmpi >/dev/null ||
    pkgs+=(openmpi-bin libopenmpi-dev)
  [ ${#pkgs[@]} -eq 0 ] && return 0
  if [ "${NO_INSTALL:-0}" = 1 ] || [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    note "missing: ${pkgs[*]}; install with: apt-get install -y ${pkgs[*]}"
    return 0
  fi
  apt_install "${pkgs[@]}"
}

# ------------------------------------------------------------------ build
build_mpi_bench() { # $1 mpicc, $2 output
  command -v "$1" >/dev/null || return 0
  mkdir -p "$(dirname "$2")"
  "$1" -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -o "$2" \
    "$HERE/mpi_allreduce.c" -lm >"$OUTDIR/$(basename "$2").log" 2>&1 ||
    { fail "$1 could not build $2 (see $OUTDIR/$(basename "$2").log)"; rm -f "$2"; }
}

build_all() {
  [ "${NO_BUILD:-0}" = 1 ] && return 0
  note "building rcoll: make -C $ROOT"
  make -C "$ROOT" >"$OUTDIR/make.log" 2>&1 ||
    note "make failed (see $OUTDIR/make.log); using whatever binaries exist"
  build_mpi_bench mpicc.mpich "$MPICH_BENCH"
  build_mpi_bench mpicc.openmpi "$OMPI_BENCH"
}

# Every tool is required here: the point is the ratios, so a missing one is a
# failure, though the others still run.
HAVE_RCOLL=0 HAVE_MPICH=0 HAVE_OMPI=0
detect_tools() {
  if [ -x "$RCOLL_BENCH" ] && command -v mpiexec.mpich >/dev/null &&
     ldd "$RCOLL_BENCH" | grep -q 'libmpich'; then HAVE_RCOLL=1
  else fail "rcoll: $RCOLL_BENCH missing or not built with MPICH (make after apt-get install mpich libmpich-dev)"
  fi
  if [ -x "$MPICH_BENCH" ] && command -v mpiexec.mpich >/dev/null; then HAVE_MPICH=1
  else fail "mpich: $MPICH_BENCH or mpiexec.mpich missing (apt-get install -y mpich libmpich-dev)"
  fi
  if [ -x "$OMPI_BENCH" ] && command -v mpiexec.openmpi >/dev/null; then HAVE_OMPI=1
  else fail "openmpi: $OMPI_BENCH or mpiexec.openmpi missing (apt-get install -y openmpi-bin libopenmpi-dev)"
  fi
}

# ------------------------------------------------------------------ runs
# Each run_* prints "time_us busbw wrong" for its one size, or nothing.
# $1 size in bytes, $2 iters, $3 warmup, $4 log file.

run_rcoll() {
  # shellcheck disable=SC2046
  RCOLL_NET=shm timeout -k 10 "$RUN_TIMEOUT" \
    mpiexec.mpich -n "$NRANKS" "$RCOLL_BENCH" $(rcoll_args "$1" "$2" "$3") >"$4" 2>&1
  local rc=$?; parse_nccl_table "$1" "$4"; return "$rc"
}
# MPICH 4's default device: ranks on one node talk through its shared memory.
run_mpich() {
  timeout -k 10 "$RUN_TIMEOUT" mpiexec.mpich -n "$NRANKS" \
    "$MPICH_BENCH" -n "$2" -w "$3" -c "$CHECK" "$1" >"$4" 2>&1
  local rc=$?; parse_ref_table "$1" "$4"; return "$rc"
}

# Open MPI refuses root without being told twice; on fewer cores than ranks
# it also refuses unless oversubscribing is allowed (which is left off
# otherwise, since Open MPI then yields in its progress loop).
ompi_args() {
  local a=(-n "$NRANKS")
  [ "$(nproc)" -lt "$NRANKS" ] && a+=(--oversubscribe)
  # shellcheck disable=SC2054 # the comma belongs to the btl list
  [ "$OMPI_PATH" = vader ] && a+=(--mca pml ob1 --mca btl vader,self)
  echo "${a[*]}"
}
run_openmpi() {
  # shellcheck disable=SC2046
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 10 "$RUN_TIMEOUT" \
    mpiexec.openmpi $(ompi_args) "$OMPI_BENCH" -n "$2" -w "$3" -c "$CHECK" "$1" >"$4" 2>&1
  local rc=$?; parse_ref_table "$1" "$4"; return "$rc"
}

declare -A BUSBW TIME LOTRAFFIC RUNS
TOOLS=(rcoll openmpi mpich)

tool_available() {
  case $1 in
  rcoll) [ $HAVE_RCOLL = 1 ] ;;
  mpich) [ $HAVE_MPICH = 1 ] ;;
  openmpi) [ $HAVE_OMPI = 1 ] ;;
  esac
}

# Runs one tool once at NRANKS ranks and one size (round $3), adding its
# time to RUNS["tool,n,size"]. Any run that fails is a failure of the whole
# script even if other rounds succeeded.
measure() {
  local tool=$1 size=$2 rep=$3 iters warmup log before after res bt bw rc key="$1,$NRANKS,$2"
  iters=$(iters_for "$size" "$tool"); warmup=$(warmup_for "$iters")
  log="$OUTDIR/${tool}_n${NRANKS}_${size}_${rep}.log"
  before=$(lo_bytes)
  res=$("run_$tool" "$size" "$iters" "$warmup" "$log")
  rc=$?
  after=$(lo_bytes)
  read -r bt _ bw <<<"$res"
  if [ $rc -ne 0 ] || [ -z "$res" ] || { [ "$bw" != N/A ] && [ "$bw" != 0 ]; }; then
    local why="exit $rc"
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && why="killed after ${RUN_TIMEOUT} s"
    [ -z "$res" ] && why="$why, no result row"
    [ -n "$res" ] && [ "$bw" != N/A ] && [ "$bw" != 0 ] && why="$why, $bw wrong elements"
    fail "$tool, $NRANKS ranks, at $size B: $why - see $log"
    tail -n 5 "$log" | sed 's/^/#   | /'
    [ -z "$res" ] && return 0
  fi
  RUNS[$key]="${RUNS[$key]:-} $bt"
  LOTRAFFIC[$key]=$(lo_ratio "$tool" $((after - before)) $((iters + warmup)) "$size")
}

# The median of the rounds' times into TIME, and busbw from it into BUSBW,
# both keyed "tool,n,size".
summarize() {
  local key t n b med
  for key in "${!RUNS[@]}"; do
    IFS=, read -r t n b <<<"$key"
    med=$(median_of "${RUNS[$key]}")
    [ -n "$med" ] || continue
    TIME[$key]=$med
    BUSBW[$key]=$(awk -v s="$b" -v t="$med" -v n="$n" \
      'BEGIN { printf "%.3f", s / (t * 1e3) * 2 * (n - 1) / n }')
  done
}

# Ratio of tool $2's time to tool $1's (above 1: $1 faster) at n $3, size $4.
ratio_n() {
  awk -v a="${TIME[$1,$3,$4]:-}" -v b="${TIME[$2,$3,$4]:-}" \
    'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2f", b / a; else print "n/a" }'
}
# The better (lower) of Open MPI's and MPICH's times at n $1, size $2.
best_mpi() {
  awk -v a="${TIME[openmpi,$1,$2]:-}" -v b="${TIME[mpich,$1,$2]:-}" 'BEGIN {
    if (a+0 > 0 && (b+0 <= 0 || a+0 <= b+0)) print a; else if (b+0 > 0) print b }'
}

# Loopback bytes per call / size: about 0 shows that the data did not go
# through TCP. bench/allreduce_perf runs every call twice (out of place, then
# in place). Below 64 KiB headers dominate, so no ratio is given there.
lo_ratio() {
  local calls=$3
  [ "$1" = rcoll ] && calls=$((calls * 2))
  awk -v d="$2" -v n="$calls" -v s="$4" \
    'BEGIN { if (s >= 65536) printf "%.2f", d / n / s; else print "-" }'
}

# ------------------------------------------------------------------ report

print_tables() {
  local s b t n
  for n in $RANKS; do
    echo
    echo "## all-reduce float32 sum, $n processes on one host, shared memory; busbw in GB/s" \
      "(median of $REPEATS rounds)"
    printf '%10s | %10s | %10s | %10s | %12s | %12s\n' size rcoll openmpi mpich \
      rcoll/openmpi rcoll/mpich
    for s in $SIZES; do
      b=$(to_bytes "$s")
      printf '%10s | %10s | %10s | %10s | %12s | %12s\n' "$b" "${BUSBW[rcoll,$n,$b]:-n/a}" \
        "${BUSBW[openmpi,$n,$b]:-n/a}" "${BUSBW[mpich,$n,$b]:-n/a}" \
        "$(ratio_n rcoll openmpi "$n" "$b")" "$(ratio_n rcoll mpich "$n" "$b")"
    done
    echo
    echo "## $n processes: time per call (us), and loopback bytes per call / size (about 0 = not over TCP)"
    printf '%10s' size
    for t in "${TOOLS[@]}"; do printf ' | %10s %5s' "$t" lo; done
    echo
    for s in $SIZES; do
      b=$(to_bytes "$s"); printf '%10s' "$b"
      for t in "${TOOLS[@]}"; do
        printf ' | %10s %5s' "${TIME[$t,$n,$b]:-n/a}" "${LOTRAFFIC[$t,$n,$b]:--}"
      done
      echo
    done
  done
}

# The issues' targets for rcoll, checked only where they ran. $1 what, $2
# measured, $3 op (ge/le), $4 goal.
MISSED=0
target() {
  local line
  line=$(awk -v m="$2" -v op="$3" -v g="$4" 'BEGIN {
      if (m == "" || m == "n/a" || g == "" || g == "n/a") { print "n/a (not measured)"; exit }
      ok = (op == "ge") ? m + 0 >= g + 0 : m + 0 <= g + 0
      if (ok) { printf "met (%s vs %s)", m, g; exit }
      miss = (op == "ge") ? (g - m) / g * 100 : (m - g) / g * 100
      printf "MISSED (%s vs %s, %.1f%% %s the goal)", m, g, miss, op == "ge" ? "below" : "above" }')
  printf '#   %-52s %s\n' "$1" "$line"
  case $line in MISSED*) MISSED=1 ;; esac
}

print_targets() {
  local b1=1048576 b16=16777216 b128=134217728 s b n
  echo
  echo "## targets for rcoll (shm, processes; times in us, busbw in GB/s)"
  for n in $RANKS; do
    for s in $SIZES; do
      b=$(to_bytes "$s")
      if [ "$n" = 2 ]; then
        case $b in
        8) target "2 ranks, 8 B: time <= Open MPI's" "${TIME[rcoll,2,8]:-}" le "${TIME[openmpi,2,8]:-}" ;;
        "$b1") target "2 ranks, busbw >= 7 GB/s at 1 MiB" "${BUSBW[rcoll,2,$b1]:-}" ge 7 ;;
        "$b16" | "$b128")
          target "2 ranks, busbw >= 8 GB/s at $((b >> 20)) MiB" "${BUSBW[rcoll,2,$b]:-}" ge 8
          target "2 ranks, >= 1.7x Open MPI at $((b >> 20)) MiB" "$(ratio_n rcoll openmpi 2 "$b")" ge 1.7 ;;
        esac
      elif [ "$b" -le 65536 ]; then
        target "$n ranks, $b B: time <= the better MPI's" "${TIME[rcoll,$n,$b]:-}" le "$(best_mpi "$n" "$b")"
      fi
    done
  done
}

describe_paths() {
  note "rcoll: $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null), RCOLL_NET=shm," \
    "processes under mpiexec.mpich (no binding), out-of-place column"
  note "mpich: $(mpichversion 2>/dev/null | awk -F: '/Version/ { gsub(/[ \t]/, "", $2); print $2 }')" \
    "default device (on-node ranks use its shared memory), no binding"
  local path="pml ob1 + btl vader,self (Open MPI's shared-memory BTL, forced)"
  [ "$OMPI_PATH" = vader ] || path="its own choice (no --mca given)"
  note "openmpi: $(ompi_info --version 2>/dev/null | awk '/Open MPI/ { print $NF; exit }')," \
    "$path, default coll (tuned) and binding (to core for 2 ranks; none when oversubscribed)"
}

main() {
  note "compare_shm: $(date -u +%FT%TZ) on $(uname -n), $(nproc) cores," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg)"
  note "sizes: $SIZES; ranks: $RANKS; rounds: $REPEATS (median kept); check: $CHECK; logs: $OUTDIR"
  install_missing
  build_all
  detect_tools
  describe_paths
  note "commands (N = ranks, S = size, I/W = iters/warmup per size):"
  note "  RCOLL_NET=shm mpiexec.mpich -n N $RCOLL_BENCH $(rcoll_args S I W)"
  note "  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec.openmpi" \
    "$(ompi_args) $OMPI_BENCH -n I -w W -c $CHECK S"
  note "  mpiexec.mpich -n N $MPICH_BENCH -n I -w W -c $CHECK S"
  local s b t rep
  for NRANKS in $RANKS; do
    for s in $SIZES; do
      b=$(to_bytes "$s")
      note "$NRANKS ranks, size $b: iters $(iters_for "$b") (mpich $(iters_for "$b" mpich))," \
        "warmup a tenth"
    done
  done
  # Rounds of every tool at every point, the tools taking turns at each, so
  # that a change in background load spreads over all of them.
  for ((rep = 1; rep <= REPEATS; rep++)); do
    for NRANKS in $RANKS; do
      for s in $SIZES; do
        b=$(to_bytes "$s")
        for t in "${TOOLS[@]}"; do
          tool_available "$t" && measure "$t" "$b" "$rep"
        done
      done
    done
  done
  summarize
  print_tables
  print_targets
  note "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  if [ $STATUS -ne 0 ]; then
    echo "compare_shm: ${#FAILURES[@]} failure(s):" >&2
    printf '  %s\n' "${FAILURES[@]}" >&2
    exit $STATUS
  fi
  [ "${STRICT:-0}" = 1 ] && [ $MISSED = 1 ] && { echo "compare_shm: a target was missed" >&2; exit 3; }
  exit 0
}

main
