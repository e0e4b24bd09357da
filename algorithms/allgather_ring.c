/* Ring all-gather: at step t each rank sends block r-t to its right
 * neighbour and receives block r-t-1 from its left, so after n-1 steps every
 * block has gone all the way round. Blocks are cut into chunks that are
 * forwarded as soon as they arrive. Our own block is sent straight from the
 * send buffer, so the local copy into place overlaps the first step. */
#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks, r = a->rank;
  size_t block = a->count * rcoll_type_size(a->dtype);
  char *rb = a->recvbuff;
  const char *sb = a->sendbuff;
  /* In place when the send buffer already is our block of the receive buffer. */
  if (sb != rb + (size_t)r * block)
    rcoll_plan_copy(p, rb + (size_t)r * block, sb, block, RCOLL_NO_DEP, RCOLL_NO_DEP);
  if (n == 1)
    return;
  int right = (r + 1) % n, left = (r + n - 1) % n;
  size_t chunk = p->chunk_bytes, nchunks = rcoll_chunk_count(block, chunk);
  int *prev = rcoll_plan_tmp(p, nchunks * sizeof *prev); /* receive of chunk j, last step */
  if (prev == NULL)
    return;
  for (int t = 0; t < n - 1; t++) {
    size_t sblk = (size_t)((r - t + n) % n), rblk = (size_t)((r - t - 1 + n) % n);
    for (size_t j = 0; j < nchunks; j++) {
      size_t off = j * chunk, len = block - off < chunk ? block - off : chunk;
      const char *src = t == 0 ? sb + off : rb + sblk * block + off;
      rcoll_plan_send(p, right, src, len, t == 0 ? RCOLL_NO_DEP : prev[j], RCOLL_NO_DEP);
      prev[j] = rcoll_plan_recv(p, left, rb + rblk * block + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
    }
  }
}

static double cost(const rcoll_tuner_t *t, double m, size_t c) { return rcoll_cost_ring(t, m, c, 1, 0); }

/* Every block but our own arrives once, and every block but the left
 * neighbour's leaves once. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  double b = rcoll_traffic_bytes(a) * (a->nranks - 1);
  rcoll_traffic_set(out, b, b, 0, "sent = received = (n-1) B (B: one rank's block)");
}

RCOLL_ALGORITHM(allgather_ring) = {
    .name = "ring",
    .coll = RCOLL_COLL_ALLGATHER,
    .summary = "Ring all-gather: n-1 steps around rank -> rank+1, pipelined by chunks",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = RCOLL_ALGO_FALLBACK,
    .tie_order = 0,
};
