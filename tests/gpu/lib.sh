# Shared by the GPU scripts (run.sh, probe.sh): the output files, the time
# budget, the machine check, the CUDA-only build in a copy of the tree under
# /tmp, and launching ranks. Sourced, not run; leaves the shell in the build.
# shellcheck shell=bash
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
ROOT=$PWD
OUTDIR=${OUT:-/tmp/rcoll-gpu-out}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/${GPU_LOG_NAME:-gpu_run}.log
SUMMARY=$OUTDIR/${GPU_LOG_NAME:+$GPU_LOG_NAME.}summary.txt
WORK=$(mktemp -d /tmp/rcoll-gpu.XXXXXX)
: >"$SUMMARY"
exec > >(tee "$LOG") 2>&1
START=$(date +%s)
BUDGET=${GPU_RUN_BUDGET:-520} # seconds after which remaining runs are skipped (a device call may last 600)
FAILED=0

say() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(($(date +%s) - START)); }
section() { printf '\n==== [%4ss] %s\n' "$(elapsed)" "$*"; }
over_budget() { [[ $(elapsed) -gt $BUDGET ]]; }

trap 'rm -rf "$WORK"' EXIT

# ---------------------------------------------------------------- the machine
section "machine"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L; then
  say "SKIP: no NVIDIA GPU or driver here"
  exit 77
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
CUDA_HOME=${CUDA_HOME:-}
if [[ -z "$CUDA_HOME" ]]; then
  if [[ -x /usr/local/cuda/bin/nvcc ]]; then CUDA_HOME=/usr/local/cuda
  elif command -v nvcc >/dev/null; then CUDA_HOME=$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)
  fi
fi
if [[ -z "$CUDA_HOME" || ! -x "$CUDA_HOME/bin/nvcc" ]]; then
  say "FAIL: no CUDA toolkit (set CUDA_HOME)"
  exit 1
fi
CUDA_LIB=$CUDA_HOME/lib64
[[ -d "$CUDA_LIB" ]] || CUDA_LIB=$CUDA_HOME/lib
"$CUDA_HOME/bin/nvcc" --version | tail -n 2
gcc --version | head -n 1
nproc

# ---------------------------------------------------------------- build
# GPU_BUILD=DIR: build in DIR and keep it, so that the next script of the
# same device call (run.sh after compare_nccl.sh) reuses it, not rebuilds.
BUILD=${GPU_BUILD:-$WORK/src}
if [[ -n "${GPU_BUILD:-}" && -f "$BUILD/.gpu-build-ok" ]]; then
  section "build: reusing $BUILD"
  cd "$BUILD" || exit 1
else
section "build (a copy of the tree, CUDA only config.mk)"
mkdir -p "$BUILD"
tar --exclude=./.git --exclude=./build --exclude=./build-asan --exclude=./tests/gpu/out -cf - . |
  (cd "$BUILD" && tar -xf -) || { say "FAIL: copying the tree"; exit 1; }
cd "$BUILD" || exit 1
# Only the GPU that is here: one gencode halves the kernels' build.
CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
[[ $CAP =~ ^[0-9]+$ ]] && export NVCC_GENCODE="-gencode arch=compute_$CAP,code=sm_$CAP"
rm -f lib/librcoll.* bench/*_perf
cat >config.mk <<EOF
# Written by tests/gpu/run.sh for the GPU run: CUDA only. VERSION as
# configure reads it: without it the library's file names are broken.
VERSION = $(awk '/^#define RCOLL_(MAJOR|MINOR|PATCH) /{v=v s $3; s="."} END{print v}' include/rcoll.h)
CC = gcc
CONFIG_DEFS = -DRCOLL_HAVE_CUDA=1
RCOLL_HAVE_CUDA = 1
CUDA_HOME = $CUDA_HOME
NVCC = $CUDA_HOME/bin/nvcc
CUDA_CFLAGS = -I$CUDA_HOME/include
# What configure puts here for the library: lib/cuda/abi_check.c includes cuda.h.
DEP_CFLAGS = -I$CUDA_HOME/include
CUDA_LIBS = -L$CUDA_LIB -Wl,-rpath,$CUDA_LIB -lcudart
RCOLL_HAVE_MPI = 0
HAVE_CRITERION = 0
EOF
# -o: never try to regenerate config.mk or configure (no autoconf needed).
MAKE_GPU=(make -o config.mk -o configure -j"$(nproc)")
if ! "${MAKE_GPU[@]}" lib/librcoll.so lib/libnccl-net-rcoll.so bench/allreduce_perf bench/reduce_scatter_perf \
  bench/allgather_perf bench/alltoall_perf; then
  say "FAIL: build"
  exit 1
fi
mkdir -p build/gpu
GPU_CFLAGS=(-std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Iinclude -I"$CUDA_HOME/include")
GPU_LIBS=(-L"$CUDA_LIB" -Wl,-rpath,"$CUDA_LIB" -lcudart -lm -ldl)
gcc "${GPU_CFLAGS[@]}" tests/gpu/gpu_conformance.c -o build/gpu/gpu_conformance -Llib -lrcoll \
  -Wl,-rpath,"$BUILD/lib" "${GPU_LIBS[@]}" &&
  gcc "${GPU_CFLAGS[@]}" tests/gpu/d2d_bw.c -o build/gpu/d2d_bw "${GPU_LIBS[@]}" &&
  gcc "${GPU_CFLAGS[@]}" tests/gpu/nccl_perf.c -o build/gpu/nccl_perf "${GPU_LIBS[@]}" ||
  { say "FAIL: building tests/gpu programs"; exit 1; }
read -ra GENCODE <<<"${NVCC_GENCODE:-}"
"$CUDA_HOME/bin/nvcc" -O2 -std=c++17 "${GENCODE[@]}" tests/gpu/latency.cu -o build/gpu/latency -ldl ||
  say "latency: build FAILED"
# bench_reduce calls the library's internal reduce launcher: it links the
# internal archive, which needs nothing the CUDA-only config.mk leaves out.
"${MAKE_GPU[@]}" build/librcoll-internal.a >/dev/null &&
  gcc "${GPU_CFLAGS[@]}" -Ilib tests/bench_reduce.c -o build/gpu/bench_reduce build/librcoll-internal.a \
    "${GPU_LIBS[@]}" -pthread || say "bench_reduce: build FAILED"
say "build: OK ($(elapsed) s)"
touch .gpu-build-ok
fi

# ---------------------------------------------------------------- launching ranks
# launch NRANKS TIMEOUT LABEL CMD...: one process per rank, the rendezvous
# from the environment (rcollCommInitFromEnv), all on this machine's GPU(s).
launch() {
  local n=$1 t=$2 label=$3 port rc=0 r
  shift 3
  port=$((20000 + RANDOM % 30000))
  local pids=()
  for ((r = 0; r < n; r++)); do
    # PER_RANK_HOSTID=1: each rank a host of its own to NCCL (step 5).
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      env ${PER_RANK_HOSTID:+NCCL_HOSTID=rcoll-gpu-node$r} \
      timeout -k 5 "$t" "$@" >"$WORK/$label.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for r in "${!pids[@]}"; do
    wait "${pids[$r]}" || { local e=$?; [[ $rc -eq 0 ]] && rc=$e; }
  done
  for ((r = 0; r < n; r++)); do
    echo "---- $label rank $r"
    if [[ $r -eq 0 ]] || grep -q 'HUNG' "$WORK/$label.rank$r.log"; then
      cat "$WORK/$label.rank$r.log"
      symbolize "$WORK/$label.rank$r.log"
    else
      tail -n 20 "$WORK/$label.rank$r.log"
    fi
  done
  return "$rc"
}


# symbolize FILE: the "#N /path/lib.so +0xOFF (sym)" frames that a hung
# gpu_conformance prints without gdb (hang_dump.h), with function and line.
symbolize() {
  local f=$1 line lib off
  grep -q ' +0x[0-9a-f]* (' "$f" || return 0
  echo "---- $(basename "$f"): frames in rcoll and the test, symbolized"
  while IFS= read -r line; do
    if [[ $line =~ \#[0-9]+\ ([^ ]+)\ \+0x([0-9a-f]+) ]]; then
      lib=${BASH_REMATCH[1]}
      off=${BASH_REMATCH[2]}
      case $lib in
      *librcoll*|*gpu_conformance*|*libnccl-net-rcoll*)
        printf '%s  ->  %s\n' "$line" "$(addr2line -f -i -p -e "$lib" "0x$off" 2>/dev/null | tr '\n' ' ')" ;;
      *) printf '%s\n' "$line" ;;
      esac
    elif [[ $line == *thread* ]]; then
      printf '%s\n' "$line"
    fi
  done <"$f"
}

# ---------------------------------------------------------------- MPS
# mps_start: the MPS control daemon for this script's ranks (pipe and logs
# under $WORK); fails where there is none or it does not start in 5 s. mps_stop:
# asks it to quit and waits (up to 10 s) until it and its server are gone,
# so that a later mps_start finds nothing in the way. Ranks of several
# processes on one GPU share it better under MPS, and the direct all-reduce
# needs it (without it every rank turns the direct path off: docs/gpu.md).
mps_start() {
  command -v nvidia-cuda-mps-control >/dev/null || return 1
  export CUDA_MPS_PIPE_DIRECTORY=$WORK/mps-pipe CUDA_MPS_LOG_DIRECTORY=$WORK/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  local i
  for ((i = 0; i < 10; i++)); do # a daemon told to quit may still be going (no pgrep to see it)
    nvidia-cuda-mps-control -d && return 0
    sleep 0.5
  done
  return 1
}
mps_stop() {
  echo quit | nvidia-cuda-mps-control
  local i
  for ((i = 0; i < 100; i++)); do
    pgrep -x nvidia-cuda-mps >/dev/null 2>&1 || return 0 # the control and the server (15-character names)
    sleep 0.1
  done
  say "MPS: still running 10 s after quit"
}
