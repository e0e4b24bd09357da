/* Direct scatter: the root sends each rank its block straight from its
 * send buffer. One hop, and the root's links carry all n-1 blocks. In place
 * (recvbuff == sendbuff + root*count on the root) the root's own block is
 * already its result; otherwise it is copied there. */
#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks, r = a->rank;
  size_t block = a->count * rcoll_type_size(a->dtype);
  size_t chunk = p->chunk_bytes, nchunks = rcoll_chunk_count(block, chunk);
  char *rb = a->recvbuff;
  if (r != a->root) {
    for (size_t j = 0; j < nchunks; j++) {
      size_t off = j * chunk, len = block - off < chunk ? block - off : chunk;
      rcoll_plan_recv(p, a->root, rb + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
    }
    return;
  }
  const char *sb = a->sendbuff;
  if (rb != sb + (size_t)r * block)
    rcoll_plan_copy(p, rb, sb + (size_t)r * block, block, RCOLL_NO_DEP, RCOLL_NO_DEP);
  for (int q = 0; q < n; q++)
    for (size_t j = 0; j < nchunks && q != r; j++) {
      size_t off = j * chunk, len = block - off < chunk ? block - off : chunk;
      rcoll_plan_send(p, q, sb + (size_t)q * block + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
    }
}

/* The root sends n-1 blocks, all in flight (tune_cost.h). */
static double cost(const rcoll_tuner_t *t, double m, size_t c) { return rcoll_cost_fan(t, m, c); }

/* The root sends n-1 blocks; every other rank receives one. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  double b = rcoll_traffic_bytes(a);
  int root = a->rank == a->root;
  rcoll_traffic_set(out, root ? (a->nranks - 1) * b : 0, root ? 0 : b, 0,
                    "the root sends (n-1) B; B received unless root (B: one rank's block)");
}

RCOLL_ALGORITHM(scatter_direct) = {
    .name = "direct",
    .coll = RCOLL_COLL_SCATTER,
    .summary = "The root sends every rank its block directly",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = RCOLL_ALGO_FALLBACK,
    .tie_order = 7,
};
