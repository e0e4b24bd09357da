#!/usr/bin/env bash
# Lab exercise 06 (docs/lab/06-pipe-transport): the student's pipe
# transport, one file defining lab_pipe_ops, checked by
#   1. tests/lab/grade_pipe.c, which drives the ops as the core does;
#   2. the conformance program (tests/conformance.c) over it with
#      RCOLL_NET=pipe at 2, 3 and 4 ranks (threads of one process: pipes join
#      nothing else). tests/lab/lab_pipe_register.c adds the transport to
#      the table (rcoll_net_add_for_tests); lib/net.c is not touched.
set -uo pipefail
source tests/lab/lab_lib.sh
EXDIR=$1
SRC=$EXDIR/pipe_transport.c
W=$LAB_WORK

[[ -f $SRC ]] || { lab_fail "$SRC is missing"; lab_done 06; }
if ! $LAB_CC $LAB_LIB_CFLAGS -c "$SRC" -o "$W/pipe_transport.o" 2>"$W/cc.log"; then
  lab_fail "$SRC does not compile:"; lab_show < "$W/cc.log"
  lab_done 06
fi
lab_pass "$SRC compiles with the library's flags (-Wall -Wextra -Werror)"
if ! lab_archive "$W/librcoll-lab.a" "$W/pipe_transport.o" >"$W/ld.log" 2>&1 ||
   ! lab_link "$W/grade_pipe" "$W/librcoll-lab.a" tests/lab/grade_pipe.c >>"$W/ld.log" 2>&1 ||
   ! lab_link "$W/conformance" "$W/librcoll-lab.a" "$BUILD_DIR/tests/conformance.o" \
       tests/lab/lab_pipe_register.c >>"$W/ld.log" 2>&1; then
  lab_fail "the programs do not link with your transport (does it define lab_pipe_ops?):"
  lab_show < "$W/ld.log"
  lab_done 06
fi

lab_run 120 "$W/grade_pipe" > "$W/grade.log" 2>&1
rc=$?
cat "$W/grade.log"
[[ $rc -eq 124 ]] && lab_fail "the transport checks ran past 120 s (something blocks)"
grep -q '^  PASS' "$W/grade.log" && LAB_PASSED=$((LAB_PASSED + $(grep -c '^  PASS' "$W/grade.log")))
if [[ $rc -ne 0 ]]; then
  LAB_FAILED=$((LAB_FAILED + 1))
  lab_fail "conformance not run: the transport must pass the checks above first"
  lab_done 06
fi

RCOLL_NET=pipe lab_run 300 "$W/conformance" -t 2,3,4 -s sweep -c 0,1,7,65537 > "$W/conf.log" 2>&1
rc=$?
grep -E '^(FAIL|conformance:)' "$W/conf.log" | head -n 20 | lab_show
if [[ $rc -eq 0 ]]; then
  lab_pass "conformance over RCOLL_NET=pipe, 2, 3 and 4 ranks (threads): every collective"
else
  tail -n 8 "$W/conf.log" | lab_show
  lab_fail "conformance over RCOLL_NET=pipe (exit status $rc$([[ $rc -eq 124 ]] && echo ': it ran past 300 s'))"
fi
RCOLL_NET=pipe RCOLL_DEBUG=INFO lab_run 60 "$W/conformance" -t 2 -s sweep -c 1 > "$W/info.log" 2>&1
if grep -q 'transports pipe,' "$W/info.log"; then
  lab_pass "the communicators really used the pipe transport (RCOLL_DEBUG=INFO: \"transports pipe\")"
else
  lab_fail "with RCOLL_NET=pipe the library's log does not show communicators over the pipe transport"
fi
lab_done 06
