#!/usr/bin/env bash
# When tests/gpu/run.sh's conformance hangs: which factor makes it hang, and
# where every thread sits when it does. Short (2 ranks, a 20 s watchdog per
# case, rcoll's own timeouts at 10 s), so that it fits in what is left of a
# device lease. Run from the repository root:
#
#   tests/gpu/probe.sh [VARIANT...]   output in $OUT (probe.log, probe.summary.txt)
#
# A variant is NAME:ENV,ENV,... run as gpu_conformance with those settings
# (gpu_conformance.c lists its GPU_CONF_* knobs; PROBE_RANKS=n, n ranks). Without arguments, the ones
# that separate what the benches (which pass) do from what the conformance
# test (which hung) does: the stream, pageable or pinned host memory, the
# int8 sweep first or float32 only, and eager kernel loading.
GPU_LOG_NAME=probe
GPU_RUN_BUDGET=${GPU_RUN_BUDGET:-240}
# shellcheck source=tests/gpu/lib.sh
source "$(dirname "$0")/lib.sh"

if (($# == 0)); then
  set -- \
    "baseline:" \
    "like-bench:GPU_CONF_STREAM=default,GPU_CONF_HOST=pinned,GPU_CONF_CASES=collectives" \
    "pinned:GPU_CONF_HOST=pinned" \
    "default-stream:GPU_CONF_STREAM=default" \
    "float-first:GPU_CONF_CASES=collectives" \
    "eager:CUDA_MODULE_LOADING=EAGER" \
    "staged:RCOLL_P2P_DISABLE=1"
fi
command -v gdb >/dev/null && echo "gdb: $(command -v gdb)" || echo "gdb: none (backtrace() frames instead)"
export RCOLL_TIMEOUT=10 GPU_CONF_LIMIT=20
for v in "$@"; do
  name=${v%%:*}
  settings=${v#*:}
  if over_budget; then say "probe $name: SKIPPED (time budget)"; continue; fi
  section "probe $name ($settings)"
  IFS=, read -r -a envs <<<"$settings"
  # PROBE_RANKS=n among a variant's settings: that many ranks (2).
  if ( ((${#envs[@]} == 0)) || export "${envs[@]}"; launch "${PROBE_RANKS:-2}" 60 "probe-$name" build/gpu/gpu_conformance); then
    say "probe $name: PASS ($(grep -h 'passed' "$WORK/probe-$name.rank0.log" | tail -n 1)) [$settings]"
  else
    say "probe $name: FAIL $(grep -h 'HUNG\|FAIL' "$WORK/probe-$name".rank*.log | head -n 2 | tr '\n' ' ') [$settings]"
  fi
done
# PROBE_BENCH=1: allreduce_perf -G, 2 ranks, as run.sh's step 5 but short,
# then again under MPS when the machine has it. Ranks that are processes on
# one GPU time-slice it between their contexts, and a stream held by
# cuStreamWaitValue32 keeps its context busy for its slice; under MPS they
# share one context. The difference is what the one-GPU benches cost.
# The proxy's time accounts (lib/cuda/cuda_comm.c) come with it: units, time
# running them, in stream syncs, waiting for the streams.
bench_quick() { # tag
  RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=P2P launch 2 90 "$1" bench/allreduce_perf -G -b 8 -e 64M -f 8 \
    -n 10 -w 3 -c 1 >/dev/null
  local rc=$?
  awk '$1 ~ /^[0-9]+$/ {printf "  %s %10s B %10s us %6s GB/s\n", tag, $1, $6, $8}' tag="$1" \
    "$WORK/$1.rank0.log" | tee -a "$SUMMARY"
  grep -h 'CUDA proxy:' "$WORK/$1".rank*.log | sed 's/.*rcoll INFO /  /' | tee -a "$SUMMARY"
  return $rc
}
if [[ ${PROBE_BENCH:-0} == 1 ]] && ! over_budget; then
  section "allreduce_perf -G 2 ranks, short"
  bench_quick bench-plain || say "bench-plain: FAIL"
  if mps_start; then
    section "allreduce_perf -G 2 ranks, short, under MPS"
    bench_quick bench-mps || { say "bench-mps: FAIL"; tail -n 20 "$CUDA_MPS_LOG_DIRECTORY"/*.log; }
    mps_stop
  else
    say "MPS: no nvidia-cuda-mps-control here, or it would not start"
  fi
fi
section "summary"
cat "$SUMMARY"
