#!/usr/bin/env bash
# The GPU run of rcoll, in one go, for a machine with a CUDA GPU (made for
# one H200; about 5 minutes there). Run from the repository root:
#
#   tests/gpu/run.sh            output in $OUT if set, else /tmp/rcoll-gpu-out/
#
# It needs bash, gcc, make, tar and a CUDA toolkit (nvcc, cudart; CUDA_HOME
# or /usr/local/cuda or the nvcc on PATH), nothing else: it builds in a copy
# of the tree under /tmp with its own config.mk (CUDA only), so neither
# autoconf, MPI nor Criterion is needed, and the checkout is left alone.
#
# Steps, each logged and summed up at the end (summary.txt):
#   1. build librcoll.so with the device code, and check that the library
#      needs no CUDA library to load (ldd/readelf, nm -D);
#   2. the device-to-device copy bandwidth of the GPU (tests/gpu/d2d_bw.c),
#      the latency of the stream operations a small call is made of
#      (tests/gpu/latency.cu) and the reduce kernel against the copy;
#   3. GPU conformance (tests/gpu/gpu_conformance.c): every collective on
#      device buffers, 2 and 4 ranks as processes on the one GPU, over CUDA
#      IPC and again staged through host memory (RCOLL_P2P_DISABLE=1), and
#      once with the wait kernel instead of cuStreamWaitValue32, once with
#      the bounce kernel, and once on the legacy default stream (where a
#      call returns when done);
#   4. NCCL (PyTorch's) through lib/libnccl-net-rcoll.so: 2 ranks on the one
#      GPU made two hosts with NCCL_HOSTID (tests/gpu/nccl_plugin.py); then
#      the "rcoll" torch backend on CUDA tensors against "nccl", results and
#      all_reduce times side by side (tests/gpu/torch_backend.py);
#   5. bench/allreduce_perf -G with 2 and 4 ranks, 8 B to 256 MiB, checked;
#      again under MPS where the machine has it.
# Exit status: 0 when every step passed, 1 otherwise, 77 without a GPU.
#
# GPU_STEPS="copy conformance nccl torch bench" (all by default) runs only
# those steps; GPU_BUILD (lib.sh) reuses a build made earlier in the call.
set -uo pipefail
GPU_STEPS=" ${GPU_STEPS:-copy conformance nccl torch bench} "
step() { [[ $GPU_STEPS == *" $1 "* ]]; }
# shellcheck source=tests/gpu/lib.sh
source "$(dirname "$0")/lib.sh" # steps 0 and 1; the shell is now in the build

if step copy; then
section "the library loads without CUDA libraries"
readelf -d lib/librcoll.so | grep -E 'NEEDED|RUNPATH'
ldd lib/librcoll.so
if readelf -d lib/librcoll.so | grep -qE 'NEEDED.*lib(cudart|cuda)\.so'; then
  say "FAIL: librcoll.so NEEDs a CUDA library"
  FAILED=1
elif nm -D lib/librcoll.so | grep -E ' U (cu|cuda)[A-Z]'; then
  say "FAIL: librcoll.so has undefined CUDA symbols"
  FAILED=1
else
  say "library: no CUDA library in NEEDED, no CUDA symbol in nm -D: OK"
fi

# ---------------------------------------------------------------- 2. copy bandwidth
section "device-to-device copy bandwidth"
D2D=$(build/gpu/d2d_bw $((256 << 20)))
echo "$D2D"
D2D_GBS=$(sed -n 's/.*: \([0-9.]*\) GB\/s copied.*/\1/p' <<<"$D2D")
say "d2d cudaMemcpy 256 MiB: ${D2D_GBS:-?} GB/s copied"

# What the GPU round trips of a small call cost here (issue 16: where each
# microsecond of an 8-byte call goes); compare_nccl.sh runs it under MPS.
section "the GPU round trips of a small call (tests/gpu/latency.cu)"
if [[ -x build/gpu/latency ]] && LAT=$(timeout 60 build/gpu/latency 300); then
  echo "$LAT"
  tee -a "$SUMMARY" <<<"$LAT" >/dev/null
else
  say "latency probe: FAIL"
  FAILED=1
fi

# The reduce kernel against a copy of the same size in the same run (issue
# 16: float32 sum >= 70 % of the copy's memory traffic at 256 MiB).
section "reduce kernel (bench_reduce --device)"
if [[ -x build/gpu/bench_reduce ]] && RED=$(build/gpu/bench_reduce --device 256 20); then
  echo "$RED"
  tee -a "$SUMMARY" <<<"$RED" >/dev/null
  F32=$(awk '$1 == "float32" { sub("%", "", $4); print $4 }' <<<"$RED")
  say "reduce kernel float32 sum at 256 MiB: ${F32:-?} % of the copy's traffic" \
    "($(awk -v p="${F32:-0}" 'BEGIN { print (p >= 70 ? "met" : "MISSED") }') >= 70 %)"
else
  say "reduce kernel bench: FAIL"
  FAILED=1
fi
fi # step copy

# ---------------------------------------------------------------- 3. conformance
run_conformance() { # tag label nranks env...
  local tag=$1 label=$2 n=$3
  shift 3
  step conformance || return 0
  if over_budget; then say "conformance $label: SKIPPED (time budget)"; FAILED=1; return; fi
  section "conformance $label"
  if ( (($# == 0)) || export "$@"; launch "$n" "${GPU_CONF_TIMEOUT:-120}" "$tag" build/gpu/gpu_conformance); then
    say "conformance $label: PASS ($(grep -h 'passed' "$WORK/$tag.rank0.log" | tail -n 1))"
  else
    say "conformance $label: FAIL"
    FAILED=1
  fi
  grep -h 'device buffers via' "$WORK/$tag".rank*.log | sed 's/.*rcoll INFO /  /' | sort -u | head -n 8 |
    tee -a "$SUMMARY"
}
# rcoll's own timeouts fire before the test's watchdog (45 s): a hang that
# they catch names the peer and the step.
export RCOLL_TIMEOUT=${RCOLL_TIMEOUT:-30}
# Calls up to 64 KiB run as host plans on pinned copies (RCOLL_CUDA_BOUNCE,
# lib/cuda/bounce.h); the 4-rank runs turn that off, so that the device
# steps see the small counts too.
run_conformance conf-2-ipc "2 ranks, CUDA IPC" 2 RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT,NET
# The direct path (lib/cuda/direct.h): all-reduces as one kernel each, and
# the other collectives' calls whose largest buffer reaches
# RCOLL_CUDA_DIRECT_INPLACE (sends, receives and in-place all-to-alls
# through the proxy as above). At 2 ranks calls from 1 MiB read the peers'
# buffers in place and smaller all-reduces go through the regions; at 4
# ranks every call but those is in place (RCOLL_CUDA_DIRECT_INPLACE=1).
# Under MPS: processes on one GPU without it take turns, and the direct path
# turns itself off (the log says so, and the check below fails).
direct_was_on() { # tag
  if [[ ! -f $WORK/$1.rank0.log ]] || grep -q 'run as one kernel' "$WORK/$1.rank0.log"; then
    return 0
  fi
  say "conformance $1: the log does not say the direct all-reduce was on"
  grep -h 'RCOLL_CUDA_DIRECT' "$WORK/$1.rank0.log" | head -n 3 | tee -a "$SUMMARY"
  FAILED=1
}
if step conformance && ! over_budget; then
  if mps_start; then
    run_conformance conf-2-direct "2 ranks, direct all-reduce (RCOLL_CUDA_DIRECT=1, MPS)" 2 \
      RCOLL_CUDA_DIRECT=1 RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT
    direct_was_on conf-2-direct
    run_conformance conf-4-direct "4 ranks, direct in place (RCOLL_CUDA_DIRECT=1, MPS)" 4 \
      RCOLL_CUDA_DIRECT=1 RCOLL_CUDA_DIRECT_INPLACE=1 RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=INIT
    direct_was_on conf-4-direct
    mps_stop
  else
    say "conformance, direct all-reduce: FAIL (MPS would not start, and the direct path needs it)"
    FAILED=1
  fi
fi

run_conformance conf-4-ipc "4 ranks, CUDA IPC, no bounce" 4 RCOLL_CUDA_BOUNCE=0
run_conformance conf-2-staged "2 ranks, staged (RCOLL_P2P_DISABLE=1)" 2 RCOLL_P2P_DISABLE=1 \
  RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=NET
run_conformance conf-4-staged "4 ranks, staged (RCOLL_P2P_DISABLE=1), no bounce" 4 RCOLL_P2P_DISABLE=1 \
  RCOLL_CUDA_BOUNCE=0
run_conformance conf-2-kernel "2 ranks, wait kernel (RCOLL_CUDA_WAIT=kernel)" 2 RCOLL_CUDA_WAIT=kernel
# Small calls' copies and wait as one kernel (lib/cuda/bounce_kernel.h).
run_conformance conf-2-bkernel "2 ranks, bounce kernel (RCOLL_CUDA_BOUNCE_KERNEL=1)" 2 \
  RCOLL_CUDA_BOUNCE_KERNEL=1
run_conformance conf-2-legacy "2 ranks, legacy default stream" 2 GPU_CONF_STREAM=default

# ---------------------------------------------------------------- 4. NCCL + plugin
# Two ranks on the one GPU that NCCL takes for two hosts (NCCL_HOSTID), so
# all their traffic goes through lib/libnccl-net-rcoll.so; NCCL_NET=rcoll
# makes NCCL fail instead of falling back to its own network. Run before the
# benches so that the time budget does not skip it.
# torch_cuda_nccl LABEL: whether python3 has PyTorch with CUDA and NCCL (says
# LABEL is skipped when not).
torch_cuda_nccl() {
  python3 -c 'import torch, torch.distributed as d; assert torch.cuda.is_available() and d.is_nccl_available()' &&
    return 0
  say "$1: SKIPPED (no python3 with PyTorch, CUDA and NCCL here)"
  return 1
}
run_nccl_plugin() {
  step nccl || return 0
  if over_budget; then say "NCCL through the plugin: SKIPPED (time budget)"; FAILED=1; return; fi
  section "NCCL (PyTorch) through lib/libnccl-net-rcoll.so"
  torch_cuda_nccl "NCCL through the plugin" || return
  if (export LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PER_RANK_HOSTID=1 \
      NCCL_NET_PLUGIN=rcoll NCCL_NET=rcoll NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
      NCCL_SOCKET_IFNAME=lo RCOLL_NET=socket PYTHONUNBUFFERED=1
    launch 2 150 nccl python3 tests/gpu/nccl_plugin.py) &&
    grep -q 'all checks passed' "$WORK/nccl.rank0.log" && grep -q 'all checks passed' "$WORK/nccl.rank1.log" &&
    grep -qE 'Using network rcoll|Loaded net plugin rcoll' "$WORK/nccl.rank0.log"; then
    say "NCCL through the plugin: PASS"
  else
    say "NCCL through the plugin: FAIL"
    FAILED=1
  fi
  grep -hE 'NCCL version|Loaded net plugin|Using network|nccl\+rcoll all_reduce|wrong' "$WORK/nccl.rank0.log" |
    sed 's/^/  /' | head -n 20 | tee -a "$SUMMARY"
}
run_nccl_plugin

# The "rcoll" torch.distributed backend on CUDA tensors beside "nccl" (NCCL
# over its own sockets, the two ranks made two hosts as above): every
# collective's results compared, and all_reduce timed at 8 B and 16 MiB.
run_torch_backend() {
  step torch || return 0
  if over_budget; then say "torch backend on CUDA: SKIPPED (time budget)"; FAILED=1; return; fi
  section "rcoll torch.distributed backend on CUDA tensors, against nccl"
  torch_cuda_nccl "torch backend on CUDA" || return
  if (export PER_RANK_HOSTID=1 NCCL_SOCKET_IFNAME=lo PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
    launch 2 180 torchb python3 tests/gpu/torch_backend.py --device cuda --ref nccl) &&
    grep -q 'all checks passed' "$WORK/torchb.rank0.log" && grep -q 'all checks passed' "$WORK/torchb.rank1.log"; then
    say "torch backend on CUDA: PASS ($(grep -h 'checks,' "$WORK/torchb.rank0.log" | tail -n 1))"
  else
    say "torch backend on CUDA: FAIL"
    FAILED=1
  fi
  grep -hE 'all_reduce float32|WRONG|lacks' "$WORK/torchb.rank0.log" | sed 's/^/  /' | head -n 20 |
    tee -a "$SUMMARY"
}
run_torch_backend

# ---------------------------------------------------------------- 5. bench
run_bench() { # tag label nranks env...   (BENCH=reduce_scatter_perf ... for another collective)
  local tag=$1 label=$2 n=$3 bench=${BENCH:-allreduce_perf}
  shift 3
  step bench || return 0
  if over_budget; then say "$bench $label: SKIPPED (time budget)"; FAILED=1; return; fi
  section "$bench -G $label"
  if ( (($# == 0)) || export "$@"; launch "$n" 150 "$tag" "bench/$bench" -G -b 16 -e 256M -f 4 -n 20 -w 5 -c 1); then
    local busbw
    busbw=$(awk '$1 == 268435456 {print $8}' "$WORK/$tag.rank0.log" | tail -n 1)
    say "$bench -G $label: PASS; 256 MiB out-of-place busbw ${busbw:-?} GB/s" \
      "(d2d copy ${D2D_GBS:-?} GB/s)"
    grep -E '^# (Out of bounds|Avg bus)' "$WORK/$tag.rank0.log" | sed 's/^/  /' | tee -a "$SUMMARY"
  else
    say "$bench -G $label: FAIL"
    FAILED=1
  fi
}
run_bench bench-2-ipc "2 ranks (CUDA IPC)" 2 RCOLL_DEBUG=WARN
run_bench bench-4-ipc "4 ranks (CUDA IPC)" 4 RCOLL_DEBUG=WARN
run_bench bench-2-staged "2 ranks (staged, RCOLL_P2P_DISABLE=1)" 2 RCOLL_P2P_DISABLE=1
# Processes on one GPU time-slice it between their contexts, which is most of
# what the runs above measure (docs/gpu.md); under MPS they share a context.
if step bench && ! over_budget; then
  if mps_start; then
    run_bench bench-2-mps "2 ranks (CUDA IPC, under MPS)" 2 RCOLL_DEBUG=WARN
    run_bench bench-4-mps "4 ranks (CUDA IPC, under MPS)" 4 RCOLL_DEBUG=WARN
    run_bench bench-2-mps-direct "2 ranks (direct all-reduce, under MPS)" 2 RCOLL_DEBUG=WARN RCOLL_CUDA_DIRECT=1
    run_bench bench-4-mps-direct "4 ranks (direct all-reduce, under MPS)" 4 RCOLL_DEBUG=WARN RCOLL_CUDA_DIRECT=1
    # Reduce-scatters and all-gathers: through the proxy, and direct (one
    # kernel: below 1 MiB pulling through the boxes, from 1 MiB in place).
    for b in reduce_scatter_perf allgather_perf; do
      BENCH=$b run_bench "bench-2-mps-$b" "2 ranks (CUDA IPC, under MPS)" 2 RCOLL_DEBUG=WARN
      BENCH=$b run_bench "bench-2-mps-direct-$b" "2 ranks (direct, under MPS)" 2 RCOLL_DEBUG=WARN \
        RCOLL_CUDA_DIRECT=1
    done
    mps_stop
  else
    say "MPS: no nvidia-cuda-mps-control here, or it would not start; no MPS benches"
  fi
fi

section "summary"
say "total: $(elapsed) s; $([[ $FAILED -eq 0 ]] && echo 'all steps passed' || echo 'SOME STEPS FAILED')"
cat "$SUMMARY"
exit "$FAILED"
