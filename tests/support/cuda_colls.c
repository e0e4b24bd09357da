/* Every collective on fake device buffers, checked against the inputs
 * (test_cuda_proxy.c, test_cuda_bounce.c). Expected values are computed
 * from cuda_ranks_input; the first few differences are logged. */
#include "cuda_colls.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdatomic.h>

#include "cuda_fake.h"

/* 1 when got differs from want; the first few differences are logged. */
static long differs(const rank_ctx_t *x, const char *what, size_t i, float got, float want) {
  static _Atomic int logged;
  if (got == want)
    return 0;
  if (atomic_fetch_add(&logged, 1) < 5)
    cr_log_warn("rank %d of %d, %s count %zu: element %zu is %g, expected %g", x->rank, x->nranks,
                what, x->count, i, got, want);
  return 1;
}

long cuda_colls_allreduce(rank_ctx_t *x, rcollComm_t comm, rcoll_cuda_stream_t s) {
  size_t n = x->count;
  float *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(n * 4);
  cuda_ranks_fill(a, n, x->rank);
  x->result = rcollAllReduce(a, b, n, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  long wrong = 0;
  for (size_t i = 0; i < n; i++)
    wrong += differs(x, "allreduce", i, b[i], cuda_ranks_sum_of(x->nranks, i));
  fake_free(a);
  fake_free(b);
  return wrong;
}

static long check_allgather(rank_ctx_t *x, rcollComm_t comm, rcoll_cuda_stream_t s) {
  size_t n = x->count, N = n * (size_t)x->nranks;
  float *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(N * 4);
  cuda_ranks_fill(a, n, x->rank);
  x->result = rcollAllGather(a, b, n, rcollFloat32, comm, s);
  fake_stream_sync(s);
  long wrong = 0;
  for (size_t i = 0; i < N; i++)
    wrong += differs(x, "allgather", i, b[i], cuda_ranks_input((int)(i / (n ? n : 1)), i % (n ? n : 1)));
  fake_free(a);
  fake_free(b);
  return wrong;
}

static long check_reduce_scatter(rank_ctx_t *x, rcollComm_t comm, rcoll_cuda_stream_t s) {
  size_t n = x->count, N = n * (size_t)x->nranks;
  float *a = cuda_ranks_dev_alloc(N * 4), *b = cuda_ranks_dev_alloc(n * 4);
  cuda_ranks_fill(a, N, x->rank);
  x->result = rcollReduceScatter(a, b, n, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  long wrong = 0;
  for (size_t i = 0; i < n; i++)
    wrong += differs(x, "reduce_scatter", i, b[i], cuda_ranks_sum_of(x->nranks, (size_t)x->rank * n + i));
  fake_free(a);
  fake_free(b);
  return wrong;
}

static long check_bcast_reduce(rank_ctx_t *x, rcollComm_t comm, rcoll_cuda_stream_t s) {
  size_t n = x->count;
  int root = x->nranks - 1;
  float *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(n * 4);
  cuda_ranks_fill(a, n, x->rank);
  x->result = rcollBroadcast(a, b, n, rcollFloat32, root, comm, s);
  fake_stream_sync(s);
  long wrong = 0;
  for (size_t i = 0; i < n; i++)
    wrong += differs(x, "broadcast", i, b[i], cuda_ranks_input(root, i));
  if (x->result == rcollSuccess)
    x->result = rcollReduce(a, b, n, rcollFloat32, rcollAvg, 0, comm, s);
  fake_stream_sync(s);
  for (size_t i = 0; x->rank == 0 && i < n; i++)
    wrong += differs(x, "reduce avg", i, b[i], cuda_ranks_sum_of(x->nranks, i) / (float)x->nranks);
  fake_free(a);
  fake_free(b);
  return wrong;
}

/* Each rank sends to the next and receives from the previous, in a group. */
static long check_sendrecv(rank_ctx_t *x, rcollComm_t comm, rcoll_cuda_stream_t s) {
  size_t n = x->count;
  int next = (x->rank + 1) % x->nranks, prev = (x->rank + x->nranks - 1) % x->nranks;
  float *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(n * 4);
  cuda_ranks_fill(a, n, x->rank);
  rcollGroupStart();
  rcollSend(a, n, rcollFloat32, next, comm, s);
  rcollRecv(b, n, rcollFloat32, prev, comm, s);
  x->result = rcollGroupEnd();
  fake_stream_sync(s);
  long wrong = 0;
  for (size_t i = 0; i < n; i++)
    wrong += differs(x, "sendrecv", i, b[i], cuda_ranks_input(prev, i));
  fake_free(a);
  fake_free(b);
  return wrong;
}

/* Out of place, then in place (through the device scratch ring). */
static long check_alltoall(rank_ctx_t *x, rcollComm_t comm, rcoll_cuda_stream_t s) {
  size_t n = x->count, N = n * (size_t)x->nranks;
  float *a = cuda_ranks_dev_alloc(N * 4), *b = cuda_ranks_dev_alloc(N * 4);
  long wrong = 0;
  for (int inplace = 0; inplace < 2 && x->result == rcollSuccess; inplace++) {
    cuda_ranks_fill(a, N, x->rank);
    x->result = rcollAlltoAll(a, inplace ? a : b, n, rcollFloat32, comm, s);
    fake_stream_sync(s);
    const float *got = inplace ? a : b;
    for (size_t i = 0; i < N; i++)
      wrong += differs(x, inplace ? "alltoall in place" : "alltoall", i, got[i],
                       cuda_ranks_input((int)(i / n), (size_t)x->rank * n + i % n));
  }
  fake_free(a);
  fake_free(b);
  return wrong;
}

static long check_gather_scatter(rank_ctx_t *x, rcollComm_t comm, rcoll_cuda_stream_t s) {
  size_t n = x->count, N = n * (size_t)x->nranks;
  int root = 1 % x->nranks;
  float *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(N * 4);
  cuda_ranks_fill(a, n, x->rank);
  x->result = rcollGather(a, b, n, rcollFloat32, root, comm, s);
  fake_stream_sync(s);
  long wrong = 0;
  for (size_t i = 0; x->rank == root && i < N; i++)
    wrong += differs(x, "gather", i, b[i], cuda_ranks_input((int)(i / n), i % n));
  cuda_ranks_fill(b, N, x->rank);
  if (x->result == rcollSuccess)
    x->result = rcollScatter(b, a, n, rcollFloat32, root, comm, s);
  fake_stream_sync(s);
  for (size_t i = 0; i < n; i++)
    wrong += differs(x, "scatter", i, a[i], cuda_ranks_input(root, (size_t)x->rank * n + i));
  fake_free(a);
  fake_free(b);
  return wrong;
}

void cuda_colls_all(rank_ctx_t *x, rcollComm_t comm) {
  long (*const checks[])(rank_ctx_t *, rcollComm_t, rcoll_cuda_stream_t) = {
      cuda_colls_allreduce, check_allgather, check_reduce_scatter, check_bcast_reduce, check_sendrecv,
      check_alltoall,  check_gather_scatter};
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  for (size_t k = 0; k < sizeof checks / sizeof checks[0] && x->result == rcollSuccess; k++)
    x->wrong += checks[k](x, comm, s);
  rcollResult_t async = rcollSuccess;
  rcollCommGetAsyncError(comm, &async);
  if (x->result == rcollSuccess)
    x->result = async;
  int dev = -7;
  rcollCommCuDevice(comm, &dev);
  x->wrong += differs(x, "rcollCommCuDevice", 0, (float)dev, 0);
  rcoll_cuda_api()->stream_destroy(s);
}

