/* Seeded random sequences of device-buffer calls on the host fake of CUDA:
 * every collective, type, op, root, in place or not, counts from 0 to 40000
 * (across the bounce limit, the direct path's in-place limit and many
 * chunks), some of them two to a group, each on one of two streams chosen
 * per rank. All calls are queued before any is waited for, then every rank
 * checks every call's result, its unchanged send buffer and its guard bytes
 * (tests/support/conformance_case.h). Not the legacy stream: ranks that are
 * threads of one process share it, so one rank's wait for its call would
 * hold the others' calls queued behind it, on a GPU as on the fake.
 *
 * The other fake-CUDA suites check one path at a time and wait after each
 * call; these runs put the paths side by side on one communicator (bounced
 * host plans, proxy device plans, direct kernels through the regions and in
 * place) with many calls in flight on streams that run in any order, which
 * is where ordering mistakes between them show. CUDA_MIX_SEED=N replays one
 * sequence, CUDA_MIX_SHOW=1 (with --verbose) lists its calls. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>

#include "rcoll.h"
#include "support/conformance_case.h"
#include "support/conformance_ref.h"
#include "support/cuda_colls.h"
#include "support/cuda_fake.h"
#include "support/cuda_ranks.h"

TestSuite(cuda_mix, .init = cuda_ranks_setup, .timeout = 240);

#define MIX_OPS 36

typedef struct mix {
  uint64_t seed;
  int refuse_ipc_rank; /* this rank gives no IPC handles (-1: none) */
} mix_t;

static const size_t mix_counts[] = {0, 1, 5, 33, 1000, 4099, 16385, 40000};

/* Call k of the sequence of `seed` at n ranks (the same on every rank). */
static ccase_t mix_case(uint64_t seed, int k, int n) {
  return ccase_random(seed, k, MIX_OPS, n, mix_counts, sizeof mix_counts / sizeof mix_counts[0]);
}

/* Which of the rank's two streams call k goes on; each rank picks for itself. */
static int mix_stream(uint64_t seed, int k, int rank) {
  return (int)(ref_hash(seed * 7919 + (uint64_t)k * 131 + 3 + (uint64_t)rank) % 2);
}

static void describe(char *out, size_t len, const ccase_t *c, int k, int stream) {
  snprintf(out, len, "call %d: %s of %zu %s%s%s, root %d, %s, stream %d", k, coll_names[c->coll], c->count,
           ref_type_names[c->type], coll_has_op(c->coll) ? " " : "",
           coll_has_op(c->coll) ? ref_op_names[c->op] : "", c->root, c->inplace ? "in place" : "out of place",
           stream);
}

static void *mix_alloc(size_t bytes) { return cuda_ranks_dev_alloc(bytes); }
static void mix_free(void *p) { fake_free(p); }

static void mix_body(rank_ctx_t *x, rcollComm_t comm) {
  const mix_t *m = x->user;
  rcoll_cuda_stream_t streams[2] = {cuda_ranks_stream_new(), cuda_ranks_stream_new()};
  ccase_t cases[MIX_OPS];
  int on[MIX_OPS];
  rank_bufs_t *bufs = calloc(MIX_OPS, sizeof *bufs);
  cr_assert_not_null(bufs);
  char what[200];
  int queued = 0;
  if (m->refuse_ipc_rank >= 0) { /* the box is made at the first direct call, with IPC allowed */
    long wrong = cuda_colls_allreduce(x, comm, streams[0]);
    cr_assert_eq(wrong, 0, "rank %d: the first all-reduce was wrong", x->rank);
  }
  for (int k = 0; k < MIX_OPS && x->result == rcollSuccess; k++) {
    cases[k] = mix_case(m->seed, k, x->nranks);
    int grouped = cases[k].grouped;
    on[k] = mix_stream(m->seed, k, x->rank);
    cr_assert_eq(case_prepare(&cases[k], x->rank, x->nranks, &bufs[k]), 0, "out of fake device memory");
    if (grouped) {
      on[k + 1] = on[k];
      cases[k + 1] = mix_case(m->seed, k + 1, x->nranks);
      cr_assert_eq(case_prepare(&cases[k + 1], x->rank, x->nranks, &bufs[k + 1]), 0);
      rcollGroupStart();
    }
    for (int j = k; j <= k + grouped && x->result == rcollSuccess; j++) {
      /* The user's buffers can't be handed over (as memory from
       * cudaMallocAsync pools): refused only around the calls that run
       * direct, as the library's own memory (the proxy's IPC ring) can be. */
      fake_refuse_ipc = x->rank == m->refuse_ipc_rank && !grouped && cases[j].count > 0 &&
                        cases[j].coll != SENDRECV && cases[j].coll != A2A_SENDRECV;
      x->result = case_call_on(&cases[j], x->rank, x->nranks, &bufs[j], comm, streams[on[j]]);
      fake_refuse_ipc = 0;
      queued = j + 1;
      describe(what, sizeof what, &cases[j], j, on[j]);
      if (getenv("CUDA_MIX_SHOW") != NULL) /* the sequence, to replay one */
        cr_log_info("seed %llu, rank %d: %s%s", (unsigned long long)m->seed, x->rank, what,
                    grouped ? " (grouped)" : "");
      if (x->result != rcollSuccess)
        cr_log_error("seed %llu, rank %d of %d, %s: %s", (unsigned long long)m->seed, x->rank, x->nranks,
                     what, rcollGetErrorString(x->result));
    }
    if (grouped) {
      rcollResult_t e = rcollGroupEnd();
      if (x->result == rcollSuccess && e != rcollSuccess) {
        x->result = e;
        cr_log_error("seed %llu, rank %d: the group of calls %d and %d: %s", (unsigned long long)m->seed,
                     x->rank, k, k + 1, rcollGetErrorString(e));
      }
      k++;
    }
  }
  for (int s = 0; s < 2; s++)
    fake_stream_sync(streams[s]);
  /* A kernel that gave up leaves wrong results: its error says why. */
  rcollResult_t async = rcollSuccess;
  rcollCommGetAsyncError(comm, &async);
  if (x->result == rcollSuccess)
    x->result = async;
  for (int k = 0; k < queued && x->result == rcollSuccess; k++) {
    case_fault_t f = {{0}};
    if (case_check(&cases[k], x->rank, x->nranks, &bufs[k], &f) != 0) {
      describe(what, sizeof what, &cases[k], k, on[k]);
      if (x->wrong++ < 4)
        cr_log_error("seed %llu, rank %d of %d, %s: %s", (unsigned long long)m->seed, x->rank, x->nranks,
                     what, f.what);
    }
  }
  for (int k = 0; k < MIX_OPS; k++)
    rank_bufs_free(&bufs[k]);
  free(bufs);
  rcoll_cuda_api()->stream_destroy(streams[0]);
  rcoll_cuda_api()->stream_destroy(streams[1]);
}

/* Runs the sequences of `seeds` seeds on n ranks, each on a communicator
 * of its own. */
static void run_mix(int n, uint64_t first_seed, int seeds, int refuse_ipc_rank) {
  ccase_alloc = mix_alloc;
  ccase_free = mix_free;
  const char *env = getenv("CUDA_MIX_SEED"); /* to replay one sequence */
  for (int i = 0; i < seeds; i++) {
    mix_t m = {.seed = env != NULL ? strtoull(env, NULL, 10) : first_seed + (uint64_t)i,
               .refuse_ipc_rank = refuse_ipc_rank};
    rank_ctx_t ctx[MAX_RANKS] = {0};
    for (int r = 0; r < n; r++)
      ctx[r].user = &m;
    cuda_ranks_run(n, 1, mix_body, ctx); /* count: the first all-reduce's */
  }
}

/* Within a node over CUDA IPC: calls whose largest buffer is at most 16 KiB
 * are host plans on pinned copies, the others device plans through the
 * proxy in 4 KiB parts. */
Test(cuda_mix, ipc_bounced_and_device_plans) {
  setenv("RCOLL_P2P_DISABLE", "0", 1);
  setenv("RCOLL_CHUNK_SIZE", "4096", 1);
  setenv("RCOLL_CUDA_BOUNCE", "16384", 1);
  run_mix(3, 1, 4, -1);
  cr_expect_gt(atomic_load(&fake_stats.reduce_kernels), 0, "no device plan reduced");
}

/* The same with the bounce kernel rather than two copies and a wait. */
Test(cuda_mix, ipc_bounce_kernel_and_device_plans) {
  setenv("RCOLL_P2P_DISABLE", "0", 1);
  setenv("RCOLL_CHUNK_SIZE", "4096", 1);
  setenv("RCOLL_CUDA_BOUNCE", "16384", 1);
  setenv("RCOLL_CUDA_BOUNCE_KERNEL", "1", 1);
  run_mix(2, 11, 3, -1);
  cr_expect_gt(atomic_load(&fake_stats.bounce_kernels), 0, "no call bounced through the kernel");
}

/* Staged through pinned slots over sockets, every copy taking 100 us, so
 * that data not waited for shows as stale. */
Test(cuda_mix, staged_over_sockets_with_slow_copies) {
  setenv("RCOLL_SHM_DISABLE", "1", 1);
  setenv("RCOLL_P2P_DISABLE", "1", 1);
  setenv("RCOLL_CHUNK_SIZE", "4096", 1);
  setenv("RCOLL_CUDA_BOUNCE", "16384", 1);
  atomic_store(&fake_stats.copy_delay_us, 100);
  run_mix(3, 21, 3, -1);
}

/* The direct path: collectives from 16 KiB in place, smaller ones through
 * 4 KiB regions in many rounds, point-to-point calls through the proxy, all
 * on the same flags. */
static void direct_setup(void) {
  setenv("RCOLL_P2P_DISABLE", "0", 1);
  setenv("RCOLL_CUDA_DIRECT", "1", 1);
  setenv("RCOLL_CUDA_DIRECT_CHUNK", "4096", 1);
  setenv("RCOLL_CUDA_DIRECT_INPLACE", "16384", 1);
  setenv("RCOLL_CHUNK_SIZE", "4096", 1);
}

Test(cuda_mix, direct_two_ranks) {
  direct_setup();
  run_mix(2, 31, 4, -1);
  cr_expect_gt(atomic_load(&fake_stats.direct_inplace), 0, "no direct call ran in place");
  cr_expect_gt(atomic_load(&fake_stats.direct_kernels), atomic_load(&fake_stats.direct_inplace),
               "no direct call went through the regions");
}

Test(cuda_mix, direct_four_ranks) {
  direct_setup();
  run_mix(4, 41, 3, -1);
  cr_expect_gt(atomic_load(&fake_stats.direct_inplace), 0, "no direct call ran in place");
}

/* A rank that cannot hand over its buffers sends every call through the
 * regions. */
Test(cuda_mix, direct_with_a_rank_without_ipc_handles) {
  direct_setup();
  run_mix(3, 51, 3, 1);
  cr_expect_eq(atomic_load(&fake_stats.direct_inplace), 0,
               "a call ran in place without every rank's handles");
  cr_expect_gt(atomic_load(&fake_stats.direct_kernels), 0);
}
