/* Small device calls run as host calls on pinned copies (lib/cuda/bounce.h),
 * on the host fake of CUDA (cuda_fake.h), ranks as threads: every
 * collective, mixed with calls too large to bounce on the same comm, over
 * shm with CUDA IPC peers, beside the direct all-reduce, and over sockets
 * with staging and slow copies (the proxy kept off its rank's home core
 * there); more calls in flight than the ring has
 * slots, on one stream and two; buffers a rank does not use left alone;
 * pinned slots refused; a call that failed on one rank only; the limit
 * agreed from rank 0; a mismatch between a bounced and a device call; and
 * with the bounce kernel (RCOLL_CUDA_BOUNCE_KERNEL=1) in place of the
 * copies and the stream's wait.
 * test_cuda_stream.c runs bounced calls behind a synchronous copy and on
 * the legacy stream.
 * It proves nothing about a GPU (tests/gpu/run.sh runs the real thing). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "cuda/cuda_comm.h"
#include "rcoll.h"
#include "support/cuda_colls.h"
#include "support/cuda_fake.h"
#include "support/cuda_ranks.h"

static void bounce_setup(void) {
  cuda_ranks_setup(); /* turns bounce off for the other suites */
  setenv("RCOLL_CUDA_BOUNCE", "65536", 1);
}

TestSuite(cuda_bounce, .init = bounce_setup, .timeout = 120);

static int64_t bounced(rcollComm_t comm) { return comm->cuda != NULL ? comm->cuda->prof.bounced : 0; }

/* Every collective; the small ones must have bounced. */
static void all_bounced(rank_ctx_t *x, rcollComm_t comm) {
  cuda_colls_all(x, comm);
  if (bounced(comm) == 0) {
    cr_log_error("rank %d: no call bounced", x->rank);
    x->wrong++;
  }
}

/* With the direct path on, the collectives are kernels, small or not
 * (lib/cuda/direct.h): none bounces; sends and receives take the proxy. */
static void none_bounced(rank_ctx_t *x, rcollComm_t comm) {
  cuda_colls_all(x, comm);
  if (bounced(comm) != 0) {
    cr_log_error("rank %d: %lld calls bounced beside the direct path", x->rank, (long long)bounced(comm));
    x->wrong++;
  }
}

/* 12289 floats: a 48 KiB all-reduce bounces, a 96 KiB all-gather does not,
 * so host and device plans alternate on one comm (and its IPC rings). */
static void sweep_with(int nranks, void (*body)(rank_ctx_t *, rcollComm_t)) {
  static const size_t counts[] = {1, 7, 1024, 12289};
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
    rank_ctx_t ctx[MAX_RANKS] = {0};
    cuda_ranks_run(nranks, counts[k], body, ctx);
  }
}
static void sweep(int nranks) { sweep_with(nranks, all_bounced); }

Test(cuda_bounce, every_collective_beside_ipc_peers) {
  setenv("RCOLL_CHUNK_SIZE", "4096", 1);
  setenv("RCOLL_P2P_DISABLE", "0", 1);
  sweep(2);
  sweep(3);
}

Test(cuda_bounce, not_beside_the_direct_path) {
  setenv("RCOLL_CUDA_DIRECT", "1", 1);
  sweep_with(3, none_bounced);
  cr_expect_gt(atomic_load(&fake_stats.direct_kernels), 0, "no direct call ran");
}

/* Copies that take 300 us: a plan that ran before its input was copied in,
 * or a result read before it was copied back, shows as wrong elements. */
Test(cuda_bounce, every_collective_over_sockets_with_slow_copies) {
  setenv("RCOLL_SHM_DISABLE", "1", 1);
  setenv("RCOLL_P2P_DISABLE", "1", 1);
  atomic_store(&fake_stats.copy_delay_us, 300);
  sweep(3);
  atomic_store(&fake_stats.copy_delay_us, 0);
}

/* A bounced call's host plan runs on the proxy, which waits in the
 * transport; it must not then move itself to its rank's home core
 * (home_core.h), where the rank's user thread waits on its stream (on an
 * H200, two ranks as two hosts over sockets: 8 B in 3370 us, not 60). */
#define ONE_BY_ONE 400
static void one_by_one(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *buf = cuda_ranks_dev_alloc(2 * sizeof(float));
  for (int k = 0; k < ONE_BY_ONE && x->result == rcollSuccess; k++) {
    buf[0] = buf[1] = 1;
    x->result = rcollAllReduce(buf, buf, 2, rcollFloat32, rcollSum, comm, s);
    fake_stream_sync(s);
    x->wrong += buf[0] != (float)x->nranks;
  }
  x->wrong += bounced(comm) != ONE_BY_ONE;
  if (comm->home_cpu < 0) {
    cr_log_error("rank %d: no home core (a core per rank over the network expected)", x->rank);
    x->wrong++;
  }
  if (comm->home_moves != 0) {
    cr_log_error("rank %d: the proxy moved to the home core %llu times", x->rank,
                 (unsigned long long)comm->home_moves);
    x->wrong++;
  }
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(buf);
}

Test(cuda_bounce, the_proxy_stays_off_its_ranks_home_core) {
  setenv("RCOLL_SHM_DISABLE", "1", 1);
  setenv("RCOLL_P2P_DISABLE", "1", 1);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 2, one_by_one, ctx);
}

/* 40 all-reduces queued back to back, each with its own buffers and
 * inputs, with slow copies: more calls than slots are in flight. On one
 * stream their order protects a slot's reuse; on two it does not. With
 * x->user set, call 0 goes on a slow stream (20 ms per copy) and the rest
 * on a fast one: call 16 takes call 0's slot again while the slow stream
 * may not have copied call 0's result back yet, and must wait for it. */
#define QUEUED 40
static void queued_calls(rank_ctx_t *x, rcollComm_t comm) {
  size_t n = x->count;
  rcoll_cuda_stream_t fast = cuda_ranks_stream_new(), slow = cuda_ranks_stream_new();
  fake_stream_copy_delay(slow, 20000);
  float *in = cuda_ranks_dev_alloc(QUEUED * n * 4), *out = cuda_ranks_dev_alloc(QUEUED * n * 4);
  for (int k = 0; k < QUEUED && x->result == rcollSuccess; k++) {
    for (size_t i = 0; i < n; i++)
      in[k * n + i] = cuda_ranks_input(x->rank, i) + (float)k;
    x->result = rcollAllReduce(in + k * n, out + k * n, n, rcollFloat32, rcollSum, comm,
                               k == 0 && x->user != NULL ? slow : fast);
  }
  fake_stream_sync(slow);
  fake_stream_sync(fast);
  for (int k = 0; k < QUEUED; k++)
    for (size_t i = 0; i < n; i++)
      x->wrong += out[k * n + i] != cuda_ranks_sum_of(x->nranks, i) + (float)(k * x->nranks);
  x->wrong += bounced(comm) != QUEUED;
  rcoll_cuda_api()->stream_destroy(slow);
  rcoll_cuda_api()->stream_destroy(fast);
  fake_free(in);
  fake_free(out);
}

Test(cuda_bounce, more_calls_in_flight_than_slots) {
  atomic_store(&fake_stats.copy_delay_us, 100);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(3, 100, queued_calls, ctx);
  atomic_store(&fake_stats.copy_delay_us, 0);
}

Test(cuda_bounce, a_slot_is_reused_after_its_copy_back_on_another_stream) {
  rank_ctx_t ctx[MAX_RANKS] = {{.user = ctx}, {.user = ctx}};
  cuda_ranks_run(2, 100, queued_calls, ctx);
}

/* The bounce kernel (lib/cuda/bounce_kernel.h) instead of the copies, the
 * event and the wait: every collective beside IPC peers and over sockets
 * with slow copies (an input read before the kernel copied it in, or a
 * result before the proxy wrote it, shows as wrong elements); more calls
 * than slots on one stream, and a slot taken again from a fast stream
 * while a slow one still runs its kernel, whose input the proxy must wait
 * for in that slot's own word (one word per comm would let the fast
 * stream's later calls say it was there). */
static void bounce_kernel_on(void) {
  setenv("RCOLL_CUDA_BOUNCE_KERNEL", "1", 1);
  atomic_store(&fake_stats.bounce_kernels, 0);
}

static void expect_bounce_kernels(void) {
  cr_expect_gt(atomic_load(&fake_stats.bounce_kernels), 0, "no bounce kernel ran");
}

Test(cuda_bounce, kernel_every_collective_beside_ipc_peers) {
  bounce_kernel_on();
  setenv("RCOLL_CHUNK_SIZE", "4096", 1);
  setenv("RCOLL_P2P_DISABLE", "0", 1);
  int copies = atomic_load(&fake_stats.copies);
  sweep(2);
  sweep(3);
  expect_bounce_kernels();
  cr_log_info("%d copies, %d bounce kernels", atomic_load(&fake_stats.copies) - copies,
              atomic_load(&fake_stats.bounce_kernels));
}

Test(cuda_bounce, kernel_every_collective_over_sockets_with_slow_copies) {
  bounce_kernel_on();
  setenv("RCOLL_SHM_DISABLE", "1", 1);
  setenv("RCOLL_P2P_DISABLE", "1", 1);
  atomic_store(&fake_stats.copy_delay_us, 300);
  sweep(3);
  atomic_store(&fake_stats.copy_delay_us, 0);
  expect_bounce_kernels();
}

Test(cuda_bounce, kernel_more_calls_in_flight_than_slots) {
  bounce_kernel_on();
  atomic_store(&fake_stats.copy_delay_us, 100);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(3, 100, queued_calls, ctx);
  atomic_store(&fake_stats.copy_delay_us, 0);
  cr_expect_eq(atomic_load(&fake_stats.bounce_kernels), 3 * QUEUED);
}

Test(cuda_bounce, kernel_a_slot_waits_for_its_own_word_on_another_stream) {
  bounce_kernel_on();
  rank_ctx_t ctx[MAX_RANKS] = {{.user = ctx}, {.user = ctx}};
  cuda_ranks_run(2, 100, queued_calls, ctx);
  cr_expect_eq(atomic_load(&fake_stats.bounce_kernels), 2 * QUEUED);
}

/* As nccl.h: a rooted call's unused buffer may be NULL, and one that is
 * passed is not written; likewise a point-to-point call outside a group. */
static void rooted(rank_ctx_t *x, rcollComm_t comm) {
  size_t n = x->count, N = n * (size_t)x->nranks;
  int root = 1, me = x->rank;
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *a = cuda_ranks_dev_alloc(N * 4), *b = cuda_ranks_dev_alloc(N * 4);
  cuda_ranks_fill(a, N, me);
  for (size_t i = 0; i < N; i++)
    b[i] = -1;
  rcollResult_t r[6];
  r[0] = rcollReduce(a, me == root ? b : NULL, n, rcollFloat32, rcollSum, root, comm, s);
  r[1] = rcollReduce(a, b, n, rcollFloat32, rcollMax, root, comm, s);
  r[2] = rcollBroadcast(me == root ? a : NULL, a + n, n, rcollFloat32, root, comm, s);
  r[3] = rcollGather(a, me == root ? b : NULL, n, rcollFloat32, root, comm, s);
  fake_stream_sync(s);
  for (size_t i = 0; i < N; i++) {
    float want = -1;
    if (me == root) /* the gather's result, over the reduce's */
      want = cuda_ranks_input((int)(i / n), i % n);
    x->wrong += b[i] != want;
  }
  for (size_t i = 0; i < n; i++)
    x->wrong += a[n + i] != cuda_ranks_input(root, i);
  cuda_ranks_fill(a, N, me); /* the scatter's input, which the broadcast wrote into */
  if (me == 0)
    r[4] = rcollSend(a, n, rcollFloat32, 1, comm, s);
  else if (me == 1)
    r[4] = rcollRecv(b, n, rcollFloat32, 0, comm, s);
  else
    r[4] = rcollSuccess;
  r[5] = rcollScatter(me == root ? a : NULL, b + n, n, rcollFloat32, root, comm, s);
  fake_stream_sync(s);
  for (size_t i = 0; me == 1 && i < n; i++)
    x->wrong += b[i] != cuda_ranks_input(0, i);
  for (size_t i = 0; i < n; i++) /* rank root's input: input(root, j) at j = me * n + i */
    x->wrong += b[n + i] != cuda_ranks_input(root, (size_t)me * n + i);
  for (int k = 0; k < 6 && x->result == rcollSuccess; k++)
    x->result = r[k];
  x->wrong += bounced(comm) != 6 - (me > 1);
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(a);
  fake_free(b);
}

Test(cuda_bounce, buffers_a_rank_does_not_use_are_left_alone) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(3, 300, rooted, ctx);
}

/* The pinned slots cannot be had on rank x->user's ranks: the call fails
 * there saying so, and the next one, once they can, runs. */
static void no_pinned_memory(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *a = cuda_ranks_dev_alloc(x->count * 4);
  fake_host_alloc_limit = 1 << 20; /* the comm's own pinned words are made, the slots are not */
  rcollResult_t r = rcollAllReduce(a, a, x->count, rcollFloat32, rcollSum, comm, s);
  x->wrong += bounced(comm) != 0 || r != rcollUnhandledCudaError ||
              strstr(rcollGetLastError(comm), "RCOLL_CUDA_BOUNCE") == NULL;
  fake_host_alloc_limit = 0;
  x->wrong += cuda_colls_allreduce(x, comm, s);
  x->wrong += bounced(comm) != 1;
  fake_free(a);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_bounce, pinned_memory_refused_then_had) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 100, no_pinned_memory, ctx);
}

/* ---- agreement ---- */

static void small_calls(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  for (int k = 0; k < 4 && x->result == rcollSuccess; k++)
    x->wrong += cuda_colls_allreduce(x, comm, s);
  x->wrong += bounced(comm) != 4; /* rank 1 set 0: rank 0's limit counts */
  x->wrong += comm->cuda_bounce != 65536;
  rcoll_cuda_api()->stream_destroy(s);
}

/* Rank 0 reads RCOLL_CUDA_BOUNCE=65536, rank 1 reads 0: both bounce, as
 * rank 0 says (one rank running a host plan against a device plan would
 * fail or hang). The ranks start 300 ms apart so that each reads its own
 * value: rank 0 reads it first thing in init, then waits for rank 1. */
Test(cuda_bounce, the_limit_is_rank_zeros) {
  rank_ctx_t ctx[2] = {{0}};
  rcollUniqueId id;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess);
  pthread_t t[2];
  for (int r = 0; r < 2; r++) {
    setenv("RCOLL_CUDA_BOUNCE", r == 0 ? "65536" : "0", 1);
    ctx[r] = (rank_ctx_t){.rank = r, .nranks = 2, .id = id, .count = 500, .body = small_calls};
    pthread_create(&t[r], NULL, cuda_ranks_main, &ctx[r]);
    if (r == 0)
      usleep(300000);
  }
  for (int r = 0; r < 2; r++) {
    pthread_join(t[r], NULL);
    cr_expect_eq(ctx[r].result, rcollSuccess, "rank %d: %s", r, rcollGetErrorString(ctx[r].result));
    cr_expect_eq(ctx[r].wrong, 0, "rank %d: %ld wrong", r, ctx[r].wrong);
  }
}

/* Rank 0 makes a call small enough to bounce, rank 1 one that is not: the
 * fingerprints tell them apart (both are host messages on either path), and
 * both ranks get the mismatch as their async error instead of a hang. */
static void mismatched(rank_ctx_t *x, rcollComm_t comm) {
  size_t n = x->rank == 0 ? 100 : 100000;
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *a = cuda_ranks_dev_alloc(n * 4);
  rcollResult_t r = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  rcollResult_t async = rcollSuccess;
  rcollCommGetAsyncError(comm, &async);
  if (r != rcollSuccess || async == rcollSuccess || strstr(comm->last_error, "mismatch") == NULL) {
    cr_log_error("rank %d: call %d, async %d: %s", x->rank, r, async, comm->last_error);
    x->wrong++;
  }
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(a);
}

Test(cuda_bounce, a_bounced_call_against_a_device_call_is_a_mismatch) {
  setenv("RCOLL_TIMEOUT", "5", 1);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 0, mismatched, ctx);
}

/* Rank 0's call fails before it is queued (no pinned slots), rank 1's runs:
 * rank 1 waits for a call rank 0 never made. Their next call (a host
 * all-reduce) must fail on both ranks, by the fingerprints or by
 * RCOLL_TIMEOUT, and the communicators must go without a crash. */
static void one_rank_failed_first(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *a = cuda_ranks_dev_alloc(x->count * 4);
  fake_host_alloc_limit = x->rank == 0 ? 1 << 20 : 0;
  rcollResult_t r = rcollAllReduce(a, a, x->count, rcollFloat32, rcollSum, comm, s);
  x->wrong += r != (x->rank == 0 ? rcollUnhandledCudaError : rcollSuccess);
  fake_host_alloc_limit = 0;
  int one = 1, sum = 0;
  double t0 = cuda_ranks_now_ms();
  r = rcollAllReduce(&one, &sum, 1, rcollInt32, rcollSum, comm, NULL);
  double ms = cuda_ranks_now_ms() - t0;
  if (r == rcollSuccess || ms > 2 * 3000 + 2000) {
    cr_log_error("rank %d: the host call after the uneven one: %s after %.0f ms", x->rank,
                 rcollGetErrorString(r), ms);
    x->wrong++;
  }
  fake_stream_sync(s);
  fake_free(a);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_bounce, a_call_that_failed_on_one_rank_fails_the_next) {
  setenv("RCOLL_TIMEOUT", "3", 1);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 100, one_rank_failed_first, ctx);
}
