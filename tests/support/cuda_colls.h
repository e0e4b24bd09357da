/* Every collective on fake device buffers, checked (cuda_colls.c). */
#ifndef RCOLL_TESTS_SUPPORT_CUDA_COLLS_H
#define RCOLL_TESTS_SUPPORT_CUDA_COLLS_H

#include "cuda_ranks.h"

/* One all-reduce of x->count floats on stream s: the elements that were
 * wrong (x->result is the call's result). */
long cuda_colls_allreduce(rank_ctx_t *x, rcollComm_t comm, rcoll_cuda_stream_t s);
/* A cuda_ranks_run body: every collective of x->count elements on a stream
 * of its own (all-reduce, all-gather, reduce-scatter, broadcast, reduce,
 * send/recv in a group, all-to-all out of and in place, gather, scatter),
 * then the comm's async error and rcollCommCuDevice. */
void cuda_colls_all(rank_ctx_t *x, rcollComm_t comm);

#endif
