/* Algorithms: each one plans a collective into a rcoll_plan_t (see plan.h).
 * One algorithm per file in algorithms/. Arguments were validated at the
 * public entry; count may be 0 (then nothing is planned). Buffers are host
 * pointers for now; sendbuff may equal recvbuff (in-place). */
#ifndef RCOLL_ALGO_H
#define RCOLL_ALGO_H

#include <stddef.h>

#include "plan.h"
#include "rcoll.h"

typedef struct rcoll_coll_args {
  const void *sendbuff;
  void *recvbuff;
  size_t count;  /* allreduce/bcast/reduce: elements; allgather: per-rank sendcount;
                    reduce_scatter: per-rank recvcount; send/recv: elements */
  rcollDataType_t dtype;
  rcollRedOp_t op;
  int root;      /* broadcast/reduce root, or send/recv peer */
  int rank;
  int nranks;
} rcoll_coll_args_t;

/* Ring: reduce-scatter then all-gather, chunked and pipelined. */
void rcoll_allreduce_ring(rcoll_plan_t *p, const rcoll_coll_args_t *a);
void rcoll_allgather_ring(rcoll_plan_t *p, const rcoll_coll_args_t *a);
void rcoll_reduce_scatter_ring(rcoll_plan_t *p, const rcoll_coll_args_t *a);
/* Pipelined chain root -> root+1 -> ... (broadcast) and its reverse (reduce). */
void rcoll_broadcast_chain(rcoll_plan_t *p, const rcoll_coll_args_t *a);
void rcoll_reduce_chain(rcoll_plan_t *p, const rcoll_coll_args_t *a);
/* Point to point: one message to or from args->root. */
void rcoll_send_p2p(rcoll_plan_t *p, const rcoll_coll_args_t *a);
void rcoll_recv_p2p(rcoll_plan_t *p, const rcoll_coll_args_t *a);

/* Splits [0, total) into ranges of at most `chunk` bytes aligned to the
 * element size; used by every pipelined algorithm. Returns the number of
 * chunks (0 when total is 0). */
size_t rcoll_chunk_count(size_t total, size_t chunk);

#endif
