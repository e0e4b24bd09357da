#!/usr/bin/env bash
# One device call that does what a short GPU lease is for, newest code first,
# within GPU_CALL_BUDGET seconds (540: the device tool's calls end at 600):
#   1. run.sh's copy bandwidth, reduce kernel and conformance steps;
#   2. compare_nccl.sh (rcoll beside NCCL, issue 16's tables);
#   3. run.sh's NCCL plugin, torch backend and benches, with what is left.
# One build serves all three (GPU_BUILD). Each run is bounded (GPU_RUN_TIMEOUT,
# GPU_CONF_TIMEOUT, RCOLL_TIMEOUT), so that a hang costs one run, not the
# call. The device tool brings back at most 8 files: the summaries, the
# results and one tarball of the logs land in $OUT, nothing else.
#
#   tests/gpu/call.sh        (ROUNDS, SIZES, BOUNCE_SIZES: compare_nccl.sh's)
#
# Until the direct all-reduce has passed on a GPU (its fault of 2026-12-04
# is fixed, not yet run: docs/gpu.md), put tests/gpu/sanitize.sh before it
# in the same call, sharing the build:
#   export GPU_BUILD=/tmp/rcoll-gpu-build; GPU_RUN_BUDGET=120 tests/gpu/sanitize.sh;
#   GPU_CALL_BUDGET=400 tests/gpu/call.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
FINAL=${OUT:-/tmp/rcoll-gpu-out}
LOGS=$(mktemp -d /tmp/rcoll-gpu-call.XXXXXX)
export OUT=$LOGS GPU_BUILD=${GPU_BUILD:-$LOGS/build-tree}
export RCOLL_TIMEOUT=${RCOLL_TIMEOUT:-20} GPU_RUN_TIMEOUT=${GPU_RUN_TIMEOUT:-45}
export GPU_CONF_TIMEOUT=${GPU_CONF_TIMEOUT:-60}
CALL_BUDGET=${GPU_CALL_BUDGET:-540}
START=$(date +%s)
left() { echo $((CALL_BUDGET - ($(date +%s) - START))); }

# Each script stops starting runs at its budget; the last run may take its
# timeout beyond that, which the shares below leave room for.
GPU_STEPS="copy conformance" GPU_RUN_BUDGET=$(($(left) * 30 / 100)) bash tests/gpu/run.sh
# The benches of step 3 print their busbw beside the copy's of step 1.
D2D_GBS=$(sed -n 's/^d2d cudaMemcpy 256 MiB: \([0-9.]*\) GB\/s.*/\1/p' "$LOGS/summary.txt")
export D2D_GBS
GPU_RUN_BUDGET=$(($(left) * 75 / 100)) bash tests/gpu/compare_nccl.sh
if (($(left) > 90)); then
  GPU_LOG_NAME=gpu_run_rest GPU_STEPS="nccl torch bench" GPU_RUN_BUDGET=$(($(left) - 60)) bash tests/gpu/run.sh
fi

mkdir -p "$FINAL"
cat "$LOGS"/summary.txt "$LOGS"/compare_nccl.summary.txt "$LOGS"/gpu_run_rest.summary.txt >"$FINAL/summary.txt" 2>/dev/null
cp "$LOGS/compare_nccl.results" "$FINAL/" 2>/dev/null
tar -czf "$FINAL/logs.tgz" -C "$LOGS" --exclude=./build-tree . 2>/dev/null
echo "call: $(($(date +%s) - START)) s; summary in $FINAL/summary.txt"
cat "$FINAL/summary.txt"
