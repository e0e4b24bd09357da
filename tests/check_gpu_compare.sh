#!/usr/bin/env bash
# What of tests/gpu/compare_nccl.sh can be checked without a GPU:
#   - tests/gpu/nccl_perf.c (NCCL's side of the comparison) compiles with
#     warnings as errors where the CUDA headers are, and says "skipped"
#     (exit 77) on a machine without a GPU instead of failing;
#   - the tables and verdicts, from a results file made up here whose right
#     answers are known: a size where rcoll wins, one where it loses, one
#     with no NCCL result, and the one-GPU targets (25 % of d2d, 20 us,
#     4 ranks' busbw within 1.5x of 2's), and the 8 B table with the
#     bounce, without (RCOLL_CUDA_BOUNCE=0) and with its kernel, and the
#     proxy by IPC slot and by slots per ring.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
failed=0
fail() { echo "   FAILED: $*"; failed=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [[ -f $CUDA_HOME/include/cuda_runtime_api.h ]]; then
  if gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I"$CUDA_HOME/include" tests/gpu/nccl_perf.c \
      -o "$tmp/nccl_perf" -L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64" -lcudart -ldl 2>"$tmp/cc.log"; then
    if ! nvidia-smi -L >/dev/null 2>&1; then
      "$tmp/nccl_perf" -b 8 -e 8 >/dev/null 2>&1
      rc=$?
      if [[ $rc -eq 77 ]]; then echo "-- nccl_perf builds, and skips (77) without a GPU"
      else fail "nccl_perf exit $rc without a GPU, not 77"; fi
    else
      echo "-- nccl_perf builds (a GPU is here: tests/gpu/compare_nccl.sh runs it)"
    fi
  else
    fail "tests/gpu/nccl_perf.c does not compile: $(head -n 5 "$tmp/cc.log")"
  fi
else
  echo "-- no CUDA headers in $CUDA_HOME: nccl_perf not compiled"
fi

# Three rounds. two-hosts: at 8 B rcoll is faster (medians 40 vs 50 us); at
# 16 MiB NCCL is (busbw 2.0 vs 3.0); at 128 MiB NCCL has no result. one-gpu:
# d2d medians to 2000; 2 ranks reach 600 GB/s at 128 MiB (30 %) and 15 us at
# 8 B; 4 ranks take 2x as long as 2 at 128 MiB, busbw 450 (within 1.5x of
# 600). one-gpu-direct: 25 us at 8 B and 435 GB/s (21.8 %) at 128 MiB, 4
# ranks 250 GB/s (below 435 / 1.5); through the regions 335 GB/s (16.8 %);
# with 128 blocks 671 GB/s (33.5 %), 4 ranks 503 (within 1.5x).
cat >"$tmp/results" <<'EOF'
rounds 3
mps yes
d2d 1990
d2d 2000
d2d 2100
two-hosts rcoll 2 8 39 0.00
two-hosts rcoll 2 8 40 0.00
two-hosts rcoll 2 8 90 0.00
two-hosts nccl 2 8 50 0.00
two-hosts nccl 2 8 49 0.00
two-hosts nccl 2 8 55 0.00
two-hosts rcoll 2 16777216 8000 2.0
two-hosts rcoll 2 16777216 8100 2.1
two-hosts rcoll 2 16777216 8200 1.9
two-hosts nccl 2 16777216 5000 3.0
two-hosts nccl 2 16777216 5100 3.1
two-hosts nccl 2 16777216 4900 2.9
two-hosts rcoll 2 134217728 60000 2.2
one-gpu rcoll 2 8 15 0.00
one-gpu rcoll 2 8 16 0.00
one-gpu rcoll 2 8 14 0.00
one-gpu rcoll 2 134217728 220 600
one-gpu rcoll 2 134217728 221 600
one-gpu rcoll 2 134217728 219 610
one-gpu rcoll 4 134217728 440 450
one-gpu rcoll 4 134217728 441 450
one-gpu rcoll 4 134217728 439 450
one-gpu-direct rcoll 2 8 25 0.00
one-gpu-direct rcoll 2 8 30 0.00
one-gpu-direct rcoll 2 8 24 0.00
one-gpu-direct rcoll 2 134217728 300 440
one-gpu-direct rcoll 2 134217728 310 430
one-gpu-direct rcoll 2 134217728 305 435
one-gpu-direct rcoll 4 134217728 800 250
one-gpu-direct-regions rcoll 2 134217728 400 335
one-gpu-direct-blocks rcoll 2 134217728 200 671
one-gpu-direct-blocks rcoll 4 134217728 400 503
two-hosts-nobounce rcoll 2 8 70 0.00
two-hosts-nobounce rcoll 2 8 72 0.00
two-hosts-nobounce rcoll 2 8 71 0.00
one-gpu-nobounce rcoll 2 8 60 0.00
two-hosts rcoll 2 65536 120 0.55
two-hosts nccl 2 65536 110 0.60
two-hosts-nobounce rcoll 2 65536 100 0.66
one-gpu rcoll 2 65536 30 2.2
one-gpu-nobounce rcoll 2 65536 45 1.5
two-hosts-bkernel rcoll 2 8 30 0.00
one-gpu-bkernel rcoll 2 8 11 0.00
two-hosts-host rcoll 2 8 21 0.00
two-hosts-host rcoll 2 8 19 0.00
two-hosts-host rcoll 2 8 20 0.00
one-gpu-chunk-16777216 rcoll 2 134217728 180 746
one-gpu-chunk-16777216 rcoll 2 134217728 170 790
one-gpu-chunk-16777216 rcoll 2 134217728 175 767
one-gpu-slots-8 rcoll 2 134217728 150 895
one-gpu-slots-8 rcoll 4 134217728 400 503
one-gpu-slots-16 rcoll 4 134217728 380 530
EOF
out=$(SIZES="8 16777216 134217728" bash tests/gpu/compare_nccl.sh --table "$tmp/results")
echo "$out" | sed 's/^/   /'
row() { awk -v s="$2" -v t="$1" '/^## / { inside = index($0, t) > 0 } inside && $1 == s' <<<"$out"; }
expect() { # table size pattern what
  row "$1" "$2" | grep -qE "$3" || fail "$4: $(row "$1" "$2")"
}
expect "two hosts" 8 '\| +40 +0.00 \| +50 +0.00 \| +1.25 \| met \(rcoll.s time <= NCCL.s\)' \
  "8 B: medians 40/50 us, ratio 1.25, met"
expect "two hosts" 16777216 '\| +0.62 \| MISSED \(rcoll.s busbw >= NCCL.s\)' "16 MiB: ratio 0.62, missed"
expect "two hosts" 134217728 '60000 +2.2 \| +- +- \| +- \| -$' "128 MiB: no NCCL result, no verdict"
expect "through the proxy" 8 '\| +15 .*met \(2 ranks <= 20 us\)' "one GPU 8 B: 15 us, met"
expect "RCOLL_CUDA_DIRECT" 8 '\| +25 .*MISSED \(2 ranks <= 20 us\)' "one GPU direct 8 B: 25 us, missed"
expect "RCOLL_CUDA_DIRECT" 134217728 '\| +305 +435 +21.8 \| +800 +250 \| MISSED \(2 ranks >= 25% of d2d\); MISSED \(4 ranks. busbw within 1.5x of 2.s\)$' \
  "one GPU direct 128 MiB: 21.8 % of d2d missed, 4 ranks' busbw 250 missed"
expect "through the proxy" 134217728 '600 +30.0 .*met \(2 ranks >= 25% of d2d\); met \(4 ranks. busbw within 1.5x of 2.s\)' \
  "one GPU 128 MiB: 30 % of d2d met, 4 ranks' busbw 450 of 600 met"
expect "BLOCKS=128" 134217728 '\| +200 +671 +33.5 \| +400 +503 \| met \(2 ranks >= 25% of d2d\); met \(4 ranks. busbw within 1.5x of 2.s\)$' \
  "one GPU direct with 128 blocks, 128 MiB: 33.5 % of d2d met, 4 ranks' busbw 503 of 671 met"
expect "INPLACE=0" 134217728 '\| +400 +335 +16.8 \| +- +- \| MISSED \(2 ranks >= 25% of d2d\)$' \
  "one GPU direct through the regions, 128 MiB: 16.8 % of d2d, missed"
bounce_row() { awk -v s="$1" '/^## 2 ranks: small calls/ { inside = 1 } inside && $1 == s' <<<"$out"; }
bounce_row 8 | grep -qE '^ +8 \| +40 +71 +30 +20 +50 \| +15 +60 +11$' ||
  fail "bounce table, 8 B: medians 40 (bounce), 71 (=0), 30 (kernel), 20 (host buffers), 50 (NCCL); one GPU 15, 60, 11: $(bounce_row 8)"
bounce_row 65536 | grep -qE '^ +65536 \| +120 +100 +- +- +110 \| +30 +45 +-$' ||
  fail "bounce table, 64 KiB: 120, 100, no kernel or host result, 110; one GPU 30, 45, no kernel: $(bounce_row 65536)"
chunk_row() { awk -v s="$1" '/by IPC slot/ { inside = 1 } inside && $1 == s' <<<"$out"; }
chunk_row 4194304 | grep -qE '^ +4194304 \| +220 +600 +30.0$' ||
  fail "slot table, 4 MiB (one-gpu's rows): 220 us, 600 GB/s, 30 %: $(chunk_row 4194304)"
chunk_row 16777216 | grep -qE '^ +16777216 \| +175 +767 +38.4$' ||
  fail "slot table, 16 MiB: medians 175 us, 767 GB/s, 38.4 %: $(chunk_row 16777216)"
chunk_row 67108864 | grep -qE '^ +67108864 \| +- +- +-$' || fail "slot table, 64 MiB: no result: $(chunk_row 67108864)"
slots_row() { awk -v s="$1" '/by slots per IPC ring/ { inside = 1 } inside && $1 == s' <<<"$out"; }
slots_row 4 | grep -qE '^ +4 \| +220 +30.0 \| +440$' ||
  fail "slots table, 4 (one-gpu's rows): 220 us, 30 %, 4 ranks 440 us: $(slots_row 4)"
slots_row 8 | grep -qE '^ +8 \| +150 +44.8 \| +400$' || fail "slots table, 8: 150 us, 44.8 %, 400 us: $(slots_row 8)"
slots_row 16 | grep -qE '^ +16 \| +- +- \| +380$' || fail "slots table, 16: no 2-rank result, 380 us: $(slots_row 16)"
grep -q 'd2d copy 2000 GB/s' <<<"$out" || fail "the d2d median (2000) is not in the one-GPU title"
grep -q 'under MPS' <<<"$out" || fail "the one-GPU title does not say MPS"

if ((failed)); then echo "check_gpu_compare: FAILED"; exit 1; fi
echo "check_gpu_compare: PASSED"
