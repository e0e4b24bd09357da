/* Hierarchical all-reduce for several nodes of several ranks each:
 *   1. within each node, a ring reduce-scatter: local rank l ends with the
 *      node's sum of segment l+1 (its shard; L segments for L local ranks);
 *   2. across nodes, the ranks with the same local index (which own the same
 *      shard) all-reduce it with a ring, chunk by chunk;
 *   3. within each node, a ring all-gather of the shards.
 * Only phase 2 crosses nodes, and each rank carries 1/L of the vector there,
 * so a node's link carries 2 (N-1)/N of the vector where a flat ring through
 * it carries 2 (n-1)/n, and only 2 (N-1) of the message latencies cross a
 * node boundary. Nodes with different rank counts have no common shard
 * layout; then, and on one node or with one rank per node, this is the ring.
 *
 * Phases overlap chunk by chunk: phase 2 of chunk j waits only for phase 1's
 * last reduction of chunk j, and phase 3 of chunk j for a join of phase 2's
 * final writes of chunk j. Phase 2 runs a whole small ring all-reduce per
 * chunk (its vector cut into N pieces), so it shares phase 1's chunking.
 *
 * Deadlock freedom: the plan is a sequence of rounds, the same on every
 * rank: round i holds phase 1 of chunk i, phase 2 of chunk i - LAG and
 * phase 3 of chunk i - 2 LAG, each a few ring steps. Phases 1 and 3 use the
 * connections between local neighbours, phase 2 only connections between
 * nodes, and every member of a ring plans the same rounds with the same
 * sizes, so both ends of a connection order its messages alike. Within a
 * round a ring step's send waits for the previous step's receive (a chain
 * that starts with sends waiting for nothing) and other dependencies point
 * to earlier rounds, so the earliest unfinished round always completes, even
 * when sends are not buffered. Rounds stay small, which keeps that true
 * within the engine's window of steps.
 *
 * Buffers: rb holds partial sums throughout, as in the flat ring; a receive
 * that overwrites a segment this rank sent earlier can only arrive after
 * that send was received (the data has to travel through the reduction). */
#include <math.h>

#include "algo.h"
#include "reduce.h"
#include "topo.h"
#include "tune_cost.h"

typedef struct hier {
  const rcoll_coll_args_t *a;
  size_t tsz, chunk;  /* element size, elements per chunk */
  size_t base, rem;   /* local segment k has base + (k < rem) elements */
  size_t nchunks;     /* chunks of the largest segment */
  int L, l;           /* ranks per node, our local index */
  int left, right;    /* local ring neighbours */
  int N, node;        /* nodes, ours */
  int xleft, xright;  /* neighbours in the ring of our local index across nodes */
  int *fin;           /* per chunk of our shard: phase 1's, then phase 2's result */
} hier_t;

static size_t seg_off(const hier_t *h, int k) {
  return (size_t)k * h->base + ((size_t)k < h->rem ? (size_t)k : h->rem);
}

/* Elements of chunk j of local segment k, and its offset; 0 past the end. */
static size_t seg_chunk(const hier_t *h, int k, size_t j, size_t *off) {
  size_t len = h->base + ((size_t)k < h->rem), start = j * h->chunk;
  *off = seg_off(h, k) + start;
  return start >= len ? 0 : (len - start < h->chunk ? len - start : h->chunk);
}

static int mod(int x, int n) { return ((x % n) + n) % n; }

/* Phase 1 for chunk j: local ring reduce-scatter into rb, as in
 * allreduce_ring.c; returns the last reduction, which finished our shard's
 * chunk j for this node. */
static int plan_local_rs(rcoll_plan_t *p, hier_t *h, size_t j) {
  const rcoll_coll_args_t *a = h->a;
  const char *sb = a->sendbuff;
  char *rb = a->recvbuff;
  int prev = RCOLL_NO_DEP;
  for (int t = 0; t < h->L - 1; t++) {
    int sseg = mod(h->l - t, h->L), rseg = mod(h->l - t - 1, h->L);
    size_t off, len = seg_chunk(h, sseg, j, &off);
    if (len > 0)
      rcoll_plan_send(p, h->right, (t == 0 ? sb : rb) + off * h->tsz, len * h->tsz, prev, RCOLL_NO_DEP);
    len = seg_chunk(h, rseg, j, &off);
    prev = len == 0 ? RCOLL_NO_DEP
                    : rcoll_plan_recv_reduce(p, h->left, rb + off * h->tsz, sb + off * h->tsz, len,
                                             a->dtype, a->op, 0, RCOLL_NO_DEP, RCOLL_NO_DEP);
  }
  return prev;
}

/* Piece k of N of the chunk [off, off + len). */
static size_t piece(size_t off, size_t len, int N, int k, size_t *poff) {
  size_t base = len / (size_t)N, rem = len % (size_t)N;
  *poff = off + (size_t)k * base + ((size_t)k < rem ? (size_t)k : rem);
  return base + ((size_t)k < rem);
}

/* Phase 2 for one chunk of our shard: a ring all-reduce across nodes of the
 * elements [off, off + len) of rb, after phase 1's step `ready`. Returns a
 * join of the steps that wrote the final values. */
static int plan_cross_chunk(rcoll_plan_t *p, hier_t *h, size_t off, size_t len, int ready) {
  const rcoll_coll_args_t *a = h->a;
  char *rb = a->recvbuff;
  int N = h->N, x = h->node, prev = ready, done = RCOLL_NO_DEP;
  for (int t = 0; t < N - 1; t++) { /* reduce-scatter: we finish piece x+1 */
    size_t po, pl = piece(off, len, N, mod(x - t, N), &po);
    if (pl > 0)
      rcoll_plan_send(p, h->xright, rb + po * h->tsz, pl * h->tsz, t == 0 ? ready : prev, RCOLL_NO_DEP);
    pl = piece(off, len, N, mod(x - t - 1, N), &po);
    int flags = t == N - 2 ? RCOLL_STEP_FINISH : 0;
    prev = pl == 0 ? RCOLL_NO_DEP
                   : rcoll_plan_recv_reduce(p, h->xleft, rb + po * h->tsz, rb + po * h->tsz, pl,
                                            a->dtype, a->op, flags, ready, RCOLL_NO_DEP);
  }
  done = prev;
  for (int t = 0; t < N - 1; t++) { /* all-gather: pass finished pieces on */
    size_t po, pl = piece(off, len, N, mod(x + 1 - t, N), &po);
    if (pl > 0)
      rcoll_plan_send(p, h->xright, rb + po * h->tsz, pl * h->tsz, prev, RCOLL_NO_DEP);
    pl = piece(off, len, N, mod(x - t, N), &po);
    prev = pl == 0 ? RCOLL_NO_DEP
                   : rcoll_plan_recv(p, h->xleft, rb + po * h->tsz, pl * h->tsz, ready, RCOLL_NO_DEP);
    done = rcoll_plan_join(p, done, prev);
  }
  return done;
}

/* Phase 3 for chunk j: local ring all-gather; we start with our shard's
 * chunk, finished by phase 2 at step `ready`. */
static void plan_local_ag(rcoll_plan_t *p, hier_t *h, size_t j, int ready) {
  char *rb = h->a->recvbuff;
  int prev = ready;
  for (int t = 0; t < h->L - 1; t++) {
    int sseg = mod(h->l + 1 - t, h->L), rseg = mod(h->l - t, h->L);
    size_t off, len = seg_chunk(h, sseg, j, &off);
    if (len > 0)
      rcoll_plan_send(p, h->right, rb + off * h->tsz, len * h->tsz, prev, RCOLL_NO_DEP);
    len = seg_chunk(h, rseg, j, &off);
    prev = len == 0 ? RCOLL_NO_DEP
                    : rcoll_plan_recv(p, h->left, rb + off * h->tsz, len * h->tsz, RCOLL_NO_DEP,
                                      RCOLL_NO_DEP);
  }
}

/* Round i: phase 1 of chunk i, phase 2 of chunk i - LAG, phase 3 of chunk
 * i - 2 LAG. Phase 1 may run that far ahead of the slower phases before its
 * messages queue behind phase 3's on the local links. */
#define HIER_LAG 4

static void plan_rounds(rcoll_plan_t *p, hier_t *h) {
  int shard = mod(h->l + 1, h->L);
  for (size_t i = 0; i < h->nchunks + 2 * HIER_LAG; i++) {
    if (i < h->nchunks)
      h->fin[i] = plan_local_rs(p, h, i);
    size_t j = i - HIER_LAG, off, len;
    if (i >= HIER_LAG && j < h->nchunks && (len = seg_chunk(h, shard, j, &off)) > 0)
      h->fin[j] = plan_cross_chunk(p, h, off, len, h->fin[j]);
    j = i - 2 * HIER_LAG;
    if (i >= 2 * HIER_LAG && j < h->nchunks)
      plan_local_ag(p, h, j, h->fin[j]);
  }
}

/* Every node has the same number of ranks (>1), and there are >1 nodes. */
static int hier_usable(const rcoll_topo_t *t) {
  if (t == NULL || t->nnodes < 2 || t->local_nranks < 2)
    return 0;
  for (int k = 0; k < t->nnodes; k++)
    if (t->node_first[k + 1] - t->node_first[k] != t->local_nranks)
      return 0;
  return 1;
}

/* Without a hierarchy to use, this is the ring all-reduce. */
extern const rcoll_algorithm_t rcoll_algorithm_allreduce_ring;

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  const rcoll_topo_t *t = p->topo;
  if (!hier_usable(t) || t->nranks != a->nranks) {
    rcoll_algorithm_allreduce_ring.plan(p, a);
    return;
  }
  hier_t h = {.a = a, .tsz = rcoll_type_size(a->dtype), .L = t->local_nranks, .l = t->local_rank,
              .N = t->nnodes, .node = t->node};
  h.chunk = p->chunk_bytes / h.tsz;
  h.base = a->count / (size_t)h.L;
  h.rem = a->count % (size_t)h.L;
  h.nchunks = rcoll_chunk_count(h.base + (h.rem > 0), h.chunk);
  h.right = rcoll_topo_rank_at(t, h.node, mod(h.l + 1, h.L));
  h.left = rcoll_topo_rank_at(t, h.node, mod(h.l - 1, h.L));
  h.xright = rcoll_topo_rank_at(t, mod(h.node + 1, h.N), h.l);
  h.xleft = rcoll_topo_rank_at(t, mod(h.node - 1, h.N), h.l);
  h.fin = rcoll_plan_tmp(p, (h.nchunks + 1) * sizeof *h.fin);
  if (h.fin != NULL)
    plan_rounds(p, &h);
}

/* Three phases overlapping chunk by chunk: the latencies of one chunk's
 * path, each phase's work on one chunk, and (chunks - 1) times the busier
 * resource (phases 1 and 3 share the links inside the node). Where cores
 * are shared the phases are costed one after the other (measured, 2
 * namespaces x 2 ranks on 2 cores, 200 us links, 64 MiB: 117 ms against
 * 57 predicted with overlap; rabenseifner, whose steps never overlap, 94 ms
 * against 68). */
static double cost(const rcoll_tuner_t *t, double m, size_t c) {
  int L = t->ppn, N = t->nnodes;
  rcoll_cost_link_t li = rcoll_cost_link(t, 0, 1), le = rcoll_cost_link(t, 1, L);
  double gamma = rcoll_cost_beta(t->prm.reduce_gbps), s1 = m / L;
  double k = rcoll_cost_chunks(s1, c), cs = fmin((double)c, s1);
  double path = 2 * (L - 1) * li.lat + 2 * (N - 1) * le.lat;
  double w1 = (L - 1) * (rcoll_cost_msg_us(li, cs) + cs * (li.b + gamma));
  double w2 = 2 * (N - 1) * (rcoll_cost_msg_us(le, cs / N) + cs / N * le.b) + (N - 1) * cs / N * gamma;
  double w3 = (L - 1) * (rcoll_cost_msg_us(li, cs) + cs * li.b);
  double busiest = t->prm.cores_shared ? w1 + w2 + w3 : fmax(w1 + w3, w2);
  busiest = fmax(busiest, rcoll_cost_window_slot(t, le.lat, k));
  return path + w1 + w2 + w3 + (k - 1) * busiest;
}

/* Where the planner would fall back to the ring, the ring's cost applies,
 * not this one. */
static int applies(const rcoll_tuner_t *t) { return t->nnodes > 1 && t->ppn > 1 && t->uniform; }

/* Phases 1 and 3 are rings of the L local ranks over the whole vector,
 * phase 2 a ring of the N nodes over a 1/L shard. Where the planner falls
 * back to the ring, so does the formula. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  if (!hier_usable(topo) || topo->nranks != a->nranks) {
    rcoll_algorithm_allreduce_ring.traffic(a, topo, out);
    return;
  }
  double L = topo->local_nranks, N = topo->nnodes, s = rcoll_traffic_bytes(a), c = (double)a->count;
  double local = (L - 1) / L, cross = (N - 1) / (N * L);
  rcoll_traffic_set(out, 2 * (local + cross) * s, 2 * (local + cross) * s, (local + cross) * c,
                    "2(L-1)/L S in the node + 2(N-1)/(N L) S across (L ranks per node, N nodes); "
                    "reduced (L-1)/L + (N-1)/(N L) of count");
}

RCOLL_ALGORITHM(allreduce_hier) = {
    .name = "hier",
    .coll = RCOLL_COLL_ALLREDUCE,
    .summary = "Hierarchical: reduce-scatter in each node, all-reduce across nodes, all-gather in "
               "each node",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .applies = applies,
    .flags = RCOLL_ALGO_TOPOLOGY,
    .tie_order = 3,
};
