/* Rabenseifner all-reduce: recursive halving reduce-scatter, then recursive
 * doubling all-gather, on the largest power of two p2 <= n ranks.
 *
 * Fold: with rem = n - p2 extra ranks, each even rank r < 2 rem gives its
 * whole vector to r+1 and sits out; r+1 reduces it into its own. The other
 * p2 ranks are renumbered 0..p2-1. At the end r+1 hands the result back.
 *
 * Halving: at step s (bit d = 2^s of the new rank, nearest partners first,
 * since they exchange the most data) a rank splits its current range in two,
 * keeps the lower half if its bit d is 0 (else the upper), sends the other
 * half to partner new ^ d and adds the partner's copy of the half it keeps.
 * After log2 p2 steps each rank holds 1/p2 of the fully reduced vector.
 * Doubling runs the steps backwards: send what we hold, receive the half we
 * gave away at that step. Each rank sends 2 (p2-1)/p2 of the vector in
 * 2 log2 p2 messages: ring bandwidth at tree-like latency, which suits
 * mid-size vectors.
 *
 * Ranges are cut into chunks (p->chunk_bytes); both partners cut a range the
 * same way, so the k-th piece sent matches the k-th piece received. Steps are
 * not pipelined into each other: every piece of a step waits for a join of
 * all the reductions of the previous step (rcoll_plan_join).
 *
 * Deadlock freedom: each (step, piece) pair is a round holding at most one
 * send and one receive per rank, planned in the same order on every rank
 * and matched on both ends of a connection in that order. A round's send and
 * receive depend only on earlier rounds, never on each other, so the
 * earliest unfinished round always completes even when a send finishes only
 * once its receive is posted. Interleaving sends and receives piece by piece
 * (rather than all sends, then all receives) keeps that true within the
 * engine's window of steps it looks at.
 *
 * Buffers: the doubling phase receives into the half this rank sent at the
 * same step; that data can only come back after the partner received ours,
 * so the send has finished (the argument the ring makes). A folded rank's
 * result overwrites its input, which in place is what it sent: each piece
 * waits for its send explicitly. */
#include <math.h>

#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

#define RHD_MAX_STEPS 31

typedef struct rhd {
  const rcoll_coll_args_t *a;
  size_t tsz, chunk; /* element size; elements per piece */
  int n, p2, rem;
  int newrank;       /* -1: folded into rank + 1 */
  int steps;         /* log2 p2 */
  size_t klo[RHD_MAX_STEPS], khi[RHD_MAX_STEPS]; /* kept range at each step */
  size_t slo[RHD_MAX_STEPS], shi[RHD_MAX_STEPS]; /* range given away */
  int ready;         /* join of everything the next step reads */
} rhd_t;

static int real_rank(const rhd_t *h, int q) { return q < h->rem ? 2 * q + 1 : q + h->rem; }

static size_t pieces(const rhd_t *h, size_t lo, size_t hi) {
  return rcoll_chunk_count(hi - lo, h->chunk);
}

/* Piece j of [lo, hi): element offset and length. */
static size_t piece(const rhd_t *h, size_t lo, size_t hi, size_t j, size_t *off) {
  *off = lo + j * h->chunk;
  return hi - *off < h->chunk ? hi - *off : h->chunk;
}

static void plan_ranges(rhd_t *h) {
  size_t lo = 0, hi = h->a->count;
  for (int s = 0; s < h->steps; s++) {
    size_t mid = lo + (hi - lo) / 2;
    int upper = (h->newrank >> s) & 1;
    h->klo[s] = upper ? mid : lo;
    h->khi[s] = upper ? hi : mid;
    h->slo[s] = upper ? lo : mid;
    h->shi[s] = upper ? mid : hi;
    lo = h->klo[s];
    hi = h->khi[s];
  }
}

/* Fold, first half: the even rank of a pair sends, the odd one reduces. */
static void plan_fold(rcoll_plan_t *p, rhd_t *h, int *sent) {
  const rcoll_coll_args_t *a = h->a;
  int r = a->rank;
  const char *sb = a->sendbuff;
  char *rb = a->recvbuff;
  size_t np = pieces(h, 0, a->count);
  for (size_t j = 0; j < np; j++) {
    size_t off, len = piece(h, 0, a->count, j, &off);
    if (h->newrank < 0) {
      sent[j] = rcoll_plan_send(p, r + 1, sb + off * h->tsz, len * h->tsz, RCOLL_NO_DEP, RCOLL_NO_DEP);
    } else {
      int x = rcoll_plan_recv_reduce(p, r - 1, rb + off * h->tsz, sb + off * h->tsz, len, a->dtype,
                                     a->op, 0, RCOLL_NO_DEP, RCOLL_NO_DEP);
      h->ready = rcoll_plan_join(p, h->ready, x);
    }
  }
}

/* Fold, second half: the odd rank hands the result back. */
static void plan_unfold(rcoll_plan_t *p, rhd_t *h, const int *sent) {
  const rcoll_coll_args_t *a = h->a;
  char *rb = a->recvbuff;
  size_t np = pieces(h, 0, a->count);
  for (size_t j = 0; j < np; j++) {
    size_t off, len = piece(h, 0, a->count, j, &off);
    if (h->newrank < 0)
      rcoll_plan_recv(p, a->rank + 1, rb + off * h->tsz, len * h->tsz, sent[j], RCOLL_NO_DEP);
    else
      rcoll_plan_send(p, a->rank - 1, rb + off * h->tsz, len * h->tsz, h->ready, RCOLL_NO_DEP);
  }
}

/* Halving step s: send [slo, shi), reduce the partner's [klo, khi) into ours. */
static void plan_halving(rcoll_plan_t *p, rhd_t *h, int s, const char *in) {
  const rcoll_coll_args_t *a = h->a;
  int partner = real_rank(h, h->newrank ^ (1 << s));
  char *rb = a->recvbuff;
  int flags = s == h->steps - 1 ? RCOLL_STEP_FINISH : 0, prev = h->ready;
  size_t ns = pieces(h, h->slo[s], h->shi[s]), nk = pieces(h, h->klo[s], h->khi[s]);
  for (size_t j = 0; j < ns || j < nk; j++) {
    size_t off, len;
    if (j < ns) {
      len = piece(h, h->slo[s], h->shi[s], j, &off);
      rcoll_plan_send(p, partner, in + off * h->tsz, len * h->tsz, prev, RCOLL_NO_DEP);
    }
    if (j < nk) {
      len = piece(h, h->klo[s], h->khi[s], j, &off);
      int x = rcoll_plan_recv_reduce(p, partner, rb + off * h->tsz, in + off * h->tsz, len, a->dtype,
                                     a->op, flags, prev, RCOLL_NO_DEP);
      h->ready = rcoll_plan_join(p, h->ready, x);
    }
  }
}

/* Doubling step s: send what we hold ([klo, khi)), receive [slo, shi). */
static void plan_doubling(rcoll_plan_t *p, rhd_t *h, int s) {
  int partner = real_rank(h, h->newrank ^ (1 << s));
  char *rb = h->a->recvbuff;
  int prev = h->ready;
  size_t nk = pieces(h, h->klo[s], h->khi[s]), ns = pieces(h, h->slo[s], h->shi[s]);
  for (size_t j = 0; j < ns || j < nk; j++) {
    size_t off, len;
    if (j < nk) {
      len = piece(h, h->klo[s], h->khi[s], j, &off);
      rcoll_plan_send(p, partner, rb + off * h->tsz, len * h->tsz, prev, RCOLL_NO_DEP);
    }
    if (j < ns) {
      len = piece(h, h->slo[s], h->shi[s], j, &off);
      int x = rcoll_plan_recv(p, partner, rb + off * h->tsz, len * h->tsz, RCOLL_NO_DEP, RCOLL_NO_DEP);
      h->ready = rcoll_plan_join(p, h->ready, x);
    }
  }
}

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  rhd_t h = {.a = a, .tsz = rcoll_type_size(a->dtype), .n = a->nranks, .p2 = 1,
             .ready = RCOLL_NO_DEP};
  h.chunk = p->chunk_bytes / h.tsz;
  if (h.n == 1) {
    rcoll_plan_copy(p, a->recvbuff, a->sendbuff, a->count * h.tsz, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  while (2 * h.p2 <= h.n)
    h.p2 *= 2, h.steps++;
  h.rem = h.n - h.p2;
  int r = a->rank;
  h.newrank = r < 2 * h.rem ? (r % 2 ? r / 2 : -1) : r - h.rem;
  int *sent = NULL;
  if (r < 2 * h.rem) {
    sent = rcoll_plan_tmp(p, (pieces(&h, 0, a->count) + 1) * sizeof *sent);
    if (sent == NULL)
      return;
    plan_fold(p, &h, sent);
  }
  if (h.newrank >= 0) {
    plan_ranges(&h);
    /* The first step reads our input, or the folded sum already in rb. */
    const char *in = r < 2 * h.rem ? a->recvbuff : a->sendbuff;
    for (int s = 0; s < h.steps; s++)
      plan_halving(p, &h, s, s == 0 ? in : a->recvbuff);
    for (int s = h.steps - 1; s >= 0; s--)
      plan_doubling(p, &h, s);
  }
  if (r < 2 * h.rem)
    plan_unfold(p, &h, sent);
}

/* Steps do not overlap: each pays its latency and its whole transfer. Its
 * chunks are all in hand when a step starts and are sent at once, so only
 * the first window waits a round trip: no window limit. */
static double cost(const rcoll_tuner_t *t, double m, size_t c) {
  double gamma = rcoll_cost_beta(t->prm.reduce_gbps), time = 0, size = m;
  if (t->rhd_rem > 0) { /* fold in and hand back: the whole vector twice */
    rcoll_cost_link_t l = rcoll_cost_link(t, t->fold_cross, t->fold_share);
    double cs = fmin((double)c, m);
    time += 2 * (l.lat + rcoll_cost_chunks(m, c) * rcoll_cost_msg_us(l, cs) + m * l.b) + m * gamma;
  }
  for (int s = 0; s < t->rhd_steps && s < RCOLL_TUNE_MAX_STEPS; s++) {
    size /= 2;
    rcoll_cost_link_t l = rcoll_cost_link(t, t->step_cross[s], t->step_share[s]);
    double cs = fmin((double)c, size);
    time += 2 * (l.lat + rcoll_cost_chunks(size, c) * rcoll_cost_msg_us(l, cs) + size * l.b) + size * gamma;
  }
  return time;
}

/* The p2 = 2^k ranks of the halving and doubling each send and receive
 * (p2-1)/p2 of the vector per phase. With rem = n - p2 extra ranks, each
 * even rank r < 2 rem hands its whole vector to r+1 and gets the result
 * back: S each way, which r+1 adds to its own share. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  int n = a->nranks, r = a->rank, p2 = 1;
  while (2 * p2 <= n)
    p2 *= 2;
  int rem = n - p2, folded = r < 2 * rem && r % 2 == 0, helper = r < 2 * rem && r % 2;
  double s = rcoll_traffic_bytes(a), c = (double)a->count, f = (double)(p2 - 1) / p2;
  double move = folded ? s : 2 * f * s + helper * s;
  rcoll_traffic_set(out, move, move, folded ? 0 : f * c + helper * c,
                    "2(p2-1)/p2 S each way (p2: largest power of 2 <= n); a folded pair adds S "
                    "each way");
}

RCOLL_ALGORITHM(allreduce_rabenseifner) = {
    .name = "rabenseifner",
    .coll = RCOLL_COLL_ALLREDUCE,
    .summary = "Recursive halving then doubling (Rabenseifner): log2(n) steps, bandwidth-optimal",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = 0,
    .tie_order = 2,
};
