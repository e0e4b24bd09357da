/* Mismatched calls (lib/fingerprint.c): two ranks that call different
 * collectives, counts, types, ops or roots, or a send and a receive of
 * different sizes or types, fail at once instead of waiting for
 * RCOLL_TIMEOUT, with rcollInvalidUsage and a message that names both
 * calls and what differs; the communicator then refuses further calls at
 * once. Each case runs over shared memory, sockets and UCX (where built),
 * two ranks as threads, after three matching calls so that the numbers and
 * connections are not the first ones. The timeout is 60 s, so a failure
 * that came from a timeout cannot pass the time bound (10 s here, for a
 * loaded machine; the failures take milliseconds). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rcoll.h"

#define COUNT_MAX 1024
#define WARMUP 3
#define BOUND_S 10.0

typedef enum { ALLREDUCE, BROADCAST, SEND, RECV } call_kind_t;

/* One rank's mismatched call. */
typedef struct call {
  call_kind_t kind;
  size_t count;
  rcollDataType_t type;
  rcollRedOp_t op;
  int root; /* root, or peer of a send/recv */
  int alone; /* its peer fails: make no call after it (it would wait for RCOLL_TIMEOUT) */
} call_t;

typedef struct job {
  rcollUniqueId id;
  int rank;
  const char *net;
  call_t call;
  rcollComm_t comm;
  rcollResult_t init, warm, result, later;
  double seconds, later_seconds;
  int data_ok; /* a receive got what was sent */
  char error[1024], later_error[1024];
} job_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static rcollResult_t make_call(const call_t *c, float *buf, rcollComm_t comm) {
  switch (c->kind) {
  case ALLREDUCE: return rcollAllReduce(buf, buf, c->count, c->type, c->op, comm, NULL);
  case BROADCAST: return rcollBroadcast(buf, buf, c->count, c->type, c->root, comm, NULL);
  case SEND: return rcollSend(buf, c->count, c->type, c->root, comm, NULL);
  default: return rcollRecv(buf, c->count, c->type, c->root, comm, NULL);
  }
}

static void *rank_main(void *arg) {
  job_t *j = arg;
  rcollConfig_t cfg = RCOLL_CONFIG_INITIALIZER;
  cfg.netName = j->net;
  cfg.timeoutMs = 60000;
  j->init = rcollCommInitRankConfig(&j->comm, 2, j->id, j->rank, &cfg);
  if (j->init != rcollSuccess) {
    snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(NULL));
    return NULL;
  }
  static _Thread_local float buf[COUNT_MAX];
  for (int i = 0; i < COUNT_MAX; i++)
    buf[i] = 1.0f;
  j->warm = rcollSuccess;
  for (int i = 0; i < WARMUP && j->warm == rcollSuccess; i++)
    j->warm = rcollAllReduce(buf, buf, 16, rcollFloat32, rcollSum, j->comm, NULL);
  /* A sender's elements are 100 + i; a receiver's buffer starts at -1. */
  for (size_t i = 0; i < j->call.count && j->call.count <= COUNT_MAX; i++)
    buf[i] = j->call.kind == SEND ? 100.0f + (float)i : -1.0f;
  double t0 = now_s();
  j->result = make_call(&j->call, buf, j->comm);
  j->data_ok = 1;
  for (size_t i = 0; j->call.kind == RECV && i < j->call.count && i < COUNT_MAX; i++)
    j->data_ok &= buf[i] == 100.0f + (float)i;
  j->seconds = now_s() - t0;
  snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(j->comm));
  if (j->call.alone)
    return NULL;
  t0 = now_s();
  j->later = rcollAllReduce(buf, buf, 16, rcollFloat32, rcollSum, j->comm, NULL);
  j->later_seconds = now_s() - t0;
  snprintf(j->later_error, sizeof j->later_error, "%s", rcollGetLastError(NULL));
  return NULL;
}

/* Runs the pair; returns 0 when the transport is not available here. */
static int run_pair(job_t jobs[2], const char *net, const call_t calls[2]) {
  rcollUniqueId id;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess, "%s", rcollGetLastError(NULL));
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    jobs[r] = (job_t){.id = id, .rank = r, .net = net, .call = calls[r]};
    cr_assert_eq(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
  }
  for (int r = 0; r < 2; r++)
    pthread_join(th[r], NULL);
  if (jobs[0].init != rcollSuccess || jobs[1].init != rcollSuccess) {
    for (int r = 0; r < 2; r++)
      if (jobs[r].comm != NULL)
        rcollCommAbort(jobs[r].comm);
    cr_assert(strcmp(net, "ucx") == 0, "%s: init failed: %s / %s", net, jobs[0].error, jobs[1].error);
    cr_log_info("%s: not available here (%s); skipped", net, jobs[0].error);
    return 0;
  }
  for (int r = 0; r < 2; r++)
    cr_assert_eq(jobs[r].warm, rcollSuccess, "%s: rank %d: the matching calls failed: %s", net, r,
                 jobs[r].error);
  return 1;
}

/* One rank failed at once with a message naming both calls and the field. */
static void expect_named(const job_t *j, const char *net, const char *const want[2], const char *field) {
  cr_assert_eq(j->result, rcollInvalidUsage, "%s: rank %d: result %d (%s), want rcollInvalidUsage; "
               "error: %s", net, j->rank, j->result, rcollGetErrorString(j->result), j->error);
  cr_assert_lt(j->seconds, BOUND_S, "%s: rank %d took %.2f s to fail: %s", net, j->rank, j->seconds,
               j->error);
  for (int r = 0; r < 2; r++)
    cr_assert(strstr(j->error, want[r]) != NULL, "%s: rank %d's message does not name \"%s\": %s",
              net, j->rank, want[r], j->error);
  char differs[64];
  snprintf(differs, sizeof differs, "(%s differs)", field);
  cr_assert(strstr(j->error, differs) != NULL, "%s: rank %d's message does not say \"%s\": %s", net,
            j->rank, differs, j->error);
  /* The communicator is now in error: the next call fails at once. */
  cr_assert_neq(j->later, rcollSuccess, "%s: rank %d: a call after the mismatch succeeded", net,
                j->rank);
  cr_assert_lt(j->later_seconds, BOUND_S, "%s: rank %d: the next call took %.2f s", net, j->rank,
               j->later_seconds);
  cr_assert(strstr(j->later_error, "failed earlier") != NULL, "%s: rank %d: %s", net, j->rank,
            j->later_error);
  cr_log_info("%s: rank %d failed in %.3f s: %s", net, j->rank, j->seconds, j->error);
}

static void end_pair(job_t jobs[2]) {
  for (int r = 0; r < 2; r++)
    cr_assert_eq(rcollCommAbort(jobs[r].comm), rcollSuccess);
}

/* Both ranks fail, each naming both calls ("rank 0 called <want[0]>"). */
static void both_fail(const call_t calls[2], const char *const want[2], const char *field) {
  static const char *const nets[] = {"shm", "socket", "ucx"};
  for (size_t n = 0; n < sizeof nets / sizeof nets[0]; n++) {
    job_t jobs[2];
    if (!run_pair(jobs, nets[n], calls))
      continue;
    for (int r = 0; r < 2; r++)
      expect_named(&jobs[r], nets[n], want, field);
    end_pair(jobs);
  }
}

TestSuite(mismatch, .timeout = 300);

/* The warm-up makes collectives #1..#3, so the mismatched one is #4. Counts
 * of 600 and more are above the flat board's 2048 bytes: these cases are the
 * fingerprints' on every transport. */
Test(mismatch, kind) {
  const call_t calls[2] = {{ALLREDUCE, 600, rcollFloat32, rcollSum, 0, 0},
                           {BROADCAST, 600, rcollFloat32, rcollSum, 0, 0}};
  const char *const want[2] = {"rank 0 called allreduce #4 (600 x float32 sum,",
                               "rank 1 called broadcast #4 (600 x float32 root 0,"};
  both_fail(calls, want, "kind");
}

Test(mismatch, count) {
  const call_t calls[2] = {{ALLREDUCE, 600, rcollFloat32, rcollSum, 0, 0},
                           {ALLREDUCE, 700, rcollFloat32, rcollSum, 0, 0}};
  const char *const want[2] = {"rank 0 called allreduce #4 (600 x float32 sum,",
                               "rank 1 called allreduce #4 (700 x float32 sum,"};
  both_fail(calls, want, "count");
}

Test(mismatch, type) {
  const call_t calls[2] = {{ALLREDUCE, 600, rcollFloat32, rcollSum, 0, 0},
                           {ALLREDUCE, 600, rcollInt32, rcollSum, 0, 0}};
  const char *const want[2] = {"rank 0 called allreduce #4 (600 x float32 sum,",
                               "rank 1 called allreduce #4 (600 x int32 sum,"};
  both_fail(calls, want, "type");
}

Test(mismatch, op) {
  const call_t calls[2] = {{ALLREDUCE, 600, rcollFloat32, rcollSum, 0, 0},
                           {ALLREDUCE, 600, rcollFloat32, rcollMax, 0, 0}};
  const char *const want[2] = {"rank 0 called allreduce #4 (600 x float32 sum,",
                               "rank 1 called allreduce #4 (600 x float32 max,"};
  both_fail(calls, want, "op");
}

Test(mismatch, root) {
  const call_t calls[2] = {{BROADCAST, 600, rcollFloat32, rcollSum, 0, 0},
                           {BROADCAST, 600, rcollFloat32, rcollSum, 1, 0}};
  const char *const want[2] = {"rank 0 called broadcast #4 (600 x float32 root 0,",
                               "rank 1 called broadcast #4 (600 x float32 root 1,"};
  both_fail(calls, want, "root");
}

/* Tiny all-reduces meet on the flat board over shared memory (lib/flat.h),
 * where the slots carry the description: a difference fails there, and a
 * rank on the board whose peer made another kind of call, or a larger one
 * that runs through the engine, learns it from the peer's published call
 * (and the engine's side from the board) within milliseconds. */
Test(mismatch, board_count) {
  const call_t calls[2] = {{ALLREDUCE, 2, rcollFloat32, rcollSum, 0, 0},
                           {ALLREDUCE, 4, rcollFloat32, rcollSum, 0, 0}};
  const char *const want[2] = {"rank 0 called allreduce #4 (2 x float32 sum,",
                               "rank 1 called allreduce #4 (4 x float32 sum,"};
  both_fail(calls, want, "count");
}

Test(mismatch, board_type) {
  const call_t calls[2] = {{ALLREDUCE, 2, rcollFloat32, rcollSum, 0, 0},
                           {ALLREDUCE, 2, rcollInt32, rcollSum, 0, 0}};
  const char *const want[2] = {"rank 0 called allreduce #4 (2 x float32 sum,",
                               "rank 1 called allreduce #4 (2 x int32 sum,"};
  both_fail(calls, want, "type");
}

Test(mismatch, board_kind) {
  const call_t calls[2] = {{ALLREDUCE, 2, rcollFloat32, rcollSum, 0, 0},
                           {BROADCAST, 2, rcollFloat32, rcollSum, 0, 0}};
  const char *const want[2] = {"rank 0 called allreduce #4 (2 x float32 sum,",
                               "rank 1 called broadcast #4 (2 x float32 root 0,"};
  both_fail(calls, want, "kind");
}

Test(mismatch, board_and_engine) {
  const call_t calls[2] = {{ALLREDUCE, 2, rcollFloat32, rcollSum, 0, 0},
                           {ALLREDUCE, 700, rcollFloat32, rcollSum, 0, 0}};
  const char *const want[2] = {"rank 0 called allreduce #4 (2 x float32 sum,",
                               "rank 1 called allreduce #4 (700 x float32 sum,"};
  both_fail(calls, want, "count");
}

/* Send and receive: the receiver checks the sender's fingerprint before it
 * takes the data, and fails naming both calls. Only the receiver: the
 * sender's call may complete (a transport may buffer the message), and its
 * next call with the receiver then fails at RCOLL_TIMEOUT, naming that call
 * (the other direction carries no fingerprint for send/recv, call.h). */
static void receiver_fails(const call_t calls[2], const char *const want[2], const char *field) {
  static const char *const nets[] = {"shm", "socket", "ucx"};
  for (size_t n = 0; n < sizeof nets / sizeof nets[0]; n++) {
    job_t jobs[2];
    if (!run_pair(jobs, nets[n], calls))
      continue;
    expect_named(&jobs[1], nets[n], want, field);
    end_pair(jobs);
  }
}

Test(mismatch, p2p_size) {
  const call_t calls[2] = {{SEND, 100, rcollFloat32, rcollSum, 1, 1},
                           {RECV, 50, rcollFloat32, rcollSum, 0, 0}};
  const char *const want[2] = {"rank 0 called send #1 to rank 1 (100 x float32)",
                               "rank 1 called recv #1 from rank 0 (50 x float32)"};
  receiver_fails(calls, want, "size");
}

/* 40 bytes travel inside the fingerprint message (fingerprint.c: inline);
 * the receiver still checks the fingerprint before it takes them. */
Test(mismatch, p2p_size_inline) {
  const call_t calls[2] = {{SEND, 10, rcollFloat32, rcollSum, 1, 1},
                           {RECV, 20, rcollFloat32, rcollSum, 0, 0}};
  const char *const want[2] = {"rank 0 called send #1 to rank 1 (10 x float32)",
                               "rank 1 called recv #1 from rank 0 (20 x float32)"};
  receiver_fails(calls, want, "size");
}

Test(mismatch, p2p_type) {
  const call_t calls[2] = {{SEND, 100, rcollFloat32, rcollSum, 1, 1},
                           {RECV, 100, rcollInt32, rcollSum, 0, 0}};
  const char *const want[2] = {"rank 0 called send #1 to rank 1 (100 x float32)",
                               "rank 1 called recv #1 from rank 0 (100 x int32)"};
  receiver_fails(calls, want, "type");
}

/* Matching calls of every shape still succeed with fingerprints on, and a
 * send/recv pair in either order inside groups is no mismatch. */
Test(mismatch, matching_calls_pass) {
  static const char *const nets[] = {"shm", "socket", "shm", "socket"};
  for (size_t n = 0; n < 4; n++) {
    size_t count = n < 2 ? 100 : 10; /* 10: the message travels inline */
    const call_t calls[2] = {{SEND, count, rcollFloat32, rcollSum, 1, 0},
                             {RECV, count, rcollFloat32, rcollSum, 0, 0}};
    job_t jobs[2];
    run_pair(jobs, nets[n], calls);
    for (int r = 0; r < 2; r++) {
      cr_assert_eq(jobs[r].result, rcollSuccess, "%s: rank %d: %s", nets[n], r, jobs[r].error);
      cr_assert_eq(jobs[r].later, rcollSuccess, "%s: rank %d: %s", nets[n], r, jobs[r].later_error);
    }
    cr_assert(jobs[1].data_ok, "%s: %zu floats: the receiver did not get what was sent", nets[n], count);
    end_pair(jobs);
  }
}
