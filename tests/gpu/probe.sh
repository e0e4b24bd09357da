#!/usr/bin/env bash
# When tests/gpu/run.sh's conformance hangs: which factor makes it hang, and
# where every thread sits when it does. Short (2 ranks, a 20 s watchdog per
# case, rcoll's own timeouts at 10 s), so that it fits in what is left of a
# device lease. Run from the repository root:
#
#   tests/gpu/probe.sh [VARIANT...]   output in $OUT (probe.log, probe.summary.txt)
#
# A variant is NAME:ENV,ENV,... run as gpu_conformance with those settings
# (gpu_conformance.c lists its GPU_CONF_* knobs). Without arguments, the ones
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
  if ( ((${#envs[@]} == 0)) || export "${envs[@]}"; launch 2 60 "probe-$name" build/gpu/gpu_conformance); then
    say "probe $name: PASS ($(grep -h 'passed' "$WORK/probe-$name.rank0.log" | tail -n 1)) [$settings]"
  else
    say "probe $name: FAIL $(grep -h 'HUNG\|FAIL' "$WORK/probe-$name".rank*.log | head -n 2 | tr '\n' ' ') [$settings]"
  fi
done
section "summary"
cat "$SUMMARY"
