#!/usr/bin/env bash
# Many communicator lifetimes leave nothing behind (tests/lifetimes.c): init,
# a small all-reduce and destroy, LIFETIMES_CYCLES times (default 200; the
# issue's figure is 1000, which takes longer on two cores), with ranks as
# threads and as processes, over socket, shm and (when built) ucx. File
# descriptors, threads, shm mappings and segments must come back to the
# baseline taken after a warm-up; VmRSS may grow by a fixed slack only.
# (What a rank killed with SIGKILL leaves in /dev/shm is tests/test_shm_sweep.c.)
#
# Each run gets a shared-memory directory of its own (RCOLL_SHM_DIR), so the
# segments other programs make at the same time are not counted.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

BIN_DIR=${TEST_BIN_DIR:-tests/bin}
for p in lifetimes; do
  if [[ ! -x $BIN_DIR/$p ]]; then
    make --no-print-directory -s "$BIN_DIR/$p" >/dev/null || { echo "cannot build $BIN_DIR/$p"; exit 1; }
  fi
done
CYCLES=${LIFETIMES_CYCLES:-200}
NETS="socket shm"
grep -q '^RCOLL_HAVE_UCX *= *1' config.mk 2>/dev/null && NETS="$NETS ucx"

SHM_DIR=$(mktemp -d /dev/shm/rcoll-lifetimes.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$SHM_DIR"' EXIT
export RCOLL_SHM_DIR=$SHM_DIR RCOLL_TIMEOUT=${RCOLL_TIMEOUT:-60}
failed=0

run() { # label, then the command
  local label=$1 rc t0=$SECONDS
  shift
  echo "-- lifetimes: $label"
  # Generous: 1000 cycles of ucx on a loaded machine take minutes.
  timeout -k 5 $((300 + CYCLES)) "$@" 2>&1 | grep -v 'rcoll \(WARN\|NOTE\|INFO\)'
  rc=${PIPESTATUS[0]}
  echo "   ($((SECONDS - t0)) s)"
  if [[ $rc -ne 0 ]]; then
    [[ $rc -eq 124 || $rc -eq 137 ]] && echo "   (timed out)"
    echo "   $label: FAILED (exit status $rc)"
    failed=1
  fi
}

# LIFETIMES_MODES=threads: threads only (make check-tsan runs it so).
MODES=${LIFETIMES_MODES:-threads procs}
for net in $NETS; do
  [[ $MODES == *threads* ]] &&
    run "$CYCLES x rcollCommInitAll(2) on threads over $net" env RCOLL_NET=$net "$BIN_DIR/lifetimes" -m threads -c "$CYCLES"
  [[ $MODES == *procs* ]] &&
    run "$CYCLES x rcollCommInitRank on 2 processes over $net" env RCOLL_NET=$net "$BIN_DIR/lifetimes" -m procs -c "$CYCLES"
done
exit $failed
