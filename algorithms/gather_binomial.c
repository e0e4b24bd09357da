/* Binomial-tree gather (tree: lib/tree.h, in rank order relative to the
 * root): every rank collects its subtree's blocks from its children and
 * passes them to its parent, so the root takes log2 n messages instead of
 * n-1, at the price of log2 n hops and of inner ranks relaying their
 * subtrees. The tuner prefers it for small blocks on many ranks.
 *
 * A subtree that fits a chunk travels as one message: the rank assembles it
 * in a piece of the scratch ring (its own block copied in, each child's
 * message received straight into its place) and sends the piece. A larger
 * one travels as the rank's own block in chunks, followed by each child's
 * messages forwarded one by one through scratch. The root receives every
 * message straight into place, unless the message wraps around the end of
 * its receive buffer (relative order is rotated by the root), which goes
 * through scratch. Every wait points up the tree to an earlier message of
 * the same stream, so unbuffered connections cannot deadlock. */
#include "algo.h"
#include "reduce.h"
#include "tree.h"
#include "tune_cost.h"

typedef struct gather {
  rcoll_plan_t *p;
  const rcoll_coll_args_t *a;
  size_t block;
  int child, parent; /* ranks (absolute) of the current child and of our parent */
} gather_t;

static int absolute(const rcoll_coll_args_t *a, int v) { return (v + a->root) % a->nranks; }

/* The root: bytes [x, y) of the relative vector from the current child. */
static void root_recv(void *ctx, size_t x, size_t y) {
  gather_t *g = ctx;
  size_t total = (size_t)g->a->nranks * g->block, at = (x + (size_t)g->a->root * g->block) % total;
  char *rb = g->a->recvbuff;
  if (at + (y - x) <= total) {
    rcoll_plan_recv(g->p, g->child, rb + at, y - x, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  int dep;
  char *piece = rcoll_plan_scratch_get(g->p, &dep);
  if (piece == NULL)
    return;
  int recv = rcoll_plan_recv(g->p, g->child, piece, y - x, dep, RCOLL_NO_DEP);
  size_t head = total - at;
  int c1 = rcoll_plan_copy(g->p, rb + at, piece, head, recv, RCOLL_NO_DEP);
  int c2 = rcoll_plan_copy(g->p, rb, piece + head, y - x - head, recv, RCOLL_NO_DEP);
  rcoll_plan_scratch_set_reader(g->p, piece, rcoll_plan_join(g->p, c1, c2));
}

/* A relay: one of the current child's messages, passed on to our parent. */
static void forward(void *ctx, size_t x, size_t y) {
  gather_t *g = ctx;
  int dep;
  char *piece = rcoll_plan_scratch_get(g->p, &dep);
  if (piece == NULL)
    return;
  int recv = rcoll_plan_recv(g->p, g->child, piece, y - x, dep, RCOLL_NO_DEP);
  int send = rcoll_plan_send(g->p, g->parent, piece, y - x, recv, RCOLL_NO_DEP);
  rcoll_plan_scratch_set_reader(g->p, piece, send);
}

/* A relay whose subtree fits a chunk: assemble it in one piece. */
static void assemble(gather_t *g, int v) {
  int n = g->a->nranks, dep;
  char *piece = rcoll_plan_scratch_get(g->p, &dep);
  if (piece == NULL)
    return;
  int ready = rcoll_plan_copy(g->p, piece, g->a->sendbuff, g->block, dep, RCOLL_NO_DEP);
  for (int d = 1; d < rcoll_binomial_span(n, v) && v + d < n; d *= 2) {
    size_t bytes = (size_t)rcoll_binomial_size(n, v + d) * g->block;
    int recv = rcoll_plan_recv(g->p, absolute(g->a, v + d), piece + (size_t)d * g->block, bytes, dep,
                               RCOLL_NO_DEP);
    ready = rcoll_plan_join(g->p, ready, recv);
  }
  size_t bytes = (size_t)rcoll_binomial_size(n, v) * g->block;
  int send = rcoll_plan_send(g->p, g->parent, piece, bytes, ready, RCOLL_NO_DEP);
  rcoll_plan_scratch_set_reader(g->p, piece, send);
}

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks, v = (a->rank - a->root + n) % n;
  gather_t g = {p, a, a->count * rcoll_type_size(a->dtype), -1, -1};
  const char *sb = a->sendbuff;
  char *rb = a->recvbuff;
  size_t chunk = p->chunk_bytes, subtree = (size_t)rcoll_binomial_size(n, v) * g.block;
  int span = rcoll_binomial_span(n, v);
  if (v == 0) {
    if (sb != rb + (size_t)a->rank * g.block)
      rcoll_plan_copy(p, rb + (size_t)a->rank * g.block, sb, g.block, RCOLL_NO_DEP, RCOLL_NO_DEP);
    for (int d = 1; d < span && d < n; d *= 2) {
      g.child = absolute(a, d);
      rcoll_binomial_msgs(n, d, g.block, chunk, root_recv, &g);
    }
    return;
  }
  g.parent = absolute(a, rcoll_binomial_parent(v));
  if (subtree <= chunk && subtree > g.block) {
    assemble(&g, v);
    return;
  }
  /* Our own block straight from the send buffer, then the children's. */
  for (size_t off = 0; off < g.block; off += chunk)
    rcoll_plan_send(p, g.parent, sb + off, g.block - off < chunk ? g.block - off : chunk, RCOLL_NO_DEP,
                    RCOLL_NO_DEP);
  for (int d = 1; d < span && v + d < n; d *= 2) {
    g.child = absolute(a, v + d);
    rcoll_binomial_msgs(n, v + d, g.block, chunk, forward, &g);
  }
}

/* The root takes every child's messages one after the other on its links;
 * before the last arrives, the blocks of the deepest subtree climb log2 n
 * hops (tune_cost.h). */
static double cost(const rcoll_tuner_t *t, double m, size_t c) { return rcoll_cost_binomial(t, m, c); }

/* Relative rank v sends its subtree's blocks up and receives its children's. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  int n = a->nranks, v = (a->rank - a->root + n) % n, size = rcoll_binomial_size(n, v);
  double b = rcoll_traffic_bytes(a);
  rcoll_traffic_set(out, v == 0 ? 0 : size * b, (size - 1) * b, 0,
                    "(s-1) B received from the children, s B sent to the parent unless root (s: the "
                    "rank's subtree, min(v & -v, n - v) ranks for relative rank v)");
}

RCOLL_ALGORITHM(gather_binomial) = {
    .name = "binomial",
    .coll = RCOLL_COLL_GATHER,
    .summary = "Binomial tree: subtrees gathered up log2 n levels, one message each when they fit a chunk",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = 0,
    .tie_order = 8,
};
