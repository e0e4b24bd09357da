/* Ring all-reduce: a reduce-scatter followed by an all-gather around the
 * ring rank -> rank+1. The vector is cut into nranks segments; after the
 * reduce-scatter rank r holds the fully reduced segment r+1, and the
 * all-gather passes the finished segments around. Each segment is further
 * cut into chunks, and each chunk travels independently: as soon as chunk j
 * of a step has been received and reduced it is sent on, while later chunks
 * are still in flight. Each rank sends and receives 2(n-1)/n of the data,
 * which is optimal in bandwidth.
 *
 * Buffer reuse is safe without extra dependencies: the all-gather overwrites
 * a segment only with data that left this rank's right neighbour after it had
 * received everything this rank sent from that segment. */
#include <string.h>

#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

typedef struct ring_segments {
  size_t base, rem; /* segment k has base + (k < rem) elements */
  size_t chunk;     /* elements per chunk */
  int n;
} ring_segments_t;

static size_t seg_off(const ring_segments_t *s, int k) {
  return (size_t)k * s->base + ((size_t)k < s->rem ? (size_t)k : s->rem);
}

static size_t seg_len(const ring_segments_t *s, int k) { return s->base + ((size_t)k < s->rem); }

/* Elements of chunk j of segment k (0 when the segment is shorter). */
static size_t chunk_len(const ring_segments_t *s, int k, size_t j, size_t *off) {
  size_t len = seg_len(s, k), start = j * s->chunk;
  *off = seg_off(s, k) + start;
  return start >= len ? 0 : (len - start < s->chunk ? len - start : s->chunk);
}

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks, r = a->rank;
  size_t tsz = rcoll_type_size(a->dtype);
  char *rb = a->recvbuff;
  const char *sb = a->sendbuff;
  if (n == 1) { /* one rank: the result is the input (avg divides by 1) */
    rcoll_plan_copy(p, rb, sb, a->count * tsz, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  int right = (r + 1) % n, left = (r + n - 1) % n;
  ring_segments_t s = {a->count / (size_t)n, a->count % (size_t)n, p->chunk_bytes / tsz, n};
  size_t nchunks = rcoll_chunk_count(seg_len(&s, 0), s.chunk);
  int *prev = rcoll_plan_tmp(p, nchunks * sizeof *prev); /* step that last wrote chunk j */
  if (prev == NULL)
    return;
  for (size_t j = 0; j < nchunks; j++)
    prev[j] = RCOLL_NO_DEP;

  /* Reduce-scatter: at step t send segment r-t, receive segment r-t-1 and
   * add our own contribution to it. The last step completes segment r+1. */
  for (int t = 0; t < n - 1; t++) {
    int sseg = (r - t + 2 * n) % n, rseg = (r - t - 1 + 2 * n) % n;
    int last = (t == n - 2);
    for (size_t j = 0; j < nchunks; j++) {
      size_t off, len = chunk_len(&s, sseg, j, &off);
      if (len > 0)
        rcoll_plan_send(p, right, (t == 0 ? sb : rb) + off * tsz, len * tsz, prev[j], RCOLL_NO_DEP);
      len = chunk_len(&s, rseg, j, &off);
      prev[j] = len == 0 ? RCOLL_NO_DEP
                         : rcoll_plan_recv_reduce(p, left, rb + off * tsz, sb + off * tsz, len,
                                                  a->dtype, a->op, last ? RCOLL_STEP_FINISH : 0,
                                                  RCOLL_NO_DEP, RCOLL_NO_DEP);
    }
  }
  /* All-gather: pass the finished segments on; at step t send segment
   * r+1-t (ours first, then the one just received) and receive r-t. */
  for (int t = 0; t < n - 1; t++) {
    int sseg = (r + 1 - t + 2 * n) % n, rseg = (r - t + 2 * n) % n;
    for (size_t j = 0; j < nchunks; j++) {
      size_t off, len = chunk_len(&s, sseg, j, &off);
      if (len > 0)
        rcoll_plan_send(p, right, rb + off * tsz, len * tsz, prev[j], RCOLL_NO_DEP);
      len = chunk_len(&s, rseg, j, &off);
      prev[j] = len == 0 ? RCOLL_NO_DEP
                         : rcoll_plan_recv(p, left, rb + off * tsz, len * tsz, RCOLL_NO_DEP,
                                           RCOLL_NO_DEP);
    }
  }
}

static double cost(const rcoll_tuner_t *t, double m, size_t c) { return rcoll_cost_ring(t, m, c, 2, 1); }

/* Reduce-scatter and all-gather each move n-1 of the n segments. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  double n = a->nranks, s = rcoll_traffic_bytes(a), f = n > 1 ? (n - 1) / n : 0;
  rcoll_traffic_set(out, 2 * f * s, 2 * f * s, f * (double)a->count,
                    "sent = received = 2(n-1)/n S; reduced (n-1)/n count");
}

RCOLL_ALGORITHM(allreduce_ring) = {
    .name = "ring",
    .coll = RCOLL_COLL_ALLREDUCE,
    .summary = "Ring: reduce-scatter then all-gather around rank -> rank+1, pipelined by chunks",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = RCOLL_ALGO_FALLBACK,
    .tie_order = 0,
};
