/* The kept plan of a repeated call (lib/plan_cache.h): a call that repeats
 * the previous one reuses its plan, renumbered. Every case checks every
 * result exactly, over shared memory and sockets, 2 and 3 ranks as threads,
 * with the repeats interleaved with what must plan afresh: other
 * collectives, other counts or buffers, calls in a group, PreMulSum ops,
 * and a mismatch that must still be caught after many repeats. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcoll.h"

#define MAXR 5
#define N 64
#define REPEATS 40

typedef struct job {
  rcollUniqueId id;
  int rank, nranks;
  const char *net;
  int scenario;
  int bad;            /* results that differed from the expected value */
  rcollResult_t fail; /* the first call that failed */
  char error[512];
} job_t;

static void failed(job_t *j, rcollResult_t r) {
  if (j->fail == rcollSuccess) {
    j->fail = r;
    snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(NULL));
  }
}

/* An in-place sum of rank + i + k over the ranks, checked. */
static void sum_check(job_t *j, rcollComm_t comm, float *buf, size_t count, int i) {
  for (size_t k = 0; k < count; k++)
    buf[k] = (float)(j->rank + i + (int)k);
  rcollResult_t r = rcollAllReduce(buf, buf, count, rcollFloat32, rcollSum, comm, NULL);
  if (r != rcollSuccess)
    return failed(j, r);
  int n = j->nranks;
  for (size_t k = 0; k < count; k++)
    j->bad += buf[k] != (float)(n * (n - 1) / 2 + n * (i + (int)k));
}

static void bcast_check(job_t *j, rcollComm_t comm, float *buf, int i) {
  int root = i % j->nranks;
  for (int k = 0; k < N; k++)
    buf[k] = j->rank == root ? (float)(1000 + i + k) : -1.0f;
  rcollResult_t r = rcollBroadcast(buf, buf, N, rcollFloat32, root, comm, NULL);
  if (r != rcollSuccess)
    return failed(j, r);
  for (int k = 0; k < N; k++)
    j->bad += buf[k] != (float)(1000 + i + k);
}

/* Repeats of one call, with other collectives and sizes between them. */
static void interleaved(job_t *j, rcollComm_t comm) {
  static _Thread_local float a[N], b[N];
  for (int i = 0; i < REPEATS && j->fail == rcollSuccess; i++) {
    sum_check(j, comm, a, 2, i);
    if (i % 7 == 3)
      bcast_check(j, comm, b, i);
    if (i % 5 == 1)
      sum_check(j, comm, a, N, i); /* same buffer, another count */
    if (i % 9 == 2)
      sum_check(j, comm, b, 2, i); /* same count, another buffer */
  }
}

/* Repeats around groups, whose calls plan afresh and share one plan. */
static void grouped(job_t *j, rcollComm_t comm) {
  static _Thread_local float a[N], b[N], c[N];
  for (int i = 0; i < REPEATS / 4 && j->fail == rcollSuccess; i++) {
    sum_check(j, comm, a, 8, i);
    sum_check(j, comm, a, 8, i + 1);
    for (int k = 0; k < N; k++)
      b[k] = (float)j->rank, c[k] = (float)(2 * j->rank);
    rcollResult_t r = rcollGroupStart();
    if (r == rcollSuccess)
      r = rcollAllReduce(b, b, 8, rcollFloat32, rcollSum, comm, NULL);
    if (r == rcollSuccess)
      r = rcollAllReduce(c, c, 8, rcollFloat32, rcollMax, comm, NULL);
    rcollResult_t e = rcollGroupEnd();
    if (r != rcollSuccess || e != rcollSuccess)
      return failed(j, r != rcollSuccess ? r : e);
    int n = j->nranks;
    for (int k = 0; k < 8; k++)
      j->bad += b[k] != (float)(n * (n - 1) / 2) || c[k] != (float)(2 * (n - 1));
  }
}

/* A PreMulSum op is never reused: a new op with another scalar must act. */
static void premul(job_t *j, rcollComm_t comm) {
  static _Thread_local float a[N];
  for (int i = 1; i <= 6 && j->fail == rcollSuccess; i++) {
    float scalar = (float)i;
    rcollRedOp_t op;
    rcollResult_t r = rcollRedOpCreatePreMulSum(&op, &scalar, rcollFloat32, rcollScalarHostImmediate, comm);
    for (int k = 0; k < 4; k++)
      a[k] = 1.0f;
    for (int rep = 0; rep < 2 && r == rcollSuccess; rep++) {
      r = rcollAllReduce(a, a, 4, rcollFloat32, op, comm, NULL);
      float want = (float)j->nranks * (rep == 0 ? scalar : scalar * scalar * (float)j->nranks);
      for (int k = 0; k < 4 && r == rcollSuccess; k++)
        j->bad += a[k] != want;
    }
    if (r == rcollSuccess)
      r = rcollRedOpDestroy(op, comm);
    if (r != rcollSuccess)
      failed(j, r);
  }
}

/* After many repeats the last rank calls a different count: every rank
 * must fail with a mismatch, naming the same call number. */
static void mismatch_after_repeats(job_t *j, rcollComm_t comm) {
  static _Thread_local float a[N];
  for (int i = 0; i < REPEATS && j->fail == rcollSuccess; i++)
    sum_check(j, comm, a, 2, i);
  if (j->fail != rcollSuccess)
    return;
  size_t count = j->rank == j->nranks - 1 ? 3 : 2;
  rcollResult_t r = rcollAllReduce(a, a, count, rcollFloat32, rcollSum, comm, NULL);
  failed(j, r == rcollSuccess ? rcollInternalError : r);
}

/* Every kind of collective, each repeated, at any rank count: plans with
 * several peers, joins and local copies (RCOLL_ALGO picks the algorithm). */
static void collectives(job_t *j, rcollComm_t comm) {
  static _Thread_local float a[N * MAXR], b[N * MAXR];
  int n = j->nranks, me = j->rank;
  for (int i = 0; i < 3 && j->fail == rcollSuccess; i++)
    sum_check(j, comm, a, 2, i), sum_check(j, comm, a, N, i);
  for (int i = 0; i < 3 && j->fail == rcollSuccess; i++)
    bcast_check(j, comm, b, 0);
  for (int i = 0; i < 3 && j->fail == rcollSuccess; i++) { /* all-gather of rank + i + k */
    for (int k = 0; k < 4; k++)
      a[k] = (float)(me + i + k);
    rcollResult_t r = rcollAllGather(a, b, 4, rcollFloat32, comm, NULL);
    if (r != rcollSuccess)
      return failed(j, r);
    for (int q = 0; q < n; q++)
      for (int k = 0; k < 4; k++)
        j->bad += b[q * 4 + k] != (float)(q + i + k);
  }
  for (int i = 0; i < 3 && j->fail == rcollSuccess; i++) { /* reduce-scatter of rank + i + k */
    for (int k = 0; k < 4 * n; k++)
      a[k] = (float)(me + i + k);
    rcollResult_t r = rcollReduceScatter(a, b, 4, rcollFloat32, rcollSum, comm, NULL);
    if (r != rcollSuccess)
      return failed(j, r);
    for (int k = 0; k < 4; k++)
      j->bad += b[k] != (float)(n * (n - 1) / 2 + n * (i + me * 4 + k));
  }
  for (int i = 0; i < 3 && j->fail == rcollSuccess; i++) { /* all-to-all: block q of rank me is 100me + q + i */
    for (int q = 0; q < n; q++)
      for (int k = 0; k < 2; k++)
        a[q * 2 + k] = (float)(100 * me + q + i);
    rcollResult_t r = rcollAlltoAll(a, b, 2, rcollFloat32, comm, NULL);
    if (r != rcollSuccess)
      return failed(j, r);
    for (int q = 0; q < n; q++)
      for (int k = 0; k < 2; k++)
        j->bad += b[q * 2 + k] != (float)(100 * q + me + i);
  }
}

static void *rank_main(void *arg) {
  job_t *j = arg;
  rcollConfig_t cfg = RCOLL_CONFIG_INITIALIZER;
  cfg.netName = j->net;
  cfg.timeoutMs = 30000;
  rcollComm_t comm;
  rcollResult_t r = rcollCommInitRankConfig(&comm, j->nranks, j->id, j->rank, &cfg);
  if (r != rcollSuccess) {
    failed(j, r);
    return NULL;
  }
  switch (j->scenario) {
  case 0: interleaved(j, comm); break;
  case 1: grouped(j, comm); break;
  case 2: premul(j, comm); break;
  case 4: collectives(j, comm); break;
  default: mismatch_after_repeats(j, comm); break;
  }
  if (j->fail == rcollSuccess)
    rcollCommDestroy(comm);
  else
    rcollCommAbort(comm);
  return NULL;
}

static void run(const char *net, int nranks, int scenario, job_t *jobs) {
  rcollUniqueId id;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess);
  pthread_t th[MAXR];
  for (int r = 0; r < nranks; r++) {
    jobs[r] = (job_t){.id = id, .rank = r, .nranks = nranks, .net = net, .scenario = scenario};
    cr_assert_eq(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
  }
  for (int r = 0; r < nranks; r++)
    pthread_join(th[r], NULL);
}

/* Over shm the small all-reduces meet on the flat board (lib/flat.h), which
 * plans nothing: each scenario runs with the board off (RCOLL_FLAT_MAX=0,
 * every call planned or restored) and on (board calls between restored
 * plans). */
static void expect_ok(const char *net, int nranks, int scenario) {
  for (int board = 0; board <= (strcmp(net, "shm") == 0); board++) {
    job_t jobs[MAXR];
    if (board)
      unsetenv("RCOLL_FLAT_MAX");
    else
      setenv("RCOLL_FLAT_MAX", "0", 1);
    run(net, nranks, scenario, jobs);
    for (int r = 0; r < nranks; r++) {
      cr_expect_eq(jobs[r].fail, rcollSuccess, "%s, %d ranks, board %d, rank %d: %s", net, nranks, board, r,
                   jobs[r].error);
      cr_expect_eq(jobs[r].bad, 0, "%s, %d ranks, board %d, rank %d: %d wrong results", net, nranks, board, r,
                   jobs[r].bad);
    }
  }
  unsetenv("RCOLL_FLAT_MAX");
}

Test(plan_cache, repeats_interleaved_shm) { expect_ok("shm", 2, 0), expect_ok("shm", 3, 0); }
Test(plan_cache, repeats_interleaved_socket) { expect_ok("socket", 2, 0), expect_ok("socket", 3, 0); }
Test(plan_cache, repeats_around_groups) { expect_ok("shm", 3, 1); }
Test(plan_cache, premulsum_ops_not_reused) { expect_ok("shm", 2, 2); }

Test(plan_cache, every_collective_and_algorithm_repeated) {
  static const char *algos[] = {"ring", "tree", "rabenseifner", NULL};
  for (int a = 0; algos[a] != NULL; a++) {
    setenv("RCOLL_ALGO", algos[a], 1); /* read when the communicators are made */
    for (int n = 2; n <= MAXR; n++)
      expect_ok("shm", n, 4);
  }
  unsetenv("RCOLL_ALGO");
  expect_ok("socket", 4, 4);
}

Test(plan_cache, mismatch_after_repeats, .timeout = 60) {
  job_t jobs[MAXR];
  run("shm", 2, 3, jobs); /* with 2 ranks each one receives the other's fingerprint */
  for (int r = 0; r < 2; r++) {
    cr_expect_eq(jobs[r].bad, 0, "rank %d: wrong results before the mismatch", r);
    cr_expect_eq(jobs[r].fail, rcollInvalidUsage, "rank %d: %s", r, jobs[r].error);
    /* The 40 repeats were numbered 1..40: the mismatch is call #41. */
    cr_expect(strstr(jobs[r].error, "mismatch") != NULL && strstr(jobs[r].error, "#41") != NULL,
              "rank %d: %s", r, jobs[r].error);
  }
}
