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
/* Double binary tree: reduce up and broadcast down two trees, each carrying
 * half the data, pipelined by chunks (latency grows with log n). */
void rcoll_allreduce_tree(rcoll_plan_t *p, const rcoll_coll_args_t *a);
/* Pipelined binary tree rooted at args->root. */
void rcoll_broadcast_tree(rcoll_plan_t *p, const rcoll_coll_args_t *a);
/* Hierarchical: reduce-scatter within each node, all-reduce of each shard
 * across nodes, all-gather within each node. Needs p->topo; falls back to
 * ring on one node, one rank per node, or nodes of unequal size. */
void rcoll_allreduce_hier(rcoll_plan_t *p, const rcoll_coll_args_t *a);
/* Recursive halving-doubling (Rabenseifner), folding the ranks beyond the
 * largest power of two into their neighbours first. */
void rcoll_allreduce_rabenseifner(rcoll_plan_t *p, const rcoll_coll_args_t *a);
/* Deterministic (RCOLL_DETERMINISTIC): every element is reduced in rank
 * order, ((x0 op x1) op x2) op ..., whatever the chunking or placement. */
void rcoll_allreduce_deterministic(rcoll_plan_t *p, const rcoll_coll_args_t *a);
void rcoll_reduce_deterministic(rcoll_plan_t *p, const rcoll_coll_args_t *a);
void rcoll_reduce_scatter_deterministic(rcoll_plan_t *p, const rcoll_coll_args_t *a);
/* Point to point: one message to or from args->root. */
void rcoll_send_p2p(rcoll_plan_t *p, const rcoll_coll_args_t *a);
void rcoll_recv_p2p(rcoll_plan_t *p, const rcoll_coll_args_t *a);

/* Splits [0, total) into ranges of at most `chunk` bytes aligned to the
 * element size; used by every pipelined algorithm. Returns the number of
 * chunks (0 when total is 0). */
size_t rcoll_chunk_count(size_t total, size_t chunk);

/* Binary trees (algorithms/tree.c): a rank's parent (-1 at the root) and
 * children (-1 where absent). */
typedef struct rcoll_tree_node {
  int parent;
  int child[2];
  int nchild;
} rcoll_tree_node_t;
/* Tree `which` (0 or 1) of the double binary tree over n ranks. */
void rcoll_dbtree_node(int n, int which, int rank, rcoll_tree_node_t *out);
/* The binary tree over n ranks rooted at `root`. */
void rcoll_btree_node(int n, int root, int rank, rcoll_tree_node_t *out);
/* Levels below the root of these trees (0 for one rank). */
int rcoll_btree_height(int n);

#endif
