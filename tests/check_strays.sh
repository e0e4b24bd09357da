#!/usr/bin/env bash
# Strays must not slow a job down. Connections that are not ranks of the job
# (idle ones, ones sending garbage or half a hello, and a flood of 200 or 300,
# past the 256 a listener keeps pending) crowd every listener a rank has: the
# bootstrap root, the bootstrap ring listener, and the socket and ucx
# transports' listeners. Init and an all-reduce must
# still complete correctly and promptly (well below the old 5 s per stray),
# and one warning must name the strays' addresses. Then the secret of
# environment launches: RCOLL_COMM_SECRET, RCOLL_COMM_SECRET_FILE, a wrong
# secret refused, bad settings named, and the warning without one given once.
# tests/strays.c is the rank that pauses between init and its first
# collective, and the client that opens the strays.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

BIN_DIR=${TEST_BIN_DIR:-tests/bin}
BENCH=${BENCH_DIR:-bench}
PROG=$BIN_DIR/strays
mkdir -p "$BIN_DIR"
if [[ ! -x $PROG || tests/strays.c -nt $PROG || lib/librcoll.a -nt $PROG ]]; then
  [[ -f lib/librcoll.a ]] || { echo "lib/librcoll.a is missing: run make first" >&2; exit 1; }
  ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g -pthread -Iinclude -Ilib \
    tests/strays.c lib/librcoll.a $(make --no-print-directory -s print-ldlibs 2>/dev/null ||
                                    echo "-pthread -lm") -o "$PROG" || exit 1
fi

TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT

export RCOLL_TIMEOUT=20 RCOLL_SOCKET_IFNAME=lo RCOLL_SOCKET_FAMILY=AF_INET
PROMPT_MS=10000 # generous for a loaded machine; the old code took 5 s per stray
failed=0
fail() { echo "   FAILED: $*"; failed=1; }
now_ms() { date +%s%3N; }

# A port for the root; a collision shows as a failed listen, rarely.
# Below the kernel's ephemeral range: the floods here leave hundreds of
# client ports in use, and a root port among them would fail to bind.
new_port() {
  local low
  low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  P=$((20000 + RANDOM % (low - 20000)))
}

# Waits (10 s at most) until FILE holds a line matching PATTERN.
wait_for() {
  for ((i = 0; i < 200; i++)); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  return 1
}

# knock PORT IDLE GARBAGE HALF FLOOD OUT: opens the strays in the background
# and waits until all are connected; OUT lists their addresses.
knock() {
  "$PROG" knock "127.0.0.1:$1" "$2" "$3" "$4" "$5" 120 >"$6" 2>&1 &
  PIDS+=($!)
  wait_for "$6" '^knocked\|FAILED' && grep -q '^knocked' "$6" ||
    { fail "strays at port $1: $(tail -1 "$6")"; return 1; }
}

# named LOG WHO KNOCKED: a warning from WHO in LOG names a stray of KNOCKED.
named() {
  sed -n 's/^stray \(.*\)$/\1 (/p' "$3" >"$3.pat"
  grep -F "$2" "$1" | grep -F stray | grep -qFf "$3.pat" ||
    fail "no warning from '$2' names the strays; its warnings: $(grep -F "$2" "$1" | head -3)"
}

# The port a rank's log (RCOLL_DEBUG=INFO) says a listener listens on.
port_of() { sed -n "s/.*$2 127\.0\.0\.1:\([0-9]*\).*/\1/p" "$1" | head -1; }

echo "-- the issue's repro: 8 idle strays at the bootstrap root"
new_port
export RCOLL_COMM_ID=127.0.0.1:$P WORLD_SIZE=2
RANK=0 timeout -k 5 60 "$BENCH/allreduce_perf" -b 8 -e 8 -n 1 -w 0 -c 1 >"$TMP/a0.out" 2>"$TMP/a0.err" &
r0=$!
for ((i = 0; i < 100; i++)); do ss -Hltn "sport = :$P" | grep -q . && break; sleep 0.05; done
knock "$P" 8 0 0 0 "$TMP/a.knock"
t0=$(now_ms)
RANK=1 timeout -k 5 60 "$BENCH/allreduce_perf" -b 8 -e 8 -n 1 -w 0 -c 1 >"$TMP/a1.out" 2>"$TMP/a1.err"
rc1=$? dt=$(($(now_ms) - t0))
wait $r0
rc0=$?
echo "   rank 1 took $dt ms"
[[ $rc0 -eq 0 && $rc1 -eq 0 ]] || fail "exit status $rc0 and $rc1: $(tail -1 "$TMP/a1.err")"
((dt < PROMPT_MS)) || fail "rank 1 took $dt ms"
grep -q "Out of bounds values : 0 OK" "$TMP/a0.out" || fail "wrong results"
named "$TMP/a0.err" "bootstrap root" "$TMP/a.knock"

# rank R NAME [VAR=VALUE...]: starts `strays rank` as rank R in the background.
rank() {
  local r=$1 name=$2
  shift 2
  env RANK="$r" STRAYS_GO="$TMP/$name.go" RCOLL_DEBUG=INFO "$@" timeout -k 5 90 "$PROG" rank \
    >"$TMP/$name.$r.out" 2>"$TMP/$name.$r.err" &
  PIDS+=($!)
  eval "pid$r=$!"
}

echo "-- the bootstrap root and rank 0's ring listener: idle, garbage, half hellos, a flood"
new_port
export RCOLL_COMM_ID=127.0.0.1:$P
rank 0 b RCOLL_DEBUG_SUBSYS=BOOTSTRAP
wait_for "$TMP/b.0.err" "ring listener on" || fail "rank 0 logged no ring listener"
ring=$(port_of "$TMP/b.0.err" "ring listener on")
knock "$P" 8 4 4 200 "$TMP/b.root.knock"
[[ -n $ring ]] && knock "$ring" 8 4 4 300 "$TMP/b.ring.knock"
t0=$(now_ms)
rank 1 b RCOLL_DEBUG_SUBSYS=BOOTSTRAP
wait_for "$TMP/b.1.out" "init ok\|FAILED"
dt=$(($(now_ms) - t0))
echo "   rank 1 joined in $dt ms"
((dt < PROMPT_MS)) || fail "rank 1's init took $dt ms"
touch "$TMP/b.go"
wait "$pid0" && wait "$pid1" || fail "a rank failed: $(cat "$TMP"/b.*.out | grep FAILED)"
grep -q "allreduce ok" "$TMP/b.0.out" || fail "rank 0: $(tail -1 "$TMP/b.0.out")"
named "$TMP/b.0.err" "bootstrap root" "$TMP/b.root.knock"
[[ -n $ring ]] && named "$TMP/b.0.err" "ring listener" "$TMP/b.ring.knock"

for net in socket ucx; do
  echo "-- the $net transport's listeners, both ranks: idle, garbage, half hellos, a flood"
  new_port
  export RCOLL_COMM_ID=127.0.0.1:$P
  rank 0 "$net" RCOLL_NET="$net" RCOLL_DEBUG_SUBSYS=NET
  rank 1 "$net" RCOLL_NET="$net" RCOLL_DEBUG_SUBSYS=NET
  wait_for "$TMP/$net.0.out" "init ok\|FAILED"
  wait_for "$TMP/$net.1.out" "init ok\|FAILED"
  if grep -q "no such transport" "$TMP/$net.0.out"; then
    echo "   skipped: this build has no $net transport"
    touch "$TMP/$net.go"
    continue
  fi
  grep -q "init ok" "$TMP/$net.0.out" && grep -q "init ok" "$TMP/$net.1.out" ||
    { fail "init: $(cat "$TMP/$net".*.out)"; touch "$TMP/$net.go"; continue; }
  [[ $net == socket ]] && what="socket: listening on" || what="listening on"
  for r in 0 1; do
    port=$(port_of "$TMP/$net.$r.err" "$what")
    [[ -n $port ]] || { fail "rank $r logged no $net listener"; continue; }
    knock "$port" 8 4 4 300 "$TMP/$net.$r.knock"
  done
  touch "$TMP/$net.go"
  wait "$pid0" && wait "$pid1" || fail "a rank failed: $(cat "$TMP/$net".*.out | grep FAILED)"
  for r in 0 1; do
    ms=$(sed -n 's/^allreduce ok in \([0-9]*\) ms/\1/p' "$TMP/$net.$r.out")
    echo "   rank $r: all-reduce ${ms:-FAILED} ms"
    [[ -n $ms ]] && ((ms < PROMPT_MS)) || fail "rank $r: $(tail -1 "$TMP/$net.$r.out")"
    [[ -f $TMP/$net.$r.knock ]] && named "$TMP/$net.$r.err" "$net: " "$TMP/$net.$r.knock"
  done
done

# pair NAME "VARS OF RANK 0" "VARS OF RANK 1": a 2-rank all-reduce from the
# environment; sets rc0 and rc1, leaves the logs in $TMP/NAME.{0,1}.err.
pair() {
  new_port
  env RCOLL_COMM_ID=127.0.0.1:$P WORLD_SIZE=2 RANK=0 $2 timeout -k 5 60 "$BENCH/allreduce_perf" \
    -b 8 -e 8 -n 1 -w 0 -c 1 >"$TMP/$1.0.out" 2>"$TMP/$1.0.err" &
  local p0=$!
  env RCOLL_COMM_ID=127.0.0.1:$P WORLD_SIZE=2 RANK=1 $3 timeout -k 5 60 "$BENCH/allreduce_perf" \
    -b 8 -e 8 -n 1 -w 0 -c 1 >"$TMP/$1.1.out" 2>"$TMP/$1.1.err"
  rc1=$?
  wait $p0
  rc0=$?
}

NOSECRET="neither RCOLL_COMM_SECRET nor RCOLL_COMM_SECRET_FILE"
unset RCOLL_COMM_SECRET RCOLL_COMM_SECRET_FILE
printf 'k3y-%s\n' "$RANDOM$RANDOM" >"$TMP/secret"
KEY=$(head -1 "$TMP/secret")

echo "-- secret: RCOLL_COMM_SECRET on both ranks"
pair env "RCOLL_COMM_SECRET=$KEY" "RCOLL_COMM_SECRET=$KEY"
[[ $rc0 -eq 0 && $rc1 -eq 0 ]] ||
  fail "exit status $rc0 and $rc1: $(tail -1 "$TMP/env.0.err") / $(tail -1 "$TMP/env.1.err")"
! grep -q "$NOSECRET" "$TMP"/env.*.err || fail "warned about a missing secret"

echo "-- secret: RCOLL_COMM_SECRET_FILE on one rank, the same text in RCOLL_COMM_SECRET on the other"
pair file "RCOLL_COMM_SECRET_FILE=$TMP/secret" "RCOLL_COMM_SECRET=$KEY"
[[ $rc0 -eq 0 && $rc1 -eq 0 ]] ||
  fail "exit status $rc0 and $rc1: $(tail -1 "$TMP/file.0.err") / $(tail -1 "$TMP/file.1.err")"
! grep -q "$NOSECRET" "$TMP"/file.*.err || fail "warned about a missing secret"

echo "-- secret: a rank with another secret is refused"
RCOLL_TIMEOUT=4 pair wrong "RCOLL_COMM_SECRET=$KEY" "RCOLL_COMM_SECRET=x$KEY"
[[ $rc1 -ne 0 ]] && grep -q "wrong secret" "$TMP/wrong.1.err" ||
  fail "rank 1 was not refused (exit status $rc1): $(tail -1 "$TMP/wrong.1.err"); rank 0: $(tail -1 "$TMP/wrong.0.err")"
[[ $rc0 -ne 0 ]] || fail "rank 0 completed a job without rank 1"

echo "-- secret: none set warns once per process, however many communicators"
env RCOLL_COMM_ID=127.0.0.1:0 WORLD_SIZE=1 RANK=0 STRAYS_INITS=3 STRAYS_GO=/ \
  timeout -k 5 60 "$PROG" rank >"$TMP/none.out" 2>"$TMP/none.err" || fail "$(tail -1 "$TMP/none.out")"
n=$(grep -c "$NOSECRET" "$TMP/none.err")
[[ $n -eq 1 ]] || fail "$n warnings about the missing secret in 3 inits"

echo "-- secret: a missing file, a blank one, and both settings at once, are named errors"
env RCOLL_COMM_ID=127.0.0.1:0 WORLD_SIZE=1 RANK=0 RCOLL_COMM_SECRET_FILE="$TMP/none" STRAYS_GO=/ \
  timeout -k 5 60 "$PROG" rank >"$TMP/missing.out" 2>&1
grep -q "RCOLL_COMM_SECRET_FILE=$TMP/none: cannot open" "$TMP/missing.out" ||
  fail "missing file: $(tail -1 "$TMP/missing.out")"
printf ' \n' >"$TMP/blank"
env RCOLL_COMM_ID=127.0.0.1:0 WORLD_SIZE=1 RANK=0 RCOLL_COMM_SECRET_FILE="$TMP/blank" STRAYS_GO=/ \
  timeout -k 5 60 "$PROG" rank >"$TMP/blank.out" 2>&1
grep -q "RCOLL_COMM_SECRET_FILE=$TMP/blank: the file is empty" "$TMP/blank.out" ||
  fail "blank file: $(tail -1 "$TMP/blank.out")"
env RCOLL_COMM_ID=127.0.0.1:0 WORLD_SIZE=1 RANK=0 RCOLL_COMM_SECRET_FILE="$TMP/secret" \
  RCOLL_COMM_SECRET=x STRAYS_GO=/ timeout -k 5 60 "$PROG" rank >"$TMP/both.out" 2>&1
grep -q "not both" "$TMP/both.out" || fail "both set: $(tail -1 "$TMP/both.out")"

[[ $failed -eq 0 ]] && echo "check_strays: PASS" || echo "check_strays: FAIL"
exit $failed
