#!/usr/bin/env bash
# The conformance program built with ThreadSanitizer (make tsan-build), for
# `make check-tsan` (scripts/run-tsan.sh, which sets TSAN_OPTIONS): ranks as
# threads of one process, where TSan sees every rank's accesses, over each
# transport two threads can share, plus a group driven by one thread and a
# connection storm. Counts are smaller than check_conformance.sh's: TSan
# makes each access several times slower, and races need no large buffers.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
PROG=${TEST_BIN_DIR:-build-tsan/tests/bin}/conformance
[[ -x $PROG ]] || { echo "$PROG is missing: run make tsan-build"; exit 1; }
export RCOLL_TIMEOUT=${RCOLL_TIMEOUT:-120}
failed=0

run() { # label, time limit in seconds, then the command
  local label=$1 limit=$2 out rc
  shift 2
  echo "-- tsan conformance: $label"
  out=$(timeout -k 5 "$limit" "$@" 2>&1)
  rc=$?
  echo "$out" | grep -E '^(FAIL|conformance:)' | head -n 20
  if [[ $rc -ne 0 ]]; then
    [[ $rc -eq 124 || $rc -eq 137 ]] && echo "   (timed out after ${limit}s)"
    # A race report: its first 60 lines name both accesses and the threads.
    echo "$out" | grep -v 'rcoll \(WARN\|NOTE\)' | grep -A 60 -m 1 'WARNING: ThreadSanitizer' |
      head -n 60
    echo "   $label: FAILED (exit status $rc)"
    failed=1
  fi
}

run "threads, ranks 1,2,3,4 (default transports)" 600 "$PROG" -t 1,2,3,4 -s sweep,types -c 0,1,7,4099
for net in socket shm ucx; do
  grep -q "^RCOLL_HAVE_UCX *= *1" config.mk 2>/dev/null || [[ $net != ucx ]] || continue
  run "threads, ranks 2,3 over $net" 600 env RCOLL_NET=$net "$PROG" -t 2,3 -s sweep -c 0,7,4099
done
run "small chunks and slots" 300 env RCOLL_CHUNK_SIZE=4096 RCOLL_NSLOTS=2 "$PROG" -t 3 -s sweep -c 20001
run "one thread drives every rank in a group" 300 "$PROG" -t 1,2,3 -s initall
run "connection storm, 4 ranks as threads" 300 "$PROG" -t 4 -s storm -r 5
exit $failed
