/* Sends and receives on the direct path (RCOLL_CUDA_DIRECT, lib/cuda/
 * direct_kernel.h): a rank's point-to-point calls of one call or group are
 * one kernel that moves them through the pair's regions of the boxes, on
 * the host fake of CUDA (the kernel is the block function the GPU runs).
 * The path comes on at the first collective (its set-up needs every rank);
 * before it, sends go through the proxy. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "cuda/cuda_comm.h"
#include "rcoll.h"
#include "support/cuda_fake.h"
#include "support/cuda_ranks.h"

static void p2p_setup(void) {
  cuda_ranks_setup();
  setenv("RCOLL_CUDA_DIRECT", "1", 1);
  /* 4 KiB regions: a round moves 4 KiB, so most messages take many. */
  setenv("RCOLL_CUDA_DIRECT_CHUNK", "4096", 1);
  setenv("RCOLL_TIMEOUT", "3", 1);
}

TestSuite(cuda_direct_p2p, .init = p2p_setup, .timeout = 120);

/* Element i of the message from rank `from` to rank `to`. */
static float msg_value(int from, int to, size_t i) { return (float)(from * 1000 + to * 100 + (int)(i % 89)); }

static void msg_fill(float *buf, size_t n, int from, int to) {
  for (size_t i = 0; i < n; i++)
    buf[i] = msg_value(from, to, i);
}

static long msg_check(const rank_ctx_t *x, const float *buf, size_t n, int from) {
  long wrong = 0;
  for (size_t i = 0; i < n; i++)
    if (buf[i] != msg_value(from, x->rank, i) && wrong++ < 3)
      cr_log_warn("rank %d: element %zu of %zu from rank %d is %g, not %g", x->rank, i, n, from, buf[i],
                  msg_value(from, x->rank, i));
  return wrong;
}

/* An all-reduce, which sets the direct path up on every rank. */
static void direct_on(rank_ctx_t *x, rcollComm_t comm, rcoll_cuda_stream_t s) {
  float *a = cuda_ranks_dev_alloc(64 * 4);
  cuda_ranks_fill(a, 64, x->rank);
  x->result = rcollAllReduce(a, a, 64, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  fake_free(a);
}

/* The proxy ran nothing, and `kernels` point-to-point kernels ran here. */
static void only_kernels(rank_ctx_t *x, rcollComm_t comm, int64_t kernels) {
  if (comm->cuda->prof.units != 0 || comm->cuda->direct.p2p_calls != kernels) {
    cr_log_error("rank %d: %lld units of the proxy, %lld point-to-point kernels (not %lld)", x->rank,
                 (long long)comm->cuda->prof.units, (long long)comm->cuda->direct.p2p_calls,
                 (long long)kernels);
    x->wrong++;
  }
}

static const size_t sizes[] = {1, 1000, 1024, 300001}; /* one round to many, and a tail */
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* Rank 0 sends rank 1 a message of each size, outside a group. */
static void sends_alone(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  direct_on(x, comm, s);
  for (size_t k = 0; k < NSIZES && x->result == rcollSuccess; k++) {
    size_t n = sizes[k];
    float *buf = cuda_ranks_dev_alloc(n * 4);
    msg_fill(buf, n, 0, 1);
    x->result = x->rank == 0 ? rcollSend(buf, n, rcollFloat32, 1, comm, s)
                             : rcollRecv(buf, n, rcollFloat32, 0, comm, s);
    fake_stream_sync(s);
    if (x->rank == 1)
      x->wrong += msg_check(x, buf, n, 0);
    fake_free(buf);
  }
  only_kernels(x, comm, NSIZES);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_p2p, a_send_is_a_kernel_on_each_side) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 0, sends_alone, ctx);
}

/* Every rank sends every other a message of its own size (rank p to q:
 * 700 * (p + 1) + 5000 * q floats) and receives theirs, in one group, the
 * sends and receives in an order of its own: an all-to-all with uneven
 * splits, as torch's all_to_all_single makes of them. */
static size_t a2a_count(int from, int to) { return 700 * (size_t)(from + 1) + 5000 * (size_t)to; }

static void all_to_all_v(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  direct_on(x, comm, s);
  float *out[MAX_RANKS] = {0}, *in[MAX_RANKS] = {0};
  for (int q = 0; q < x->nranks; q++) {
    out[q] = cuda_ranks_dev_alloc(a2a_count(x->rank, q) * 4);
    in[q] = cuda_ranks_dev_alloc(a2a_count(q, x->rank) * 4);
    msg_fill(out[q], a2a_count(x->rank, q), x->rank, q);
  }
  rcollGroupStart();
  for (int k = 0; k < x->nranks; k++) { /* odd ranks receive first, and go round the other way */
    int q = x->rank % 2 ? (x->rank + x->nranks - k) % x->nranks : (x->rank + k) % x->nranks;
    if (q == x->rank)
      continue;
    if (x->rank % 2)
      rcollRecv(in[q], a2a_count(q, x->rank), rcollFloat32, q, comm, s);
    rcollSend(out[q], a2a_count(x->rank, q), rcollFloat32, q, comm, s);
    if (x->rank % 2 == 0)
      rcollRecv(in[q], a2a_count(q, x->rank), rcollFloat32, q, comm, s);
  }
  x->result = rcollGroupEnd();
  fake_stream_sync(s);
  for (int q = 0; q < x->nranks; q++) {
    if (q != x->rank)
      x->wrong += msg_check(x, in[q], a2a_count(q, x->rank), q);
    fake_free(out[q]);
    fake_free(in[q]);
  }
  only_kernels(x, comm, 1);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_p2p, an_uneven_all_to_all_of_sends_is_one_kernel_a_rank) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(4, 0, all_to_all_v, ctx);
}

/* 20 messages from rank 0 to rank 1 in one group (more than a kernel
 * holds: two kernels on each side, one after the other), of sizes that
 * differ, received in the order sent. */
#define MANY 20
static size_t many_count(int k) { return 37 + (size_t)k * 1301; }

static void many_to_one_peer(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  direct_on(x, comm, s);
  float *buf[MANY];
  rcollGroupStart();
  for (int k = 0; k < MANY; k++) {
    buf[k] = cuda_ranks_dev_alloc(many_count(k) * 4);
    msg_fill(buf[k], many_count(k), 0, 1);
    if (x->rank == 0)
      rcollSend(buf[k], many_count(k), rcollFloat32, 1, comm, s);
    else
      rcollRecv(buf[k], many_count(k), rcollFloat32, 0, comm, s);
  }
  x->result = rcollGroupEnd();
  fake_stream_sync(s);
  for (int k = 0; k < MANY; k++) {
    x->wrong += x->rank == 1 ? msg_check(x, buf[k], many_count(k), 0) : 0;
    fake_free(buf[k]);
  }
  only_kernels(x, comm, 2);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_p2p, more_messages_than_a_kernel_holds_follow_each_other) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 0, many_to_one_peer, ctx);
}

/* A group's send on one stream and receive on another: the kernel starts
 * after the work queued on both before the group (the send's input is
 * written by slow work on its stream), and work queued on either after the
 * group sees its result. */
typedef struct slow_fill {
  float *buf;
  size_t n;
  int from, to;
} slow_fill_t;

static void fill_slowly(void *arg) {
  slow_fill_t *f = arg;
  struct timespec ts = {0, 30 * 1000 * 1000};
  nanosleep(&ts, NULL);
  msg_fill(f->buf, f->n, f->from, f->to);
}

static void two_streams(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s1 = cuda_ranks_stream_new(), s2 = cuda_ranks_stream_new();
  direct_on(x, comm, s1);
  const size_t n = 20000;
  int peer = 1 - x->rank;
  float *out = cuda_ranks_dev_alloc(n * 4), *in = cuda_ranks_dev_alloc(n * 4), *seen = calloc(n, 4);
  memset(out, 0, n * 4);
  slow_fill_t f = {out, n, x->rank, peer};
  cuda_ranks_snapshot_t snap = {in, seen, n};
  fake_stream_host(s2, fill_slowly, &f);
  rcollGroupStart();
  rcollRecv(in, n, rcollFloat32, peer, comm, s1); /* the kernel's stream */
  rcollSend(out, n, rcollFloat32, peer, comm, s2);
  x->result = rcollGroupEnd();
  fake_stream_host(s2, cuda_ranks_take_snapshot, &snap); /* after the group, on the other stream */
  fake_stream_sync(s2);
  x->wrong += msg_check(x, seen, n, peer);
  fake_stream_sync(s1);
  only_kernels(x, comm, 1);
  fake_free(out), fake_free(in), free(seen);
  rcoll_cuda_api()->stream_destroy(s1);
  rcoll_cuda_api()->stream_destroy(s2);
}

Test(cuda_direct_p2p, a_group_on_two_streams_waits_for_both_and_both_wait_for_it) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 0, two_streams, ctx);
}

/* Before any collective the direct path is not set up (that needs every
 * rank): a send goes through the proxy; after an all-reduce, it is a
 * kernel. Both arrive. */
static void before_and_after(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = 5000;
  float *buf = cuda_ranks_dev_alloc(n * 4);
  for (int round = 0; round < 2 && x->result == rcollSuccess; round++) {
    if (round == 1)
      direct_on(x, comm, s);
    msg_fill(buf, n, 0, 1);
    if (x->rank == 1)
      memset(buf, 0, n * 4);
    x->result = x->rank == 0 ? rcollSend(buf, n, rcollFloat32, 1, comm, s)
                             : rcollRecv(buf, n, rcollFloat32, 0, comm, s);
    fake_stream_sync(s);
    x->wrong += x->rank == 1 ? msg_check(x, buf, n, 0) : 0;
    x->wrong += comm->cuda->direct.p2p_calls != round;
  }
  x->wrong += comm->cuda->prof.units != 1; /* the first send's */
  fake_free(buf);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_p2p, sends_before_any_collective_go_through_the_proxy) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 0, before_and_after, ctx);
}

/* The error a rank sees next (its next call's, or the async one). */
static const char *next_error(rank_ctx_t *x, rcollComm_t comm, rcoll_cuda_stream_t s, rcollResult_t r) {
  float *a = cuda_ranks_dev_alloc(64 * 4);
  cuda_ranks_fill(a, 64, x->rank);
  if (r == rcollSuccess)
    r = rcollAllReduce(a, a, 64, rcollFloat32, rcollSum, comm, s);
  if (r == rcollSuccess)
    rcollCommGetAsyncError(comm, &r);
  fake_free(a);
  x->wrong += r == rcollSuccess;
  return rcollGetLastError(comm);
}

/* Rank 1 receives 200 floats where rank 0 sends 100: told on rank 1 at
 * its next call, naming both sizes. */
static void sizes_differ(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  direct_on(x, comm, s);
  float *buf = cuda_ranks_dev_alloc(200 * 4);
  msg_fill(buf, 200, 0, 1);
  rcollResult_t r = x->rank == 0 ? rcollSend(buf, 100, rcollFloat32, 1, comm, s)
                                 : rcollRecv(buf, 200, rcollFloat32, 0, comm, s);
  fake_stream_sync(s);
  if (x->rank == 1) {
    const char *msg = next_error(x, comm, s, r);
    cr_log_info("rank 1: %s", msg);
    x->wrong += strstr(msg, "rank 0 made another call: a send or receive of 800 bytes here, a send or "
                            "receive of 400 bytes there") == NULL;
  }
  fake_free(buf);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_p2p, a_receive_of_another_size_is_told) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 0, sizes_differ, ctx);
}

/* Rank 0 sends a message of many rounds that rank 1 never receives: its
 * kernel gives up after RCOLL_TIMEOUT, and its next call names rank 1.
 * Rank 1 keeps its comm (and box, where rank 0's kernel writes its flags)
 * until then: a box is freed once the peers took what its owner sent, and
 * a send that nobody receives is one the owner cannot know of. */
static pthread_barrier_t nobody_done;

static void nobody_receives(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  direct_on(x, comm, s);
  const size_t n = 100000;
  float *buf = cuda_ranks_dev_alloc(n * 4);
  msg_fill(buf, n, 0, 1);
  if (x->rank == 0) {
    rcollResult_t r = rcollSend(buf, n, rcollFloat32, 1, comm, s);
    fake_stream_sync(s);
    x->wrong += r != rcollSuccess;
    if (r == rcollSuccess) { /* the next call reports it */
      r = rcollSend(buf, 1, rcollFloat32, 1, comm, s);
      const char *msg = rcollGetLastError(comm);
      cr_log_info("rank 0: %s", msg);
      x->wrong += r == rcollSuccess || strstr(msg, "waiting for rank 1 (its receive of our send)") == NULL;
    }
  }
  pthread_barrier_wait(&nobody_done);
  fake_free(buf);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_p2p, a_send_nobody_receives_names_the_peer) {
  pthread_barrier_init(&nobody_done, NULL, 2);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 0, nobody_receives, ctx);
}
