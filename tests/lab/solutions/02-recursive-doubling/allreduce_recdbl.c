/* Recursive-doubling all-reduce (lab exercise 02, reference solution).
 *
 * With p2 = 2^k ranks, at step s every rank swaps its whole partial result
 * with partner rank ^ 2^s and adds the partner's copy into its own: after
 * step s each rank holds the sum of its group of 2^(s+1) ranks, after k
 * steps the sum of all. k messages of the whole vector S: log2(n) latencies
 * (as few as a tree), but log2(n) S on the wire (a ring sends 2(n-1)/n S),
 * so it suits small vectors.
 *
 * Other rank counts fold first, as allreduce_rabenseifner.c does: with
 * rem = n - p2, each even rank r < 2 rem hands its vector to r+1 and sits
 * out; r+1 adds it to its own; the p2 ranks left are renumbered 0..p2-1; at
 * the end r+1 hands the result back.
 *
 * Buffers: a step sends its partial result and receives the partner's at
 * the same time, so it cannot add into the buffer it is sending from (the
 * send may still be reading it; waiting for the send first would deadlock
 * on a transport that delivers only when the receive is posted). So each
 * step writes into a fresh scratch piece (rcoll_plan_scratch_get) and the
 * next step reads it; the last step writes into recvbuff. When the first
 * step's input is recvbuff itself (in place, or a fold helper), the last
 * step also waits for that first send; with a single step it cannot, so it
 * adds into scratch and a copy moves the result home.
 *
 * Order: chunk by chunk, and within a chunk step by step, so that a piece's
 * next reader is planned before the ring hands the piece out again. Each
 * (chunk, step) is a round with one send and one receive per rank, both
 * depending only on earlier rounds, planned in the same order by both
 * partners: the earliest unfinished round can always complete. */
#include <math.h>

#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

typedef struct recdbl {
  const rcoll_coll_args_t *a;
  size_t tsz, ce, nchunks; /* element size, elements per chunk, chunks */
  int p2, rem, steps, newrank; /* newrank -1: folded into rank + 1 */
} recdbl_t;

/* The real rank of renumbered rank q. */
static int real_rank(const recdbl_t *h, int q) { return q < h->rem ? 2 * q + 1 : q + h->rem; }

/* Chunk j: its first element and its length. */
static size_t chunk(const recdbl_t *h, size_t j, size_t *off) {
  *off = j * h->ce;
  return h->a->count - *off < h->ce ? h->a->count - *off : h->ce;
}

/* The doubling steps of chunk j, starting from `in` (ready after `ready`).
 * Returns the step after which the chunk's result is home. */
static int plan_chunk(rcoll_plan_t *p, const recdbl_t *h, size_t j, const char *in, int ready) {
  const rcoll_coll_args_t *a = h->a;
  size_t off, len = chunk(h, j, &off);
  char *home = (char *)a->recvbuff + off * h->tsz;
  int in_home = in == home, first = RCOLL_NO_DEP;
  const char *cur = in;
  for (int s = 0; s < h->steps; s++) {
    int partner = real_rank(h, h->newrank ^ (1 << s)), last = s == h->steps - 1;
    /* Send our partial result to the partner ... */
    int snd = rcoll_plan_send(p, partner, cur, len * h->tsz, ready, RCOLL_NO_DEP);
    if (s == 0)
      first = snd;
    /* ... and add the partner's into a place nobody is reading. */
    int reuse = RCOLL_NO_DEP, direct = last && !(in_home && s == 0);
    char *dst = direct ? home : rcoll_plan_scratch_get(p, &reuse);
    int dep = direct && in_home ? first : reuse;
    int red = rcoll_plan_recv_reduce(p, partner, dst, cur, len, a->dtype, a->op,
                                     last ? RCOLL_STEP_FINISH : 0, ready, dep);
    if (s > 0) /* cur was the previous step's piece: free it once both have read it */
      rcoll_plan_scratch_set_reader(p, cur, rcoll_plan_join(p, snd, red));
    if (last && !direct) { /* one step, in place: move the sum home */
      int cp = rcoll_plan_copy(p, home, dst, len * h->tsz, red, first);
      rcoll_plan_scratch_set_reader(p, dst, cp);
      return cp;
    }
    cur = dst;
    ready = red;
  }
  return ready;
}

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  recdbl_t h = {.a = a, .tsz = rcoll_type_size(a->dtype), .p2 = 1};
  int n = a->nranks, r = a->rank;
  if (n == 1) { /* one rank: the result is the input (avg divides by 1) */
    rcoll_plan_copy(p, a->recvbuff, a->sendbuff, a->count * h.tsz, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  h.ce = p->chunk_bytes / h.tsz;
  h.nchunks = (a->count + h.ce - 1) / h.ce;
  while (2 * h.p2 <= n)
    h.p2 *= 2, h.steps++;
  h.rem = n - h.p2;
  h.newrank = r < 2 * h.rem ? (r % 2 ? r / 2 : -1) : r - h.rem;
  const char *sb = a->sendbuff;
  char *rb = a->recvbuff;
  for (size_t j = 0; j < h.nchunks; j++) {
    size_t off, len = chunk(&h, j, &off), at = off * h.tsz;
    if (h.newrank < 0) { /* folded: give our part away, get the result back */
      int sent = rcoll_plan_send(p, r + 1, sb + at, len * h.tsz, RCOLL_NO_DEP, RCOLL_NO_DEP);
      rcoll_plan_recv(p, r + 1, rb + at, len * h.tsz, sent, RCOLL_NO_DEP);
      continue;
    }
    int ready = RCOLL_NO_DEP;
    const char *in = sb + at;
    if (r < 2 * h.rem) { /* helper: add the folded rank's part first */
      ready = rcoll_plan_recv_reduce(p, r - 1, rb + at, sb + at, len, a->dtype, a->op, 0,
                                     RCOLL_NO_DEP, RCOLL_NO_DEP);
      in = rb + at;
    }
    int done = plan_chunk(p, &h, j, in, ready);
    if (r < 2 * h.rem) /* hand the result back */
      rcoll_plan_send(p, r - 1, rb + at, len * h.tsz, done, RCOLL_NO_DEP);
  }
}

/* Each step pays a latency, a message per chunk and the whole vector, then
 * adds it. */
static double cost(const rcoll_tuner_t *t, double m, size_t c) {
  double gamma = rcoll_cost_beta(t->prm.reduce_gbps), time = 0, cs = fmin((double)c, m);
  if (t->rhd_rem > 0) { /* fold in and hand back: the whole vector twice */
    rcoll_cost_link_t l = rcoll_cost_link(t, t->fold_cross, t->fold_share);
    time += 2 * (l.lat + rcoll_cost_chunks(m, c) * rcoll_cost_msg_us(l, cs) + m * l.b) + m * gamma;
  }
  for (int s = 0; s < t->rhd_steps && s < RCOLL_TUNE_MAX_STEPS; s++) {
    rcoll_cost_link_t l = rcoll_cost_link(t, t->step_cross[s], t->step_share[s]);
    time += l.lat + rcoll_cost_chunks(m, c) * rcoll_cost_msg_us(l, cs) + m * l.b + m * gamma;
  }
  return time;
}

/* log2(p2) S each way and log2(p2) count added, p2 the largest power of 2
 * <= n; a folded pair moves S more each way, and its helper adds count more. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  int n = a->nranks, r = a->rank, p2 = 1, k = 0;
  while (2 * p2 <= n)
    p2 *= 2, k++;
  int rem = n - p2, folded = r < 2 * rem && r % 2 == 0, helper = r < 2 * rem && r % 2;
  double s = rcoll_traffic_bytes(a), c = (double)a->count;
  double move = folded ? s : k * s + helper * s;
  rcoll_traffic_set(out, move, move, folded ? 0 : k * c + helper * c,
                    "log2(p2) S each way, log2(p2) count reduced (p2: largest power of 2 <= n); "
                    "a folded pair adds S each way");
}

RCOLL_ALGORITHM(allreduce_recdbl) = {
    .name = "recdbl",
    .coll = RCOLL_COLL_ALLREDUCE,
    .summary = "Recursive doubling: log2(n) swaps of the whole vector with rank ^ 2^s",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = 0,
    .tie_order = 9,
};
