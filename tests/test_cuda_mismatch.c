/* Mismatched calls on device buffers (lib/fingerprint.c), on the host fake
 * of CUDA: device calls carry fingerprints too (as host messages ahead of
 * their data), so ranks whose device calls differ fail at once, naming
 * both calls, over CUDA IPC and over staging alike, and a device call met
 * by a host one says that the memory types differ. The timeout is 20 s
 * (cuda_ranks.c) and a failure must come within BOUND_MS, so an error that
 * came from waiting out the timeout cannot pass. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcoll.h"
#include "support/cuda_fake.h"
#include "support/cuda_ranks.h"

TestSuite(cuda_mismatch, .init = cuda_ranks_setup, .timeout = 120);

#define N 256
#define BOUND_MS 5000.0

/* What each rank calls after one matching all-reduce. */
typedef struct plan {
  size_t count[2];
  rcollRedOp_t op[2];
  int host[2];        /* this rank's call is on host buffers */
  int grouped[2];     /* this rank makes its call in a group */
  size_t first;       /* the matching call's count (0: N) */
  const char *differs; /* "call mismatch (<this> differs)" */
  const char *theirs[2]; /* a piece of each rank's error naming the other's call */
} plan_t;

/* Runs the mismatched call; returns its error (the async error for a
 * device call, which returns before its proxy fails). */
static rcollResult_t mismatched_call(rank_ctx_t *x, rcollComm_t comm, const plan_t *p,
                                     rcoll_cuda_stream_t s, float *dev, float *host) {
  int r = x->rank;
  if (p->host[r])
    return rcollAllReduce(host, host, p->count[r], rcollFloat32, p->op[r], comm, NULL);
  if (p->grouped[r])
    rcollGroupStart();
  rcollResult_t res = rcollAllReduce(dev, dev, p->count[r], rcollFloat32, p->op[r], comm, s);
  if (p->grouped[r]) {
    rcollResult_t e = rcollGroupEnd();
    res = res != rcollSuccess ? res : e;
  }
  fake_stream_sync(s);
  rcollResult_t async = rcollSuccess;
  rcollCommGetAsyncError(comm, &async);
  return res != rcollSuccess ? res : async;
}

static void mismatch_body(rank_ctx_t *x, rcollComm_t comm) {
  const plan_t *p = x->user;
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  size_t first = p->first ? p->first : N;
  float *dev = cuda_ranks_dev_alloc((first > 2 * N ? first : 2 * N) * 4), *host = calloc(2 * N, 4);
  cuda_ranks_fill(dev, first, x->rank);
  /* A matching device call first: numbers and connections are not the first. */
  x->result = rcollAllReduce(dev, dev, first, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  for (size_t i = 0; i < first; i++)
    x->wrong += dev[i] != cuda_ranks_sum_of(x->nranks, i);
  double t0 = cuda_ranks_now_ms();
  rcollResult_t r = mismatched_call(x, comm, p, s, dev, host);
  double ms = cuda_ranks_now_ms() - t0;
  const char *err = rcollGetLastError(comm);
  char want[64];
  snprintf(want, sizeof want, "call mismatch (%s differs)", p->differs);
  cr_expect_eq(r, rcollInvalidUsage, "rank %d: %s", x->rank, err);
  cr_expect(strstr(err, want) != NULL, "rank %d wants \"%s\": %s", x->rank, want, err);
  cr_expect(strstr(err, p->theirs[x->rank]) != NULL, "rank %d wants \"%s\": %s", x->rank,
            p->theirs[x->rank], err);
  cr_expect(ms < BOUND_MS, "rank %d failed after %.0f ms", x->rank, ms);
  x->wrong += r != rcollInvalidUsage || strstr(err, want) == NULL ||
              strstr(err, p->theirs[x->rank]) == NULL || ms >= BOUND_MS;
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(dev);
  free(host);
}

static void run(const char *p2p_disable, const plan_t *p) {
  setenv("RCOLL_P2P_DISABLE", p2p_disable, 1);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  ctx[0].user = ctx[1].user = (void *)p;
  cuda_ranks_run(2, N, mismatch_body, ctx);
}

static const plan_t COUNTS = {
    .count = {100, 200},
    .op = {rcollSum, rcollSum},
    .differs = "count",
    .theirs = {"rank 1 called allreduce #2 (200 x float32 sum",
               "rank 0 called allreduce #2 (100 x float32 sum"}};

Test(cuda_mismatch, counts_over_ipc) { run("0", &COUNTS); }
Test(cuda_mismatch, counts_over_staging) { run("1", &COUNTS); }

static const plan_t OPS = {
    .count = {64, 64},
    .op = {rcollSum, rcollMax},
    .differs = "op",
    .theirs = {"rank 1 called allreduce #2 (64 x float32 max", "rank 0 called allreduce #2 (64 x float32 sum"}};

Test(cuda_mismatch, ops_over_ipc) { run("0", &OPS); }
Test(cuda_mismatch, ops_over_staging) { run("1", &OPS); }

/* Rank 1 passes host buffers where rank 0 passes device buffers: its call
 * meets on the flat board (lib/flat.h), where it learns rank 0's call from
 * what rank 0 published, and rank 0's engine learns it from the board. */
static const plan_t MEMORY = {
    .count = {64, 64},
    .op = {rcollSum, rcollSum},
    .host = {0, 1},
    .differs = "memory type",
    .theirs = {"rank 1 called allreduce #2 (64 x float32 sum, flat)",
               "rank 0 called allreduce #2 (64 x float32 sum, recdbl, device buffers)"}};

Test(cuda_mismatch, host_buffers_against_device_buffers_over_ipc) { run("0", &MEMORY); }
Test(cuda_mismatch, host_buffers_against_device_buffers_over_staging) { run("1", &MEMORY); }

/* Rank 0 makes a small device call in a group (a device plan), rank 1 makes
 * it outside one, where calls of at most RCOLL_CUDA_BOUNCE bytes run through
 * host memory: the two send different messages, so the fingerprints tell
 * them apart (they waited for each other's data until RCOLL_TIMEOUT). The
 * matching call before is a device plan, so that the IPC ring exists. */
static const plan_t GROUPED = {
    .count = {64, 64},
    .op = {rcollSum, rcollSum},
    .grouped = {1, 0},
    .first = 100000,
    .differs = "path",
    .theirs = {"rank 1 called allreduce #2 (64 x float32 sum, recdbl, device buffers through host memory); "
               "every rank must make the same calls in the same order, with the same count, type, op and "
               "root, and a small device call in a group on all of them or on none",
               "rank 0 called allreduce #2 (64 x float32 sum, recdbl, device buffers); every rank"}};

Test(cuda_mismatch, a_small_call_in_a_group_on_one_rank_only_over_ipc) {
  setenv("RCOLL_CUDA_BOUNCE", "65536", 1);
  run("0", &GROUPED);
}
Test(cuda_mismatch, a_small_call_in_a_group_on_one_rank_only_over_staging) {
  setenv("RCOLL_CUDA_BOUNCE", "65536", 1);
  run("1", &GROUPED);
}

/* The same before any device plan made the IPC ring: as the communicator's
 * first call, rank 0's grouped call opens the IPC connection, whose hello
 * rank 1's bounced call does not expect; after a call bounced on both, the
 * fingerprints tell. Both fail at once; rank 0's error says why. */
static void grouped_first(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *dev = cuda_ranks_dev_alloc(N * 4);
  cuda_ranks_fill(dev, N, x->rank);
  if (x->user != NULL) { /* a call bounced on both first: the connections exist */
    x->result = rcollAllReduce(dev, dev, N, rcollFloat32, rcollSum, comm, s);
    fake_stream_sync(s);
  }
  double t0 = cuda_ranks_now_ms();
  if (x->rank == 0)
    rcollGroupStart();
  rcollResult_t r = rcollAllReduce(dev, dev, 64, rcollFloat32, rcollSum, comm, s);
  if (x->rank == 0) {
    rcollResult_t e = rcollGroupEnd();
    r = r != rcollSuccess ? r : e;
  }
  fake_stream_sync(s);
  if (r == rcollSuccess)
    rcollCommGetAsyncError(comm, &r);
  double ms = cuda_ranks_now_ms() - t0;
  const char *err = rcollGetLastError(comm);
  cr_expect_neq(r, rcollSuccess, "rank %d: the call passed", x->rank);
  cr_expect(ms < BOUND_MS, "rank %d failed after %.0f ms: %s", x->rank, ms, err);
  int told = x->rank != 0 || strstr(err, "in a group on all of them or on none") != NULL;
  cr_expect(told, "rank 0 does not say why: %s", err);
  x->wrong += r == rcollSuccess || ms >= BOUND_MS || !told;
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(dev);
}

static void run_grouped_first(int after_a_call) {
  setenv("RCOLL_CUDA_BOUNCE", "65536", 1);
  setenv("RCOLL_P2P_DISABLE", "0", 1);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  ctx[0].user = ctx[1].user = after_a_call ? ctx : NULL;
  cuda_ranks_run(2, N, grouped_first, ctx);
}

Test(cuda_mismatch, a_first_call_in_a_group_on_one_rank_only) { run_grouped_first(0); }
Test(cuda_mismatch, a_first_device_plan_in_a_group_on_one_rank_only) { run_grouped_first(1); }
