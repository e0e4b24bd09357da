/* Pipelined binary tree broadcast (tree: algorithms/tree.c, rotated so that
 * its root is the broadcast root). The message is cut into chunks; each rank
 * forwards a chunk to its children as soon as it has arrived. A chunk reaches
 * the last rank after log2(n) hops instead of the chain's n-1, at the price
 * of inner ranks sending everything twice: the tuner prefers it for small and
 * mid-size messages on many ranks.
 *
 * Deadlock freedom: chunk j's messages all belong to round j, every rank
 * plans rounds in order, each round carries one message per tree edge, and a
 * rank's sends of a round wait only for its receive of the same round, from
 * its parent. Waits follow the tree from the root down, so the earliest
 * unfinished round can always complete even with no buffering at all. */
#include "algo.h"
#include "reduce.h"

void rcoll_broadcast_tree(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks;
  size_t bytes = a->count * rcoll_type_size(a->dtype);
  char *rb = a->recvbuff;
  const char *sb = a->sendbuff;
  int root = a->rank == a->root;
  if (root && sb != rb)
    rcoll_plan_copy(p, rb, sb, bytes, RCOLL_NO_DEP, RCOLL_NO_DEP);
  if (n == 1)
    return;
  rcoll_tree_node_t nd;
  rcoll_btree_node(n, a->root, a->rank, &nd);
  size_t chunk = p->chunk_bytes, nchunks = rcoll_chunk_count(bytes, chunk);
  for (size_t j = 0; j < nchunks; j++) {
    size_t off = j * chunk, len = bytes - off < chunk ? bytes - off : chunk;
    /* The root sends from its send buffer: no wait for the local copy. */
    const char *src = root ? sb + off : rb + off;
    int have = root ? RCOLL_NO_DEP
                    : rcoll_plan_recv(p, nd.parent, rb + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
    for (int k = 0; k < nd.nchild; k++)
      rcoll_plan_send(p, nd.child[k], src, len, have, RCOLL_NO_DEP);
  }
}
