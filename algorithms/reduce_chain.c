/* Pipelined chain reduce, the broadcast chain run backwards: the rank
 * farthest from the root sends its data one hop towards the root, each rank
 * on the way adds its own contribution and passes the partial sum on, and the
 * root adds the last contribution into recvbuff. Partial sums travel through
 * the communicator's scratch ring (non-root ranks have no receive buffer). */
#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks, r = a->rank;
  size_t tsz = rcoll_type_size(a->dtype), bytes = a->count * tsz;
  int pos = (r - a->root + n) % n;
  int toward_root = (r + n - 1) % n, from_tail = (r + 1) % n;
  char *rb = a->recvbuff;
  const char *sb = a->sendbuff;
  if (n == 1) {
    rcoll_plan_copy(p, rb, sb, bytes, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  size_t chunk = p->chunk_bytes, nchunks = rcoll_chunk_count(bytes, chunk);
  for (size_t j = 0; j < nchunks; j++) {
    size_t off = j * chunk, len = bytes - off < chunk ? bytes - off : chunk;
    if (pos == n - 1) { /* the tail only sends */
      rcoll_plan_send(p, toward_root, sb + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
    } else if (pos == 0) { /* the root finishes the reduction in place */
      rcoll_plan_recv_reduce(p, from_tail, rb + off, sb + off, len / tsz, a->dtype, a->op,
                             RCOLL_STEP_FINISH, RCOLL_NO_DEP, RCOLL_NO_DEP);
    } else {
      int reuse;
      char *piece = rcoll_plan_scratch_get(p, &reuse);
      int sum = rcoll_plan_recv_reduce(p, from_tail, piece, sb + off, len / tsz, a->dtype, a->op, 0,
                                       reuse, RCOLL_NO_DEP);
      int sent = rcoll_plan_send(p, toward_root, piece, len, sum, RCOLL_NO_DEP);
      rcoll_plan_scratch_set_reader(p, piece, sent);
    }
  }
}

static double cost(const rcoll_tuner_t *t, double m, size_t c) { return rcoll_cost_chain(t, m, c, 1, 0, 1); }

/* The partial sum arrives once (but at the tail) and leaves once (but at
 * the root), reduced on arrival. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  int n = a->nranks, pos = (a->rank - a->root + n) % n;
  double s = rcoll_traffic_bytes(a), in = n > 1 && pos < n - 1;
  rcoll_traffic_set(out, n > 1 && pos > 0 ? s : 0, in * s, in * (double)a->count,
                    "S received and reduced unless the tail, S sent unless the root");
}

RCOLL_ALGORITHM(reduce_chain) = {
    .name = "chain",
    .coll = RCOLL_COLL_REDUCE,
    .summary = "Pipelined chain towards the root, each rank adding its part",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = RCOLL_ALGO_FALLBACK,
    .tie_order = 4,
};
