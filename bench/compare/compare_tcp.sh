#!/usr/bin/env bash
# Puts rcoll's all-reduce over the socket transport beside Gloo, MPICH and
# Open MPI over TCP on loopback, 2 ranks, float32 sum, and iperf3 as the
# ceiling; ends with issue 18's TCP target (8 B all-reduce <= MPICH's and
# Open MPI's time over tcp), met or MISSED.
#
#   bench/compare/compare_tcp.sh                 # 8 1M 16M 128M
#   bench/compare/compare_tcp.sh 8 64K 4M        # other sizes
#
# Environment knobs (defaults in brackets):
#   SIZES ["8 1M 16M 128M"]   sizes when none are given as arguments
#   ITERS, WARMUP [by size]   timed and warm-up calls; by default about
#                             256 MiB of traffic per size, 5..1000 calls
#   CHECK [0]                 rcoll's -c (result check runs, untimed)
#   REPEATS [5]               rounds; each runs every tool once at every
#                             size, the tools taking turns; the median of
#                             the rounds is kept
#   RUN_TIMEOUT [300]         seconds before one run is killed
#   NO_BUILD [0]              1: do not run make
#   OUTDIR [mktemp -d]        where every run's full output is kept
#   IPERF [1]                 0: skip the iperf3 ceiling
#   STRICT [0]                1: exit 3 when a target is missed
# The script exits 1 if any run failed or reported wrong results, 3 with
# STRICT=1 when a target was missed, else 0.
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
NRANKS=2
TORCH_PY=/usr/bin/python3         # Debian's python3-torch lives here only
RCOLL_BENCH="$ROOT/bench/allreduce_perf"
MPI_BENCH="$ROOT/build/compare/mpi_allreduce"
OMPI_BENCH="$ROOT/build/compare/mpi_allreduce_openmpi" # the name compare_shm.sh builds
GLOO_BENCH="$HERE/gloo_allreduce.py"
OUTDIR=${OUTDIR:-$(mktemp -d /tmp/rcoll-compare.XXXXXX)}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
REPEATS=${REPEATS:-5}
CHECK=${CHECK:-0}
if [ $# -gt 0 ]; then SIZES="$*"; else SIZES=${SIZES:-"8 1M 16M 128M"}; fi
STATUS=0
IPERF_PID=""
mkdir -p "$OUTDIR"

# Every server this script starts is stopped however it exits.
cleanup() {
  if [ -n "$IPERF_PID" ] && kill -0 "$IPERF_PID" 2>/dev/null; then
    kill "$IPERF_PID" 2>/dev/null
    wait "$IPERF_PID" 2>/dev/null
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$(dirname "$0")/common.sh"

# Calls per size: about 256 MiB through the all-reduce, 5..1000 calls, so the
# small sizes average out scheduler noise and the large ones stay short.
iters_for() {
  local i=$(( (256 << 20) / ($1 > 0 ? $1 : 1) ))
  [ "$i" -lt 5 ] && i=5
  [ "$i" -gt 1000 ] && i=1000
  echo "${ITERS:-$i}"
}

# ------------------------------------------------------------------ build
build_all() {
  if [ "${NO_BUILD:-0}" != 1 ]; then
    note "building rcoll: make -C $ROOT"
    make -C "$ROOT" >"$OUTDIR/make.log" 2>&1 ||
      note "make failed (see $OUTDIR/make.log); using whatever binaries exist"
  fi
  if command -v mpicc.mpich >/dev/null; then
    mkdir -p "$(dirname "$MPI_BENCH")"
    mpicc.mpich -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -o "$MPI_BENCH" \
      "$HERE/mpi_allreduce.c" -lm >"$OUTDIR/mpicc.log" 2>&1 ||
      { note "mpicc.mpich failed (see $OUTDIR/mpicc.log)"; rm -f "$MPI_BENCH"; }
  fi
  if command -v mpicc.openmpi >/dev/null; then
    mkdir -p "$(dirname "$OMPI_BENCH")"
    mpicc.openmpi -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -o "$OMPI_BENCH" \
      "$HERE/mpi_allreduce.c" -lm >"$OUTDIR/mpicc_openmpi.log" 2>&1 ||
      { note "mpicc.openmpi failed (see $OUTDIR/mpicc_openmpi.log)"; rm -f "$OMPI_BENCH"; }
  fi
}

# Which references can run here; a missing one becomes an n/a column.
HAVE_RCOLL=0 HAVE_RCOLL_MPI=0 HAVE_GLOO=0 HAVE_MPICH=0 HAVE_OMPI=0
detect_tools() {
  if [ -x "$RCOLL_BENCH" ]; then
    HAVE_RCOLL=1
    # Built by mpicc, the bench can be launched as processes by mpiexec.
    if command -v mpiexec.mpich >/dev/null && ldd "$RCOLL_BENCH" | grep -q 'libmpi'; then
      HAVE_RCOLL_MPI=1
    fi
  else
    note "rcoll: $RCOLL_BENCH is missing (make did not build it)"
  fi
  if "$TORCH_PY" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null
  then HAVE_GLOO=1
  else note "gloo: $TORCH_PY cannot import torch with gloo (apt-get install -y python3-torch)"
  fi
  if [ -x "$MPI_BENCH" ] && command -v mpiexec.mpich >/dev/null; then HAVE_MPICH=1
  else note "mpich: mpicc.mpich/mpiexec.mpich missing (apt-get install -y mpich)"
  fi
  if [ -x "$OMPI_BENCH" ] && command -v mpiexec.openmpi >/dev/null; then HAVE_OMPI=1
  else note "openmpi: mpicc.openmpi/mpiexec.openmpi missing (apt-get install -y openmpi-bin libopenmpi-dev)"
  fi
}

# ------------------------------------------------------------------ runs
# Each run_* prints "time_us busbw wrong" for its one size, or nothing.
# $1 size in bytes, $2 iters, $3 warmup, $4 log file.

run_rcoll_threads() {
  # shellcheck disable=SC2046
  RCOLL_NET=socket timeout -k 10 "$RUN_TIMEOUT" \
    "$RCOLL_BENCH" -t "$NRANKS" $(rcoll_args "$1" "$2" "$3") >"$4" 2>&1
  local rc=$?; parse_nccl_table "$1" "$4"; return "$rc"
}
run_rcoll_procs() {
  # shellcheck disable=SC2046
  RCOLL_NET=socket timeout -k 10 "$RUN_TIMEOUT" \
    mpiexec.mpich -n "$NRANKS" "$RCOLL_BENCH" $(rcoll_args "$1" "$2" "$3") >"$4" 2>&1
  local rc=$?; parse_nccl_table "$1" "$4"; return "$rc"
}
run_gloo() {
  timeout -k 10 "$RUN_TIMEOUT" "$TORCH_PY" "$GLOO_BENCH" -N "$NRANKS" -n "$2" -w "$3" \
    --timeout "$RUN_TIMEOUT" "$1" >"$4" 2>&1
  local rc=$?; parse_ref_table "$1" "$4"; return "$rc"
}
# MPICH 4 (ch4:ucx): NOLOCAL stops it from treating the ranks as on-node
# (its shared-memory path); UCX_TLS keeps UCX itself off posix/sysv/cma.
run_mpich_tcp() {
  MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self timeout -k 10 "$RUN_TIMEOUT" \
    mpiexec.mpich -n "$NRANKS" "$MPI_BENCH" -n "$2" -w "$3" "$1" >"$4" 2>&1
  local rc=$?; parse_ref_table "$1" "$4"; return "$rc"
}
# Open MPI's ob1 PML over its TCP BTL only (self for a rank's own data), so
# that on-node ranks do not take vader. It refuses root without being told
# twice, and more ranks than cores without --oversubscribe.
ompi_tcp_args() {
  local a=(-n "$NRANKS")
  [ "$(nproc)" -lt "$NRANKS" ] && a+=(--oversubscribe)
  # shellcheck disable=SC2054 # the comma belongs to the btl list
  a+=(--mca pml ob1 --mca btl tcp,self)
  echo "${a[*]}"
}
run_ompi_tcp() {
  # shellcheck disable=SC2046
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 10 "$RUN_TIMEOUT" \
    mpiexec.openmpi $(ompi_tcp_args) "$OMPI_BENCH" -n "$2" -w "$3" "$1" >"$4" 2>&1
  local rc=$?; parse_ref_table "$1" "$4"; return "$rc"
}
# The default MPICH path (shared memory), to show what NOLOCAL changes.
run_mpich_shm() {
  timeout -k 10 "$RUN_TIMEOUT" \
    mpiexec.mpich -n "$NRANKS" "$MPI_BENCH" -n "$2" -w "$3" "$1" >"$4" 2>&1
  local rc=$?; parse_ref_table "$1" "$4"; return "$rc"
}

declare -A BUSBW TIME LOTRAFFIC
TOOLS=(rcoll_threads rcoll_procs gloo mpich_tcp ompi_tcp mpich_shm)

tool_available() {
  case $1 in
  rcoll_threads) [ $HAVE_RCOLL = 1 ] ;;
  rcoll_procs) [ $HAVE_RCOLL_MPI = 1 ] ;;
  gloo) [ $HAVE_GLOO = 1 ] ;;
  mpich_*) [ $HAVE_MPICH = 1 ] ;;
  ompi_tcp) [ $HAVE_OMPI = 1 ] ;;
  esac
}

# Runs one tool once at one size (round $3), adding its time to RUNS.
# Also records how many bytes crossed loopback per call, relative to the size:
# about 2 for a 2-rank all-reduce that really goes over TCP (each rank sends
# one buffer's worth), about 0 for one that goes through shared memory.
declare -A RUNS
measure() {
  local tool=$1 size=$2 rep=$3 iters warmup log before after res bt bw
  iters=$(iters_for "$size"); warmup=$(warmup_for "$iters")
  log="$OUTDIR/${tool}_${size}_${rep}.log"
  before=$(lo_bytes)
  res=$("run_$tool" "$size" "$iters" "$warmup" "$log")
  local rc=$?
  after=$(lo_bytes)
  read -r bt _ bw <<<"$res"
  if [ $rc -ne 0 ] || [ -z "$res" ] || { [ "$bw" != N/A ] && [ "$bw" != 0 ]; }; then
    note "$tool at $size B: exit $rc, result '${res}' - see $log"
    tail -n 5 "$log" | sed 's/^/#   | /'
    STATUS=1
    [ -z "$res" ] && return 0
  fi
  RUNS[$tool,$size]="${RUNS[$tool,$size]:-} $bt"
  LOTRAFFIC[$tool,$size]=$(lo_ratio "$tool" $((after - before)) $((iters + warmup)) "$size")
}

# Each tool's median over the rounds, at each size, into TIME and BUSBW.
summarize() {
  local key med
  for key in "${!RUNS[@]}"; do
    med=$(median_of "${RUNS[$key]}")
    [ -n "$med" ] && record_best "${key%%,*}" "${key#*,}" "$med"
  done
}

# Loopback bytes per call / size. bench/allreduce_perf runs every call twice
# (out of place, then in place). Below 64 KiB headers and acknowledgements
# dominate, so no ratio is given there.
lo_ratio() {
  local calls=$3
  case $1 in rcoll_*) calls=$((calls * 2)) ;; esac
  awk -v d="$2" -v n="$calls" -v s="$4" \
    'BEGIN { if (s >= 65536) printf "%.2f", d / n / s; else print "-" }'
}

# ------------------------------------------------------------------ iperf3
IPERF_GBS=""
run_iperf() {
  [ "${IPERF:-1}" = 1 ] || return 0
  command -v iperf3 >/dev/null || { note "iperf3 missing (apt-get install -y iperf3)"; return 0; }
  local port pidfile="$OUTDIR/iperf3.pid"
  port=$("$TORCH_PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 5201)
  iperf3 -s -1 -D -B 127.0.0.1 -p "$port" -I "$pidfile" >"$OUTDIR/iperf3_server.log" 2>&1
  for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$pidfile" ] && break; sleep 0.2; done
  IPERF_PID=$(tr -d '\0 \n' <"$pidfile" 2>/dev/null)
  timeout -k 5 30 iperf3 -c 127.0.0.1 -p "$port" -P 2 -t 3 >"$OUTDIR/iperf3.log" 2>&1 ||
    note "iperf3 client failed (see $OUTDIR/iperf3.log)"
  # The receiver's [SUM] line: "... sec  X GBytes  Y Gbits/sec  receiver".
  IPERF_GBS=$(awk '/SUM/ && /receiver/ {
      r = $6; u = $7; if (u ~ /^Mbits/) r /= 1000; printf "%.2f", r / 8 }' "$OUTDIR/iperf3.log")
  cleanup
  IPERF_PID=""
}

# ------------------------------------------------------------------ report

print_tables() {
  # rcoll as 2 processes is the like-for-like comparison with Gloo and MPICH,
  # which run as 2 processes; threads mode stands in when MPI is missing.
  local main=rcoll_procs s b
  [ $HAVE_RCOLL_MPI = 1 ] || main=rcoll_threads
  echo
  echo "## all-reduce float32 sum, $NRANKS ranks, loopback TCP; busbw in GB/s (rcoll = $main)"
  printf '%10s | %10s | %10s | %10s | %10s | %10s | %10s | %10s | %10s | %10s\n' size "rcoll" \
    "rcoll -t2" gloo mpich-tcp ompi-tcp "rcoll/gloo" "rcoll/mpich" "rcoll/ompi" "mpich-shm"
  for s in $SIZES; do
    b=$(to_bytes "$s")
    printf '%10s | %10s | %10s | %10s | %10s | %10s | %10s | %10s | %10s | %10s\n' "$b" \
      "$(val $main "$b")" "$(val rcoll_threads "$b")" "$(val gloo "$b")" "$(val mpich_tcp "$b")" \
      "$(val ompi_tcp "$b")" "$(ratio $main gloo "$b")" "$(ratio $main mpich_tcp "$b")" \
      "$(ratio $main ompi_tcp "$b")" "$(val mpich_shm "$b")"
  done
  echo
  echo "## time per call (us), and loopback bytes per call / size (about 2 = over TCP)"
  printf '%10s' size
  for t in "${TOOLS[@]}"; do printf ' | %13s %5s' "$t" "lo"; done
  echo
  for s in $SIZES; do
    b=$(to_bytes "$s"); printf '%10s' "$b"
    for t in "${TOOLS[@]}"; do
      printf ' | %13s %5s' "${TIME[$t,$b]:-n/a}" "${LOTRAFFIC[$t,$b]:--}"
    done
    echo
  done
  b=$(to_bytes "${SIZES%% *}")
  echo
  echo "## latency at $b B (time_us): rcoll ${TIME[$main,$b]:-n/a} |" \
    "rcoll -t2 ${TIME[rcoll_threads,$b]:-n/a} | gloo ${TIME[gloo,$b]:-n/a} |" \
    "mpich-tcp ${TIME[mpich_tcp,$b]:-n/a} | ompi-tcp ${TIME[ompi_tcp,$b]:-n/a} |" \
    "mpich-shm ${TIME[mpich_shm,$b]:-n/a}"
  if [ -n "$IPERF_GBS" ]; then
    echo "## iperf3 loopback, 2 streams, 3 s: $IPERF_GBS GB/s together," \
      "$(awk -v g="$IPERF_GBS" 'BEGIN { printf "%.2f", g / 2 }') GB/s per stream" \
      "(a 2-rank all-reduce's busbw is what one rank sends per second: compare per stream)"
  fi
}

# Issue 18's TCP target for rcoll (2 ranks): its 8 B all-reduce no slower
# than either MPI over tcp, i.e. <= the smaller of the two times. Printed
# only when 8 B ran.
MISSED=0
print_targets() {
  local main=rcoll_procs line
  [ $HAVE_RCOLL_MPI = 1 ] || main=rcoll_threads
  [ -n "${TIME[$main,8]:-}" ] || [ -n "${TIME[mpich_tcp,8]:-}" ] || return 0
  line=$(awk -v r="${TIME[$main,8]:-}" -v m="${TIME[mpich_tcp,8]:-}" -v o="${TIME[ompi_tcp,8]:-}" 'BEGIN {
      if (r == "" || m == "" || o == "") {
        printf "n/a (rcoll %s, mpich-tcp %s, ompi-tcp %s us: not all measured)",
          r == "" ? "n/a" : r, m == "" ? "n/a" : m, o == "" ? "n/a" : o; exit }
      goal = m + 0 < o + 0 ? m : o
      if (r + 0 <= goal + 0) { printf "met (rcoll %s us; mpich-tcp %s, ompi-tcp %s)", r, m, o; exit }
      printf "MISSED (rcoll %s us, %.1f%% above %s; mpich-tcp %s, ompi-tcp %s)",
        r, (r - goal) / goal * 100, goal, m, o }')
  echo
  echo "## targets for rcoll ($main, $NRANKS ranks, socket transport)"
  printf '#   %-46s %s\n' "8 B all-reduce <= MPICH and Open MPI over tcp" "$line"
  case $line in MISSED*) MISSED=1 ;; esac
}

# Other programs' loopback traffic lands in the lo column too; say how much.
background_lo() {
  local a b
  a=$(lo_bytes); sleep 1; b=$(lo_bytes)
  note "background loopback traffic: $(( (b - a) >> 20 )) MiB/s" \
    "(the lo column is only meaningful when this is near 0)"
}

main() {
  note "compare_tcp: $(date -u +%FT%TZ) on $(uname -n), $(nproc) cores," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg)"
  background_lo
  note "sizes: $SIZES; rounds: $REPEATS (median kept); logs: $OUTDIR"
  build_all
  detect_tools
  note "commands (S = size, I/W = iters/warmup per size):"
  note "  RCOLL_NET=socket $RCOLL_BENCH -t 2 $(rcoll_args S I W)"
  note "  RCOLL_NET=socket mpiexec.mpich -n 2 $RCOLL_BENCH $(rcoll_args S I W)"
  note "  $TORCH_PY $GLOO_BENCH -N 2 -n I -w W S"
  note "  MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self mpiexec.mpich -n 2 $MPI_BENCH -n I -w W S"
  note "  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec.openmpi" \
    "$(ompi_tcp_args) $OMPI_BENCH -n I -w W S   (ompi-tcp)"
  note "  mpiexec.mpich -n 2 $MPI_BENCH -n I -w W S   (mpich-shm)"
  local s b t rep
  for s in $SIZES; do
    b=$(to_bytes "$s")
    note "size $b: iters $(iters_for "$b"), warmup $(warmup_for "$(iters_for "$b")")"
  done
  # Rounds in which the tools take turns at each size, so that a change in
  # background load spreads over all of them rather than landing on one.
  for ((rep = 1; rep <= REPEATS; rep++)); do
    for s in $SIZES; do
      b=$(to_bytes "$s")
      for t in "${TOOLS[@]}"; do
        tool_available "$t" && measure "$t" "$b" "$rep"
      done
    done
  done
  summarize
  run_iperf
  print_tables
  print_targets
  note "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  background_lo
  [ $STATUS -ne 0 ] && exit $STATUS
  [ "${STRICT:-0}" = 1 ] && [ $MISSED = 1 ] && { echo "compare_tcp: a target was missed" >&2; exit 3; }
  exit 0
}

main
