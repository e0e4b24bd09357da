/* Binomial-tree scatter (tree: lib/tree.h, in rank order relative to the
 * root): the root sends each child its whole subtree's blocks, and every
 * rank keeps its own block and passes the rest down, so the root sends
 * log2 n messages instead of n-1, at the price of log2 n hops and of inner
 * ranks relaying their subtrees. The tuner prefers it for small blocks on
 * many ranks.
 *
 * A subtree that fits a chunk travels as one message: the rank receives it
 * into a piece of the scratch ring, copies its own block out and sends each
 * child its part straight from the piece. A larger one travels as the
 * rank's own block in chunks (received in place), followed by each child's
 * messages, forwarded one by one through scratch. The root sends from its
 * send buffer, packing through scratch only a message that wraps around
 * the buffer's end (relative order is rotated by the root). Every wait
 * points up the tree to an earlier message of the same stream, so
 * unbuffered connections cannot deadlock. */
#include "algo.h"
#include "reduce.h"
#include "tree.h"
#include "tune_cost.h"

typedef struct scatter {
  rcoll_plan_t *p;
  const rcoll_coll_args_t *a;
  size_t block;
  int child, parent; /* ranks (absolute) of the current child and of our parent */
} scatter_t;

static int absolute(const rcoll_coll_args_t *a, int v) { return (v + a->root) % a->nranks; }

/* The root: bytes [x, y) of the relative vector to the current child. */
static void root_send(void *ctx, size_t x, size_t y) {
  scatter_t *s = ctx;
  size_t total = (size_t)s->a->nranks * s->block, at = (x + (size_t)s->a->root * s->block) % total;
  const char *sb = s->a->sendbuff;
  if (at + (y - x) <= total) {
    rcoll_plan_send(s->p, s->child, sb + at, y - x, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  int dep;
  char *piece = rcoll_plan_scratch_get(s->p, &dep);
  if (piece == NULL)
    return;
  size_t head = total - at;
  int c1 = rcoll_plan_copy(s->p, piece, sb + at, head, dep, RCOLL_NO_DEP);
  int c2 = rcoll_plan_copy(s->p, piece + head, sb, y - x - head, dep, RCOLL_NO_DEP);
  int send = rcoll_plan_send(s->p, s->child, piece, y - x, rcoll_plan_join(s->p, c1, c2), RCOLL_NO_DEP);
  rcoll_plan_scratch_set_reader(s->p, piece, send);
}

/* A relay: one of the current child's messages, from our parent. */
static void forward(void *ctx, size_t x, size_t y) {
  scatter_t *s = ctx;
  int dep;
  char *piece = rcoll_plan_scratch_get(s->p, &dep);
  if (piece == NULL)
    return;
  int recv = rcoll_plan_recv(s->p, s->parent, piece, y - x, dep, RCOLL_NO_DEP);
  int send = rcoll_plan_send(s->p, s->child, piece, y - x, recv, RCOLL_NO_DEP);
  rcoll_plan_scratch_set_reader(s->p, piece, send);
}

/* A relay whose subtree fits a chunk: one message in, split out of a piece. */
static void split(scatter_t *s, int v) {
  int n = s->a->nranks, dep;
  char *piece = rcoll_plan_scratch_get(s->p, &dep);
  if (piece == NULL)
    return;
  size_t bytes = (size_t)rcoll_binomial_size(n, v) * s->block;
  int recv = rcoll_plan_recv(s->p, s->parent, piece, bytes, dep, RCOLL_NO_DEP);
  int done = rcoll_plan_copy(s->p, s->a->recvbuff, piece, s->block, recv, RCOLL_NO_DEP);
  for (int d = 1; d < rcoll_binomial_span(n, v) && v + d < n; d *= 2) {
    size_t part = (size_t)rcoll_binomial_size(n, v + d) * s->block;
    int send = rcoll_plan_send(s->p, absolute(s->a, v + d), piece + (size_t)d * s->block, part, recv,
                               RCOLL_NO_DEP);
    done = rcoll_plan_join(s->p, done, send);
  }
  rcoll_plan_scratch_set_reader(s->p, piece, done);
}

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks, v = (a->rank - a->root + n) % n;
  scatter_t s = {p, a, a->count * rcoll_type_size(a->dtype), -1, -1};
  const char *sb = a->sendbuff;
  char *rb = a->recvbuff;
  size_t chunk = p->chunk_bytes, subtree = (size_t)rcoll_binomial_size(n, v) * s.block;
  int span = rcoll_binomial_span(n, v);
  if (v == 0) {
    if (rb != sb + (size_t)a->rank * s.block)
      rcoll_plan_copy(p, rb, sb + (size_t)a->rank * s.block, s.block, RCOLL_NO_DEP, RCOLL_NO_DEP);
    for (int d = 1; d < span && d < n; d *= 2) {
      s.child = absolute(a, d);
      rcoll_binomial_msgs(n, d, s.block, chunk, root_send, &s);
    }
    return;
  }
  s.parent = absolute(a, rcoll_binomial_parent(v));
  if (subtree <= chunk && subtree > s.block) {
    split(&s, v);
    return;
  }
  /* Our own block straight into place, then the children's. */
  for (size_t off = 0; off < s.block; off += chunk)
    rcoll_plan_recv(p, s.parent, rb + off, s.block - off < chunk ? s.block - off : chunk, RCOLL_NO_DEP,
                    RCOLL_NO_DEP);
  for (int d = 1; d < span && v + d < n; d *= 2) {
    s.child = absolute(a, v + d);
    rcoll_binomial_msgs(n, v + d, s.block, chunk, forward, &s);
  }
}

/* The root sends every child's messages one after the other on its links;
 * the last of them still descends log2 n hops (tune_cost.h). */
static double cost(const rcoll_tuner_t *t, double m, size_t c) { return rcoll_cost_binomial(t, m, c); }

/* Relative rank v receives its subtree's blocks and sends its children's. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  int n = a->nranks, v = (a->rank - a->root + n) % n, size = rcoll_binomial_size(n, v);
  double b = rcoll_traffic_bytes(a);
  rcoll_traffic_set(out, (size - 1) * b, v == 0 ? 0 : size * b, 0,
                    "s B received from the parent unless root, (s-1) B sent to the children (s: the "
                    "rank's subtree, min(v & -v, n - v) ranks for relative rank v)");
}

RCOLL_ALGORITHM(scatter_binomial) = {
    .name = "binomial",
    .coll = RCOLL_COLL_SCATTER,
    .summary = "Binomial tree: subtrees handed down log2 n levels, one message each when they fit a chunk",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = 0,
    .tie_order = 8,
};
