/* Deterministic all-reduce (RCOLL_DETERMINISTIC=1): every element is reduced
 * in rank order, ((x0 op x1) op x2) op ... op x(n-1), so floating-point
 * results are bit-identical whatever the chunking, the rank placement or the
 * number of nodes, and identical to rcoll_reduce_deterministic and
 * rcoll_reduce_scatter_deterministic.
 *
 * The order is fixed, so the reduction runs along the chain 0 -> 1 -> ... ->
 * n-1: rank k receives the partial sum of ranks 0..k-1 and adds its own
 * input (rb = sb op partial; every op is commutative, so this is partial op
 * x_k bit for bit). The finished chunk then travels back n-1 -> ... -> 0 on
 * the opposite direction of the same links. Chunks are pipelined, so on
 * full-duplex links the time approaches one pass of the vector each way:
 * each rank sends 2x the vector where the ring sends 2(n-1)/n, and the
 * latency is 2(n-1) hops like the ring's. (Gathering each shard's n pieces
 * at its owner and reducing them there would move less data, but needs a
 * local reduction step that plans do not have.)
 *
 * Deadlock freedom: the forward links carry only reductions and the
 * backward links only results, in chunk order on both ends. Round j holds
 * chunk j's messages; a rank's steps in it wait for its receive from the
 * left (going up) or from the right (coming down), a chain with no cycle,
 * and every other dependency points to an earlier round. So the earliest
 * unfinished round always completes, with or without buffering.
 *
 * Buffers: an inner rank sends its partial from rb and later receives the
 * result into rb; the receive waits for that send. */
#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks, r = a->rank;
  size_t tsz = rcoll_type_size(a->dtype), bytes = a->count * tsz;
  const char *sb = a->sendbuff;
  char *rb = a->recvbuff;
  if (n == 1) {
    rcoll_plan_copy(p, rb, sb, bytes, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  size_t chunk = p->chunk_bytes, nchunks = rcoll_chunk_count(bytes, chunk);
  for (size_t j = 0; j < nchunks; j++) {
    size_t off = j * chunk, len = bytes - off < chunk ? bytes - off : chunk;
    if (r == 0) { /* the first contribution: pass our input on */
      int s = rcoll_plan_send(p, 1, sb + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
      rcoll_plan_recv(p, 1, rb + off, len, s, RCOLL_NO_DEP);
      continue;
    }
    int last = r == n - 1;
    int sum = rcoll_plan_recv_reduce(p, r - 1, rb + off, sb + off, len / tsz, a->dtype, a->op,
                                     last ? RCOLL_STEP_FINISH : 0, RCOLL_NO_DEP, RCOLL_NO_DEP);
    int have = sum;
    if (!last) { /* pass the partial up, then take the result back */
      int s = rcoll_plan_send(p, r + 1, rb + off, len, sum, RCOLL_NO_DEP);
      have = rcoll_plan_recv(p, r + 1, rb + off, len, s, RCOLL_NO_DEP);
    }
    rcoll_plan_send(p, r - 1, rb + off, len, have, RCOLL_NO_DEP);
  }
}

static double cost(const rcoll_tuner_t *t, double m, size_t c) { return rcoll_cost_chain(t, m, c, 2, 0, 1); }

/* Up the chain, every rank but the last sends the partial sum and every
 * rank but rank 0 receives and reduces it; the result comes back the
 * other way. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  int n = a->nranks, r = a->rank;
  double s = rcoll_traffic_bytes(a), links = n == 1 ? 0 : (r > 0) + (r < n - 1);
  rcoll_traffic_set(out, links * s, links * s, n > 1 && r > 0 ? (double)a->count : 0,
                    "S each way per chain neighbour (2S inside); count reduced unless rank 0");
}

RCOLL_ALGORITHM(allreduce_deterministic) = {
    .name = "deterministic",
    .coll = RCOLL_COLL_ALLREDUCE,
    .summary = "Rank-order sums along the chain 0 -> n-1 and back: bit-identical results",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = RCOLL_ALGO_DETERMINISTIC,
    .tie_order = 5,
};
