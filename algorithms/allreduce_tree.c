/* Double binary tree all-reduce. The vector is cut in two halves; half t is
 * reduced up tree t towards its root and the result broadcast back down the
 * same tree (trees: lib/tree.c). Each half is cut into chunks, and
 * every chunk travels on its own, so for large vectors the reduction of
 * later chunks overlaps the broadcast of earlier ones. Since every rank is
 * an inner node of at most one tree, no rank sends much more than twice the
 * data, while a small vector needs only 2 log2(n) message latencies where
 * the ring needs 2(n-1).
 *
 * On each rank, for chunk j of tree t:
 *   up:   rb = sb (op) child0 (op) child1, then send rb to the parent (a
 *         leaf sends sb directly; the root's last reduction finishes avg);
 *   down: receive rb from the parent, then send it to the children.
 *
 * Schedule and deadlock freedom. The plan is a sequence of rounds; round i
 * holds the up step of chunk i of both trees and the down step of chunk
 * i - LAG, on every rank in the same order. So the messages on any
 * connection appear in the same (round, tree, direction) order on both of
 * its ends, each such key carries at most one message per connection, and
 * every dependency points to the same or an earlier key. Within one key the
 * waits follow the tree edges (children before parents going up, parents
 * before children going down), which cannot form a cycle. Hence the earliest
 * unfinished key can always complete, even on a transport that buffers
 * nothing (a send finishes only when its receive is posted), and by induction
 * every key does. The lag lets the up messages of later chunks pass the down
 * messages of earlier ones where the two trees use the same connection.
 *
 * Buffers: the receive from the parent overwrites rb, which this rank sent
 * up just before; it waits for that send explicitly (in place, a leaf's sb
 * is rb too). */
#include <math.h>

#include "algo.h"
#include "reduce.h"
#include "tree.h"
#include "tune_cost.h"

typedef struct tree_ctx {
  const rcoll_coll_args_t *a;
  rcoll_tree_node_t node[2];
  size_t off[2], count[2]; /* elements of each tree's half */
  size_t chunk;            /* elements per chunk */
  size_t nchunks[2];
  int *up_done[2];         /* per chunk: the step after which rb holds the up result */
} tree_ctx_t;

static size_t chunk_range(const tree_ctx_t *c, int t, size_t j, size_t *off) {
  size_t start = j * c->chunk;
  *off = c->off[t] + start;
  return c->count[t] - start < c->chunk ? c->count[t] - start : c->chunk;
}

/* Reduce chunk j of tree t into rb from our children, then pass it up. */
static void plan_up(rcoll_plan_t *p, tree_ctx_t *c, int t, size_t j) {
  const rcoll_coll_args_t *a = c->a;
  const rcoll_tree_node_t *nd = &c->node[t];
  size_t tsz = rcoll_type_size(a->dtype), off, len = chunk_range(c, t, j, &off);
  const char *sb = (const char *)a->sendbuff + off * tsz;
  char *rb = (char *)a->recvbuff + off * tsz;
  int root = nd->parent < 0, last = RCOLL_NO_DEP;
  if (nd->nchild == 0) { /* a leaf: our input is the partial sum */
    c->up_done[t][j] = rcoll_plan_send(p, nd->parent, sb, len * tsz, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  for (int k = 0; k < nd->nchild; k++) {
    int fin = (root && k == nd->nchild - 1) ? RCOLL_STEP_FINISH : 0;
    last = rcoll_plan_recv_reduce(p, nd->child[k], rb, k == 0 ? sb : rb, len, a->dtype, a->op, fin,
                                  last, RCOLL_NO_DEP);
  }
  c->up_done[t][j] = root ? last : rcoll_plan_send(p, nd->parent, rb, len * tsz, last, RCOLL_NO_DEP);
}

/* Receive the result of chunk j of tree t from the parent, pass it down. */
static void plan_down(rcoll_plan_t *p, tree_ctx_t *c, int t, size_t j) {
  const rcoll_coll_args_t *a = c->a;
  const rcoll_tree_node_t *nd = &c->node[t];
  size_t tsz = rcoll_type_size(a->dtype), off, len = chunk_range(c, t, j, &off);
  char *rb = (char *)a->recvbuff + off * tsz;
  int have = c->up_done[t][j];
  if (nd->parent >= 0)
    have = rcoll_plan_recv(p, nd->parent, rb, len * tsz, have, RCOLL_NO_DEP);
  for (int k = 0; k < nd->nchild; k++)
    rcoll_plan_send(p, nd->child[k], rb, len * tsz, have, RCOLL_NO_DEP);
}

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks;
  size_t tsz = rcoll_type_size(a->dtype);
  if (n == 1) {
    rcoll_plan_copy(p, a->recvbuff, a->sendbuff, a->count * tsz, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  tree_ctx_t c = {.a = a, .chunk = p->chunk_bytes / tsz};
  c.count[0] = (a->count + 1) / 2;
  c.count[1] = a->count - c.count[0];
  c.off[1] = c.count[0];
  for (int t = 0; t < 2; t++) {
    rcoll_dbtree_node(n, t, a->rank, &c.node[t]);
    c.nchunks[t] = rcoll_chunk_count(c.count[t], c.chunk);
  }
  int *done = rcoll_plan_tmp(p, (c.nchunks[0] + c.nchunks[1] + 1) * sizeof *done);
  if (done == NULL)
    return;
  c.up_done[0] = done;
  c.up_done[1] = done + c.nchunks[0];
  /* A chunk's result comes back down after about 2 x height hops; holding
   * the down steps back by the height keeps both directions busy. */
  size_t lag = (size_t)rcoll_btree_height(n) + 1;
  size_t rounds = c.nchunks[0] + lag; /* tree 0 has the longer half */
  for (size_t i = 0; i < rounds; i++) {
    for (int t = 0; t < 2; t++)
      if (i < c.nchunks[t])
        plan_up(p, &c, t, i);
    for (int t = 0; t < 2; t++)
      if (i >= lag && i - lag < c.nchunks[t])
        plan_down(p, &c, t, i - lag);
  }
}

static double cost(const rcoll_tuner_t *t, double m, size_t c) {
  rcoll_cost_link_t l = rcoll_cost_link(t, t->tree_cross, 1);
  double k = rcoll_cost_chunks(m / 2, c), cb = fmin((double)c, m / 2), gamma = rcoll_cost_beta(t->prm.reduce_gbps);
  double nic = t->tree_cross ? t->tree_share * rcoll_cost_beta(t->prm.inter.gbps) : 0;
  /* An inner rank reduces two children's chunks per slot. */
  double slot = rcoll_cost_msg_us(l, cb) + cb * (fmax(2 * t->tree_out * l.b, nic) + 2 * gamma);
  slot = fmax(slot, rcoll_cost_window_slot(t, l.lat, k));
  return rcoll_cost_pipeline(2 * t->tree_us, k, 2 * t->tree_height, slot);
}

/* Per tree, half the vector goes up and comes down each edge once: a rank
 * moves S/2 each way per edge (its parent's and its children's), and
 * reduces what its children send up. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  double edges = 0, children = 0, half = rcoll_traffic_bytes(a) / 2;
  for (int t = 0; t < 2 && a->nranks > 1; t++) {
    rcoll_tree_node_t nd;
    rcoll_dbtree_node(a->nranks, t, a->rank, &nd);
    edges += nd.nchild + (nd.parent >= 0);
    children += nd.nchild;
  }
  rcoll_traffic_set(out, edges * half, edges * half, children * (double)a->count / 2,
                    "per tree: S/2 each way per edge (parent, children); children x count/2 reduced");
}

RCOLL_ALGORITHM(allreduce_tree) = {
    .name = "tree",
    .coll = RCOLL_COLL_ALLREDUCE,
    .summary = "Double binary tree: reduce up and broadcast down two trees of half the data each",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = 0,
    .tie_order = 1,
};
