/* Direct gather: every rank sends its block straight to the root, which
 * receives each rank's block in place in its receive buffer. One hop, and
 * the root's links carry all n-1 blocks: the tuner prefers it unless many
 * small blocks make the root's per-message overheads dominate. In place
 * (sendbuff == recvbuff + root*count on the root) the root's own block is
 * already where it belongs; otherwise it is copied there. */
#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks, r = a->rank;
  size_t block = a->count * rcoll_type_size(a->dtype);
  size_t chunk = p->chunk_bytes, nchunks = rcoll_chunk_count(block, chunk);
  const char *sb = a->sendbuff;
  if (r != a->root) {
    for (size_t j = 0; j < nchunks; j++) {
      size_t off = j * chunk, len = block - off < chunk ? block - off : chunk;
      rcoll_plan_send(p, a->root, sb + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
    }
    return;
  }
  char *rb = a->recvbuff;
  if (sb != rb + (size_t)r * block)
    rcoll_plan_copy(p, rb + (size_t)r * block, sb, block, RCOLL_NO_DEP, RCOLL_NO_DEP);
  for (int q = 0; q < n; q++)
    for (size_t j = 0; j < nchunks && q != r; j++) {
      size_t off = j * chunk, len = block - off < chunk ? block - off : chunk;
      rcoll_plan_recv(p, q, rb + (size_t)q * block + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
    }
}

/* The root receives n-1 blocks, all in flight (tune_cost.h). */
static double cost(const rcoll_tuner_t *t, double m, size_t c) { return rcoll_cost_fan(t, m, c); }

/* A block leaves every rank but the root; the root takes in n-1. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  double b = rcoll_traffic_bytes(a);
  int root = a->rank == a->root;
  rcoll_traffic_set(out, root ? 0 : b, root ? (a->nranks - 1) * b : 0, 0,
                    "B sent unless root; the root receives (n-1) B (B: one rank's block)");
}

RCOLL_ALGORITHM(gather_direct) = {
    .name = "direct",
    .coll = RCOLL_COLL_GATHER,
    .summary = "Every rank sends its block straight to the root",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = RCOLL_ALGO_FALLBACK,
    .tie_order = 7,
};
