#!/usr/bin/env bash
# The CUDA kernels (lib/cuda/kernels.cu) run on the CPU: tests/kernel_emu.cpp
# compiles that very file with g++ and a shim for the CUDA built-ins, with
# AddressSanitizer and UBSan, and checks every reduce kernel and the direct
# all-reduce (see its header for what this can and cannot show).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
if ! command -v g++ >/dev/null; then
  echo "check_kernel_emu: SKIPPED (no g++)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! g++ -std=c++17 -O1 -g -Wall -Wextra -Werror -fsanitize=address,undefined -fno-sanitize-recover=all \
    -Iinclude -Ilib tests/kernel_emu.cpp -o "$tmp/kernel_emu" -pthread 2>"$tmp/cc.log"; then
  echo "check_kernel_emu: FAILED to compile:"
  head -n 20 "$tmp/cc.log"
  exit 1
fi
if ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 timeout 300 "$tmp/kernel_emu"; then
  echo "check_kernel_emu: PASSED"
else
  echo "check_kernel_emu: FAILED"
  exit 1
fi
