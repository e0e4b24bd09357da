#!/usr/bin/env bash
# The torch.distributed backend on the torch that users have (2.x), beside
# Debian's 1.13 that tests/check_python.sh uses: a virtual environment with
# torch $TORCH2_VERSION from PyPI (the CPU path of its CUDA build; the wheel and
# its CUDA libraries take about 5 GB under build/), then
#   - the whole of tests/check_python.sh with that Python (every collective
#     against gloo, PREMUL_SUM, a rank killed mid-training, DDP losses);
#   - torch's own torchrun starting examples/python/ddp_train.py on 2 ranks
#     (Debian's torchrun fails on Python 3.11, so check_python.sh imitates it).
# torch 2.15 renamed the methods c10d calls on a process group
# (all_gather_single, reduce_scatter_single, ...): this is what caught it.
# Exit 77 (skip) when PyPI cannot be reached or no Python can make a venv.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
TORCH2_VERSION=${TORCH2_VERSION:-2.15.0}
VENV=${TORCH2_VENV:-build/venv-torch$TORCH2_VERSION}
PY=$VENV/bin/python
if [[ ! -e lib/librcoll.so ]]; then
  echo "check_torch2: FAIL: lib/librcoll.so is not built (run make)"
  exit 1
fi
if ! "$PY" -c 'import torch.distributed, numpy' 2>/dev/null; then
  rm -rf "$VENV"
  if ! python3 -m venv "$VENV"; then
    echo "check_torch2: SKIP: python3 -m venv failed"
    exit 77
  fi
  echo "-- installing torch==$TORCH2_VERSION and numpy from PyPI into $VENV"
  if ! timeout 900 "$VENV/bin/pip" install -q --disable-pip-version-check \
      "torch==$TORCH2_VERSION" numpy; then
    rm -rf "$VENV"
    echo "check_torch2: SKIP: pip could not install torch==$TORCH2_VERSION (no PyPI here?)"
    exit 77
  fi
fi
echo "-- $("$PY" -c 'import torch; print("torch", torch.__version__)')"
fails=0
if ! RCOLL_PYTHON=$PY tests/check_python.sh; then
  echo "   FAILED: tests/check_python.sh with torch $TORCH2_VERSION"
  fails=$((fails + 1))
fi

echo "-- torchrun --nproc-per-node 2 examples/python/ddp_train.py --backend rcoll"
out=$(PYTHONPATH=$PWD/python RCOLL_TIMEOUT=60 timeout 180 "$VENV/bin/torchrun" \
  --nproc-per-node 2 --master-port $((29400 + RANDOM % 100)) \
  examples/python/ddp_train.py --backend rcoll --steps 3 2>&1)
rc=$?
steps=$(grep -c '^step' <<<"$out")
if [[ $rc -eq 0 && $steps -eq 3 ]]; then
  grep '^step' <<<"$out" | tail -n 1
  echo "   ok: torchrun"
else
  echo "$out" | tail -n 20
  echo "   FAILED: torchrun (exit $rc, $steps of 3 loss lines)"
  fails=$((fails + 1))
fi

if ((fails)); then
  echo "check_torch2: $fails step(s) failed"
  exit 1
fi
echo "check_torch2: all passed"
