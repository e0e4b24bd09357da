/* Stream semantics of device calls, on the host fake of CUDA (cuda_fake.h):
 * a call returns without waiting for its stream, starts only after the work
 * queued before it, and holds the work queued after it; calls on one
 * communicator run in order; a group is one unit; failures become the
 * communicator's async error and still release the stream; host and device
 * calls do not mix in a group. Plus the memory-type rules seen through the
 * fake. Not a GPU test: see tests/gpu/run.sh for that. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <unistd.h>

#include "comm.h"
#include "cuda/cuda_comm.h"
#include "memtype.h"
#include "support/cuda_fake.h"
#include "support/cuda_ranks.h"

TestSuite(cuda_stream, .init = cuda_ranks_setup, .timeout = 120);

/* A slow piece of work queued on a stream before a call: it writes the
 * call's input only after a delay, so a call that did not wait for its
 * stream would read the old contents. */
typedef struct slow_fill {
  float *buf;
  size_t count;
  int rank;
  int delay_ms;
} slow_fill_t;

static void slow_fill(void *arg) {
  slow_fill_t *f = arg;
  struct timespec ts = {f->delay_ms / 1000, (long)(f->delay_ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  for (size_t i = 0; i < f->count; i++)
    f->buf[i] = cuda_ranks_input(f->rank, i);
}

/* The first device call of a comm makes its device state (allocations, the
 * proxy): done before anything is timed. */
static void warm_up(rcollComm_t comm, rcoll_cuda_stream_t s) {
  float *w = cuda_ranks_dev_alloc(16);
  rcollAllReduce(w, w, 4, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  fake_free(w);
}

/* 1 (and a log line) when a call took so long that it must have waited for
 * its stream's earlier work, which takes SLOW_MS. */
#define SLOW_MS 400
static long blocked(const rank_ctx_t *x, const char *what, double ms) {
  if (ms < SLOW_MS / 2)
    return 0;
  cr_log_warn("rank %d: %s took %.1f ms: it waited for its stream", x->rank, what, ms);
  return 1;
}

static long count_wrong(const float *got, size_t n, int nranks) {
  long wrong = 0;
  for (size_t i = 0; i < n; i++)
    wrong += got[i] != cuda_ranks_sum_of(nranks, i);
  return wrong;
}

/* ---- a call is ordered on its stream and does not block the host ---- */

static void ordered_body(rank_ctx_t *x, rcollComm_t comm) {
  size_t n = x->count;
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(n * 4), *seen = calloc(n, 4);
  memset(a, 0, n * 4);
  slow_fill_t fill = {a, n, x->rank, SLOW_MS};
  cuda_ranks_snapshot_t snap = {b, seen, n};
  warm_up(comm, s);
  fake_stream_host(s, slow_fill, &fill);
  double t0 = cuda_ranks_now_ms();
  x->result = rcollAllReduce(a, b, n, rcollFloat32, rcollSum, comm, s);
  /* The call returned long before the slow fill finished... */
  x->wrong += blocked(x, "rcollAllReduce", cuda_ranks_now_ms() - t0);
  fake_stream_host(s, cuda_ranks_take_snapshot, &snap);
  fake_stream_sync(s);
  /* ...yet summed the filled inputs, and the snapshot saw the result. */
  x->wrong += count_wrong(seen, n, x->nranks);
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(a);
  fake_free(b);
  free(seen);
}

Test(cuda_stream, call_waits_for_earlier_work_and_holds_later_work) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 3000, ordered_body, ctx);
}

/* Calls on one communicator run in the order they were made: the second
 * reduces what the first produced. */
static void chain_body(rank_ctx_t *x, rcollComm_t comm) {
  size_t n = x->count;
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  int32_t *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(n * 4), *c = cuda_ranks_dev_alloc(n * 4);
  for (size_t i = 0; i < n; i++)
    a[i] = (int32_t)(i + (size_t)x->rank);
  rcollAllReduce(a, b, n, rcollInt32, rcollSum, comm, s);
  rcollAllReduce(b, c, n, rcollInt32, rcollSum, comm, s);
  x->result = rcollAllReduce(c, c, n, rcollInt32, rcollAvg, comm, s);
  fake_stream_sync(s);
  int64_t nr = x->nranks;
  for (size_t i = 0; i < n; i++) {
    int64_t first = nr * (int64_t)i + nr * (nr - 1) / 2;
    x->wrong += c[i] != (int32_t)(nr * first); /* avg of nranks equal sums */
  }
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(a);
  fake_free(b);
  fake_free(c);
}

Test(cuda_stream, calls_run_in_order) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(3, 2049, chain_body, ctx);
}

/* ---- a group is one unit ---- */

/* The allgather is queued first on s2, the allreduce second on s1 behind
 * slow work. Were they separate units, the allgather would finish and
 * release s2 before the slow work ends; as one unit, s2 is held until the
 * allreduce is done too, so the snapshot taken on s2 sees its result. */
static void group_body(rank_ctx_t *x, rcollComm_t comm) {
  size_t n = x->count;
  rcoll_cuda_stream_t s1 = cuda_ranks_stream_new(), s2 = cuda_ranks_stream_new();
  float *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(n * 4), *c = cuda_ranks_dev_alloc(n * 4);
  float *d = cuda_ranks_dev_alloc(n * 4 * (size_t)x->nranks), *seen = calloc(n, 4);
  memset(b, 0, n * 4);
  cuda_ranks_fill(c, n, x->rank);
  slow_fill_t fill = {a, n, x->rank, SLOW_MS};
  cuda_ranks_snapshot_t snap = {b, seen, n};
  warm_up(comm, s1);
  int records = atomic_load(&fake_stats.records);
  fake_stream_host(s1, slow_fill, &fill);
  double t0 = cuda_ranks_now_ms();
  rcollGroupStart();
  rcollAllGather(c, d, n, rcollFloat32, comm, s2);
  rcollAllReduce(a, b, n, rcollFloat32, rcollSum, comm, s1);
  x->result = rcollGroupEnd();
  x->wrong += blocked(x, "the group", cuda_ranks_now_ms() - t0);
  fake_stream_host(s2, cuda_ranks_take_snapshot, &snap);
  fake_stream_sync(s2);
  fake_stream_sync(s1);
  x->wrong += count_wrong(seen, n, x->nranks);
  for (size_t i = 0; i < n * (size_t)x->nranks; i++)
    x->wrong += d[i] != cuda_ranks_input((int)(i / n), i % n);
  /* One event per stream of the unit (other ranks record theirs too). */
  if (atomic_load(&fake_stats.records) - records < 2) {
    cr_log_warn("rank %d: %d events recorded for a group on two streams", x->rank,
                atomic_load(&fake_stats.records) - records);
    x->wrong++;
  }
  rcoll_cuda_api()->stream_destroy(s1);
  rcoll_cuda_api()->stream_destroy(s2);
  fake_free(a);
  fake_free(b);
  fake_free(c);
  fake_free(d);
  free(seen);
}

Test(cuda_stream, group_launches_as_one_unit) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 1500, group_body, ctx);
}

/* ---- failures ---- */

/* Rank 0 sends more than rank 1 receives: the receiver's proxy finds the
 * calls' fingerprints differ, the call had already returned, so it shows as
 * the async error, and the stream is released all the same (the sync below
 * returns). */
static void mismatch_body(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *a = cuda_ranks_dev_alloc(4096);
  x->result = x->rank == 0 ? rcollSend(a, 1000, rcollFloat32, 1, comm, s)
                           : rcollRecv(a, 500, rcollFloat32, 0, comm, s);
  fake_stream_sync(s);
  rcollResult_t async = rcollSuccess;
  cr_expect_eq(rcollCommGetAsyncError(comm, &async), rcollSuccess);
  if (x->rank == 1) {
    x->wrong += async != rcollInvalidUsage;
    cr_expect(strstr(rcollGetLastError(comm), "call mismatch (size differs)") != NULL &&
                  strstr(rcollGetLastError(comm), "(1000 x float32, device buffers)") != NULL,
              "%s", rcollGetLastError(comm));
    /* A failed communicator refuses further work, naming the first error. */
    x->wrong += rcollAllReduce(a, a, 10, rcollFloat32, rcollSum, comm, s) != rcollInvalidUsage;
  }
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(a);
}

Test(cuda_stream, failure_becomes_async_error_and_releases_the_stream) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 0, mismatch_body, ctx);
}

/* ---- host and device calls ---- */

static void mix_body(rank_ctx_t *x, rcollComm_t comm) {
  size_t n = x->count;
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *da = cuda_ranks_dev_alloc(n * 4), *db = cuda_ranks_dev_alloc(n * 4);
  float *ha = calloc(n, 4), *hb = calloc(n, 4);
  cuda_ranks_fill(da, n, x->rank);
  cuda_ranks_fill(ha, n, x->rank);
  /* One group, both kinds: refused at the call that mixes, and nothing runs. */
  rcollGroupStart();
  rcollResult_t r1 = rcollAllReduce(da, db, n, rcollFloat32, rcollSum, comm, s);
  rcollResult_t r2 = rcollAllReduce(ha, hb, n, rcollFloat32, rcollSum, comm, NULL);
  rcollResult_t r3 = rcollGroupEnd();
  x->wrong += r1 != rcollSuccess || r2 != rcollInvalidUsage || r3 != rcollInvalidUsage;
  /* Mixed buffers in one call, and a stream with host buffers. */
  x->wrong += rcollAllReduce(da, hb, n, rcollFloat32, rcollSum, comm, s) != rcollInvalidUsage;
  x->wrong += rcollAllReduce(ha, hb, n, rcollFloat32, rcollSum, comm, s) != rcollInvalidUsage;
  /* A device call, then a host call right away: the host call waits for the
   * device work on the comm (same connections) and both are right. */
  rcollAllReduce(da, db, n, rcollFloat32, rcollSum, comm, s);
  x->result = rcollAllReduce(ha, hb, n, rcollFloat32, rcollSum, comm, NULL);
  fake_stream_sync(s);
  x->wrong += count_wrong(db, n, x->nranks) + count_wrong(hb, n, x->nranks);
  x->wrong += rcollCommFinalize(comm) != rcollSuccess;
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(da);
  fake_free(db);
  free(ha);
  free(hb);
}

Test(cuda_stream, host_and_device_calls_do_not_mix_in_a_group) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 777, mix_body, ctx);
}

/* A trainer's step: device calls, then the same host calls (its metrics,
 * same buffers), step after step: each device call hands the
 * communicator's steps array to its unit, leaving none until a call plans
 * again, and an in-place gather on one rank plans no step (the plan cache then saved
 * from no array: UBSan's "null pointer passed as argument 2" of memcpy,
 * found by test_cuda_mix). */
static void repeat_body(rank_ctx_t *x, rcollComm_t comm) {
  size_t n = x->count;
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *da = cuda_ranks_dev_alloc(n * 4), *db = cuda_ranks_dev_alloc(n * 4);
  float *ha = calloc(n, 4), *hb = calloc(n, 4), *hg = calloc(n * (size_t)x->nranks, 4);
  cuda_ranks_fill(da, n, x->rank);
  cuda_ranks_fill(ha, n, x->rank);
  for (int step = 0; step < 4 && x->result == rcollSuccess; step++) {
    memset(hb, 0, n * 4);
    memset(hg, 0, n * (size_t)x->nranks * 4);
    memcpy(hg + (size_t)x->rank * n, ha, n * 4);
    x->result = rcollAllReduce(da, db, n, rcollFloat32, rcollSum, comm, s);
    if (x->result == rcollSuccess)
      x->result = rcollGather(hg + (size_t)x->rank * n, hg, n, rcollFloat32, 0, comm, NULL); /* in place */
    if (x->result == rcollSuccess)
      x->result = rcollAllReduce(ha, hb, n, rcollFloat32, rcollSum, comm, NULL);
    fake_stream_sync(s);
    x->wrong += count_wrong(db, n, x->nranks) + count_wrong(hb, n, x->nranks);
    for (int r = 0; x->rank == 0 && r < x->nranks; r++)
      for (size_t i = 0; i < n; i++)
        x->wrong += hg[(size_t)r * n + i] != cuda_ranks_input(r, i);
  }
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(da);
  fake_free(db);
  free(ha);
  free(hb);
  free(hg);
}

Test(cuda_stream, the_same_host_call_after_device_calls_step_after_step) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  for (int n = 1; n <= 2; n++) /* above RCOLL_CUDA_BOUNCE: device plans */
    cuda_ranks_run(n, 40000, repeat_body, ctx);
}

/* ---- memory types through the fake ---- */

Test(cuda_stream, memory_types) {
  void *dev = cuda_ranks_dev_alloc(1000), *pinned = NULL;
  rcoll_cuda_api()->host_alloc(&pinned, 64, 0);
  int local = 0;
  rcoll_mem_info_t mi;
  cr_assert_eq(rcoll_mem_query((char *)dev + 10, 990, &mi), rcollSuccess);
  cr_expect(mi.type == RCOLL_MEM_CUDA && mi.device == 0);
  cr_expect_eq(rcoll_mem_query((char *)dev + 10, 991, &mi), rcollInvalidArgument,
               "a device buffer past the end of its allocation");
  cr_assert_eq(rcoll_mem_query(pinned, 64, &mi), rcollSuccess);
  cr_expect(mi.type == RCOLL_MEM_HOST && mi.device == -1, "pinned host memory is host memory");
  /* Plain host memory: the driver says it is not CUDA memory, so the
   * runtime is never asked (no context for host-only programs). */
  int before = atomic_load(&fake_stats.attr_queries);
  cr_assert_eq(rcoll_mem_query(&local, sizeof local, &mi), rcollSuccess);
  cr_expect(mi.type == RCOLL_MEM_HOST && mi.device == -1);
  cr_expect_eq(atomic_load(&fake_stats.attr_queries), before);
  fake_free(dev);
  fake_free(pinned);
}

static void register_body(rank_ctx_t *x, rcollComm_t comm) {
  float *dev = cuda_ranks_dev_alloc(4096);
  void *h = NULL;
  x->result = rcollCommRegister(comm, dev, 4096, &h);
  const rcoll_reg_t *g = rcoll_reg_find(comm, dev + 100, 400);
  x->wrong += g == NULL || g->mem.type != RCOLL_MEM_CUDA || g->mem.device != 0;
  x->wrong += rcollCommRegister(comm, dev, 8192, &h) != rcollInvalidArgument; /* past its end */
  x->wrong += rcollCommDeregister(comm, h) != rcollSuccess;
  fake_free(dev);
}

Test(cuda_stream, register_device_memory) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(1, 0, register_body, ctx);
}

/* ---- a synchronous copy right behind a call ----
 * The pattern of `t.cpu()` after an all-reduce: cudaMemcpyAsync into
 * pageable memory on the call's stream blocks the caller inside the driver,
 * holding the driver's lock, until the call is done (cuda_fake.h models it
 * as a real driver showed it). The proxy must finish the call without a CUDA
 * call that needs that lock: on a GPU, a wait here that gives up is a hang
 * (seen on an H200, where cuEventDestroy in the proxy waited for ever). */
#define PAGEABLE_ROUNDS 8

static void pageable_body(rank_ctx_t *x, rcollComm_t comm) {
  size_t n = x->count;
  int legacy = x->user != NULL;
  rcoll_cuda_stream_t s = legacy ? NULL : cuda_ranks_stream_new();
  float *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(n * 4), *host = calloc(n, 4);
  for (int round = 0; round < PAGEABLE_ROUNDS; round++) {
    cuda_ranks_fill(a, n, x->rank);
    memset(b, 0, n * 4);
    x->result = rcollAllReduce(a, b, n, rcollFloat32, rcollSum, comm, s);
    /* On the legacy stream the call returns once done: nothing to wait for. */
    if (legacy)
      x->wrong += count_wrong(b, n, x->nranks);
    fake_copy_to_pageable(host, b, n * 4, s);
    x->wrong += count_wrong(host, n, x->nranks);
  }
  /* The proxy's time accounts (logged at destroy) saw every call; with
   * more than one rank the data went through the IPC rings, unless the
   * calls ran as host plans on pinned copies (lib/cuda/bounce.h). */
  const struct rcoll_cuda_prof *prof = &comm->cuda->prof;
  x->wrong += prof->units < PAGEABLE_ROUNDS || prof->run_us <= 0;
  if (comm->cuda_bounce >= n * 4)
    x->wrong += prof->bounced != PAGEABLE_ROUNDS;
  else
    x->wrong += x->nranks > 1 ? prof->ipc_parts_sent == 0 || prof->ipc_parts_recv == 0
                              : prof->local_copies == 0;
  if (!legacy)
    rcoll_cuda_api()->stream_destroy(s);
  fake_free(a);
  fake_free(b);
  free(host);
}

Test(cuda_stream, synchronous_copy_behind_a_call_on_a_created_stream) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  int created = atomic_load(&fake_stats.events_created);
  cuda_ranks_run(2, 5000, pageable_body, ctx);
  cr_expect_eq(atomic_load(&fake_stats.deadlocks), 0, "the proxy waited for the driver lock that a "
               "synchronous copy held: a hang on a GPU");
  /* Events are reused: creating them is not free, destroying them is what
   * deadlocked. At most one per rank and call in flight, not one per call,
   * and one per part in flight in each direction of each CUDA IPC
   * connection (RCOLL_NSLOTS, 4: ipc.h), made once. */
  cr_expect_leq(atomic_load(&fake_stats.events_created) - created, 2 * 2 + 2 * 2 * 4,
                "%d events for %d calls", atomic_load(&fake_stats.events_created) - created,
                2 * PAGEABLE_ROUNDS);
}

/* The legacy stream is one per process, so the ranks-as-threads of these
 * tests would share it (and hold each other): one rank here. The call runs
 * its proxy steps all the same (the out-of-place copy). */
Test(cuda_stream, call_on_the_legacy_stream_returns_done) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  ctx[0].user = ctx; /* any non-NULL: use the legacy stream */
  cuda_ranks_run(1, 5000, pageable_body, ctx);
  cr_expect_eq(atomic_load(&fake_stats.deadlocks), 0, "the proxy waited for the driver lock that a "
               "synchronous copy on the legacy stream held: a hang on a GPU");
}

/* The same two with calls that run as host plans on pinned copies: the
 * copy back is queued behind the stream's hold, and on the legacy stream
 * the call returns only once it ran (copies take 200 us here). */
static void bounced_behind_a_synchronous_copy(const char *bounce_kernel) {
  setenv("RCOLL_CUDA_BOUNCE", "65536", 1);
  setenv("RCOLL_CUDA_BOUNCE_KERNEL", bounce_kernel, 1);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 5000, pageable_body, ctx);
  cr_expect_eq(atomic_load(&fake_stats.deadlocks), 0, "the proxy waited for the driver lock that a "
               "synchronous copy held: a hang on a GPU");
}

static void bounced_on_the_legacy_stream(const char *bounce_kernel) {
  setenv("RCOLL_CUDA_BOUNCE", "65536", 1);
  setenv("RCOLL_CUDA_BOUNCE_KERNEL", bounce_kernel, 1);
  atomic_store(&fake_stats.copy_delay_us, 200);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  ctx[0].user = ctx;
  cuda_ranks_run(1, 5000, pageable_body, ctx);
  atomic_store(&fake_stats.copy_delay_us, 0);
}

Test(cuda_stream, synchronous_copy_behind_a_bounced_call) { bounced_behind_a_synchronous_copy("0"); }
Test(cuda_stream, a_bounced_call_on_the_legacy_stream_returns_done) { bounced_on_the_legacy_stream("0"); }

/* The same two with the bounce kernel (lib/cuda/bounce_kernel.h) in place
 * of the copies and the wait. */
Test(cuda_stream, synchronous_copy_behind_a_bounce_kernel) {
  bounced_behind_a_synchronous_copy("1");
  cr_expect_gt(atomic_load(&fake_stats.bounce_kernels), 0, "no bounce kernel ran");
}

Test(cuda_stream, a_bounce_kernel_on_the_legacy_stream_returns_done) {
  bounced_on_the_legacy_stream("1");
  cr_expect_gt(atomic_load(&fake_stats.bounce_kernels), 0, "no bounce kernel ran");
}
