/* Seeded random sequences of device calls on the host fake of CUDA
 * (cuda_mix.h). */
#include "cuda_mix.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>

#include "conformance_case.h"
#include "conformance_ref.h"
#include "cuda_fake.h"
#include "cuda_ranks.h"

#define MIX_OPS 36

typedef struct mix {
  uint64_t seed;
  int refuse_ipc_rank; /* this rank gives no IPC handles (-1: none) */
  int split;           /* some calls on a communicator split by parity */
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

/* stream -1: a host call. */
static void describe(char *out, size_t len, const ccase_t *c, int k, int stream) {
  char on[24] = "host buffers";
  if (stream >= 0)
    snprintf(on, sizeof on, "stream %d", stream);
  snprintf(out, len, "call %d: %s of %zu %s%s%s, root %d, %s, %s", k, coll_names[c->coll], c->count,
           ref_type_names[c->type], coll_has_op(c->coll) ? " " : "",
           coll_has_op(c->coll) ? ref_op_names[c->op] : "", c->root, c->inplace ? "in place" : "out of place", on);
}

/* Set in the thread of the rank whose buffers have no IPC handle. */
static _Thread_local int mix_no_ipc;
/* Set while a host call's buffers are made. */
static _Thread_local int mix_host;

static void *mix_alloc(size_t bytes) {
  if (mix_host)
    return malloc(bytes);
  fake_alloc_no_ipc = mix_no_ipc;
  void *p = cuda_ranks_dev_alloc(bytes);
  fake_alloc_no_ipc = 0;
  return p;
}
static void mix_free(void *p) { fake_free(p); } /* host memory too: the fake frees what it does not know */

/* One call of the sequence as this rank makes it. */
typedef struct mix_call {
  ccase_t c;
  rank_bufs_t b;
  int sub;    /* on the split communicator, not the whole one */
  int stream; /* 0 or 1 */
  int host;   /* on host buffers, with no stream */
} mix_call_t;

/* Where call k goes: the whole communicator, or with `split` one time in
 * three the one of this rank's parity (the same choice on every rank). */
static int mix_on_sub(const mix_t *m, int k) {
  return m->split && ref_hash(m->seed * 7919 + (uint64_t)k * 131 + 5) % 3 == 0;
}

/* About one call in eight outside a group is made on host buffers (a
 * trainer's metrics beside its gradients): it must first wait for the
 * device calls queued before it on its communicator, which share its
 * connections (docs/gpu.md), and the calls after it must not overtake it. */
static int mix_on_host(const mix_t *m, int k) {
  return ref_hash(m->seed * 7919 + (uint64_t)k * 131 + 7) % 8 == 0;
}

static void mix_body(rank_ctx_t *x, rcollComm_t comm) {
  const mix_t *m = x->user;
  rcoll_cuda_stream_t streams[2] = {cuda_ranks_stream_new(), cuda_ranks_stream_new()};
  rcollComm_t comms[2] = {comm, NULL};
  int ranks[2] = {x->rank, 0}, sizes[2] = {x->nranks, 1};
  if (m->split) {
    cr_assert_eq(rcollCommSplit(comm, x->rank % 2, x->rank, &comms[1], NULL), rcollSuccess);
    rcollCommUserRank(comms[1], &ranks[1]);
    rcollCommCount(comms[1], &sizes[1]);
  }
  mix_call_t *calls = calloc(MIX_OPS, sizeof *calls);
  cr_assert_not_null(calls);
  char what[200];
  int queued = 0;
  mix_no_ipc = x->rank == m->refuse_ipc_rank;
  for (int k = 0; k < MIX_OPS && x->result == rcollSuccess; k++) {
    /* A group holds call k and k + 1, on call k's stream, each call on its
     * own communicator. */
    int last = k + (mix_case(m->seed, k, x->nranks).grouped ? 1 : 0);
    for (int j = k; j <= last; j++) {
      mix_call_t *mc = &calls[j];
      mc->sub = mix_on_sub(m, j);
      mc->c = mix_case(m->seed, j, sizes[mc->sub]);
      mc->stream = mix_stream(m->seed, k, x->rank);
      mc->host = last == k && mix_on_host(m, k);
      mix_host = mc->host;
      cr_assert_eq(case_prepare(&mc->c, ranks[mc->sub], sizes[mc->sub], &mc->b), 0,
                   "out of fake device memory");
      mix_host = 0;
    }
    if (last > k)
      rcollGroupStart();
    for (int j = k; j <= last && x->result == rcollSuccess; j++) {
      mix_call_t *mc = &calls[j];
      x->result = case_call_on(&mc->c, ranks[mc->sub], sizes[mc->sub], &mc->b, comms[mc->sub],
                               mc->host ? NULL : streams[mc->stream]);
      queued = j + 1;
      describe(what, sizeof what, &mc->c, j, mc->host ? -1 : mc->stream);
      if (getenv("CUDA_MIX_SHOW") != NULL) /* the sequence, to replay one */
        cr_log_info("seed %llu, rank %d: %s%s%s", (unsigned long long)m->seed, x->rank, what,
                    mc->sub ? ", split communicator" : "", last > k ? " (grouped)" : "");
      if (x->result != rcollSuccess)
        cr_log_error("seed %llu, rank %d of %d, %s: %s", (unsigned long long)m->seed, x->rank, x->nranks,
                     what, rcollGetErrorString(x->result));
    }
    if (last > k) {
      rcollResult_t e = rcollGroupEnd();
      if (x->result == rcollSuccess && e != rcollSuccess) {
        x->result = e;
        cr_log_error("seed %llu, rank %d: the group of calls %d and %d: %s", (unsigned long long)m->seed,
                     x->rank, k, k + 1, rcollGetErrorString(e));
      }
    }
    k = last;
  }
  /* The split communicator goes first, its calls finished but not the
   * whole one's, which may hold group units it shares with it (a proxy that
   * freed those after it looked into the destroyed communicator). */
  rcollResult_t async = rcollSuccess;
  if (comms[1] != NULL) {
    if (x->result == rcollSuccess)
      x->result = rcollCommFinalize(comms[1]);
    rcollCommGetAsyncError(comms[1], &async);
    rcollCommDestroy(comms[1]);
    comms[1] = NULL;
  }
  for (int s = 0; s < 2; s++)
    fake_stream_sync(streams[s]);
  /* A kernel that gave up leaves wrong results: its error says why. */
  if (async == rcollSuccess)
    rcollCommGetAsyncError(comms[0], &async);
  if (x->result == rcollSuccess)
    x->result = async;
  for (int k = 0; k < queued && x->result == rcollSuccess; k++) {
    mix_call_t *mc = &calls[k];
    case_fault_t f = {{0}};
    if (case_check(&mc->c, ranks[mc->sub], sizes[mc->sub], &mc->b, &f) != 0) {
      describe(what, sizeof what, &mc->c, k, mc->host ? -1 : mc->stream);
      if (x->wrong++ < 4)
        cr_log_error("seed %llu, rank %d of %d, %s%s: %s", (unsigned long long)m->seed, x->rank, x->nranks,
                     what, mc->sub ? ", split communicator" : "", f.what);
    }
  }
  mix_no_ipc = 0;
  for (int k = 0; k < MIX_OPS; k++)
    rank_bufs_free(&calls[k].b);
  free(calls);
  rcoll_cuda_api()->stream_destroy(streams[0]);
  rcoll_cuda_api()->stream_destroy(streams[1]);
}

void cuda_mix_run(int n, uint64_t first_seed, int seeds, int refuse_ipc_rank, int split) {
  ccase_alloc = mix_alloc;
  ccase_free = mix_free;
  const char *env = getenv("CUDA_MIX_SEED"); /* to replay one sequence */
  for (int i = 0; i < seeds; i++) {
    mix_t m = {.seed = env != NULL ? strtoull(env, NULL, 10) : first_seed + (uint64_t)i,
               .refuse_ipc_rank = refuse_ipc_rank, .split = split};
    rank_ctx_t ctx[MAX_RANKS] = {0};
    for (int r = 0; r < n; r++)
      ctx[r].user = &m;
    cuda_ranks_run(n, 0, mix_body, ctx);
  }
}

