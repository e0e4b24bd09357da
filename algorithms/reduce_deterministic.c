/* Deterministic reduce: the rank-order chain of allreduce_deterministic.c,
 * ((x0 op x1) op x2) op ..., ending at rank n-1, which hands each finished
 * chunk to the root (when the root is not n-1 itself). Ranks other than the
 * root have no receive buffer, so their partial sums live in the
 * communicator's scratch ring until sent on; a piece is reused only after
 * the send that read it, an earlier step.
 *
 * Deadlock freedom: links k -> k+1 carry only partial sums, the link
 * n-1 -> root only results, all in chunk order; within a chunk the waits
 * follow the chain 0 -> ... -> n-1 -> root, and scratch reuse waits for
 * earlier chunks only. So the earliest unfinished chunk always completes,
 * even when sends are not buffered. */
#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

/* Where rank r accumulates chunk `off`: rb on the root, else scratch. */
static char *partial_buffer(rcoll_plan_t *p, const rcoll_coll_args_t *a, size_t off, int *reuse) {
  *reuse = RCOLL_NO_DEP;
  if (a->rank == a->root)
    return (char *)a->recvbuff + off;
  return rcoll_plan_scratch_get(p, reuse);
}

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks, r = a->rank, root = a->root;
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
    int sent = RCOLL_NO_DEP;
    if (r == 0) {
      sent = rcoll_plan_send(p, 1, sb + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
    } else {
      int reuse, last = r == n - 1;
      char *acc = partial_buffer(p, a, off, &reuse);
      int sum = rcoll_plan_recv_reduce(p, r - 1, acc, sb + off, len / tsz, a->dtype, a->op,
                                       last ? RCOLL_STEP_FINISH : 0, reuse, RCOLL_NO_DEP);
      if (!(last && r == root)) /* up the chain, or from n-1 to the root */
        sent = rcoll_plan_send(p, last ? root : r + 1, acc, len, sum, RCOLL_NO_DEP);
      if (r != root)
        rcoll_plan_scratch_set_reader(p, acc, sent);
    }
    /* The root receives the result last; in place, after sending its part. */
    if (r == root && root != n - 1)
      rcoll_plan_recv(p, n - 1, rb + off, len, sent, RCOLL_NO_DEP);
  }
}

static double cost(const rcoll_tuner_t *t, double m, size_t c) { return rcoll_cost_chain(t, m, c, 1, 1, 1); }

/* The chain 0 -> n-1 (S per link), then n-1 hands the result to the root. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  int n = a->nranks, r = a->rank, hand = a->root != n - 1;
  double s = rcoll_traffic_bytes(a);
  if (n == 1) {
    rcoll_traffic_set(out, 0, 0, 0, "nothing moves on one rank");
    return;
  }
  double sent = (r < n - 1) + (r == n - 1 && hand), got = (r > 0) + (r == a->root && hand);
  rcoll_traffic_set(out, sent * s, got * s, r > 0 ? (double)a->count : 0,
                    "S per chain link 0 -> n-1, plus S from n-1 to the root");
}

RCOLL_ALGORITHM(reduce_deterministic) = {
    .name = "deterministic",
    .coll = RCOLL_COLL_REDUCE,
    .summary = "Rank-order sums along the chain 0 -> n-1, then to the root: bit-identical results",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = RCOLL_ALGO_DETERMINISTIC,
    .tie_order = 5,
};
