#!/usr/bin/env bash
# Every nccl-tests 2.19 flag that means something without a GPU, shown by its
# effect on what the bench does or prints (never by how fast it ran):
#   -m   the library logs 4x the calls per timed iteration (RCOLL_DEBUG COLL lines)
#   -N   each size's row comes N times
#   -w   the warm-up calls are counted the same way (every doubling size, and the largest)
#   -a   with two processes from the environment, the times are combined by a
#        broadcast from rank 0 (0) or an all-reduce sum/min/max (1/2/3), as the
#        library logs those calls; 4 refused
#   -I/-K  the i_min/i_max/i_p99/i_cv% columns; -K needs -I and fewer than -n
#   -z   the blocking mode's header line; with two processes, 1 and 3 add one
#        barrier (a logged 1-element all-reduce) per timed iteration, 2 none; 4 refused
#   -C   the time columns are "cputime"
#   -R 1 both buffers of every rank registered (RCOLL_DEBUG ALLOC lines); -R 2 refused
#   --host-malloc  the header line saying the buffers come from posix_memalign
#   -S   a timestamp ends each row
#   -T   a rank whose peer never comes is ended after T seconds, status 2
#   -M   the host memory line of the footer
#   -u   the buffers shifted by u elements: the header says so, every type checks clean
#   -p   the parallel-init header line
#   -d all, -o all, -r all   the rows of every type, op and root
#   NCCL_TESTS_SPLIT  ranks in groups (Group column; all-gather counts of the group's size)
#   NCCL_TESTS_MIN_BW  the footer's FAILED and exit status 1 below 90% of it
#   GPU-only flags (-G N, -y, -x, -D, -V): the value asking for nothing taken, others
#   refused with a message naming the flag; -G with no value stays rcoll's device buffers.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
make --no-print-directory bench/allreduce_perf bench/broadcast_perf bench/allgather_perf >/dev/null || exit 1
BIN=${BENCH_DIR:-bench}
failed=0
fail() { echo "FAIL: $*"; failed=1; }
AR="$BIN/allreduce_perf -t 2 -b 64 -e 64 -n 3 -w 0 -c 0"

# Rows of the table: lines that start with a size.
rows() { grep -cE '^ +[0-9]+ +[0-9]+ ' <<<"$1"; }
# Calls rank 0 made, as the library logs them.
calls() { grep -c '\[0\] rcoll INFO rcollAllReduce:' <<<"$1"; }
run() { RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=${SUBSYS:-COLL} "$@" 2>&1; }
refused() { # flag-words... : exit status 2 and a message naming the flag
  local out rc
  out=$($AR "$@" 2>&1)
  rc=$?
  [[ $rc -eq 2 ]] || fail "'$*' not refused (exit status $rc)"
  grep -q -- "${1}" <<<"$out" || fail "'$*': the message does not name $1: $out"
}
taken() {
  local out
  out=$($AR "$@" 2>&1) || fail "'$*' refused: $(tail -n 2 <<<"$out")"
}

echo "-- -m: calls per timed iteration (per half: one untimed call, n x m, one more untimed)"
c1=$(calls "$(run $AR -m 1)")
c4=$(calls "$(run $AR -m 4)")
[[ $c1 -eq 10 ]] || fail "-m 1: $c1 calls, expected 2 x (1 + 3 + 1)"
[[ $c4 -eq 28 ]] || fail "-m 4: $c4 calls, expected 2 x (1 + 3 x 4 + 1)"
refused -m 0

echo "-- -w: warm-up calls at every size from the smallest, doubling, the largest, and the smallest again"
c=$(calls "$(run $AR -w 5)")
[[ $c -eq $((10 + 5)) ]] || fail "-w 5: $c calls, expected 10 + 5"
c=$(calls "$(run $AR -w 2 -e 256 -f 2)")
[[ $c -eq $((3 * 10 + 4 * 2)) ]] || fail "-w 2 over 64..256: $c calls, expected 3 sizes x 10 + (64, 128, 256, 64) x 2"
c=$(calls "$(run $AR -w 2 -e 200 -f 3)")
[[ $c -eq $((2 * 10 + 4 * 2)) ]] || fail "-w 2 over 64, 192 (max 200): $c calls, expected 2 x 10 + (64, 128, 200, 64) x 2"

echo "-- -N: cycles"
[[ $(rows "$($AR -N 3)") -eq 3 ]] || fail "-N 3: not 3 rows"
[[ $(rows "$($AR -N 1 -e 256 -f 2)") -eq 3 ]] || fail "-N 1 over 3 sizes: not 3 rows"

# Two processes from the environment, whose driver barriers and reductions go
# through the library (so they are logged): rank 0's output and log.
envrun() {
  local port=$((20000 + RANDOM % 20000)) d
  d=$(mktemp -d)
  for r in 1 0; do
    RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RCOLL_COMM_SECRET=flags \
      RCOLL_DEBUG=INFO RCOLL_DEBUG_SUBSYS=COLL timeout -k 5 60 "$BIN/allreduce_perf" \
      -b 64 -e 64 -n 3 -w 0 -c 0 "$@" >"$d/$r" 2>&1 &
  done
  wait
  cat "$d/0"
  rm -rf "$d"
}
# The driver's own 1-element float64 calls: "OP:REDOP" counts.
driver_calls() { grep -oE 'rcoll(AllReduce|Broadcast): 1 x float64( [a-z]+)?' | sed 's/rcoll//; s/: 1 x float64 */:/' | sort | uniq -c | awk '{printf "%s=%s ", $2, $1}'; }

echo "-- -a: how the times are combined (4 = time and cputime x 2 halves)"
for a in 0 1 2 3; do
  got=$(envrun -a $a | driver_calls)
  case $a in
    0) want="AllReduce:sum=7 Broadcast:root=4 " ;;
    1) want="AllReduce:sum=11 " ;;
    2) want="AllReduce:min=4 AllReduce:sum=7 " ;;
    3) want="AllReduce:max=4 AllReduce:sum=7 " ;;
  esac
  [[ $got == "$want" ]] || fail "-a $a: driver calls '$got', expected '$want'"
done
refused -a 4

echo "-- -I and -K"
out=$($AR -n 5 -I 1 -K 2)
grep -q 'i_min *i_max *i_p99 *i_cv%' <<<"$out" || fail "-I 1: no per-iteration columns"
grep -q 'summary skips first 2 iterations' <<<"$out" || fail "-K 2: not in the header"
[[ $(grep -E '^ +64 ' <<<"$out" | awk '{print NF}') -eq 21 ]] || fail "-I 1: a row is not 21 columns"
[[ $(grep -E '^ +64 ' <<<"$($AR)" | awk '{print NF}') -eq 13 ]] || fail "without -I a row is not 13 columns"
refused -K 1
refused -I 1 -n 3 -K 3

echo "-- -z"
grep -q '^# Blocking Enabled: wait and barrier after each inner' <<<"$($AR -z 1)" || fail "-z 1: no header line"
grep -q '^# Blocking Enabled: wait after each inner' <<<"$($AR -z 2 -m 2)" || fail "-z 2: no header line"
grep -q '^# Blocking Enabled: .*outer iteration' <<<"$($AR -z 3 -I 1)" || fail "-z 3: no header line"
grep -q '^# Blocking' <<<"$($AR -z 0)" && fail "-z 0 prints a blocking line"
for z in 0 1 2 3; do
  n=$(envrun -z $z | grep -c 'rcollAllReduce: 1 x float64 sum')
  want=$((z == 1 || z == 3 ? 11 + 6 : 11))
  [[ $n -eq $want ]] || fail "-z $z: $n barriers and sums, expected $want (3 iterations x 2 halves more for -z 1 and 3)"
done
refused -z 4

echo "-- -C"
grep -qE '^# +size .* cputime .* cputime' <<<"$($AR -C 1)" || fail "-C 1: no cputime columns"
grep -q 'cputime' <<<"$($AR)" && fail "cputime without -C"

# Host buffers come from rcollMemAlloc (as nccl-tests' from ncclMemAlloc)
# unless --host-malloc asks for posix_memalign, which the header then says.
echo "-- --host-malloc"
out=$($AR --host-malloc 2>&1)
grep -q '^# Host buffers: posix_memalign' <<<"$out" && [[ $(rows "$out") -eq 1 ]] ||
  fail "--host-malloc: no header line, or no row"
grep -q '^# Host buffers' <<<"$($AR 2>&1)" && fail "without --host-malloc the header must not name posix_memalign"

echo "-- -R"
out=$(SUBSYS=ALLOC run $AR -R 1)
[[ $(grep -c 'registered [0-9]* bytes of host memory' <<<"$out") -eq 4 ]] || fail "-R 1: not 2 buffers x 2 ranks registered"
out=$(SUBSYS=ALLOC run $AR)
grep -q 'registered [0-9]* bytes of host memory' <<<"$out" && fail "registration without -R"
refused -R 2

echo "-- -S"
grep -qE '^ +64 .* [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}$' <<<"$($AR -S 1)" || fail "-S 1: no timestamp"

echo "-- -T"
port=$((20000 + RANDOM % 20000))
start=$SECONDS
out=$(RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RCOLL_COMM_SECRET=flags \
      timeout -k 5 60 "$BIN/allreduce_perf" -b 8 -e 8 -T 2 2>&1)
rc=$?
[[ $rc -eq 2 ]] || fail "-T 2 with a missing peer: exit status $rc, expected 2"
grep -q 'Test timeout (2s)' <<<"$out" || fail "-T 2: no timeout message: $(tail -n 2 <<<"$out")"
((SECONDS - start < 30)) || fail "-T 2: took $((SECONDS - start)) s"

echo "-- -M"
grep -q '^# Host memory usage *: Initialization .* | User-Allocated .* | Collective .* | Total' <<<"$($AR -M 1)" ||
  fail "-M 1: no memory line"
grep -q 'memory usage' <<<"$($AR)" && fail "memory line without -M"

echo "-- -u"
out=$("$BIN/allreduce_perf" -t 2 -b 64 -e 4K -f 8 -n 2 -w 0 -c 1 -u 3 -d all)
grep -q 'unalign: 3$' <<<"$out" || fail "-u 3: not in the header"
[[ $(rows "$out") -eq 36 ]] || fail "-u 3 -d all: not 3 sizes x 12 types rows"
grep -q '^# Out of bounds values : 0 OK' <<<"$out" || fail "-u 3: out of bounds"
awk '/^ +[0-9]+ +[0-9]+ / && ($9 != 0 || $13 != 0) {bad=1} END {exit bad}' <<<"$out" || fail "-u 3: wrong results"

echo "-- -p"
grep -q '^# Parallel Init Enabled' <<<"$($AR -p 1)" || fail "-p 1: no header line"
grep -q 'Parallel Init' <<<"$($AR -p 0)" && fail "-p 0 prints the parallel-init line"

echo "-- -d all, -o all, -r all"
out=$($AR -d all -o all)
[[ $(rows "$out") -eq 60 ]] || fail "-d all -o all: not 12 types x 5 ops rows"
out=$("$BIN/broadcast_perf" -t 3 -b 64 -e 64 -n 2 -w 0 -r all)
[[ $(awk '/^ +64 /{print $5}' <<<"$out" | tr '\n' ' ') == "0 1 2 " ]] || fail "-r all: roots are not 0 1 2"
grep -q "expected a rank, or all" <<<"$("$BIN/broadcast_perf" -r x 2>&1)" || fail "-r x: no message"

echo "-- NCCL_TESTS_SPLIT"
out=$(NCCL_TESTS_SPLIT="MOD 2" "$BIN/allgather_perf" -t 4 -b 1024 -e 1024 -n 2 -w 0)
[[ $(grep -oE 'Group +[0-9]+' <<<"$out" | awk '{print $2}' | tr '\n' ' ') == "0 1 0 1 " ]] ||
  fail "MOD 2: groups are not 0 1 0 1"
[[ $(awk '/^ +1024 /{print $2}' <<<"$out") -eq 128 ]] || fail "MOD 2: all-gather count is not 1024/4/2"
[[ $(awk '/^ +1024 /{print $2}' <<<"$("$BIN/allgather_perf" -t 4 -b 1024 -e 1024 -n 2 -w 0)") -eq 64 ]] ||
  fail "no split: all-gather count is not 1024/4/4"
out=$(NCCL_TESTS_SPLIT="DIV 2" "$BIN/allgather_perf" -t 4 -b 1024 -e 1024 -n 2 -w 0)
[[ $(grep -oE 'Group +[0-9]+' <<<"$out" | awk '{print $2}' | tr '\n' ' ') == "0 0 1 1 " ]] ||
  fail "DIV 2: groups are not 0 0 1 1"
grep -q '^# Out of bounds values : 0 OK' <<<"$out" || fail "DIV 2: out of bounds"
out=$(NCCL_TESTS_SPLIT="XOR 2" $AR 2>&1)
[[ $? -eq 2 ]] && grep -q NCCL_TESTS_SPLIT <<<"$out" || fail "a bad NCCL_TESTS_SPLIT is not refused"

echo "-- NCCL_TESTS_MIN_BW"
out=$(NCCL_TESTS_MIN_BW=1000000 $AR)
rc=$?
[[ $rc -eq 1 ]] || fail "NCCL_TESTS_MIN_BW above the bandwidth: exit status $rc, expected 1"
grep -q '^# Avg bus bandwidth .* FAILED' <<<"$out" || fail "NCCL_TESTS_MIN_BW: no FAILED"
out=$(NCCL_TESTS_MIN_BW=0 $AR) || fail "NCCL_TESTS_MIN_BW=0 fails"
grep -q '^# Avg bus bandwidth .* OK' <<<"$out" || fail "NCCL_TESTS_MIN_BW=0: no OK"

echo "-- GPU-only flags"
taken -g 1
taken -G 0
taken -y 0
taken -D 0
refused -G 1
refused -G 4
refused -y 1
refused -x 0
refused -D 1
refused -V 16
refused -g 2
out=$($AR -G 1 2>&1)
grep -q -- '--device-buffers' <<<"$out" || fail "-G 1: the message does not point to --device-buffers"
if ! nvidia-smi -L >/dev/null 2>&1; then
  out=$($AR -G 2>&1)
  [[ $? -eq 2 ]] && grep -q 'no CUDA device' <<<"$out" || fail "-G (device buffers) without a GPU: $out"
fi

[[ $failed -eq 0 ]] && echo "PASS: check_bench_flags"
exit $failed
