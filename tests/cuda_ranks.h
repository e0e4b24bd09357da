/* Ranks as threads of this process for the fake-CUDA tests, and the inputs
 * they use (test_cuda_proxy.c, test_cuda_stream.c). */
#ifndef RCOLL_TESTS_CUDA_RANKS_H
#define RCOLL_TESTS_CUDA_RANKS_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "cuda/module.h"
#include "cuda_fake.h"
#include "rcoll.h"

#define MAX_RANKS 4

static inline void cuda_ranks_setup(void) {
  if (rcoll_cuda_fatbin_size == 0)
    cr_skip_test("this build has no device code (configure found no CUDA), so device calls are "
                 "refused before they reach the proxy");
  setenv("RCOLL_TIMEOUT", "20", 1);
  fake_cuda_install();
}

static inline double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline void *dev_alloc(size_t bytes) {
  void *p = NULL;
  cr_assert_eq(rcoll_cuda_api()->malloc(&p, bytes ? bytes : 1), 0);
  return p;
}

static inline rcoll_cuda_stream_t stream_new(void) {
  rcoll_cuda_stream_t s;
  rcoll_cuda_api()->stream_create_with_flags(&s, 0);
  return s;
}

/* The input element i of `rank`: small integers, exact in float. */
static inline float input(int rank, size_t i) {
  return (float)(rank * 100 + (int)(i % 61));
}

static inline void fill_rank(float *buf, size_t count, int rank) {
  for (size_t i = 0; i < count; i++)
    buf[i] = input(rank, i);
}

static inline float sum_of(int n, size_t i) {
  float s = 0;
  for (int r = 0; r < n; r++)
    s += input(r, i);
  return s;
}

/* ---- ranks as threads ---- */

typedef struct rank_ctx {
  int rank, nranks;
  rcollUniqueId id;
  size_t count;
  long wrong;
  rcollResult_t result;
  void (*body)(struct rank_ctx *, rcollComm_t);
  void *user;
} rank_ctx_t;

static inline void *rank_main(void *arg) {
  rank_ctx_t *x = arg;
  rcollComm_t comm;
  x->result = rcollCommInitRank(&comm, x->nranks, x->id, x->rank);
  if (x->result != rcollSuccess)
    return NULL;
  x->body(x, comm);
  rcollCommDestroy(comm);
  return NULL;
}

static inline void run_ranks(int n, size_t count, void (*body)(rank_ctx_t *, rcollComm_t), rank_ctx_t *ctx) {
  rcollUniqueId id;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess);
  pthread_t t[MAX_RANKS];
  for (int r = 0; r < n; r++) {
    ctx[r] = (rank_ctx_t){.rank = r, .nranks = n, .id = id, .count = count, .body = body,
                          .user = ctx[r].user};
    pthread_create(&t[r], NULL, rank_main, &ctx[r]);
  }
  for (int r = 0; r < n; r++)
    pthread_join(t[r], NULL);
  for (int r = 0; r < n; r++) {
    cr_expect_eq(ctx[r].result, rcollSuccess, "rank %d: %s", r, rcollGetErrorString(ctx[r].result));
    cr_expect_eq(ctx[r].wrong, 0, "rank %d: %ld wrong elements", r, ctx[r].wrong);
  }
}

#endif
