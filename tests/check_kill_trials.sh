#!/usr/bin/env bash
# Kill trials: a rank SIGKILLed at a random moment of a random stream of
# collectives (all-reduce, broadcast, all-gather, reduce-scatter), over shm,
# socket and ucx (where built) in turn, with 2..4 ranks. In every trial no
# rank may hang (`timeout` turns a hang into a failure), every survivor must
# fail within RCOLL_TIMEOUT naming the call it was in and its number
# (tests/rank_death.c judges that), and scripts/rcoll-fr-analyze, reading the
# survivors' flight-recorder dumps, must name the killed rank.
#
#   RCOLL_TEST_KILL_TRIALS=50 tests/check_kill_trials.sh    (default 6)
#   RCOLL_TEST_SEED=N                                       (repeat a run)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

command -v python3 >/dev/null || { echo "SKIP: python3 is missing (the analyzer needs it)"; exit 77; }
BIN_DIR=${TEST_BIN_DIR:-tests/bin}
PROG=$BIN_DIR/rank_death
mkdir -p "$BIN_DIR"
if [[ ! -x $PROG || tests/rank_death.c -nt $PROG || lib/librcoll.a -nt $PROG ]]; then
  [[ -f lib/librcoll.a ]] || { echo "lib/librcoll.a is missing: run make first" >&2; exit 1; }
  ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g -pthread -Iinclude -Ilib \
    tests/rank_death.c lib/librcoll.a $(make --no-print-directory -s print-ldlibs 2>/dev/null ||
                                         echo "-pthread -lm") -o "$PROG" || exit 1
fi

TRIALS=${RCOLL_TEST_KILL_TRIALS:-6}
SEED=${RCOLL_TEST_SEED:-$$}
RANDOM=$SEED
NETS=(shm socket)
grep -q '^RCOLL_HAVE_UCX = 1' config.mk 2>/dev/null && NETS+=(ucx)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

export RCOLL_TIMEOUT=10 RCOLL_SOCKET_IFNAME=lo RCOLL_SOCKET_FAMILY=AF_INET
echo "kill trials: $TRIALS over ${NETS[*]}, seed $SEED, RCOLL_TIMEOUT=$RCOLL_TIMEOUT"
hangs=0 failures=0 named=0
for ((t = 1; t <= TRIALS; t++)); do
  net=${NETS[$(((t - 1) % ${#NETS[@]}))]}
  n=$((2 + RANDOM % 3))
  victim=$((RANDOM % n))
  delay=$((RANDOM % 400))
  dir=$TMP/t$t
  mkdir -p "$dir"
  args="-n $n -d $victim -m kill -c -w $delay"
  # UCX trials alternate between its shared memory and TCP. Not its cma:
  # UCX aborts the surviving process when process_vm_readv finds the peer
  # gone (cma_ep.c, "No such process" is fatal in UCX itself), which no
  # library above it can catch.
  tls=${UCX_TLS:-}
  if [[ $net == ucx && -z ${UCX_TLS:-} ]]; then
    tls=posix,sysv,self
    (((t / ${#NETS[@]}) % 2)) && tls=tcp,self
    net_label="ucx ($tls)"
  else
    net_label=$net
  fi
  t0=$(date +%s)
  UCX_TLS=$tls RCOLL_NET=$net RCOLL_FR_DUMP_FILE="$dir/fr-%r.txt" timeout -k 5 120 "$PROG" $args \
    >"$dir/out" 2>"$dir/err"
  rc=$?
  secs=$(($(date +%s) - t0))
  verdict=$(scripts/rcoll-fr-analyze "$dir" 2>&1)
  status=PASS
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    status="FAIL (hung: killed by timeout after 120 s)"
    hangs=$((hangs + 1))
  elif [[ $rc -ne 0 ]]; then
    status="FAIL (rank_death exit $rc)"
  fi
  if grep -q "rank $victim's dump is missing" <<<"$verdict"; then
    named=$((named + 1))
  else
    status="FAIL (the analyzer does not name rank $victim)"
  fi
  echo "trial $t: $net_label, $n ranks, rank $victim killed $delay ms into its calls, ${secs} s: $status"
  if [[ $status != PASS ]]; then
    failures=$((failures + 1))
    sed 's/^/   | /' "$dir/out"
    sed 's/^/   > /' <<<"$verdict"
  else
    grep -o 'error: .*' "$dir/out" | head -"$n" | cut -c1-200 | sed 's/^/   /'
    sed 's/^/   analyzer: /' <<<"$verdict" | sed -n 2p
  fi
done
echo "kill trials: $TRIALS run, $hangs hung, $failures failed, analyzer named the killed rank in $named"
[[ $failures -eq 0 ]]
