/* Direct collectives but the all-reduce (RCOLL_CUDA_DIRECT,
 * lib/cuda/direct.h) on the host fake of CUDA: ranks are threads, and the
 * kernel is the block function the GPU runs (tests/support/
 * cuda_fake_direct.c). Calls whose largest buffer reaches
 * RCOLL_CUDA_DIRECT_INPLACE meet on the host and run in place, reading or
 * writing the peers' buffers; smaller ones, or ones a rank cannot hand
 * over, pull from the peers' regions. Either is one kernel.
 * test_cuda_direct.c has the all-reduce. */
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
 * which `inplace` read the peers' buffers (the rest went through the
 * regions): the calls that were not direct went through the proxy. */
static void run_colls(int nranks, void (*body)(rank_ctx_t *, rcollComm_t), int kernels, int inplace) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(nranks, 0, body, ctx);
  cr_expect_eq(atomic_load(&fake_stats.direct_kernels), kernels, "%d direct kernels, not %d",
               atomic_load(&fake_stats.direct_kernels), kernels);
  cr_expect_eq(atomic_load(&fake_stats.direct_inplace), inplace, "%d in place, not %d",
               atomic_load(&fake_stats.direct_inplace), inplace);
}

/* Per-rank counts in a row: under the limit (1 and 7 floats: the regions),
 * one block, many blocks, and back, each out of place and then in NCCL's
 * in-place form, with a direct all-reduce between them on the same flags. */
static const size_t counts[] = {1, 7, 1000, 16385, 300000, 3, 70000, 1031};
#define NCOUNTS (sizeof counts / sizeof counts[0])

/* The calls of counts[] that reach the 4 KiB limit at n ranks, out of
 * place and in place, on every rank: the largest buffer is n counts for a
 * reduce-scatter or all-gather (per_rank), one for a broadcast or reduce. */
static int inplace_calls(int n, int per_rank) {
  int k = 0;
  for (size_t i = 0; i < NCOUNTS; i++)
    k += counts[i] * 4 * (size_t)(per_rank ? n : 1) >= 4096 ? 2 : 0;
  return n * k;
}
/* Every call is a kernel: out of place, in place, and the all-reduce of 4
 * floats between them; those in place as above. */
#define ROW(n, per_rank) 3 * (n) * (int)NCOUNTS, inplace_calls(n, per_rank)
/* ... when the in-place form goes through the regions (the all-to-all's). */
#define HALF_ROW(n) 3 * (n) * (int)NCOUNTS, inplace_calls(n, 1) / 2
/* ... when nothing runs in place (RCOLL_CUDA_DIRECT_INPLACE=0). */
#define PULLED(n) 3 * (n) * (int)NCOUNTS, 0

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

/* Broadcasts from each root in turn: out of place (the other ranks' input
 * NULL, as NCCL allows), then in place (rcollBcast). */
static void broadcasts_in_a_row(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  for (size_t k = 0; k < NCOUNTS && x->result == rcollSuccess; k++) {
    size_t c = counts[k];
    int root = (int)k % x->nranks;
    float *in = cuda_ranks_dev_alloc(c * 4), *out = cuda_ranks_dev_alloc(c * 4);
    cuda_ranks_fill(in, c, x->rank);
    x->result = rcollBroadcast(x->rank == root ? in : NULL, out, c, rcollFloat32, root, comm, s);
    fake_stream_sync(s);
    for (size_t i = 0; i < c; i++)
      if (out[i] != cuda_ranks_input(root, i) && x->wrong++ < 3)
        cr_log_warn("rank %d of %d, broadcast of %zu from %d: element %zu is %g", x->rank, x->nranks,
                    c, root, i, out[i]);
    small_allreduce(x, comm, s);
    if (x->result == rcollSuccess)
      x->result = rcollBcast(in, c, rcollFloat32, root, comm, s);
    fake_stream_sync(s);
    for (size_t i = 0; i < c; i++)
      if (in[i] != cuda_ranks_input(root, i) && x->wrong++ < 3)
        cr_log_warn("rank %d of %d, rcollBcast of %zu from %d: element %zu is %g", x->rank, x->nranks,
                    c, root, i, in[i]);
    fake_free(in);
    fake_free(out);
  }
  rcoll_cuda_api()->stream_destroy(s);
}

/* Reduces to each root in turn: out of place (the other ranks' output
 * NULL), then in place at the root. */
static void reduces_in_a_row(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  for (size_t k = 0; k < NCOUNTS && x->result == rcollSuccess; k++) {
    size_t c = counts[k];
    int root = (int)(k + 1) % x->nranks, is_root = x->rank == root;
    float *in = cuda_ranks_dev_alloc(c * 4), *out = cuda_ranks_dev_alloc(c * 4);
    cuda_ranks_fill(in, c, x->rank);
    x->result = rcollReduce(in, is_root ? out : NULL, c, rcollFloat32, rcollSum, root, comm, s);
    fake_stream_sync(s);
    for (size_t i = 0; i < c && is_root; i++)
      if (out[i] != cuda_ranks_sum_of(x->nranks, i) && x->wrong++ < 3)
        cr_log_warn("root %d of %d, reduce of %zu: element %zu is %g", x->rank, x->nranks, c, i, out[i]);
    small_allreduce(x, comm, s);
    if (x->result == rcollSuccess)
      x->result = rcollReduce(in, is_root ? in : NULL, c, rcollFloat32, rcollSum, root, comm, s);
    fake_stream_sync(s);
    for (size_t i = 0; i < c; i++) {
      float want = is_root ? cuda_ranks_sum_of(x->nranks, i) : cuda_ranks_input(x->rank, i);
      if (in[i] != want && x->wrong++ < 3) /* the others' input is theirs still */
        cr_log_warn("rank %d of %d, reduce of %zu in place to %d: element %zu is %g, not %g", x->rank,
                    x->nranks, c, root, i, in[i], want);
    }
    fake_free(in);
    fake_free(out);
  }
  rcoll_cuda_api()->stream_destroy(s);
}

/* Gathers to each root in turn: out of place (the others' output NULL),
 * then in place (the root's input at its place in its output). */
static void gathers_to_roots(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = (size_t)x->nranks;
  for (size_t k = 0; k < NCOUNTS && x->result == rcollSuccess; k++) {
    size_t c = counts[k];
    int root = (int)k % x->nranks, is_root = x->rank == root;
    float *in = cuda_ranks_dev_alloc(c * 4), *out = cuda_ranks_dev_alloc(n * c * 4);
    cuda_ranks_fill(in, c, x->rank);
    x->result = rcollGather(in, is_root ? out : NULL, c, rcollFloat32, root, comm, s);
    fake_stream_sync(s);
    if (is_root)
      check_gather(x, out, c, "to the root");
    small_allreduce(x, comm, s);
    float *mine = is_root ? out + (size_t)root * c : in;
    if (is_root) {
      memset(out, 0, n * c * 4);
      cuda_ranks_fill(mine, c, x->rank);
    }
    if (x->result == rcollSuccess)
      x->result = rcollGather(mine, is_root ? out : NULL, c, rcollFloat32, root, comm, s);
    fake_stream_sync(s);
    if (is_root)
      check_gather(x, out, c, "in place at the root");
    fake_free(in);
    fake_free(out);
  }
  rcoll_cuda_api()->stream_destroy(s);
}

/* Scatters from each root in turn: out of place (the others' input NULL),
 * then in place (the root's output at its segment of its input). */
static void scatters_from_roots(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = (size_t)x->nranks;
  for (size_t k = 0; k < NCOUNTS && x->result == rcollSuccess; k++) {
    size_t c = counts[k];
    int root = (int)(k + 1) % x->nranks, is_root = x->rank == root;
    float *in = cuda_ranks_dev_alloc(n * c * 4), *out = cuda_ranks_dev_alloc(c * 4);
    cuda_ranks_fill(in, n * c, x->rank);
    for (int pass = 0; pass < 2 && x->result == rcollSuccess; pass++) {
      float *dst = pass == 1 && is_root ? in + (size_t)root * c : out;
      x->result = rcollScatter(is_root ? in : NULL, dst, c, rcollFloat32, root, comm, s);
      fake_stream_sync(s);
      for (size_t i = 0; i < c; i++)
        if (dst[i] != cuda_ranks_input(root, (size_t)x->rank * c + i) && x->wrong++ < 3)
          cr_log_warn("rank %d of %d, scatter of %zu from %d (pass %d): element %zu is %g", x->rank,
                      x->nranks, c, root, pass, i, dst[i]);
      if (pass == 0)
        small_allreduce(x, comm, s);
    }
    fake_free(in);
    fake_free(out);
  }
  rcoll_cuda_api()->stream_destroy(s);
}

/* All-to-alls: out of place, then in place (through the regions: in place
 * a peer would overwrite a segment we have yet to send). */
static void alltoalls_in_a_row(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = (size_t)x->nranks;
  for (size_t k = 0; k < NCOUNTS && x->result == rcollSuccess; k++) {
    size_t c = counts[k];
    float *in = cuda_ranks_dev_alloc(n * c * 4), *out = cuda_ranks_dev_alloc(n * c * 4);
    for (int pass = 0; pass < 2 && x->result == rcollSuccess; pass++) {
      cuda_ranks_fill(in, n * c, x->rank);
      float *dst = pass == 0 ? out : in;
      x->result = rcollAlltoAll(in, dst, c, rcollFloat32, comm, s);
      fake_stream_sync(s);
      for (int q = 0; q < x->nranks; q++) /* rank q's segment for us */
        for (size_t i = 0; i < c; i++)
          if (dst[(size_t)q * c + i] != cuda_ranks_input(q, (size_t)x->rank * c + i) && x->wrong++ < 3)
            cr_log_warn("rank %d of %d, all-to-all of %zu (pass %d): rank %d's element %zu is %g",
                        x->rank, x->nranks, c, pass, q, i, dst[(size_t)q * c + i]);
      if (pass == 0)
        small_allreduce(x, comm, s);
    }
    fake_free(in);
    fake_free(out);
  }
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_colls, reduce_scatter_two_ranks) { run_colls(2, scatters_in_a_row, ROW(2, 1)); }
Test(cuda_direct_colls, reduce_scatter_three_ranks) { run_colls(3, scatters_in_a_row, ROW(3, 1)); }
Test(cuda_direct_colls, reduce_scatter_four_ranks) { run_colls(4, scatters_in_a_row, ROW(4, 1)); }
Test(cuda_direct_colls, all_gather_two_ranks) { run_colls(2, gathers_in_a_row, ROW(2, 1)); }
Test(cuda_direct_colls, all_gather_three_ranks) { run_colls(3, gathers_in_a_row, ROW(3, 1)); }
Test(cuda_direct_colls, all_gather_four_ranks) { run_colls(4, gathers_in_a_row, ROW(4, 1)); }
Test(cuda_direct_colls, broadcast_two_ranks) { run_colls(2, broadcasts_in_a_row, ROW(2, 0)); }
Test(cuda_direct_colls, broadcast_three_ranks) { run_colls(3, broadcasts_in_a_row, ROW(3, 0)); }
Test(cuda_direct_colls, broadcast_four_ranks) { run_colls(4, broadcasts_in_a_row, ROW(4, 0)); }
Test(cuda_direct_colls, reduce_two_ranks) { run_colls(2, reduces_in_a_row, ROW(2, 0)); }
Test(cuda_direct_colls, reduce_three_ranks) { run_colls(3, reduces_in_a_row, ROW(3, 0)); }
Test(cuda_direct_colls, reduce_four_ranks) { run_colls(4, reduces_in_a_row, ROW(4, 0)); }
Test(cuda_direct_colls, gather_two_ranks) { run_colls(2, gathers_to_roots, ROW(2, 1)); }
Test(cuda_direct_colls, gather_three_ranks) { run_colls(3, gathers_to_roots, ROW(3, 1)); }
Test(cuda_direct_colls, gather_four_ranks) { run_colls(4, gathers_to_roots, ROW(4, 1)); }
Test(cuda_direct_colls, scatter_two_ranks) { run_colls(2, scatters_from_roots, ROW(2, 1)); }
Test(cuda_direct_colls, scatter_three_ranks) { run_colls(3, scatters_from_roots, ROW(3, 1)); }
Test(cuda_direct_colls, scatter_four_ranks) { run_colls(4, scatters_from_roots, ROW(4, 1)); }
Test(cuda_direct_colls, alltoall_two_ranks) { run_colls(2, alltoalls_in_a_row, HALF_ROW(2)); }
Test(cuda_direct_colls, alltoall_three_ranks) { run_colls(3, alltoalls_in_a_row, HALF_ROW(3)); }
Test(cuda_direct_colls, alltoall_four_ranks) { run_colls(4, alltoalls_in_a_row, HALF_ROW(4)); }

/* Every collective through the regions alone (no meeting): each call
 * pulls, in as many rounds of up to 32 blocks as its 4096-byte regions
 * need (300000 floats at 3 ranks: 28 rounds). */
#define PULL_TEST(name, body)                                                                   \
  Test(cuda_direct_colls, name##_through_the_regions) {                                         \
    setenv("RCOLL_CUDA_DIRECT_INPLACE", "0", 1);                                                \
    run_colls(3, body, PULLED(3));                                                              \
  }
PULL_TEST(reduce_scatter, scatters_in_a_row)
PULL_TEST(all_gather, gathers_in_a_row)
PULL_TEST(broadcast, broadcasts_in_a_row)
PULL_TEST(reduce, reduces_in_a_row)
PULL_TEST(gather, gathers_to_roots)
PULL_TEST(scatter, scatters_from_roots)
PULL_TEST(alltoall, alltoalls_in_a_row)

/* Every type and op of a reduce-scatter and a reduce, and every type of an
 * all-gather and a broadcast, against the reference (fp8 sums within their
 * rounding), on counts that are no whole number of 16-byte vectors (3 x
 * 2063 bytes reach the limit); the buffers 1 element past an
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
      /* The same vector reduced whole to rank 1. */
      if (x->result == rcollSuccess)
        x->result = rcollReduce(src, dst, n * c, ty, (rcollRedOp_t)op, 1, comm, s);
      fake_stream_sync(s);
      for (size_t i = 0; i < n * c && x->rank == 1; i++) {
        uint64_t want = ref_reduce(ty, (rcollRedOp_t)op, x->nranks, seed, i);
        if (!ref_accepts(ty, (rcollRedOp_t)op, x->nranks, seed, i, ref_load(dst, ty, i), want) &&
            x->wrong++ < 3)
          cr_log_warn("rank 1: reduce %s %s element %zu wrong", ref_type_names[t], ref_op_names[op], i);
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
    for (size_t i = 0; i < n * c; i++) /* and rank 2's whole vector broadcast */
      ref_store(src, ty, i, ref_input(ty, rcollSum, seed, x->rank, i));
    if (x->result == rcollSuccess)
      x->result = rcollBroadcast(src, dst, n * c, ty, 2, comm, s);
    fake_stream_sync(s);
    for (size_t i = 0; i < n * c; i++)
      if (ref_load(dst, ty, i) != ref_input(ty, rcollSum, seed, 2, i) && x->wrong++ < 3)
        cr_log_warn("rank %d: broadcast %s: element %zu wrong", x->rank, ref_type_names[t], i);
    fake_free(in);
    fake_free(out);
  }
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_colls, every_type_and_op_three_ranks) {
  const int calls = 3 * rcollNumTypes * 2 * (rcollNumOps + 1); /* RS, reduce: every op; AG, broadcast */
  run_colls(3, every_type, calls, calls);
}

/* The same through the regions: 4096 bytes each, so each call takes rounds
 * (a third of a region per segment of a reduce-scatter: 7 rounds of 340
 * floats). */
Test(cuda_direct_colls, every_type_and_op_three_ranks_through_the_regions) {
  setenv("RCOLL_CUDA_DIRECT_INPLACE", "0", 1);
  run_colls(3, every_type, 3 * rcollNumTypes * 2 * (rcollNumOps + 1), 0);
}

/* A rank that cannot hand its buffers over (a cudaMallocAsync pool's
 * memory has no IPC handle): every rank then runs the call through the
 * regions, with the right result, and the next call runs in place again. */
static void one_rank_without_handles(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t c = 5000, n = (size_t)x->nranks;
  float *in = cuda_ranks_dev_alloc(n * c * 4), *out = cuda_ranks_dev_alloc(n * c * 4);
  small_allreduce(x, comm, s); /* sets the box and the meeting up, with handles */
  /* Under the limit: through the regions. */
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

Test(cuda_direct_colls, a_rank_without_ipc_handles_means_the_regions) {
  /* Every call a kernel; the first two meetings end in the regions, the
   * last two in place. */
  run_colls(3, one_rank_without_handles, 3 * (1 + 1 + 4), 3 * 2);
}

/* Ranks 0 and 1 make different calls of the same count and type: both
 * meet on the host, and each is told the other's call at once (RCOLL_TIMEOUT
 * is 20 s here), naming both. user: 0, a reduce-scatter against an
 * all-reduce; 1, broadcasts from two roots. */
static void told_another_call(rank_ctx_t *x, rcollComm_t comm) {
  static const char *const calls[2][2] = {
      {"ReduceScatter 300000 x float32 sum", "AllReduce 300000 x float32 sum"},
      {"Broadcast 300000 x float32 root 0", "Broadcast 300000 x float32 root 1"}};
  int which = x->user != NULL;
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t c = 300000;
  float *a = cuda_ranks_dev_alloc(2 * c * 4);
  x->result = rcollAllReduce(a, a, 1, rcollFloat32, rcollSum, comm, s); /* sets the meeting up */
  fake_stream_sync(s);
  double t0 = cuda_ranks_now_ms();
  rcollResult_t r = x->result;
  if (r == rcollSuccess && which == 0)
    r = x->rank == 0 ? rcollReduceScatter(a, a, c, rcollFloat32, rcollSum, comm, s)
                     : rcollAllReduce(a, a, c, rcollFloat32, rcollSum, comm, s);
  else if (r == rcollSuccess)
    r = rcollBcast(a, c, rcollFloat32, x->rank, comm, s);
  double waited = cuda_ranks_now_ms() - t0;
  const char *msg = rcollGetLastError(comm);
  cr_log_info("rank %d after %.0f ms: %s", x->rank, waited, msg);
  char want[200];
  snprintf(want, sizeof want, "rank %d made another call: %s here, %s there", 1 - x->rank,
           calls[which][x->rank], calls[which][1 - x->rank]);
  x->wrong += r != rcollInvalidUsage || strstr(msg, want) == NULL;
  x->wrong += waited > 5000;
  fake_free(a);
  rcoll_cuda_api()->stream_destroy(s);
}

static void run_told(int which) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  ctx[0].user = ctx[1].user = which ? ctx : NULL;
  cuda_ranks_run(2, 0, told_another_call, ctx);
  cr_expect_eq(atomic_load(&fake_stats.direct_inplace), 0, "a mismatched call ran");
}

Test(cuda_direct_colls, a_reduce_scatter_against_an_all_reduce_is_told) { run_told(0); }
Test(cuda_direct_colls, broadcasts_from_two_roots_are_told) { run_told(1); }
