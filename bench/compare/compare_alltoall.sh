#!/usr/bin/env bash
# rcoll's all-to-all (bench/alltoall_perf, RCOLL_NET=shm) beside Open MPI's
# MPI_Alltoall (bench/compare/mpi_alltoall.c over its shared-memory BTL) on
# one machine, float32, at 2 and 4 ranks (processes). The tools alternate,
# round after round (which goes first alternates too), so that a change in
# background load lands on both; each tool's time at a size is the median
# of its rounds. Prints times, the ratio (Open MPI's time / rcoll's: above 1
# rcoll is faster) and the issue's verdict:
#   1 MiB and 16 MiB: rcoll >= 1.2x Open MPI;   8 B (one float per rank where
#   ranks > 2: 16 B at 4): rcoll's time <= 1.5x Open MPI's.
#
#   bench/compare/compare_alltoall.sh                   # 8 1M 16M, ranks 2 4, 5 rounds
#   ROUNDS=1 RANKS=2 ITERS=5 bench/compare/compare_alltoall.sh 8 64K   # a smoke run
#
# Environment knobs (defaults in brackets):
#   SIZES ["8 1M 16M"]      sizes (bytes of one rank's send buffer, as
#                           nccl-tests) when none are given as arguments
#   RANKS ["2 4"]           rank counts
#   ROUNDS [5]              alternating rounds per rank count and size
#   RCOLL_ARGS []           more flags for alltoall_perf: --host-malloc
#                           measures buffers from posix_memalign, read by
#                           CMA, instead of rcollMemAlloc's shared blocks
#   ITERS, WARMUP [by size] timed and warm-up calls per run (default about
#                           1 GiB sent per run, 20..10000 calls)
#   CHECK [1]               results checked after the timed calls (untimed)
#   RUN_TIMEOUT [120]       seconds before one run is killed
#   NO_BUILD [0]            1: do not run make or mpicc
#   NO_INSTALL [0]          1: do not apt-get Open MPI when it is missing
#   OUTDIR [mktemp -d]      every run's full output is kept there
#   STRICT [0]              1: exit 3 when a verdict is missed
# Exit status: 0 when every run succeeded with no wrong result, 1 when one
# failed, timed out, printed no row or reported wrong results (or a tool is
# missing), 3 (STRICT=1 only) when a target was missed.
# shellcheck disable=SC2317
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RCOLL_BENCH="$ROOT/bench/alltoall_perf"
OMPI_BENCH="$ROOT/build/compare/mpi_alltoall_openmpi"
OUTDIR=${OUTDIR:-$(mktemp -d /tmp/rcoll-compare-alltoall.XXXXXX)}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
ROUNDS=${ROUNDS:-5}
CHECK=${CHECK:-1}
RANKS=${RANKS:-"2 4"}
if [ $# -gt 0 ]; then SIZES="$*"; else SIZES=${SIZES:-"8 1M 16M"}; fi
STATUS=0 MISSED=0
FAILURES=()
mkdir -p "$OUTDIR"
trap 'exit 130' INT TERM

# shellcheck source=bench/compare/common.sh
. "$HERE/common.sh"
fail() { note "FAILED: $*"; FAILURES+=("$*"); STATUS=1; }

iters_for() {
  local i=$(( (1 << 30) / ($1 > 0 ? $1 : 1) ))
  [ "$i" -lt 20 ] && i=20
  [ "$i" -gt 10000 ] && i=10000
  echo "${ITERS:-$i}"
}

# Open MPI is installed only for this comparison; Debian's generic names
# (mpicc, mpiexec) are put back to what they pointed at (compare_shm.sh does
# the same, and says why).
install_openmpi() {
  command -v mpicc.openmpi >/dev/null && command -v mpiexec.openmpi >/dev/null && return 0
  if [ "${NO_INSTALL:-0}" = 1 ] || [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    note "Open MPI missing; install with: apt-get install -y openmpi-bin libopenmpi-dev"
    return 0
  fi
  local alts=(mpi mpirun mpi-x86_64-linux-gnu) before=() i now
  for i in "${!alts[@]}"; do before[i]=$(update-alternatives --query "${alts[i]}" 2>/dev/null | awk '/^Value:/ {print $2}'); done
  note "installing openmpi-bin libopenmpi-dev"
  { DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openmpi-bin libopenmpi-dev ||
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openmpi-bin libopenmpi-dev; }
  } >>"$OUTDIR/apt.log" 2>&1 || note "apt-get failed (see $OUTDIR/apt.log)"
  for i in "${!alts[@]}"; do
    now=$(update-alternatives --query "${alts[i]}" 2>/dev/null | awk '/^Value:/ {print $2}')
    [ -n "${before[i]}" ] && [ "$now" != "${before[i]}" ] &&
      update-alternatives --set "${alts[i]}" "${before[i]}" >>"$OUTDIR/apt.log" 2>&1
  done
  return 0
}

build_all() {
  [ "${NO_BUILD:-0}" = 1 ] && return 0
  note "building rcoll: make -C $ROOT"
  make -C "$ROOT" >"$OUTDIR/make.log" 2>&1 || note "make failed (see $OUTDIR/make.log)"
  if command -v mpicc.openmpi >/dev/null; then
    mkdir -p "$(dirname "$OMPI_BENCH")"
    mpicc.openmpi -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -o "$OMPI_BENCH" "$HERE/mpi_alltoall.c" \
      >"$OUTDIR/mpi_alltoall.log" 2>&1 || fail "mpicc.openmpi could not build $OMPI_BENCH (see $OUTDIR/mpi_alltoall.log)"
  fi
}

# Each prints "time_us" for its one run, or nothing. $1 ranks, $2 size, $3 iters, $4 warmup, $5 log.
run_rcoll() {
  RCOLL_NET=shm timeout -k 10 "$RUN_TIMEOUT" mpiexec.mpich -n "$1" "$RCOLL_BENCH" \
    -b "$2" -e "$2" -f 2 -n "$3" -w "$4" -c "$CHECK" -d float ${RCOLL_ARGS:-} >"$5" 2>&1
  local rc=$?
  awk -v s="$2" '$1 == s && $3 == "float" { if ($9 != "N/A" && $9 + 0 > 0) print "WRONG", $9; else print $6; exit }' "$5"
  return "$rc"
}
run_openmpi() {
  # shellcheck disable=SC2054 # the comma belongs to the btl list
  local a=(-n "$1" --mca pml ob1 --mca btl vader,self)
  [ "$(nproc)" -lt "$1" ] && a+=(--oversubscribe)
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 10 "$RUN_TIMEOUT" \
    mpiexec.openmpi "${a[@]}" "$OMPI_BENCH" -n "$3" -w "$4" -c "$CHECK" "$2" >"$5" 2>&1
  local rc=$?
  awk -v s="$2" '$1 == s { if ($6 != "0" && $6 != "N/A") print "WRONG", $6; else print $3; exit }' "$5"
  return "$rc"
}

declare -A RUNS  # "tool,ranks,size" -> the times of its rounds, space-separated

# One run of one tool; a failure fails the script but the others go on.
measure() { # $1 tool, $2 ranks, $3 size, $4 round
  local iters warmup log res rc
  iters=$(iters_for "$3"); warmup=$(warmup_for "$iters")
  log="$OUTDIR/$1_n$2_$3_r$4.log"
  res=$("run_$1" "$2" "$3" "$iters" "$warmup" "$log"); rc=$?
  if [ $rc -ne 0 ] || [ -z "$res" ] || [[ $res == WRONG* ]]; then
    fail "$1, $2 ranks, $3 B, round $4: exit $rc${res:+, $res}$([ -z "$res" ] && echo ', no result row') - see $log"
    tail -n 5 "$log" | sed 's/^/#   | /'
    return
  fi
  RUNS[$1,$2,$3]="${RUNS[$1,$2,$3]:-} $res"
}

# One rank's send buffer at n ranks: the size asked for, rounded up to a
# whole float per rank (8 B at 4 ranks would be half a float per block: no
# row at all, in either bench).
size_at() { # $1 ranks, $2 bytes
  local unit=$(($1 * 4))
  echo $(( ($2 + unit - 1) / unit * unit ))
}

verdict() { # $1 size in bytes, $2 rcoll us, $3 Open MPI us
  awk -v s="$1" -v r="$2" -v o="$3" 'BEGIN {
    if (r == "" || o == "") { print "n/a (not measured)"; exit }
    if (s == 8) { ok = r <= 1.5 * o; printf "%s (rcoll %.2fx Open MPI'\''s time, goal <= 1.5x)", ok ? "met" : "MISSED", r / o; exit }
    if (s == 1048576 || s == 16777216) { ok = o / r >= 1.2; printf "%s (%.2fx, goal >= 1.2x)", ok ? "met" : "MISSED", o / r; exit }
    print "- (no target at this size)" }'
}

report() {
  local n s b r o line
  echo
  echo "## all-to-all float32, one host, shared memory: median time per call (us) over $ROUNDS rounds"
  printf '%6s %12s | %12s %12s | %8s | %s\n' ranks size rcoll openmpi ratio verdict
  for n in $RANKS; do
    for s in $SIZES; do
      b=$(size_at "$n" "$(to_bytes "$s")")
      r=$(median_of "${RUNS[rcoll,$n,$b]:-}"); o=$(median_of "${RUNS[openmpi,$n,$b]:-}")
      line=$(verdict "$(to_bytes "$s")" "$r" "$o")
      case $line in MISSED*) MISSED=1 ;; esac
      printf '%6s %12s | %12s %12s | %8s | %s\n' "$n" "$b" "${r:-n/a}" "${o:-n/a}" \
        "$(awk -v r="$r" -v o="$o" 'BEGIN { if (r + 0 > 0 && o + 0 > 0) printf "%.2f", o / r; else print "n/a" }')" "$line"
    done
  done
  echo "# ratio: Open MPI's time / rcoll's (above 1: rcoll is faster)"
}

main() {
  note "compare_alltoall: $(date -u +%FT%TZ) on $(uname -n), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  note "sizes: $SIZES; ranks: $RANKS; rounds: $ROUNDS (alternating, median kept); check: $CHECK; logs: $OUTDIR"
  install_openmpi
  build_all
  [ -x "$RCOLL_BENCH" ] && command -v mpiexec.mpich >/dev/null && ldd "$RCOLL_BENCH" | grep -q libmpich ||
    fail "rcoll: $RCOLL_BENCH missing or not built with MPICH (apt-get install mpich libmpich-dev; make)"
  [ -x "$OMPI_BENCH" ] && command -v mpiexec.openmpi >/dev/null ||
    fail "openmpi: $OMPI_BENCH or mpiexec.openmpi missing (apt-get install -y openmpi-bin libopenmpi-dev)"
  [ $STATUS -ne 0 ] && { printf '  %s\n' "${FAILURES[@]}" >&2; exit 1; }
  note "rcoll: $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null), RCOLL_NET=shm mpiexec.mpich -n N $RCOLL_BENCH -b S -e S -n I -w W -c $CHECK -d float${RCOLL_ARGS:+ $RCOLL_ARGS} (out-of-place column)"
  note "openmpi: $(ompi_info --version 2>/dev/null | awk '/Open MPI/ {print $NF; exit}'), mpiexec.openmpi -n N --mca pml ob1 --mca btl vader,self $OMPI_BENCH -n I -w W -c $CHECK S"
  local round n s b first second
  for ((round = 1; round <= ROUNDS; round++)); do
    if ((round % 2)); then first=rcoll second=openmpi; else first=openmpi second=rcoll; fi
    for n in $RANKS; do
      for s in $SIZES; do
        b=$(size_at "$n" "$(to_bytes "$s")")
        measure "$first" "$n" "$b" "$round"
        measure "$second" "$n" "$b" "$round"
      done
    done
    note "round $round of $ROUNDS done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  done
  report
  if [ $STATUS -ne 0 ]; then
    echo "compare_alltoall: ${#FAILURES[@]} failure(s):" >&2
    printf '  %s\n' "${FAILURES[@]}" >&2
    exit $STATUS
  fi
  [ "${STRICT:-0}" = 1 ] && [ $MISSED = 1 ] && { echo "compare_alltoall: a target was missed" >&2; exit 3; }
  exit 0
}

main
