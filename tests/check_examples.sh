#!/usr/bin/env bash
# Runs every C example the way examples/README.md says, and checks the
# result each one prints (each also checks its own result and exits non-zero
# when it is wrong):
#   allreduce_threads, sendrecv_ring (4 and 3 ranks), comm_split (4 and 6):
#     ranks as threads of one process;
#   init_from_env: 3 processes with torchrun's variables (RANK, WORLD_SIZE,
#     MASTER_ADDR, MASTER_PORT), 2 with RCOLL_COMM_ID, 4 under mpiexec with
#     RCOLL_COMM_ID, and under torchrun itself where it starts processes
#     (Debian 12's torch 1.13 on Python 3.11 does not);
#   mpi_allreduce: 4 ranks under mpiexec, where configure found MPI;
#   device_buffers: 2 processes; where the machine has no GPU (or the build
#     no CUDA) every rank must say it needs one and exit 77, else each must
#     report its all-reduce on device memory correct.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
EXAMPLES=(allreduce_threads sendrecv_ring comm_split init_from_env device_buffers)
HAVE_MPI=$(sed -n 's/^RCOLL_HAVE_MPI = //p' config.mk 2>/dev/null)
[[ $HAVE_MPI == 1 ]] && EXAMPLES+=(mpi_allreduce)
MPIEXEC=${MPIEXEC:-$(sed -n 's/^MPIEXEC = //p' config.mk 2>/dev/null)}
make --no-print-directory "${EXAMPLES[@]/#/examples/bin/}" >/dev/null || exit 1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
# Quiet rcoll's per-communicator NOTE lines; one secret for every job here.
export RCOLL_DEBUG=WARN RCOLL_COMM_SECRET=check-examples-$$ RCOLL_TIMEOUT=60
port() { echo $((20000 + RANDOM % 20000)); }
# Open MPI refuses to start as root unless told; MPICH does not mind.
MPI_ROOT_FLAG=()
[[ -n $MPIEXEC && $(id -u) == 0 && $($MPIEXEC --version 2>&1) == *"Open MPI"* ]] &&
  MPI_ROOT_FLAG=(--allow-run-as-root)

# expect NAME PATTERN CMD...: CMD exits 0 and prints a line matching PATTERN.
expect() {
  local name=$1 pattern=$2 rc
  shift 2
  timeout -k 5 180 "$@" >"$TMP/$name.out" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    fail "$name: exit status $rc"; tail -n 8 "$TMP/$name.out"
  elif ! grep -qE "$pattern" "$TMP/$name.out"; then
    fail "$name: no line matching '$pattern'"; tail -n 8 "$TMP/$name.out"
  else
    echo "   $name: $(grep -E "$pattern" "$TMP/$name.out" | head -n 1)"
  fi
}

# env_job NAME BIN N VARS...: N processes of examples/bin/BIN, rank r with
# RANK=r WORLD_SIZE=N and VARS, as a launcher would start them; each one's
# output goes to $TMP/NAME.r and its exit status to $TMP/NAME.rc.r.
env_job() {
  local name=$1 bin=$2 n=$3 r
  shift 3
  for ((r = 0; r < n; r++)); do
    (env RANK=$r WORLD_SIZE="$n" "$@" timeout -k 5 180 "examples/bin/$bin" >"$TMP/$name.$r" 2>&1
     echo $? >"$TMP/$name.rc.$r") &
  done
  wait
}

# job_ok NAME N PATTERN: every rank exited 0 and printed PATTERN, where @R@
# stands for its rank.
job_ok() {
  local name=$1 n=$2 pattern=$3 r
  for ((r = 0; r < n; r++)); do
    local rc want=${pattern//@R@/$r}
    rc=$(cat "$TMP/$name.rc.$r" 2>/dev/null || echo none)
    if [[ $rc != 0 ]]; then
      fail "$name rank $r: exit status $rc"; tail -n 6 "$TMP/$name.$r"
    elif ! grep -qE "$want" "$TMP/$name.$r"; then
      fail "$name rank $r: no line matching '$want'"; tail -n 6 "$TMP/$name.$r"
    fi
  done
  [[ $failed == 0 ]] && echo "   $name: $n ranks, e.g. $(grep -E "${pattern//@R@/0}" "$TMP/$name.0")"
}

echo "-- ranks as threads"
expect allreduce_threads 'over 4 ranks: every element is 10.0$' examples/bin/allreduce_threads
expect sendrecv_ring_4 '^ring of 4 ranks: every message made 4 hops and came home intact$' \
  examples/bin/sendrecv_ring 4
expect sendrecv_ring_3 '^ring of 3 ranks: every message made 3 hops and came home intact$' \
  examples/bin/sendrecv_ring 3
expect comm_split_4 '^4 ranks as 2 rows x 2 columns: every row and column communicator summed' \
  examples/bin/comm_split 4
expect comm_split_6 '^6 ranks as 3 rows x 2 columns: every row and column communicator summed' \
  examples/bin/comm_split 6
out=$(examples/bin/comm_split 5 2>&1)
[[ $? -eq 2 && $out == usage:* ]] || fail "comm_split 5 (odd): expected usage and exit status 2, got: $out"

echo "-- init_from_env: processes"
env_job torchrun_vars init_from_env 3 MASTER_ADDR=127.0.0.1 MASTER_PORT="$(port)"
job_ok torchrun_vars 3 '^rank @R@ of 3 \(RANK=@R@\): ranks gathered in order, sum 6 correct$'
env_job comm_id init_from_env 2 RCOLL_COMM_ID=127.0.0.1:"$(port)"
job_ok comm_id 2 '^rank @R@ of 2 \(RANK=@R@\): ranks gathered in order, sum 3 correct$'
if [[ -n $MPIEXEC ]]; then
  expect init_from_env_mpi '^rank 3 of 4 \((PMI_RANK|OMPI_COMM_WORLD_RANK)=3\): ranks gathered in order, sum 10 correct$' \
    "$MPIEXEC" "${MPI_ROOT_FLAG[@]}" -n 4 env RCOLL_COMM_ID=127.0.0.1:"$(port)" examples/bin/init_from_env
fi
if command -v torchrun >/dev/null &&
   timeout 60 torchrun --standalone --nproc_per_node=1 --no_python true >/dev/null 2>&1; then
  expect torchrun '^rank 1 of 2 \(RANK=1\): ranks gathered in order, sum 3 correct$' \
    torchrun --standalone --nproc_per_node=2 --no_python examples/bin/init_from_env
else
  echo "   torchrun: not run (missing, or it cannot start a process here: Debian 12's torch 1.13 on Python 3.11)"
fi

echo "-- mpi_allreduce"
if [[ $HAVE_MPI == 1 && -n $MPIEXEC ]]; then
  expect mpi_allreduce "^4 MPI ranks: rcoll's all-reduce of [0-9]+ ints matches MPI_Allreduce's on every rank$" \
    "$MPIEXEC" "${MPI_ROOT_FLAG[@]}" -n 4 examples/bin/mpi_allreduce
else
  echo "   mpi_allreduce: not built (configure found no MPI compiler)"
fi

echo "-- device_buffers"
# A GPU counts when the example was built with CUDA and the driver sees a device.
gpu=0
readelf -d examples/bin/device_buffers 2>/dev/null | grep -q 'NEEDED.*libcudart' &&
  { [[ -e /dev/nvidiactl ]] || ls /dev/nvidia[0-9]* >/dev/null 2>&1; } && gpu=1
env_job device_buffers device_buffers 2 RCOLL_COMM_ID=127.0.0.1:"$(port)"
if [[ $gpu == 1 ]]; then
  job_ok device_buffers 2 '^rank @R@ of 2 \(GPU [0-9]+\): all-reduce of [0-9]+ floats in device memory: every element correct'
else
  for r in 0 1; do
    rc=$(cat "$TMP/device_buffers.rc.$r" 2>/dev/null || echo none)
    if [[ $rc != 77 ]] || ! grep -q '^device_buffers: needs a CUDA GPU.*skipped$' "$TMP/device_buffers.$r"; then
      fail "device_buffers rank $r without a GPU: expected 'needs a CUDA GPU ... skipped' and exit status 77, got $rc"
      tail -n 4 "$TMP/device_buffers.$r"
    fi
  done
  echo "   device_buffers: skipped as it should be: $(head -n 1 "$TMP/device_buffers.0")"
fi

exit $failed
