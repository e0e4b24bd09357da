/* Direct reduce-scatters and all-gathers (RCOLL_CUDA_DIRECT, lib/cuda/
 * direct.h) on the host fake of CUDA: ranks are threads, and the kernel is
 * the block function the GPU runs (tests/support/cuda_fake_direct.c). Both
 * run in place only, reading or writing the peers' buffers: calls whose
 * largest buffer reaches RCOLL_CUDA_DIRECT_INPLACE meet on the host and run
 * as one kernel; smaller ones, or ones a rank cannot hand over, go through
 * the proxy. test_cuda_direct.c has the all-reduce. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "rcoll.h"
#include "support/conformance_ref.h"
#include "support/cuda_fake.h"
#include "support/cuda_ranks.h"

static void colls_setup(void) {
  cuda_ranks_setup();
  setenv("RCOLL_CUDA_DIRECT", "1", 1);
  setenv("RCOLL_CUDA_DIRECT_CHUNK", "4096", 1);
  setenv("RCOLL_CUDA_DIRECT_INPLACE", "4096", 1); /* bytes of the call's largest buffer */
}

TestSuite(cuda_direct_colls, .init = colls_setup, .timeout = 120);

/* Runs body on nranks ranks, expecting `kernels` direct kernels in all, of
 * which `inplace` read the peers' buffers (the rest are all-reduces through
 * the regions): the calls that were not direct went through the proxy. */
static void run_colls(int nranks, void (*body)(rank_ctx_t *, rcollComm_t), int kernels, int inplace) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(nranks, 0, body, ctx);
  cr_expect_eq(atomic_load(&fake_stats.direct_kernels), kernels, "%d direct kernels, not %d",
               atomic_load(&fake_stats.direct_kernels), kernels);
  cr_expect_eq(atomic_load(&fake_stats.direct_inplace), inplace, "%d in place, not %d",
               atomic_load(&fake_stats.direct_inplace), inplace);
}

/* Per-rank counts in a row: under the limit (1 and 7 floats: the proxy),
 * one block, many blocks, and back, each out of place and then in NCCL's
 * in-place form, with a direct all-reduce between them on the same flags. */
static const size_t counts[] = {1, 7, 1000, 16385, 300000, 3, 70000, 1031};
#define NCOUNTS (sizeof counts / sizeof counts[0])

/* The calls of counts[] that reach the 4 KiB limit at n ranks, out of
 * place and in place, on every rank. */
static int inplace_calls(int n) {
  int k = 0;
  for (size_t i = 0; i < NCOUNTS; i++)
    k += counts[i] * 4 * (size_t)n >= 4096 ? 2 : 0;
  return n * k;
}
/* ... and with them the all-reduces of 4 floats between them. */
#define ROW(n) inplace_calls(n) + (n) * (int)NCOUNTS, inplace_calls(n)

static void check_scatter(rank_ctx_t *x, const float *got, size_t count, const char *how) {
  for (size_t i = 0; i < count; i++) {
    float want = cuda_ranks_sum_of(x->nranks, (size_t)x->rank * count + i);
    if (got[i] != want && x->wrong++ < 3)
      cr_log_warn("rank %d of %d, reduce-scatter of %zu %s: element %zu is %g, not %g", x->rank,
                  x->nranks, count, how, i, got[i], want);
  }
}

static void check_gather(rank_ctx_t *x, const float *got, size_t count, const char *how) {
  for (int q = 0; q < x->nranks; q++)
    for (size_t i = 0; i < count; i++) {
      float want = cuda_ranks_input(q, i);
      if (got[(size_t)q * count + i] != want && x->wrong++ < 3)
        cr_log_warn("rank %d of %d, all-gather of %zu %s: rank %d's element %zu is %g, not %g",
                    x->rank, x->nranks, count, how, q, i, got[(size_t)q * count + i], want);
    }
}

/* A direct all-reduce of 4 floats (through the regions): the next call
 * must find the flags where this one left them. */
static void small_allreduce(rank_ctx_t *x, rcollComm_t comm, rcoll_cuda_stream_t s) {
  float *buf = cuda_ranks_dev_alloc(4 * 4);
  cuda_ranks_fill(buf, 4, x->rank);
  if (x->result == rcollSuccess)
    x->result = rcollAllReduce(buf, buf, 4, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  for (size_t i = 0; i < 4; i++)
    x->wrong += buf[i] != cuda_ranks_sum_of(x->nranks, i);
  fake_free(buf);
}

static void scatters_in_a_row(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = (size_t)x->nranks;
  for (size_t k = 0; k < NCOUNTS && x->result == rcollSuccess; k++) {
    size_t c = counts[k];
    float *in = cuda_ranks_dev_alloc(n * c * 4), *out = cuda_ranks_dev_alloc(c * 4);
    cuda_ranks_fill(in, n * c, x->rank);
    x->result = rcollReduceScatter(in, out, c, rcollFloat32, rcollSum, comm, s);
    fake_stream_sync(s);
    check_scatter(x, out, c, "out of place");
    small_allreduce(x, comm, s);
    float *mine = in + (size_t)x->rank * c; /* in place: our segment of the input */
    if (x->result == rcollSuccess)
      x->result = rcollReduceScatter(in, mine, c, rcollFloat32, rcollSum, comm, s);
    fake_stream_sync(s);
    check_scatter(x, mine, c, "in place");
    fake_free(in);
    fake_free(out);
  }
  rcoll_cuda_api()->stream_destroy(s);
}

static void gathers_in_a_row(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = (size_t)x->nranks;
  for (size_t k = 0; k < NCOUNTS && x->result == rcollSuccess; k++) {
    size_t c = counts[k];
    float *in = cuda_ranks_dev_alloc(c * 4), *out = cuda_ranks_dev_alloc(n * c * 4);
    cuda_ranks_fill(in, c, x->rank);
    x->result = rcollAllGather(in, out, c, rcollFloat32, comm, s);
    fake_stream_sync(s);
    check_gather(x, out, c, "out of place");
    small_allreduce(x, comm, s);
    float *mine = out + (size_t)x->rank * c; /* in place: our place in the output */
    memset(out, 0, n * c * 4);
    cuda_ranks_fill(mine, c, x->rank);
    if (x->result == rcollSuccess)
      x->result = rcollAllGather(mine, out, c, rcollFloat32, comm, s);
    fake_stream_sync(s);
    check_gather(x, out, c, "in place");
    fake_free(in);
    fake_free(out);
  }
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_colls, reduce_scatter_two_ranks) { run_colls(2, scatters_in_a_row, ROW(2)); }
Test(cuda_direct_colls, reduce_scatter_three_ranks) { run_colls(3, scatters_in_a_row, ROW(3)); }
Test(cuda_direct_colls, reduce_scatter_four_ranks) { run_colls(4, scatters_in_a_row, ROW(4)); }
Test(cuda_direct_colls, all_gather_two_ranks) { run_colls(2, gathers_in_a_row, ROW(2)); }
Test(cuda_direct_colls, all_gather_three_ranks) { run_colls(3, gathers_in_a_row, ROW(3)); }
Test(cuda_direct_colls, all_gather_four_ranks) { run_colls(4, gathers_in_a_row, ROW(4)); }

/* Every type and op of a reduce-scatter, and every type of an all-gather,
 * against the reference (fp8 sums within their rounding), on a count that
 * is no whole number of 16-byte vectors (3 x 2063 bytes reach the limit); the buffers 1 element past an
 * alignment of 16 on odd ranks, so those calls take the scalar loops. */
static void every_type(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t c = 2063, n = (size_t)x->nranks, skew = (size_t)(x->rank & 1);
  for (int t = 0; t < rcollNumTypes && x->result == rcollSuccess; t++) {
    rcollDataType_t ty = (rcollDataType_t)t;
    size_t es = ref_type_size(ty);
    char *in = cuda_ranks_dev_alloc((n * c + 1) * es), *out = cuda_ranks_dev_alloc((n * c + 1) * es);
    char *src = in + skew * es, *dst = out + skew * es;
    for (int op = 0; op < rcollNumOps && x->result == rcollSuccess; op++) {
      uint64_t seed = ref_hash((uint64_t)(t * 16 + op));
      for (size_t i = 0; i < n * c; i++) /* rank r's input of the reduce is element i of the vector */
        ref_store(src, ty, i, ref_input(ty, (rcollRedOp_t)op, seed, x->rank, i));
      x->result = rcollReduceScatter(src, dst, c, ty, (rcollRedOp_t)op, comm, s);
      fake_stream_sync(s);
      for (size_t i = 0; i < c; i++) {
        size_t at = (size_t)x->rank * c + i;
        uint64_t want = ref_reduce(ty, (rcollRedOp_t)op, x->nranks, seed, at);
        if (!ref_accepts(ty, (rcollRedOp_t)op, x->nranks, seed, at, ref_load(dst, ty, i), want) &&
            x->wrong++ < 3)
          cr_log_warn("rank %d: reduce-scatter %s %s element %zu wrong", x->rank, ref_type_names[t],
                      ref_op_names[op], i);
      }
    }
    uint64_t seed = ref_hash((uint64_t)t);
    for (size_t i = 0; i < c; i++)
      ref_store(src, ty, i, ref_input(ty, rcollSum, seed, x->rank, i));
    if (x->result == rcollSuccess)
      x->result = rcollAllGather(src, dst, c, ty, comm, s);
    fake_stream_sync(s);
    for (int q = 0; q < x->nranks; q++)
      for (size_t i = 0; i < c; i++)
        if (ref_load(dst, ty, (size_t)q * c + i) != ref_input(ty, rcollSum, seed, q, i) && x->wrong++ < 3)
          cr_log_warn("rank %d: all-gather %s: rank %d's element %zu wrong", x->rank, ref_type_names[t],
                      q, i);
    fake_free(in);
    fake_free(out);
  }
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_colls, every_type_and_op_three_ranks) {
  run_colls(3, every_type, 3 * rcollNumTypes * (rcollNumOps + 1), 3 * rcollNumTypes * (rcollNumOps + 1));
}

/* A rank that cannot hand its buffers over (a cudaMallocAsync pool's
 * memory has no IPC handle): every rank then sends the call through the
 * proxy, with the right result, and the next call runs direct again. */
static void one_rank_without_handles(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t c = 5000, n = (size_t)x->nranks;
  float *in = cuda_ranks_dev_alloc(n * c * 4), *out = cuda_ranks_dev_alloc(n * c * 4);
  small_allreduce(x, comm, s); /* sets the box and the meeting up, with handles */
  /* Under the limit: the proxy, whose connections get their handles now (a
   * pool's memory lacks them for the user's buffers only). */
  cuda_ranks_fill(in, n * 7, x->rank);
  if (x->result == rcollSuccess)
    x->result = rcollReduceScatter(in, out, 7, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  check_scatter(x, out, 7, "under the limit");
  for (int k = 0; k < 4 && x->result == rcollSuccess; k++) {
    fake_refuse_ipc = x->rank == 1 && k < 2;
    cuda_ranks_fill(in, n * c, x->rank);
    if (k % 2 == 0) {
      x->result = rcollReduceScatter(in, out, c, rcollFloat32, rcollSum, comm, s);
      fake_stream_sync(s);
      check_scatter(x, out, c, k < 2 ? "refused" : "after");
    } else {
      x->result = rcollAllGather(in, out, c, rcollFloat32, comm, s);
      fake_stream_sync(s);
      check_gather(x, out, c, k < 2 ? "refused" : "after");
    }
  }
  fake_refuse_ipc = 0;
  fake_free(in);
  fake_free(out);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_colls, a_rank_without_ipc_handles_means_the_proxy) {
  setenv("RCOLL_CUDA_BOUNCE", "0", 1); /* small calls as device plans, over CUDA IPC */
  /* The first two meetings end in the proxy, the last two run direct. */
  run_colls(3, one_rank_without_handles, 3 * (1 + 2), 3 * 2);
}

/* Rank 0 makes a reduce-scatter where rank 1 makes an all-reduce of the
 * same count, type and op: both meet on the host, and each is told the
 * other's call at once (RCOLL_TIMEOUT is 20 s here). */
static void scatter_against_allreduce(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t c = 300000;
  float *a = cuda_ranks_dev_alloc(2 * c * 4);
  x->result = rcollAllReduce(a, a, 1, rcollFloat32, rcollSum, comm, s); /* sets the meeting up */
  fake_stream_sync(s);
  double t0 = cuda_ranks_now_ms();
  rcollResult_t r = x->result;
  if (r == rcollSuccess)
    r = x->rank == 0 ? rcollReduceScatter(a, a, c, rcollFloat32, rcollSum, comm, s)
                     : rcollAllReduce(a, a, c, rcollFloat32, rcollSum, comm, s);
  double waited = cuda_ranks_now_ms() - t0;
  const char *msg = rcollGetLastError(comm);
  cr_log_info("rank %d after %.0f ms: %s", x->rank, waited, msg);
  char want[160];
  snprintf(want, sizeof want,
           "rank %d made another call: %s %zu x float32 sum here, %s %zu x float32 sum there",
           1 - x->rank, x->rank == 0 ? "ReduceScatter" : "AllReduce", c,
           x->rank == 0 ? "AllReduce" : "ReduceScatter", c);
  x->wrong += r != rcollInvalidUsage || strstr(msg, want) == NULL;
  x->wrong += waited > 5000;
  fake_free(a);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_colls, a_reduce_scatter_against_an_all_reduce_is_told) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 0, scatter_against_allreduce, ctx);
  cr_expect_eq(atomic_load(&fake_stats.direct_inplace), 0, "a mismatched call ran");
}
