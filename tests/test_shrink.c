/* rcollCommShrink and rcollCommRevoke.
 *
 * The main case, per transport (shm, socket, ucx when built): 4 ranks are
 * forked processes running a loop of all-reduces; the parent SIGKILLs rank 2
 * in the middle of it. Each survivor sees a call fail and the error in
 * rcollCommGetAsyncError, shrinks the communicator without rank 2
 * (RCOLL_SHRINK_ABORT), and runs more all-reduces on the 3-rank result,
 * whose sums must be exact. The other cases run ranks as threads: a shrink
 * with no dead rank (the parent still works afterwards), survivors that pass
 * different lists, revoke, and bad arguments. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "rcoll.h"

#define NR 4
#define DEAD 2
#define COUNT (64u * 1024) /* floats per call: long enough to die inside one */
#define CALLS_BEFORE_KILL 5
#define AFTER_CALLS 20

static void shrink_setup(void) { setenv("RCOLL_TIMEOUT", "20", 1); }

TestSuite(shrink, .init = shrink_setup, .timeout = 300);

/* What each forked rank reports, in memory shared with the parent. */
typedef struct outcome {
  int reported;
  int init, failed_call, async_error, shrink, destroy;
  int calls_ok, wrong_before, wrong_after, after_ok;
  int new_rank, new_size;
  char error[400];
} outcome_t;

static void fill(float *buf, int rank, int call) {
  for (size_t i = 0; i < COUNT; i++)
    buf[i] = (float)((rank + 1) * (call + 1) + (int)(i % 7));
}

/* The exact sum over `ranks` of fill(): small integers, exact in float. */
static int wrong_sum(const float *buf, const int *ranks, int n, int call) {
  for (size_t i = 0; i < COUNT; i++) {
    float want = 0;
    for (int k = 0; k < n; k++)
      want += (float)((ranks[k] + 1) * (call + 1) + (int)(i % 7));
    if (buf[i] != want)
      return 1;
  }
  return 0;
}

/* After the shrink: more all-reduces over the survivors, each contributing
 * as its parent rank did, so a mix-up of ranks shows in the sums. */
static void after_shrink(rcollComm_t nc, int rank, float *in, float *out, outcome_t *o) {
  const int alive[NR - 1] = {0, 1, 3};
  rcollCommUserRank(nc, &o->new_rank);
  rcollCommCount(nc, &o->new_size);
  for (int c = 0; c < AFTER_CALLS; c++) {
    fill(in, rank, 1000 + c);
    if (rcollAllReduce(in, out, COUNT, rcollFloat32, rcollSum, nc, NULL) != rcollSuccess) {
      snprintf(o->error, sizeof o->error, "after shrink: %s", rcollGetLastError(nc));
      return;
    }
    o->wrong_after |= wrong_sum(out, alive, NR - 1, 1000 + c);
    o->after_ok++;
  }
}

static void survivor(rcollComm_t comm, int rank, float *in, float *out, outcome_t *o) {
  const int all[NR] = {0, 1, 2, 3};
  rcollResult_t r = rcollSuccess;
  for (int c = 0; c < 100000 && r == rcollSuccess; c++) {
    fill(in, rank, c);
    r = rcollAllReduce(in, out, COUNT, rcollFloat32, rcollSum, comm, NULL);
    if (r == rcollSuccess) {
      o->calls_ok++;
      o->wrong_before |= wrong_sum(out, all, NR, c);
    }
  }
  o->failed_call = r;
  snprintf(o->error, sizeof o->error, "%s", rcollGetLastError(comm));
  rcollResult_t async = rcollSuccess;
  rcollCommGetAsyncError(comm, &async);
  o->async_error = async;
  /* The pattern a trainer follows: the comm has an error, so shrink it.
   * A survivor may learn of the death only when its own call times out
   * (RCOLL_TIMEOUT, 20 s here: seen over socket and ucx under ASan, where a
   * rank waiting mid-message on a peer that had left for the shrink was not
   * woken by that peer's close), so the shrink waits for the others three
   * times as long as a call does. */
  int dead = DEAD;
  rcollComm_t nc = NULL;
  rcollConfig_t cfg = RCOLL_CONFIG_INITIALIZER;
  cfg.timeoutMs = 60000;
  o->shrink = async != rcollSuccess ? rcollCommShrink(comm, &dead, 1, &nc, &cfg, RCOLL_SHRINK_ABORT)
                                    : rcollInternalError;
  if (o->shrink != rcollSuccess)
    snprintf(o->error, sizeof o->error, "shrink: %s", rcollGetLastError(NULL));
  else
    after_shrink(nc, rank, in, out, o);
  o->destroy = nc ? rcollCommDestroy(nc) : rcollSuccess;
  rcollCommDestroy(comm);
}

/* The victim runs calls until the parent's SIGKILL ends it; `ready` tells
 * the parent that calls are under way. */
static void victim(rcollComm_t comm, float *in, float *out, int ready) {
  for (int c = 0;; c++) {
    fill(in, DEAD, c);
    rcollAllReduce(in, out, COUNT, rcollFloat32, rcollSum, comm, NULL);
    if (c == CALLS_BEFORE_KILL && write(ready, "k", 1) != 1)
      _exit(3);
  }
}

/* The unique id, made by rank 0 after the fork: the test process itself
 * starts no thread before it forks (rcollGetUniqueId's root thread could be
 * inside malloc, or UCX's memory hooks, at the fork, and the child would
 * then block on that lock for ever). */
typedef struct shared_id {
  rcollUniqueId id;
  _Atomic int ready;
} shared_id_t;

static int get_id(int rank, shared_id_t *sid, rcollUniqueId *id, outcome_t *o) {
  if (rank == 0) {
    if (rcollGetUniqueId(&sid->id) != rcollSuccess) {
      snprintf(o->error, sizeof o->error, "rcollGetUniqueId: %s", rcollGetLastError(NULL));
      atomic_store(&sid->ready, -1);
      return -1;
    }
    atomic_store(&sid->ready, 1);
  }
  for (int ms = 0; atomic_load(&sid->ready) == 0 && ms < 60000; ms++) {
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (atomic_load(&sid->ready) != 1) {
    snprintf(o->error, sizeof o->error, "no unique id from rank 0 within 60 s");
    return -1;
  }
  *id = sid->id;
  return 0;
}

static void rank_proc(shared_id_t *sid, int rank, int ready, outcome_t *o) {
  rcollComm_t comm = NULL;
  rcollUniqueId id;
  if (get_id(rank, sid, &id, o) != 0) {
    o->reported = 1;
    _exit(0);
  }
  o->init = rcollCommInitRank(&comm, NR, id, rank);
  float *in = malloc(COUNT * sizeof(float)), *out = malloc(COUNT * sizeof(float));
  if (o->init != rcollSuccess || in == NULL || out == NULL) {
    snprintf(o->error, sizeof o->error, "init: %s", rcollGetLastError(NULL));
    o->reported = 1;
    _exit(0);
  }
  if (rank == DEAD)
    victim(comm, in, out, ready);
  survivor(comm, rank, in, out, o);
  free(in);
  free(out);
  o->reported = 1;
  _exit(0);
}

static void kill_one_and_shrink(const char *net) {
  if (rcoll_net_index(net) < 0)
    cr_skip_test("transport %s is not built here", net);
  setenv("RCOLL_NET", net, 1);
  outcome_t *out = mmap(NULL, sizeof(outcome_t) * NR, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(out != MAP_FAILED);
  memset(out, 0, sizeof(outcome_t) * NR);
  int pipefd[2];
  cr_assert_eq(pipe(pipefd), 0);
  shared_id_t *sid = mmap(NULL, sizeof *sid, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(sid != MAP_FAILED);
  atomic_store(&sid->ready, 0);
  pid_t pids[NR];
  for (int r = 0; r < NR; r++) {
    pids[r] = fork();
    cr_assert(pids[r] >= 0);
    if (pids[r] == 0)
      rank_proc(sid, r, pipefd[1], &out[r]);
  }
  close(pipefd[1]); /* the victim's end only: a victim that dies early gives EOF, not a wait */
  char k;
  cr_assert_eq(read(pipefd[0], &k, 1), 1, "the victim never got its calls going");
  struct timespec ts = {0, 5 * 1000 * 1000}; /* into the next call */
  nanosleep(&ts, NULL);
  kill(pids[DEAD], SIGKILL);
  for (int r = 0; r < NR; r++)
    waitpid(pids[r], NULL, 0);
  for (int r = 0; r < NR; r++) {
    if (r == DEAD)
      continue;
    const outcome_t *o = &out[r];
    cr_assert(o->reported, "%s: rank %d reported nothing (%s)", net, r, o->error);
    cr_assert_eq(o->init, rcollSuccess, "%s: rank %d: %s", net, r, o->error);
    cr_expect(o->calls_ok >= CALLS_BEFORE_KILL, "%s: rank %d: only %d calls before the kill", net, r, o->calls_ok);
    cr_expect_eq(o->wrong_before, 0, "%s: rank %d: wrong sums before the kill", net, r);
    cr_expect_neq(o->failed_call, rcollSuccess, "%s: rank %d: no call failed", net, r);
    cr_expect_neq(o->async_error, rcollSuccess, "%s: rank %d: rcollCommGetAsyncError saw no error", net, r);
    cr_assert_eq(o->shrink, rcollSuccess, "%s: rank %d: %s", net, r, o->error);
    cr_expect_eq(o->new_size, NR - 1, "%s: rank %d: new size %d", net, r, o->new_size);
    cr_expect_eq(o->new_rank, r < DEAD ? r : r - 1, "%s: rank %d: new rank %d", net, r, o->new_rank);
    cr_expect_eq(o->after_ok, AFTER_CALLS, "%s: rank %d: %d of %d calls after the shrink (%s)", net, r,
                 o->after_ok, AFTER_CALLS, o->error);
    cr_expect_eq(o->wrong_after, 0, "%s: rank %d: wrong sums after the shrink", net, r);
    cr_expect_eq(o->destroy, rcollSuccess, "%s: rank %d: destroying the new comm", net, r);
  }
  munmap(out, sizeof(outcome_t) * NR);
  munmap(sid, sizeof *sid);
}

Test(shrink, kill_one_of_four_shm) { kill_one_and_shrink("shm"); }
Test(shrink, kill_one_of_four_socket) { kill_one_and_shrink("socket"); }
/* Over ucx, under UCX's shared memory (posix, sysv) and under TCP, never
 * its cma: UCX aborts a survivor whose process_vm_readv finds the killed
 * rank gone (seen here as "rank 0 reported nothing" after the others' 60 s
 * shrink timeout, with UCX's default transports), which no library above it
 * can catch. Each rank closes its communicator right after its last call,
 * while peers may still wait for the completion of sends it received
 * (issue 14: the ucx transport's close now flushes first, and a send waits
 * out a grace when its peer's line closes; tests/test_ucx_close.c). */
static void kill_one_and_shrink_ucx(const char *tls) {
  setenv("UCX_TLS", tls, 1);
  kill_one_and_shrink("ucx");
}

Test(shrink, kill_one_of_four_ucx_shm) { kill_one_and_shrink_ucx("posix,sysv,self"); }
Test(shrink, kill_one_of_four_ucx_tcp) { kill_one_and_shrink_ucx("tcp,self"); }
