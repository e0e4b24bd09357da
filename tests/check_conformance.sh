#!/usr/bin/env bash
# Conformance sweep (tests/conformance.c): every collective, type, op, root,
# count and in-place variant on 1..9 real ranks, checked element by element.
#
#   1. ranks as threads: the sweep, the all-types-and-ops pass and a random
#      mix of calls (some two to a group)
#   2. ranks as processes joining through a unique id passed in a pipe
#   3. ranks as processes joining through RCOLL_COMM_ID + rcollCommInitFromEnv;
#      and with buffers from rcollMemAlloc (-m), which peers map
#   4. small chunks and two slots (RCOLL_CHUNK_SIZE=4096 RCOLL_NSLOTS=2), so a
#      ~100k-element call is cut into many chunks that reuse every slot
#   5. rcollCommInitAll with one thread driving every rank in a group
#   6. connection storms: fresh 8-rank communicators whose first call is an
#      all-to-all, so all 56 connections are made at the same moment
#   7. sockets only (RCOLL_SHM_DISABLE=1), as on a node without shared memory
#   8. when `make check` has built the sanitized library (build-asan/), a
#      shorter sweep linked with it under ASan and UBSan
#
# RCOLL_TIMEOUT bounds every wait inside the library, and `timeout` bounds
# each run, so a hang fails the check instead of stalling `make check`.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

BIN_DIR=${TEST_BIN_DIR:-tests/bin}
PROG=$BIN_DIR/conformance
# Libraries the static library needs (UCX, verbs...), as the Makefile knows them.
LDLIBS=$(make --no-print-directory -s print-ldlibs 2>/dev/null || echo "-pthread -lm")
mkdir -p "$BIN_DIR"
# The program and the support files it uses (the case and its reference).
SRCS="tests/conformance.c tests/support/conformance_case.c tests/support/conformance_ref.c"
stale() { # program: missing, or older than a source, a support header or the library ($2)
  local f
  [[ -x $1 ]] || return 0
  for f in $SRCS tests/support/conformance_case.h tests/support/conformance_ref.h "$2"; do
    [[ $f -nt $1 ]] && return 0
  done
  return 1
}
if stale "$PROG" lib/librcoll.a; then
  [[ -f lib/librcoll.a ]] || { echo "lib/librcoll.a is missing: run make first" >&2; exit 1; }
  # shellcheck disable=SC2086 # a word list on purpose
  ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g -pthread -Iinclude -Ilib \
    $SRCS lib/librcoll.a $LDLIBS -o "$PROG" || exit 1
fi

export RCOLL_TIMEOUT=${RCOLL_TIMEOUT:-60}
failed=0

run() { # label, time limit in seconds, then the command
  local label=$1 limit=$2 out rc
  shift 2
  echo "-- conformance: $label"
  out=$(timeout -k 5 "$limit" "$@" 2>&1)
  rc=$?
  echo "$out" | grep -E '^(FAIL|conformance:)' | head -n 40
  if [[ $rc -ne 0 ]]; then
    [[ $rc -eq 124 || $rc -eq 137 ]] && echo "   (timed out after ${limit}s)"
    # A crash or sanitizer report says more than the verdict lines.
    grep -q '^conformance:' <<<"$out" || echo "$out" | grep -v 'rcoll \(WARN\|NOTE\)' | tail -n 40
    echo "   $label: FAILED (exit status $rc)"
    failed=1
  fi
}

run "threads, ranks 1,2,3,4,5,8,9" 240 "$PROG" -t 1,2,3,4,5,8,9 -s sweep,types,mix
run "processes, unique id through a pipe" 240 "$PROG" -p 1,2,3,4,5,8 -s sweep
run "processes, RCOLL_COMM_ID + rcollCommInitFromEnv" 120 "$PROG" -p 1,2,3,5 -e -s sweep \
  -c 0,1,7,65537
# Buffers from rcollMemAlloc: single-copy messages of 64 KiB and more are
# read through the receiver's mapping of the sender's pool block: those of
# all-to-all, then (with the CMA threshold on) every large send, reductions
# included.
run "processes, buffers from rcollMemAlloc (peers map them)" 120 "$PROG" -p 2,3,4,8 -s sweep,mix -m
run "processes, rcollMemAlloc buffers, every send from 64 KiB single-copy" 120 \
  env RCOLL_SHM_CMA_THRESHOLD=65536 "$PROG" -p 3,4 -s sweep -m
run "small chunks and slots (4096 B, 2 slots)" 120 \
  env RCOLL_CHUNK_SIZE=4096 RCOLL_NSLOTS=2 "$PROG" -t 2,3,4,5,8 -s sweep -c 100003,99999
# These calls are small; a short timeout keeps a stuck group from costing minutes.
run "rcollCommInitAll, one thread drives all ranks in a group" 120 \
  env RCOLL_TIMEOUT=10 "$PROG" -t 1,2,3,4 -s initall
run "connection storm, 8 ranks as threads, 60 fresh communicators" 180 \
  env RCOLL_TIMEOUT=10 "$PROG" -t 8 -s storm -r 60
run "connection storm, 8 ranks as processes, 20 fresh communicators" 180 \
  env RCOLL_TIMEOUT=10 "$PROG" -p 8 -s storm -r 20

# Within a node the steps above use shared memory; a node without it (or
# RCOLL_SHM_DISABLE=1) runs everything over the socket transport, a rank's
# messages to itself included (an all-to-all of sends and receives sends
# one): those hung once their small messages took the socket lane.
run "sockets only (RCOLL_SHM_DISABLE=1), ranks 1,2,3,5" 120 \
  env RCOLL_SHM_DISABLE=1 "$PROG" -t 1,2,3,5 -s sweep,mix

ASAN_LIB=build-asan/lib/librcoll.a
ASAN_PROG=$BIN_DIR/conformance-asan
if [[ -f $ASAN_LIB ]]; then
  if stale "$ASAN_PROG" "$ASAN_LIB"; then
    # shellcheck disable=SC2086
    ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O1 -g -pthread -Iinclude -Ilib \
      -fsanitize=address,undefined -fno-omit-frame-pointer \
      $SRCS "$ASAN_LIB" $LDLIBS -o "$ASAN_PROG" || exit 1
  fi
  export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  run "ASan+UBSan, threads, ranks 1,2,3,4,5" 240 "$ASAN_PROG" -t 1,2,3,4,5 -c 0,1,7,100003
  run "ASan+UBSan, small chunks, processes" 120 \
    env RCOLL_CHUNK_SIZE=4096 RCOLL_NSLOTS=2 "$ASAN_PROG" -p 3,4 -s sweep -c 0,1,7,20001
else
  echo "-- conformance: $ASAN_LIB not built; skipping the sanitizer sweep"
fi

exit $failed
