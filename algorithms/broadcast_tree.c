/* Pipelined binary tree broadcast (tree: lib/tree.c, rotated so that
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
#include <math.h>

#include "algo.h"
#include "reduce.h"
#include "tree.h"
#include "tune_cost.h"

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
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

static double cost(const rcoll_tuner_t *t, double m, size_t c) {
  rcoll_cost_link_t l = rcoll_cost_link(t, t->btree_cross, 1);
  double fan = t->nranks > 2 ? 2 : 1;
  double nic = t->btree_cross ? t->btree_share * rcoll_cost_beta(t->prm.inter.gbps) : 0;
  double cs = fmin((double)c, m), slot = fan * rcoll_cost_msg_us(l, cs) + cs * fmax(fan * l.b, nic);
  slot = fmax(slot, rcoll_cost_window_slot(t, l.lat, rcoll_cost_chunks(m, c)));
  return rcoll_cost_pipeline(t->btree_us, rcoll_cost_chunks(m, c), t->tree_height, slot);
}

/* The message arrives once (but at the root) and leaves once per child. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  rcoll_tree_node_t nd = {.parent = -1};
  if (a->nranks > 1)
    rcoll_btree_node(a->nranks, a->root, a->rank, &nd);
  double s = rcoll_traffic_bytes(a);
  rcoll_traffic_set(out, nd.nchild * s, nd.parent >= 0 ? s : 0, 0,
                    "S received unless root, S sent per child in the tree");
}

RCOLL_ALGORITHM(broadcast_tree) = {
    .name = "tree",
    .coll = RCOLL_COLL_BROADCAST,
    .summary = "Pipelined binary tree rooted at the root",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = 0,
    .tie_order = 1,
};
