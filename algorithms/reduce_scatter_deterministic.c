/* Deterministic reduce-scatter: the rank-order chain of
 * allreduce_deterministic.c, ((x0 op x1) op x2) op ..., over all n blocks,
 * ending at rank n-1, which keeps its own block and sends block b to rank b.
 * Partial sums of other ranks' blocks have no home in the user's buffers
 * and live in the communicator's scratch ring until sent on (a piece is
 * reused only after the send that read it, an earlier step).
 *
 * Deadlock freedom: links k -> k+1 carry only partial sums and links
 * n-1 -> b only results, in (block, chunk) order on both ends; within a
 * chunk the waits follow the chain 0 -> ... -> n-1 -> b, and scratch reuse
 * waits for earlier chunks only, so the earliest unfinished chunk always
 * completes even when sends are not buffered. */
#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

/* One chunk [off, off + len) of block b. */
static void plan_chunk(rcoll_plan_t *p, const rcoll_coll_args_t *a, int b, size_t off, size_t len) {
  int n = a->nranks, r = a->rank;
  size_t tsz = rcoll_type_size(a->dtype), block = a->count * tsz;
  const char *in = (const char *)a->sendbuff + (size_t)b * block + off;
  char *out = (char *)a->recvbuff + off;
  int read; /* our step that reads `in`: in place, `out` is `in` */
  if (r == 0) {
    read = rcoll_plan_send(p, 1, in, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
  } else if (r == n - 1 && b == r) { /* our own block is finished in place */
    read = rcoll_plan_recv_reduce(p, r - 1, out, in, len / tsz, a->dtype, a->op, RCOLL_STEP_FINISH,
                                  RCOLL_NO_DEP, RCOLL_NO_DEP);
  } else {
    int reuse, last = r == n - 1;
    char *acc = rcoll_plan_scratch_get(p, &reuse);
    read = rcoll_plan_recv_reduce(p, r - 1, acc, in, len / tsz, a->dtype, a->op,
                                  last ? RCOLL_STEP_FINISH : 0, reuse, RCOLL_NO_DEP);
    int sent = rcoll_plan_send(p, last ? b : r + 1, acc, len, read, RCOLL_NO_DEP);
    rcoll_plan_scratch_set_reader(p, acc, sent);
  }
  if (r == b && r != n - 1) /* the owner receives its finished block */
    rcoll_plan_recv(p, n - 1, out, len, read, RCOLL_NO_DEP);
}

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks;
  size_t block = a->count * rcoll_type_size(a->dtype);
  if (n == 1) {
    rcoll_plan_copy(p, a->recvbuff, a->sendbuff, block, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  size_t chunk = p->chunk_bytes, nchunks = rcoll_chunk_count(block, chunk);
  for (int b = 0; b < n; b++)
    for (size_t j = 0; j < nchunks; j++) {
      size_t off = j * chunk;
      plan_chunk(p, a, b, off, block - off < chunk ? block - off : chunk);
    }
}

static double cost(const rcoll_tuner_t *t, double m, size_t c) { return rcoll_cost_chain(t, m, c, 1, 1, 1); }

/* The chain carries all n blocks (n B per link); n-1 then sends each block
 * but its own to its owner. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  int n = a->nranks, r = a->rank;
  double b = rcoll_traffic_bytes(a), c = (double)a->count;
  if (n == 1) {
    rcoll_traffic_set(out, 0, 0, 0, "nothing moves on one rank");
    return;
  }
  double sent = r < n - 1 ? n * b : (n - 1) * b, got = (r > 0 ? n * b : 0) + (r < n - 1 ? b : 0);
  rcoll_traffic_set(out, sent, got, r > 0 ? n * c : 0,
                    "n B per chain link 0 -> n-1, then n-1 sends each owner its B");
}

RCOLL_ALGORITHM(reduce_scatter_deterministic) = {
    .name = "deterministic",
    .coll = RCOLL_COLL_REDUCE_SCATTER,
    .summary = "Rank-order sums along the chain 0 -> n-1, each block to its owner: bit-identical results",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = RCOLL_ALGO_DETERMINISTIC,
    .tie_order = 5,
};
