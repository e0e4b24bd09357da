#!/usr/bin/env bash
# A rank that dies, hangs or never joins must not hang the others: each
# survivor gets an error within RCOLL_TIMEOUT that names a rank (the dead
# rank's neighbour names the dead rank), and rcollCommAbort returns. See
# tests/rank_death.c for what each case checks. `timeout 60` turns a hang
# into a failure.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

BIN_DIR=${TEST_BIN_DIR:-tests/bin}
PROG=$BIN_DIR/rank_death
mkdir -p "$BIN_DIR"
if [[ ! -x $PROG || tests/rank_death.c -nt $PROG || lib/librcoll.a -nt $PROG ]]; then
  [[ -f lib/librcoll.a ]] || { echo "lib/librcoll.a is missing: run make first" >&2; exit 1; }
  ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g -pthread -Iinclude -Ilib \
    tests/rank_death.c lib/librcoll.a $(make --no-print-directory -s print-ldlibs 2>/dev/null ||
                                         echo "-pthread -lm") -o "$PROG" || exit 1
fi

export RCOLL_TIMEOUT=10
failed=0
for args in "-n 4 -d 2 -m exit" "-n 3 -d 1 -m kill" "-n 4 -d 1 -m stop" \
            "-n 4 -d 3 -m nojoin" "-n 3 -d 0 -m nojoin" "-n 3 -d 1 -m kill -s" \
            "-n 4 -d 2 -m exit -s"; do
  echo "-- rank_death $args"
  # The library's own warnings go to stderr; the verdict lines to stdout.
  timeout -k 5 60 "$PROG" $args 2>/dev/null
  rc=$?
  if [[ $rc -ne 0 ]]; then
    [[ $rc -eq 124 || $rc -eq 137 ]] && echo "   timed out after 60 s: a rank hung"
    echo "   rank_death $args: FAILED (exit status $rc)"
    failed=1
  fi
done
exit $failed
