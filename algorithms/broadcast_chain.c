/* Pipelined chain broadcast: root -> root+1 -> ... -> root-1. The message is
 * cut into chunks; each rank forwards a chunk as soon as it has it, so for
 * large messages every link is busy at once and the time approaches one
 * message transfer regardless of the number of ranks. */
#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks, r = a->rank;
  size_t bytes = a->count * rcoll_type_size(a->dtype);
  int pos = (r - a->root + n) % n; /* our place in the chain */
  int next = (r + 1) % n, prev = (r + n - 1) % n;
  size_t chunk = p->chunk_bytes, nchunks = rcoll_chunk_count(bytes, chunk);
  char *rb = a->recvbuff;
  const char *sb = a->sendbuff;
  if (pos == 0 && sb != rb)
    rcoll_plan_copy(p, rb, sb, bytes, RCOLL_NO_DEP, RCOLL_NO_DEP);
  if (n == 1)
    return;
  for (size_t j = 0; j < nchunks; j++) {
    size_t off = j * chunk, len = bytes - off < chunk ? bytes - off : chunk;
    if (pos == 0) { /* the root sends from its send buffer: no wait for the copy */
      rcoll_plan_send(p, next, sb + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
      continue;
    }
    int got = rcoll_plan_recv(p, prev, rb + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
    if (pos < n - 1)
      rcoll_plan_send(p, next, rb + off, len, got, RCOLL_NO_DEP);
  }
}

static double cost(const rcoll_tuner_t *t, double m, size_t c) { return rcoll_cost_chain(t, m, c, 1, 0, 0); }

/* Everyone but the root receives the message; everyone but the last in
 * the chain passes it on. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  int n = a->nranks, pos = (a->rank - a->root + n) % n;
  double s = rcoll_traffic_bytes(a);
  rcoll_traffic_set(out, pos < n - 1 ? s : 0, pos > 0 ? s : 0, 0,
                    "S received unless root, S sent unless last in the chain");
}

RCOLL_ALGORITHM(broadcast_chain) = {
    .name = "chain",
    .coll = RCOLL_COLL_BROADCAST,
    .summary = "Pipelined chain root -> root+1 -> ...",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = RCOLL_ALGO_FALLBACK,
    .tie_order = 4,
};
