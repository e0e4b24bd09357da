/* The direct all-reduce (RCOLL_CUDA_DIRECT, lib/cuda/direct.h) on the host
 * fake of CUDA: ranks are threads, and the kernel is the block function of
 * lib/cuda/direct_kernel.h compiled for the host (tests/support/
 * cuda_fake_direct.c), so the flags, rounds, region reuse between calls of
 * different sizes, in-place calls and the arithmetic are the GPU's. What it
 * cannot show is speed, or memory ordering on a GPU: tests/gpu/ does. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "cuda/cuda_comm.h"
#include "cuda/direct_meet.h"
#include "rcoll.h"
#include "support/conformance_ref.h"
#include "support/cuda_fake.h"
#include "support/cuda_ranks.h"

static void direct_setup(void) {
  cuda_ranks_setup();
  setenv("RCOLL_CUDA_DIRECT", "1", 1);
  /* 4 KiB regions: 1024 floats, so larger calls take many rounds. */
  setenv("RCOLL_CUDA_DIRECT_CHUNK", "4096", 1);
}

TestSuite(cuda_direct, .init = direct_setup, .timeout = 120);

/* Runs body on nranks ranks, expecting `kernels` direct kernels in all. */
static void run_direct(int nranks, void (*body)(rank_ctx_t *, rcollComm_t), int kernels) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(nranks, 0, body, ctx);
  cr_expect_eq(atomic_load(&fake_stats.direct_kernels), kernels, "%d direct kernels, not %d",
               atomic_load(&fake_stats.direct_kernels), kernels);
}

/* Sizes in a row on one communicator: one block, many blocks, many rounds,
 * and back, so that a call finds regions last used by a call with other
 * blocks and rounds. Each out of place, then in place. */
static const size_t sizes[] = {1, 7, 1000, 16385, 300000, 3, 70000, 1031};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void sums_in_a_row(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  for (size_t k = 0; k < NSIZES && x->result == rcollSuccess; k++) {
    size_t n = sizes[k];
    float *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(n * 4);
    cuda_ranks_fill(a, n, x->rank);
    x->result = rcollAllReduce(a, b, n, rcollFloat32, rcollSum, comm, s);
    if (x->result == rcollSuccess)
      x->result = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
    fake_stream_sync(s);
    for (size_t i = 0; i < n; i++) {
      float want = cuda_ranks_sum_of(x->nranks, i);
      if ((b[i] != want || a[i] != want) && x->wrong++ < 3)
        cr_log_warn("rank %d of %d, count %zu: element %zu is %g out of place, %g in place; %g "
                    "expected", x->rank, x->nranks, n, i, b[i], a[i], want);
    }
    fake_free(a);
    fake_free(b);
  }
  rcoll_cuda_api()->stream_destroy(s);
}

/* inplace: calls of 4 KiB or more read the peers' buffers in place (4 of
 * the sizes, twice each per rank), the others go through the regions, so
 * the two kinds follow each other on the same flags. */
static void run_sums(int n, int inplace) {
  if (inplace)
    setenv("RCOLL_CUDA_DIRECT_INPLACE", "4096", 1);
  else
    setenv("RCOLL_CUDA_DIRECT_INPLACE", "0", 1);
  run_direct(n, sums_in_a_row, n * 2 * (int)NSIZES);
  cr_expect_eq(atomic_load(&fake_stats.reduce_kernels), 0, "an all-reduce went through the proxy");
  cr_expect_eq(atomic_load(&fake_stats.direct_inplace), inplace ? n * 2 * 4 : 0, "%d in place",
               atomic_load(&fake_stats.direct_inplace));
}

/* Ranks whose RCOLL_CUDA_DIRECT_CHUNK differs read each other's regions
 * where their own would be: all take the least region at set-up. (Threads
 * share one environment: each rank sets its comm's copy before its first
 * device call.) With each rank's own, 4 KiB against 16 KiB regions, the
 * ranks waited for each other until RCOLL_TIMEOUT and the sums were wrong. */
static void sums_with_other_regions(rank_ctx_t *x, rcollComm_t comm) {
  comm->settings.cuda_direct_chunk = x->rank == 1 ? 4096 : 16384;
  sums_in_a_row(x, comm);
}

Test(cuda_direct, ranks_with_other_region_sizes_agree) {
  setenv("RCOLL_CUDA_DIRECT_INPLACE", "0", 1);
  run_direct(3, sums_with_other_regions, 3 * 2 * (int)NSIZES);
}

Test(cuda_direct, two_ranks_sizes_in_a_row) { run_sums(2, 0); }
Test(cuda_direct, three_ranks_sizes_in_a_row) { run_sums(3, 0); }
Test(cuda_direct, four_ranks_sizes_in_a_row) { run_sums(4, 0); }
Test(cuda_direct, two_ranks_sizes_in_a_row_in_place) { run_sums(2, 1); }
Test(cuda_direct, three_ranks_sizes_in_a_row_in_place) { run_sums(3, 1); }
Test(cuda_direct, four_ranks_sizes_in_a_row_in_place) { run_sums(4, 1); }

/* Every block of every rank must be resident at once: 3 ranks on a GPU of
 * 7 multiprocessors (whose bus ids are unknown, so they may share it) take
 * 2 blocks each, in place and through the regions (the largest call would
 * take 19). */
Test(cuda_direct, blocks_fit_the_gpu) {
  atomic_store(&fake_stats.sm_count, 7);
  run_sums(3, 1);
  atomic_store(&fake_stats.sm_count, 0);
  cr_expect_eq(atomic_load(&fake_stats.direct_max_blocks), 2);
}

/* One all-reduce of 16 MiB (a block per 64 KiB would be 256). */
static void one_large_call(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = 4 << 20;
  float *a = cuda_ranks_dev_alloc(n * 4);
  cuda_ranks_fill(a, n, x->rank);
  x->result = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  for (size_t i = 0; i < n; i += 4099)
    x->wrong += a[i] != cuda_ranks_sum_of(x->nranks, i);
  fake_free(a);
  rcoll_cuda_api()->stream_destroy(s);
}

/* RCOLL_CUDA_DIRECT_BLOCKS bounds a call's blocks (the least over the
 * ranks), in place up to 128; through the regions a box's 32 bound them
 * too. The fake's GPU gives no multiprocessor count, so only these do. */
static void run_blocks(const char *setting, const char *inplace, int want) {
  setenv("RCOLL_CUDA_DIRECT_BLOCKS", setting, 1);
  setenv("RCOLL_CUDA_DIRECT_INPLACE", inplace, 1);
  run_direct(2, one_large_call, 2);
  cr_expect_eq(atomic_load(&fake_stats.direct_max_blocks), want, "%d blocks, not %d",
               atomic_load(&fake_stats.direct_max_blocks), want);
}

Test(cuda_direct, blocks_are_32_by_default) {
  unsetenv("RCOLL_CUDA_DIRECT_BLOCKS");
  run_direct(2, one_large_call, 2);
  cr_expect_eq(atomic_load(&fake_stats.direct_max_blocks), 32);
}
Test(cuda_direct, blocks_follow_the_setting_in_place) { run_blocks("100", "1", 100); }
Test(cuda_direct, blocks_follow_the_setting_below_32) { run_blocks("20", "0", 20); }
Test(cuda_direct, blocks_through_the_regions_are_at_most_32) { run_blocks("128", "0", 32); }

/* Buffers 4 bytes past an alignment of 16: the kernel's scalar loops. */
static void unaligned(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = 20000;
  float *a = cuda_ranks_dev_alloc((n + 1) * 4), *b = cuda_ranks_dev_alloc((n + 2) * 4);
  cuda_ranks_fill(a + 1, n, x->rank);
  x->result = rcollAllReduce(a + 1, b + 2, n, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  for (size_t i = 0; i < n; i++)
    x->wrong += b[2 + i] != cuda_ranks_sum_of(x->nranks, i);
  fake_free(a);
  fake_free(b);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct, unaligned_buffers) { run_direct(3, unaligned, 3); }
Test(cuda_direct, unaligned_buffers_in_place) {
  setenv("RCOLL_CUDA_DIRECT_INPLACE", "1", 1);
  run_direct(3, unaligned, 3);
  cr_expect_eq(atomic_load(&fake_stats.direct_inplace), 3);
}

/* Every type and op against the reference arithmetic (bit for bit, but
 * fp8 sums within their rounding), on a count that leaves a short slice. */
static void every_type_and_op(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = 1031;
  for (int t = 0; t < rcollNumTypes && x->result == rcollSuccess; t++)
    for (int op = 0; op < rcollNumOps && x->result == rcollSuccess; op++) {
      size_t es = ref_type_size((rcollDataType_t)t);
      uint64_t seed = ref_hash((uint64_t)(t * 16 + op));
      char *a = cuda_ranks_dev_alloc(n * es), *b = cuda_ranks_dev_alloc(n * es);
      for (size_t i = 0; i < n; i++)
        ref_store(a, (rcollDataType_t)t, i, ref_input((rcollDataType_t)t, (rcollRedOp_t)op, seed, x->rank, i));
      x->result = rcollAllReduce(a, b, n, (rcollDataType_t)t, (rcollRedOp_t)op, comm, s);
      fake_stream_sync(s);
      for (size_t i = 0; i < n; i++) {
        uint64_t want = ref_reduce((rcollDataType_t)t, (rcollRedOp_t)op, x->nranks, seed, i);
        int ok = ref_accepts((rcollDataType_t)t, (rcollRedOp_t)op, x->nranks, seed, i,
                             ref_load(b, (rcollDataType_t)t, i), want);
        if (!ok && x->wrong++ < 3)
          cr_log_warn("rank %d: %s %s element %zu wrong", x->rank, ref_type_names[t], ref_op_names[op], i);
      }
      fake_free(a);
      fake_free(b);
    }
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct, every_type_and_op_three_ranks) {
  run_direct(3, every_type_and_op, 3 * rcollNumTypes * rcollNumOps);
}
Test(cuda_direct, every_type_and_op_three_ranks_in_place) {
  setenv("RCOLL_CUDA_DIRECT_INPLACE", "1", 1);
  run_direct(3, every_type_and_op, 3 * rcollNumTypes * rcollNumOps);
  cr_expect_eq(atomic_load(&fake_stats.direct_inplace), 3 * rcollNumTypes * rcollNumOps);
}

/* A rank that cannot hand its buffers over (memory from a cudaMallocAsync
 * pool has no IPC handle): every rank then goes through the regions, and
 * says nothing wrong. */
static void one_rank_without_handles(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = 70000;
  float *a = cuda_ranks_dev_alloc(n * 4);
  cuda_ranks_fill(a, n, x->rank);
  x->result = rcollAllReduce(a, a, 1, rcollFloat32, rcollSum, comm, s); /* the box, with handles */
  fake_stream_sync(s);
  fake_refuse_ipc = x->rank == 1;
  cuda_ranks_fill(a, n, x->rank);
  if (x->result == rcollSuccess)
    x->result = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  fake_refuse_ipc = 0;
  for (size_t i = 0; i < n; i++)
    x->wrong += a[i] != cuda_ranks_sum_of(x->nranks, i);
  fake_free(a);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct, a_rank_without_ipc_handles_means_regions) {
  setenv("RCOLL_CUDA_DIRECT_INPLACE", "4096", 1);
  run_direct(3, one_rank_without_handles, 3 * 2);
  cr_expect_eq(atomic_load(&fake_stats.direct_inplace), 0);
}

/* Calls on two streams in turn: each starts after the other's last. */
static void two_streams(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s[2] = {cuda_ranks_stream_new(), cuda_ranks_stream_new()};
  const size_t n = 5000;
  float *a = cuda_ranks_dev_alloc(n * 4);
  cuda_ranks_fill(a, n, x->rank);
  for (int k = 0; k < 6 && x->result == rcollSuccess; k++)
    x->result = rcollAllReduce(a, a, n, rcollFloat32, rcollMax, comm, s[k % 2]);
  fake_stream_sync(s[0]);
  fake_stream_sync(s[1]);
  for (size_t i = 0; i < n; i++)
    x->wrong += a[i] != cuda_ranks_input(x->nranks - 1, i);
  fake_free(a);
  rcoll_cuda_api()->stream_destroy(s[0]);
  rcoll_cuda_api()->stream_destroy(s[1]);
}

Test(cuda_direct, calls_on_two_streams_in_turn) { run_direct(2, two_streams, 2 * 6); }

/* Without the setting every device all-reduce goes through the proxy. */
Test(cuda_direct, off_by_default) {
  unsetenv("RCOLL_CUDA_DIRECT");
  run_direct(2, sums_in_a_row, 0);
  cr_expect_gt(atomic_load(&fake_stats.reduce_kernels), 0);
}

/* Rank 1 makes the first call, then not the second: rank 0's kernel gives
 * up after RCOLL_TIMEOUT, and its next call fails naming rank 1 and what
 * it waited for. Rank 1 keeps its box until rank 0's kernel is over. */
static void one_rank_stops(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = 100;
  float *a = cuda_ranks_dev_alloc(n * 4);
  cuda_ranks_fill(a, n, x->rank);
  x->result = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  if (x->rank == 1) {
    sleep(4);
  } else if (x->result == rcollSuccess) {
    double t0 = cuda_ranks_now_ms();
    x->result = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
    fake_stream_sync(s);
    double waited = cuda_ranks_now_ms() - t0;
    rcollResult_t r = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
    const char *msg = rcollGetLastError(comm);
    cr_log_info("rank 0 after %.0f ms: %s", waited, msg);
    x->wrong += r == rcollSuccess || strstr(msg, "waiting for rank 1") == NULL ||
                strstr(msg, "input in its box") == NULL;
    x->wrong += waited < 1500 || waited > 3900;
  }
  fake_free(a);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct, a_rank_that_stops_calling_is_named) {
  setenv("RCOLL_TIMEOUT", "2", 1);
  run_direct(2, one_rank_stops, 2 + 1); /* rank 0's second call is launched, its third refused */
}

/* Ranks 0 and 1 make all-reduces of n0 and n1 floats; each is told, naming
 * the other and both calls, long before RCOLL_TIMEOUT (20 s here). Through
 * the regions the kernels stop at their first flag and the next call says
 * so; in place the ranks meet on the host first (after a call that sets the
 * meeting up) and the call itself says so, launching nothing. */
static void told_another_call(rank_ctx_t *x, rcollComm_t comm, size_t n0, size_t n1, int in_place) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = x->rank == 0 ? n0 : n1;
  float *a = cuda_ranks_dev_alloc(n * 4);
  cuda_ranks_fill(a, n, x->rank);
  if (in_place) {
    x->result = rcollAllReduce(a, a, 1, rcollFloat32, rcollSum, comm, s);
    fake_stream_sync(s);
  }
  double t0 = cuda_ranks_now_ms();
  rcollResult_t r = x->result;
  if (r == rcollSuccess)
    r = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  if (!in_place) {
    x->result = r;
    fake_stream_sync(s);
    r = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  }
  double waited = cuda_ranks_now_ms() - t0;
  const char *msg = rcollGetLastError(comm);
  cr_log_info("rank %d after %.0f ms: %s", x->rank, waited, msg);
  char want[160];
  snprintf(want, sizeof want,
           "rank %d made another call: AllReduce %zu x float32 sum here, AllReduce %zu x float32 sum there",
           1 - x->rank, n, x->rank == 0 ? n1 : n0);
  x->wrong += r != rcollInvalidUsage || strstr(msg, want) == NULL;
  x->wrong += waited > 5000;
  fake_free(a);
  rcoll_cuda_api()->stream_destroy(s);
}

static void different_counts(rank_ctx_t *x, rcollComm_t comm) { told_another_call(x, comm, 100, 200000, 0); }
static void different_counts_in_place(rank_ctx_t *x, rcollComm_t comm) {
  told_another_call(x, comm, 300000, 400000, 1);
}

Test(cuda_direct, ranks_making_different_calls_are_told_at_once) {
  run_direct(2, different_counts, 2);
}

Test(cuda_direct, in_place_different_calls_are_told_at_the_meeting) {
  run_direct(2, different_counts_in_place, 2);
}

static void meeting_without_rank_1(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = 300000;
  float *a = cuda_ranks_dev_alloc(n * 4);
  x->result = rcollAllReduce(a, a, 1, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  if (x->rank == 1) {
    sleep(3);
  } else if (x->result == rcollSuccess) {
    double t0 = cuda_ranks_now_ms();
    rcollResult_t r = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
    double waited = cuda_ranks_now_ms() - t0;
    const char *msg = rcollGetLastError(comm);
    cr_log_info("rank 0 after %.0f ms: %s", waited, msg);
    x->wrong += r != rcollTimeout || strstr(msg, "rank 1 did not come to this all-reduce") == NULL;
    x->wrong += waited < 1500 || waited > 2900;
  }
  fake_free(a);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct, in_place_meeting_names_a_rank_that_does_not_come) {
  setenv("RCOLL_TIMEOUT", "2", 1);
  run_direct(2, meeting_without_rank_1, 2);
}

/* The peers' allocations a rank maps for in-place calls (ranks in other
 * processes; these threads share one and use the addresses, so the cache is
 * driven here directly): a handle seen before is not opened again, and the
 * 17th distinct one closes the least recently used. */
static void imports_kept(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *a = cuda_ranks_dev_alloc(4);
  x->result = rcollAllReduce(a, a, 1, rcollFloat32, rcollSum, comm, s); /* sets the meeting up */
  fake_stream_sync(s);
  if (x->rank == 0 && x->result == rcollSuccess) {
    rcoll_cuda_comm_t *cc = comm->cuda;
    enum { N = DIRECT_IMPORTS + 1 };
    char *bufs[N];
    rcoll_cuda_ipc_handle_t h[N];
    int opens = atomic_load(&fake_stats.ipc_opens), closes = atomic_load(&fake_stats.ipc_closes);
    for (int i = 0; i < N; i++) {
      bufs[i] = cuda_ranks_dev_alloc(64);
      rcoll_cuda_api()->ipc_get_mem_handle(&h[i], bufs[i]);
    }
    for (int i = 0; i < DIRECT_IMPORTS; i++) /* opened once each, in turn */
      x->wrong += rcoll_direct_meet_import(cc, 1, &h[i]) != bufs[i];
    for (int i = DIRECT_IMPORTS - 1; i >= 1; i--) /* seen again: buffer 0 is now the oldest */
      x->wrong += rcoll_direct_meet_import(cc, 1, &h[i]) != bufs[i];
    x->wrong += atomic_load(&fake_stats.ipc_opens) - opens != DIRECT_IMPORTS;
    x->wrong += atomic_load(&fake_stats.ipc_closes) != closes;
    x->wrong += rcoll_direct_meet_import(cc, 1, &h[N - 1]) != bufs[N - 1];
    x->wrong += atomic_load(&fake_stats.ipc_closes) - closes != 1;
    x->wrong += rcoll_direct_meet_import(cc, 1, &h[1]) != bufs[1]; /* kept */
    x->wrong += atomic_load(&fake_stats.ipc_opens) - opens != DIRECT_IMPORTS + 1;
    x->wrong += rcoll_direct_meet_import(cc, 1, &h[0]) != bufs[0]; /* closed: opened again */
    x->wrong += atomic_load(&fake_stats.ipc_opens) - opens != DIRECT_IMPORTS + 2;
    if (x->wrong)
      cr_log_warn("imports: %d opened, %d closed", atomic_load(&fake_stats.ipc_opens) - opens,
                  atomic_load(&fake_stats.ipc_closes) - closes);
    for (int i = 0; i < N; i++)
      fake_free(bufs[i]);
  }
  fake_free(a);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct, in_place_keeps_sixteen_mappings_per_peer) { run_direct(2, imports_kept, 2); }

/* Each rank hands over its buffers' handles at every in-place call: one
 * handle when sendbuff == recvbuff, two when they differ. */
static void handles_per_call(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *a = cuda_ranks_dev_alloc(4096 * 4), *b = cuda_ranks_dev_alloc(4096 * 4);
  for (int k = 0; k < 10 && x->result == rcollSuccess; k++) {
    cuda_ranks_fill(a, 4096, x->rank);
    x->result = rcollAllReduce(a, k < 5 ? a : b, 4096, rcollFloat32, rcollSum, comm, s);
    fake_stream_sync(s);
    const float *got = k < 5 ? a : b;
    for (size_t i = 0; i < 4096; i++)
      x->wrong += got[i] != cuda_ranks_sum_of(x->nranks, i);
  }
  fake_free(a);
  fake_free(b);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct, in_place_hands_over_one_handle_per_buffer) {
  setenv("RCOLL_CUDA_DIRECT_INPLACE", "4096", 1);
  int gets = atomic_load(&fake_stats.ipc_gets);
  run_direct(2, handles_per_call, 20);
  /* Setting the box up takes one per rank; then 5 calls with one buffer
   * and 5 with two, per rank. */
  cr_expect_eq(atomic_load(&fake_stats.ipc_gets) - gets, 2 * (1 + 5 + 2 * 5), "%d handles",
               atomic_load(&fake_stats.ipc_gets) - gets);
}

/* Many in-place calls of alternating sizes back to back: a rank that left
 * the meeting posts its next call while others still read the last one's
 * posts, and none must take that for another call. */
static void alternating_sizes(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *a = cuda_ranks_dev_alloc(40 * 4);
  cuda_ranks_fill(a, 40, x->rank);
  for (int k = 0; k < 300 && x->result == rcollSuccess; k++) {
    fake_refuse_ipc = x->user != NULL && x->rank == 1 && k % 2; /* then all go through the regions */
    x->result = rcollAllReduce(a, a, 32 + k % 8, rcollFloat32, rcollMax, comm, s);
  }
  fake_refuse_ipc = 0;
  fake_stream_sync(s);
  for (size_t i = 0; i < 40; i++) /* the last element is in no call */
    x->wrong += a[i] != cuda_ranks_input(i < 39 ? x->nranks - 1 : x->rank, i);
  fake_free(a);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct, in_place_calls_of_alternating_sizes) {
  setenv("RCOLL_CUDA_DIRECT_INPLACE", "1", 1);
  run_direct(4, alternating_sizes, 4 * 300);
  cr_expect_eq(atomic_load(&fake_stats.direct_inplace), 4 * 300);
}

/* The same with rank 1 unable to hand over its buffers every other call:
 * those meetings end in the regions, and the ranks still keep step. */
Test(cuda_direct, in_place_and_regions_alternating) {
  setenv("RCOLL_CUDA_DIRECT_INPLACE", "1", 1);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  for (int r = 0; r < 4; r++)
    ctx[r].user = ctx; /* any non-NULL: refuse */
  cuda_ranks_run(4, 0, alternating_sizes, ctx);
  cr_expect_eq(atomic_load(&fake_stats.direct_kernels), 4 * 300);
  cr_expect_eq(atomic_load(&fake_stats.direct_inplace), 4 * 150);
}

/* Two processes on one GPU without MPS take turns on it (direct.h): no
 * direct all-reduce then. The pairs the rule holds against, and those it
 * leaves alone. */
Test(cuda_direct, processes_sharing_a_gpu_need_mps) {
  const rcoll_direct_gpu_t a = {.pid = 100, .ns_key = 7, .bus = "0000:17:00.0", .mps = 0};
  rcoll_direct_gpu_t b = a;
  cr_expect_not(rcoll_direct_take_turns(&a, &b), "threads of one process share a context");
  b.pid = 101;
  cr_expect(rcoll_direct_take_turns(&a, &b), "two processes, one GPU, no MPS");
  b.pid = 100;
  b.ns_key = 8;
  cr_expect(rcoll_direct_take_turns(&a, &b), "our pid number in another pid namespace");
  b.ns_key = 7;
  b.pid = 101;
  b.mps = 1;
  cr_expect(rcoll_direct_take_turns(&a, &b), "MPS on one side only");
  rcoll_direct_gpu_t c = a, d = b;
  c.mps = 1;
  cr_expect_not(rcoll_direct_take_turns(&c, &d), "both under MPS");
  c.mps = d.mps = -1;
  cr_expect_not(rcoll_direct_take_turns(&c, &d), "MPS unknown (a runtime before 12.4)");
  snprintf(d.bus, sizeof d.bus, "0000:18:00.0");
  c.mps = d.mps = 0;
  cr_expect_not(rcoll_direct_take_turns(&c, &d), "two GPUs");
  c.bus[0] = d.bus[0] = '\0';
  cr_expect_not(rcoll_direct_take_turns(&c, &d), "bus ids unknown");
}

/* A rank in a process of its own, which installs the fake again after the
 * fork (its streams are threads, which a fork does not copy): a small
 * all-reduce with the device saying "no MPS" and both ranks on one bus id.
 * It must not be a direct kernel, which would map the other process's box
 * (the fake's IPC cannot), and it must be right; it runs as a host plan on
 * pinned copies over shm (bounce.h). Rank 0 makes the unique id and hands
 * it to rank 1 through `ids`, as a launcher would. Exit status: 0 when all
 * went well. */
static int turns_rank(int rank, const int ids[2], void *arg) {
  const char *log = arg;
  rcollUniqueId id;
  if (rank == 0) {
    if (freopen(log, "w", stderr) == NULL || rcollGetUniqueId(&id) != rcollSuccess ||
        write(ids[1], &id, sizeof id) != (ssize_t)sizeof id)
      return 2;
  } else if (read(ids[0], &id, sizeof id) != (ssize_t)sizeof id) {
    return 2;
  }
  setenv("RCOLL_CUDA_BOUNCE", "65536", 1);
  fake_cuda_install();
  snprintf(fake_bus_id, sizeof fake_bus_id, "0000:17:00.0");
  fake_mps = 0;
  rcollComm_t comm;
  if (rcollCommInitRank(&comm, 2, id, rank) != rcollSuccess)
    return 3;
  const size_t n = 1000;
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  void *p = NULL;
  if (rcoll_cuda_api()->malloc(&p, n * 4) != 0)
    return 4;
  float *a = p;
  cuda_ranks_fill(a, n, rank);
  rcollResult_t r = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  int bad = r != rcollSuccess || atomic_load(&fake_stats.direct_kernels) != 0;
  for (size_t i = 0; i < n; i++)
    bad += a[i] != cuda_ranks_sum_of(2, i);
  rcollCommDestroy(comm);
  fflush(stderr);
  return bad ? 5 : 0;
}

Test(cuda_direct, two_processes_on_one_gpu_without_mps_use_the_proxy) {
  char log[] = "/tmp/rcoll-turns-XXXXXX";
  int fd = mkstemp(log);
  cr_assert(fd >= 0, "a log file");
  close(fd);
  cuda_ranks_fork2(turns_rank, log, 50);
  char text[8192] = "";
  FILE *f = fopen(log, "r");
  cr_assert_not_null(f);
  size_t got = fread(text, 1, sizeof text - 1, f);
  text[got] = '\0';
  fclose(f);
  unlink(log);
  cr_expect_not_null(strstr(text, "ranks 0 and 1 are two processes on one GPU (0000:17:00.0) without MPS"),
                     "rank 0's log:\n%s", text);
}
