/* The direct path (RCOLL_CUDA_DIRECT) inside groups, on the host fake of
 * CUDA: a group's collectives are held until rcollGroupEnd and run there as
 * direct kernels when they are all for one communicator (lib/group.c), its
 * sends and receives one more kernel; a group that holds them
 * for two communicators is planned, and a rank that did not group alike is
 * told why after RCOLL_TIMEOUT. (test_cuda_direct.c had grown past 600
 * lines.) */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "cuda/cuda_comm.h"
#include "rcoll.h"
#include "support/cuda_fake.h"
#include "support/cuda_ranks.h"

static void direct_setup(void) {
  cuda_ranks_setup();
  setenv("RCOLL_CUDA_DIRECT", "1", 1);
  setenv("RCOLL_TIMEOUT", "2", 1);
}

TestSuite(cuda_direct_groups, .init = direct_setup, .timeout = 120);

static int direct_kernels(void) { return atomic_load(&fake_stats.direct_kernels); }

/* Elements of buf that are not `scale` times what want(i) says, logged
 * (the first 3). */
static long count_off(const rank_ctx_t *x, const char *what, const float *buf, size_t n,
                      float (*want)(const rank_ctx_t *, size_t), float scale) {
  long wrong = 0;
  for (size_t i = 0; i < n; i++)
    if (buf[i] != scale * want(x, i) && wrong++ < 3)
      cr_log_warn("rank %d: %s[%zu] is %g, not %g", x->rank, what, i, buf[i], scale * want(x, i));
  return wrong;
}

static float sum_of(const rank_ctx_t *x, size_t i) { return cuda_ranks_sum_of(x->nranks, i); }
static float mine(const rank_ctx_t *x, size_t i) { return cuda_ranks_input(x->rank, i); }
static float from_prev(const rank_ctx_t *x, size_t i) {
  return cuda_ranks_input((x->rank + x->nranks - 1) % x->nranks, i);
}
static float of_root(const rank_ctx_t *x, size_t i) { (void)x; return cuda_ranks_input(1, i); }

/* Rank 0 makes its second all-reduce in a group, rank 1 outside one: both
 * run it as a kernel (before, rank 0's went to the proxy and both waited
 * until RCOLL_TIMEOUT). With x->user set, a group of a send and a receive
 * comes first (a kernel of its own). */
static void one_rank_groups(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = 100;
  float *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(n * 4);
  cuda_ranks_fill(a, n, x->rank);
  x->result = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  if (x->user != NULL && x->result == rcollSuccess) {
    rcollGroupStart();
    rcollSend(a, n, rcollFloat32, 1 - x->rank, comm, s);
    rcollRecv(b, n, rcollFloat32, 1 - x->rank, comm, s);
    x->result = rcollGroupEnd();
  }
  if (x->rank == 0)
    rcollGroupStart();
  rcollResult_t r = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  if (x->rank == 0) {
    rcollResult_t e = rcollGroupEnd();
    r = r != rcollSuccess ? r : e;
  }
  if (x->result == rcollSuccess)
    x->result = r;
  if (x->result == rcollSuccess)
    x->result = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  if (x->result == rcollSuccess)
    rcollCommGetAsyncError(comm, &x->result);
  x->wrong += count_off(x, "a", a, n, sum_of, 4); /* 2 ranks: each call doubles the sum */
  fake_free(a);
  fake_free(b);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_groups, a_call_in_a_group_on_one_rank_only_is_a_kernel_on_both) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 0, one_rank_groups, ctx);
  cr_expect_eq(direct_kernels(), 6, "%d direct kernels, not 3 calls x 2 ranks", direct_kernels());
}

Test(cuda_direct_groups, a_call_in_a_group_on_one_rank_only_is_a_kernel_on_both_after_sends) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  ctx[0].user = ctx[1].user = ctx; /* any non-NULL: a send and a receive first */
  cuda_ranks_run(2, 0, one_rank_groups, ctx);
  cr_expect_eq(direct_kernels(), 8, "%d direct kernels, not 4 calls x 2 ranks", direct_kernels());
}

/* A group of four collectives (an all-reduce large enough to meet in
 * place, a reduce-scatter, an all-gather and a broadcast through the
 * regions): four kernels a rank, no unit for the proxy, every result right. */
static void collectives_grouped(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = 300000, m = 1000; /* n floats: 1.2 MB, over RCOLL_CUDA_DIRECT_INPLACE */
  const size_t nr = (size_t)x->nranks;
  float *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(n * 4);
  float *rs_in = cuda_ranks_dev_alloc(nr * m * 4), *rs = cuda_ranks_dev_alloc(m * 4);
  float *ag_in = cuda_ranks_dev_alloc(m * 4), *ag = cuda_ranks_dev_alloc(nr * m * 4);
  float *bc = cuda_ranks_dev_alloc(m * 4);
  cuda_ranks_fill(a, n, x->rank);
  for (size_t q = 0; q < nr; q++) /* segment q holds elements q*m..: the reduce-scatter's sum is checkable */
    for (size_t i = 0; i < m; i++)
      rs_in[q * m + i] = cuda_ranks_input(x->rank, q * m + i);
  cuda_ranks_fill(ag_in, m, x->rank);
  cuda_ranks_fill(bc, m, x->rank);
  rcollGroupStart();
  rcollAllReduce(a, b, n, rcollFloat32, rcollSum, comm, s);
  rcollReduceScatter(rs_in, rs, m, rcollFloat32, rcollSum, comm, s);
  rcollAllGather(ag_in, ag, m, rcollFloat32, comm, s);
  rcollBroadcast(bc, bc, m, rcollFloat32, 1, comm, s);
  x->result = rcollGroupEnd();
  fake_stream_sync(s);
  x->wrong += count_off(x, "all-reduce", b, n, sum_of, 1);
  for (size_t i = 0; i < m; i++) {
    float want = cuda_ranks_sum_of(x->nranks, (size_t)x->rank * m + i);
    if (rs[i] != want && x->wrong++ < 3)
      cr_log_warn("rank %d: reduce-scatter [%zu] is %g, not %g", x->rank, i, rs[i], want);
  }
  for (size_t q = 0; q < nr; q++)
    for (size_t i = 0; i < m; i++)
      if (ag[q * m + i] != cuda_ranks_input((int)q, i) && x->wrong++ < 3)
        cr_log_warn("rank %d: all-gather block %zu [%zu] is %g", x->rank, q, i, ag[q * m + i]);
  x->wrong += count_off(x, "broadcast", bc, m, of_root, 1);
  x->wrong += comm->cuda->prof.units != 0; /* nothing went to the proxy */
  fake_free(a), fake_free(b), fake_free(rs_in), fake_free(rs), fake_free(ag_in), fake_free(ag);
  fake_free(bc);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_groups, a_group_of_collectives_is_a_kernel_each) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(3, 0, collectives_grouped, ctx);
  cr_expect_eq(direct_kernels(), 4 * 3, "%d direct kernels, not 4 calls x 3 ranks", direct_kernels());
  cr_expect_eq(atomic_load(&fake_stats.direct_inplace), 3, "%d in place, not the all-reduce's 3",
               atomic_load(&fake_stats.direct_inplace));
}

/* A send to the next rank, a receive from the previous and an all-reduce
 * in one group: the all-reduce is a kernel, the send and the receive one
 * more (test_cuda_direct_p2p.c), nothing for the proxy. */
static void sends_and_a_collective(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = 5000;
  int next = (x->rank + 1) % x->nranks, prev = (x->rank + x->nranks - 1) % x->nranks;
  float *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(n * 4), *c = cuda_ranks_dev_alloc(n * 4);
  cuda_ranks_fill(a, n, x->rank);
  rcollGroupStart();
  rcollSend(a, n, rcollFloat32, next, comm, s);
  rcollAllReduce(a, b, n, rcollFloat32, rcollSum, comm, s);
  rcollRecv(c, n, rcollFloat32, prev, comm, s);
  x->result = rcollGroupEnd();
  fake_stream_sync(s);
  x->wrong += count_off(x, "all-reduce", b, n, sum_of, 1);
  x->wrong += count_off(x, "received", c, n, from_prev, 1);
  x->wrong += count_off(x, "sent", a, n, mine, 1);
  x->wrong += comm->cuda->prof.units != 0 || comm->cuda->direct.p2p_calls != 1;
  fake_free(a), fake_free(b), fake_free(c);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_groups, sends_of_a_group_are_a_kernel_beside_its_collectives) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(3, 0, sends_and_a_collective, ctx);
  cr_expect_eq(direct_kernels(), 6, "%d direct kernels, not 2 x 3 ranks", direct_kernels());
}

/* As NCCL's, a grouped call starts at rcollGroupEnd: work the user queued
 * on its stream between the call and the group's end runs before it. */
typedef struct refill {
  float *buf;
  size_t n;
  int rank;
} refill_t;

static void refill_tenfold(void *arg) {
  refill_t *f = arg;
  for (size_t i = 0; i < f->n; i++)
    f->buf[i] = 10 * cuda_ranks_input(f->rank, i);
}

static void work_between_call_and_end(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = 3000;
  float *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(n * 4);
  cuda_ranks_fill(a, n, x->rank);
  refill_t f = {a, n, x->rank};
  rcollGroupStart();
  x->result = rcollAllReduce(a, b, n, rcollFloat32, rcollSum, comm, s);
  fake_stream_host(s, refill_tenfold, &f);
  rcollResult_t e = rcollGroupEnd();
  x->result = x->result != rcollSuccess ? x->result : e;
  fake_stream_sync(s);
  x->wrong += count_off(x, "all-reduce", b, n, sum_of, 10);
  fake_free(a), fake_free(b);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_groups, work_queued_before_the_group_ends_runs_before_its_calls) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 0, work_between_call_and_end, ctx);
  cr_expect_eq(direct_kernels(), 2, "%d direct kernels, not 2", direct_kernels());
}

/* A second communicator of the same ranks, and one all-reduce on each
 * outside a group (their direct paths set up). */
static rcollComm_t second_comm(rank_ctx_t *x, rcollComm_t comm, float *a, size_t n,
                               rcoll_cuda_stream_t s) {
  rcollComm_t other = NULL;
  x->result = rcollCommSplit(comm, 0, x->rank, &other, NULL);
  if (x->result == rcollSuccess)
    x->result = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  if (x->result == rcollSuccess)
    x->result = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, other, s);
  fake_stream_sync(s);
  return other;
}

/* Rank 0 holds all-reduces for two communicators in one group, which is
 * planned (a thread holding calls for two communicators could wait in one
 * for a peer that waits in the other); rank 1 makes them outside a group,
 * as kernels. Neither sees the other's call: after RCOLL_TIMEOUT each
 * error says why. */
static void two_comms_in_one_group(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = 100;
  float *a = cuda_ranks_dev_alloc(n * 4);
  cuda_ranks_fill(a, n, x->rank);
  rcollComm_t other = second_comm(x, comm, a, n, s);
  if (x->result != rcollSuccess)
    return;
  rcollResult_t r;
  if (x->rank == 0) {
    rcollGroupStart();
    rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
    rcollAllReduce(a, a, n, rcollFloat32, rcollSum, other, s);
    r = rcollGroupEnd();
  } else {
    r = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
    if (r == rcollSuccess)
      r = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, other, s);
  }
  fake_stream_sync(s);
  if (r == rcollSuccess) /* rank 1's kernels failed on the device: its next call says so */
    r = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  if (r == rcollSuccess)
    rcollCommGetAsyncError(comm, &r);
  const char *msg = rcollGetLastError(comm);
  cr_log_info("rank %d: %s", x->rank, msg);
  x->wrong += r == rcollSuccess || strstr(msg, "group such calls alike on every rank") == NULL;
  const char *why = x->rank == 1 ? "group held direct calls for two communicators"
                                 : "a kernel that needs no connection";
  x->wrong += strstr(msg, why) == NULL;
  fake_stream_sync(s);
  rcollCommDestroy(other);
  fake_free(a);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_groups, a_group_holding_calls_for_two_communicators_on_one_rank_is_explained) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 0, two_comms_in_one_group, ctx);
}

/* A device all-reduce on one communicator and a host all-reduce on another
 * in one group: refused at rcollGroupEnd before any kernel, as before the
 * device calls were held; both communicators go on working. */
static void host_and_device_in_one_group(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = 100;
  float *a = cuda_ranks_dev_alloc(n * 4), host[100];
  cuda_ranks_fill(a, n, x->rank);
  cuda_ranks_fill(host, n, x->rank);
  rcollComm_t other = second_comm(x, comm, a, n, s);
  if (x->result != rcollSuccess)
    return;
  int64_t before = comm->cuda->direct.calls;
  rcollGroupStart();
  rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  rcollAllReduce(host, host, n, rcollFloat32, rcollSum, other, NULL);
  rcollResult_t r = rcollGroupEnd();
  const char *msg = rcollGetLastError(NULL);
  x->wrong += r != rcollInvalidUsage || strstr(msg, "mixes calls on device buffers") == NULL;
  fake_stream_sync(s);
  x->wrong += comm->cuda->direct.calls != before; /* ours: the other rank may be past its group */
  x->result = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  if (x->result == rcollSuccess)
    x->result = rcollAllReduce(host, host, n, rcollFloat32, rcollSum, other, NULL);
  fake_stream_sync(s);
  x->wrong += count_off(x, "device", a, n, sum_of, 4); /* 2 ranks, 3 in-place calls on it */
  x->wrong += count_off(x, "host", host, n, sum_of, 1);
  rcollCommDestroy(other);
  fake_free(a);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_groups, a_group_mixing_host_and_device_calls_runs_nothing) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 0, host_and_device_in_one_group, ctx);
}
