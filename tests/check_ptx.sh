#!/usr/bin/env bash
# The device code (lib/cuda/kernels.cu) as nvcc compiles it: no generic
# load or store. Our kernels only touch global memory (device buffers, IPC
# mappings, mapped host words), their parameter, their stack and shared
# memory, and nvcc names each of those spaces in the PTX when it knows it.
# A generic ld or st is one it lost track of, and the one we met was wrong:
# nvcc 13.0 turned a read of the direct all-reduce's __grid_constant__
# parameter into an ld.volatile from the parameter's address with no
# cvta.param, and on the H200 every direct all-reduce failed at its first
# wait with "an illegal memory access". kernel_emu (check_kernel_emu.sh)
# cannot see that: on the CPU every address is generic.
#
# Compiled for each virtual architecture the library's fatbin carries
# (compute_80 and compute_90, see NVCC_GENCODE in the Makefile); no GPU needed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
NVCC=${NVCC:-$(sed -n 's/^NVCC *= *//p' config.mk 2>/dev/null)}
[[ -n $NVCC ]] || NVCC=$(command -v nvcc)
if [[ -z $NVCC || ! -x $NVCC ]]; then
  echo "check_ptx: SKIPPED (no nvcc)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
for arch in compute_80 compute_90; do
  ptx=$tmp/kernels-$arch.ptx
  if ! "$NVCC" -O3 -std=c++17 -arch="$arch" -ptx -Iinclude -Ilib -o "$ptx" lib/cuda/kernels.cu 2>"$tmp/nvcc.log"; then
    echo "check_ptx: FAILED: nvcc -arch=$arch -ptx lib/cuda/kernels.cu:"
    head -n 20 "$tmp/nvcc.log"
    exit 1
  fi
  # Every ld/ldu/st/atom/red (predicated or not) names its state space right
  # after the opcode or after .volatile/.relaxed/.acquire/.release and a
  # scope; print those that do not, with the kernel they are in.
  awk -v arch="$arch" '
    /^\.(visible )?\.entry / { k = $NF; sub(/\(.*/, "", k) }
    /^[ \t]+(@!?%p[0-9]+[ \t]+)?(ld|ldu|st|atom|red)\./ {
      op = $1 ~ /^@/ ? $2 : $1
      if (op !~ /\.(global|param|local|shared|const)(\.|$)/) {
        n++
        if (n <= 10) printf "  %s %s: %s\n", arch, k, $0
      }
    }
    END { if (n > 0) { printf "  %s: %d generic loads or stores\n", arch, n; exit 1 } }
  ' "$ptx" || bad=1
  entries=$(grep -c '\.entry ' "$ptx")
  echo "check_ptx: $arch: $entries kernels read"
  if ((entries < 100)); then # 48 reduce, 12 avg, 48 direct, the wait kernel
    echo "check_ptx: FAILED: only $entries kernels in the $arch PTX (the awk above read nothing?)"
    bad=1
  fi
done
if ((bad)); then
  echo "check_ptx: FAILED (a generic load or store in the device code, above)"
  exit 1
fi
echo "check_ptx: PASSED"
