/* The GPUDirect RDMA path of device calls (lib/cuda/stage.c, rcoll_gdr_*) on
 * the host fake of CUDA. No transport here can register device memory, so
 * the test adds one: real sockets that claim RCOLL_PTR_CUDA (the fake's
 * device memory is host memory, which sockets can carry). Pinned: large
 * messages go to and from the user's device buffers registered as
 * RCOLL_MEM_CUDA and every such receive is flushed; messages of 64 KiB or
 * less are staged (a transport may move small messages with the CPU);
 * results are right either way. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "../transports/socket/socket.h"
#include "error.h"
#include "net.h"
#include "rcoll.h"
#include "support/cuda_fake.h"
#include "support/cuda_mix.h"
#include "support/cuda_ranks.h"

static rcoll_transport_ops_t gdr_ops;
static _Atomic int cuda_regs, flushes;

static rcollResult_t gdr_props(void *ctx, int dev, rcoll_net_props_t *p) {
  RCOLL_CHECK(socket_ops.get_properties(ctx, dev, p));
  p->ptr_support |= RCOLL_PTR_CUDA;
  return rcollSuccess;
}

static rcollResult_t gdr_reg(void *comm, void *data, size_t size, int type, void **mh) {
  if (type == RCOLL_MEM_CUDA)
    atomic_fetch_add(&cuda_regs, 1);
  return socket_ops.reg_mr(comm, data, size, RCOLL_MEM_HOST, mh);
}

static rcollResult_t gdr_flush(void *comm, int n, void **data, const size_t *sizes, void **mh, void **req) {
  atomic_fetch_add(&flushes, 1);
  return socket_ops.iflush(comm, n, data, sizes, mh, req);
}

static void gdr_setup(void) {
  cuda_ranks_setup();
  gdr_ops = socket_ops;
  gdr_ops.name = "gdrsock";
  gdr_ops.get_properties = gdr_props;
  gdr_ops.reg_mr = gdr_reg;
  gdr_ops.iflush = gdr_flush;
  rcoll_net_add_for_tests(&gdr_ops);
  setenv("RCOLL_NET", "gdrsock", 1);
  setenv("RCOLL_P2P_DISABLE", "1", 1); /* one node: else CUDA IPC */
}

TestSuite(cuda_gdr, .init = gdr_setup, .timeout = 120);

/* All-reduce, all-gather and a send/recv ring on device buffers, checked. */
static void gdr_body(rank_ctx_t *x, rcollComm_t comm) {
  size_t n = x->count, N = n * (size_t)x->nranks;
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *a = cuda_ranks_dev_alloc(N * 4), *b = cuda_ranks_dev_alloc(N * 4);
  cuda_ranks_fill(a, n, x->rank);
  x->result = rcollAllReduce(a, b, n, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  for (size_t i = 0; i < n; i++)
    x->wrong += b[i] != cuda_ranks_sum_of(x->nranks, i);
  x->result = x->result ? x->result : rcollAllGather(a, b, n, rcollFloat32, comm, s);
  fake_stream_sync(s);
  for (size_t i = 0; i < N; i++)
    x->wrong += b[i] != cuda_ranks_input((int)(i / n), i % n);
  int next = (x->rank + 1) % x->nranks, prev = (x->rank + x->nranks - 1) % x->nranks;
  rcollGroupStart();
  rcollSend(a, n, rcollFloat32, next, comm, s);
  rcollRecv(b, n, rcollFloat32, prev, comm, s);
  rcollResult_t r = rcollGroupEnd();
  x->result = x->result ? x->result : r;
  fake_stream_sync(s);
  for (size_t i = 0; i < n; i++)
    x->wrong += b[i] != cuda_ranks_input(prev, i);
  rcollResult_t async = rcollSuccess;
  rcollCommGetAsyncError(comm, &async);
  x->result = x->result ? x->result : async;
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(a);
  fake_free(b);
}

Test(cuda_gdr, large_messages_use_the_device_buffers_and_are_flushed) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(3, 300007, gdr_body, ctx); /* ~400 KB per ring step: over 64 KiB */
  cr_expect_gt(atomic_load(&cuda_regs), 0, "no device buffer was registered with the transport");
  cr_expect_gt(atomic_load(&flushes), 0, "no GPUDirect receive was flushed");
}

Test(cuda_gdr, small_messages_are_staged) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(3, 1000, gdr_body, ctx); /* 4000-byte sends, 1333-byte ring steps */
  cr_expect_eq(atomic_load(&cuda_regs), 0, "a message of 64 KiB or less went GPUDirect");
  cr_expect_eq(atomic_load(&flushes), 0);
}

/* Calls of every kind and size side by side (tests/support/cuda_mix.h):
 * GPUDirect messages over 64 KiB, staged ones below, host plans for calls of
 * 16 KiB or less, with copies of 100 us. */
Test(cuda_gdr, every_kind_of_call_mixed_on_two_streams) {
  setenv("RCOLL_CUDA_BOUNCE", "16384", 1);
  atomic_store(&fake_stats.copy_delay_us, 100);
  cuda_mix_run(3, 61, 3, -1, 0);
  cr_expect_gt(atomic_load(&cuda_regs), 0, "no device buffer was registered with the transport");
}
