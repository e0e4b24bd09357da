/* Ring reduce-scatter: the first half of ring all-reduce, with blocks
 * numbered so that rank r ends with block r. At step t rank r sends its
 * partial sum of block r-t-1 to the right and receives the partial sum of
 * block r-t-2 from the left, adding its own contribution. Partial sums have
 * no home in the user's buffers (recvbuff holds one block), so they live in
 * the communicator's scratch ring until they have been sent on.
 *
 * A partial sum made at step t is read by the send of step t+1, so chunks
 * are planned in windows of half the scratch ring: a window's pieces for
 * steps t and t+1 fit in the ring at once, and every reuse of a piece waits
 * for a send that is already planned. */
#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

typedef struct partial {
  int step;    /* the receive-reduce that produced it */
  char *piece; /* scratch piece holding it */
} partial_t;

/* Step t for chunks [j0, j1): send the partial sums of block r-t-1 (our own
 * input at t == 0), receive block r-t-2 and add our input to it. */
static void plan_step(rcoll_plan_t *p, const rcoll_coll_args_t *a, int t, size_t j0, size_t j1,
                      partial_t *prev) {
  int n = a->nranks, r = a->rank;
  int right = (r + 1) % n, left = (r + n - 1) % n;
  size_t tsz = rcoll_type_size(a->dtype), block = a->count * tsz, chunk = p->chunk_bytes;
  const char *sb = a->sendbuff;
  char *rb = a->recvbuff;
  size_t sblk = (size_t)((r - t - 1 + 2 * n) % n), rblk = (size_t)((r - t - 2 + 2 * n) % n);
  int last = (t == n - 2); /* rblk == r: the result goes to recvbuff */
  for (size_t j = j0; j < j1; j++) {
    size_t off = j * chunk, len = block - off < chunk ? block - off : chunk;
    if (t == 0) {
      rcoll_plan_send(p, right, sb + sblk * block + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
    } else {
      int s = rcoll_plan_send(p, right, prev[j].piece, len, prev[j].step, RCOLL_NO_DEP);
      rcoll_plan_scratch_set_reader(p, prev[j].piece, s);
    }
    int reuse = RCOLL_NO_DEP;
    char *dst = last ? rb + off : rcoll_plan_scratch_get(p, &reuse);
    prev[j].piece = dst;
    prev[j].step = rcoll_plan_recv_reduce(p, left, dst, sb + rblk * block + off, len / tsz, a->dtype,
                                          a->op, last ? RCOLL_STEP_FINISH : 0, reuse, RCOLL_NO_DEP);
  }
}

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks;
  size_t tsz = rcoll_type_size(a->dtype), block = a->count * tsz;
  char *rb = a->recvbuff;
  const char *sb = a->sendbuff;
  if (n == 1) {
    rcoll_plan_copy(p, rb, sb, block, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  size_t nchunks = rcoll_chunk_count(block, p->chunk_bytes);
  partial_t *prev = rcoll_plan_tmp(p, nchunks * sizeof *prev);
  if (prev == NULL)
    return;
  size_t window = (size_t)p->scratch_pieces / 2;
  for (size_t j0 = 0; j0 < nchunks; j0 += window) {
    size_t j1 = j0 + window < nchunks ? j0 + window : nchunks;
    for (int t = 0; t < n - 1; t++)
      plan_step(p, a, t, j0, j1, prev);
  }
}

static double cost(const rcoll_tuner_t *t, double m, size_t c) { return rcoll_cost_ring(t, m, c, 1, 1); }

/* n-1 partial blocks leave and n-1 arrive, each reduced on arrival. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  double k = a->nranks - 1, b = rcoll_traffic_bytes(a);
  rcoll_traffic_set(out, k * b, k * b, k * (double)a->count,
                    "sent = received = (n-1) B; reduced (n-1) count (B: one block)");
}

RCOLL_ALGORITHM(reduce_scatter_ring) = {
    .name = "ring",
    .coll = RCOLL_COLL_REDUCE_SCATTER,
    .summary = "Ring reduce-scatter: n-1 steps around rank -> rank+1, pipelined by chunks",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = RCOLL_ALGO_FALLBACK,
    .tie_order = 0,
};
