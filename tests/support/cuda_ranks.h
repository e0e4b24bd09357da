/* Ranks as threads of this process for the fake-CUDA tests, and the inputs
 * they use (test_cuda_gdr.c, test_cuda_proxy.c, test_cuda_stream.c). The
 * functions assert with Criterion, so only Criterion binaries link them. */
#ifndef RCOLL_TESTS_SUPPORT_CUDA_RANKS_H
#define RCOLL_TESTS_SUPPORT_CUDA_RANKS_H

#include <stddef.h>

#include "cuda/cuda_api.h"
#include "rcoll.h"

#define MAX_RANKS 4

/* One rank: body runs between rcollCommInitRank and rcollCommDestroy, and
 * counts what it found wrong in `wrong`; user is the test's own. */
typedef struct rank_ctx {
  int rank, nranks;
  rcollUniqueId id;
  size_t count;
  long wrong;
  rcollResult_t result;
  void (*body)(struct rank_ctx *, rcollComm_t);
  void *user;
} rank_ctx_t;

/* Installs the fake CUDA table, or skips the test where the build has no
 * device code (configure found no CUDA). */
void cuda_ranks_setup(void);

/* CLOCK_MONOTONIC in milliseconds. */
double cuda_ranks_now_ms(void);

/* Fake device memory (at least one byte), asserting that it was had. */
void *cuda_ranks_dev_alloc(size_t bytes);

rcoll_cuda_stream_t cuda_ranks_stream_new(void);

/* The input element i of `rank`: small integers, exact in float. */
float cuda_ranks_input(int rank, size_t i);
void cuda_ranks_fill(float *buf, size_t count, int rank);
/* The sum over ranks 0..n-1 of their element i. */
float cuda_ranks_sum_of(int n, size_t i);

/* A rank's thread (pthread_create's function, ctx its rank_ctx_t, filled
 * in as cuda_ranks_run does): init, body, destroy. */
void *cuda_ranks_main(void *ctx);

/* Runs body on n ranks, one thread each (ctx[r].user is kept), and expects
 * every rank to succeed with nothing wrong. */
void cuda_ranks_run(int n, size_t count, void (*body)(rank_ctx_t *, rcollComm_t), rank_ctx_t *ctx);

/* Work queued on a stream (fake_stream_host(s, cuda_ranks_take_snapshot,
 * &snap)): a copy of `count` floats at the moment the stream lets it run. */
typedef struct cuda_ranks_snapshot {
  const float *src;
  float *copy;
  size_t count;
} cuda_ranks_snapshot_t;
void cuda_ranks_take_snapshot(void *snapshot);

/* Two ranks as processes of their own: rank_main(rank, ids, arg) runs in
 * each child, which ends with its return value as exit status (and is
 * killed with the test, or after `secs`). ids is a pipe: rank 0 makes the
 * unique id and writes it, rank 1 reads it, as a launcher would hand it
 * over. Expects both to exit 0. Nothing may start a thread, or allocate in
 * one, while the ranks fork (a child would inherit an allocator lock no
 * thread of its own releases; under ASan it hung, 3 runs in 6): the legacy
 * stream's thread is seen idle first, and no Criterion call comes before
 * the forks. A child installs the fake again (its streams are threads,
 * which a fork does not copy). */
void cuda_ranks_fork2(int (*rank_main)(int rank, const int ids[2], void *arg), void *arg, int secs);

#endif
