#!/usr/bin/env bash
# When a device path fails with "an illegal memory access": which kernel,
# which thread, which address. Runs short all-reduces (allreduce_perf -G,
# 3 calls) for each variant, plain and under compute-sanitizer's memcheck,
# with the kernels built with line information. Run from the repository root:
#
#   tests/gpu/sanitize.sh [VARIANT...]   output in $OUT (sanitize.log, sanitize.summary.txt)
#
# A variant is NAME:RANKS:BYTES:ENV,ENV,...[:BENCH] (BENCH allreduce_perf
# unless given: reduce_scatter_perf, alltoall_perf, ...). Without arguments:
# the direct all-reduce (lib/cuda/direct.h) on 1 and 2 ranks, through its
# regions and in place, and the direct all-to-all (every other collective's
# direct call is the same kernel with other sources and outputs).
GPU_LOG_NAME=sanitize
GPU_RUN_BUDGET=${GPU_RUN_BUDGET:-150}
export NVCC_FLAGS=${NVCC_FLAGS:-"-O3 -std=c++17 -lineinfo -gencode arch=compute_90,code=sm_90"}
# shellcheck source=tests/gpu/lib.sh
source "$(dirname "$0")/lib.sh"
START=$(date +%s) # the budget is the runs': the build took 51 s on one H200 machine, 92 on another

if (($# == 0)); then
  set -- "direct-1:1:8:RCOLL_CUDA_DIRECT=1" "direct-2:2:8:RCOLL_CUDA_DIRECT=1" \
    "direct-2-inplace:2:1048576:RCOLL_CUDA_DIRECT=1,RCOLL_CUDA_DIRECT_INPLACE=1" \
    "direct-2-alltoall:2:1048576:RCOLL_CUDA_DIRECT=1,RCOLL_CUDA_DIRECT_INPLACE=1:alltoall_perf"
fi
SANITIZER=$CUDA_HOME/bin/compute-sanitizer
[[ -x $SANITIZER ]] || SANITIZER=$(command -v compute-sanitizer)
export RCOLL_TIMEOUT=${RCOLL_TIMEOUT:-10}
# Under MPS, which the direct all-reduce needs for processes on one GPU (the
# ranks turn it off without: docs/gpu.md). Whether compute-sanitizer works
# under MPS the memcheck runs will show.
if mps_start; then
  say "MPS: on"
else
  say "MPS: would not start; the direct variants will run through the proxy"
fi
for v in "$@"; do
  IFS=: read -r name n bytes settings bench <<<"$v"
  IFS=, read -r -a envs <<<"$settings"
  cmd=("bench/${bench:-allreduce_perf}" -G -b "$bytes" -e "$bytes" -n 2 -w 1 -c 1)
  for how in plain memcheck; do
    over_budget && { say "$name $how: SKIPPED (time budget)"; continue; }
    [[ $how == memcheck && -z $SANITIZER ]] && { say "$name: no compute-sanitizer here"; continue; }
    section "$name, $how ($settings)"
    run=("${cmd[@]}")
    [[ $how == memcheck ]] && run=("$SANITIZER" --tool memcheck --print-limit 4 "${cmd[@]}")
    if ( ((${#envs[@]} == 0)) || export "${envs[@]}"; launch "$n" 60 "$name-$how" "${run[@]}"); then
      say "$name $how: PASS"
    else
      say "$name $how: FAIL"
    fi
    grep -hE 'illegal|Invalid|=========  +(at|by|Address)|ERROR SUMMARY|failed' "$WORK/$name-$how".rank*.log |
      head -n 24 | sed 's/^/  /' | tee -a "$SUMMARY"
  done
done
[[ -n ${CUDA_MPS_PIPE_DIRECTORY:-} ]] && mps_stop
section "summary"
cat "$SUMMARY"
