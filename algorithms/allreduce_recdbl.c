/* Recursive-doubling all-reduce: the fewest message latencies, for small
 * vectors at any rank count.
 *
 * With p2 = 2^k ranks, at step s every rank swaps its whole partial result
 * with partner rank ^ 2^s and reduces the partner's copy into its own; after
 * step s a rank holds the reduction of its group of 2^(s+1) ranks, after k
 * steps that of all. That is k = log2(n) latencies where the double tree
 * needs 2 log2(n) and the ring 2(n-1), at the price of log2(n) S on the wire
 * (the ring sends 2(n-1)/n S): the tuner picks it for small vectors only.
 *
 * Other rank counts fold first (as allreduce_rabenseifner.c does): with
 * rem = n - p2, each even rank r < 2 rem hands its vector to r+1 and sits
 * out; r+1 reduces it into its own; the p2 ranks left are renumbered
 * 0..p2-1 and run the doubling; at the end r+1 hands the result back. Pairs
 * of neighbours fold, which are on one node wherever ranks are placed in
 * blocks.
 *
 * Every rank gets the same bits. Both ranks of a step compute "mine (op)
 * partner's": the same two operands in opposite order, which every op of
 * lib/reduce_math.h gives the same bits for (integer ops are exact; float
 * sum and product are commutative in IEEE arithmetic; max and min pick
 * between +0 and -0 whatever the order), so the partners' results are
 * equal and so are the next step's operands. A folded rank gets a copy of
 * its helper's result, and avg divides the same sum on every rank. Only NaN
 * payloads may differ (a NaN on every rank, as with any algorithm: which
 * operand's payload an addition keeps is the hardware's choice). It does not
 * sum in rank order, so RCOLL_DETERMINISTIC=1 never uses it (no
 * RCOLL_ALGO_DETERMINISTIC flag).
 *
 * Buffers: a step sends its partial result and receives the partner's at
 * the same time, so it cannot reduce into the buffer it sends from (the send
 * may still read it, and waiting for the send first would deadlock on a
 * transport that completes a send only once its receive is posted). Each
 * step reduces into a fresh scratch piece (rcoll_plan_scratch_get), which
 * the next step sends; the last step reduces into recvbuff. Where the first
 * step sent from recvbuff itself (in place, or a helper), the last step
 * waits for that send, which the partner of the first step had to receive
 * before it could go on; with a single step it cannot wait, so it reduces
 * into scratch and a copy moves the result home.
 *
 * Order and deadlock freedom: the vector is cut into chunks (a staging slot
 * holds one), planned chunk by chunk, and within a chunk step by step, so a
 * scratch piece's last reader is named before the ring hands the piece out
 * again. Each (chunk, step) is a round with one send and one receive per
 * rank, planned in the same order by both partners, and depending only on
 * earlier rounds: the earliest unfinished round can always complete, and by
 * induction every one does. */
#include <math.h>

#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

typedef struct recdbl {
  const rcoll_coll_args_t *a;
  size_t tsz, chunk, nchunks; /* element size, elements per chunk, chunks */
  int p2, rem, steps;         /* largest power of 2 <= n, n - p2, log2 p2 */
  int newrank;                /* in the doubling; -1: folded into rank + 1 */
} recdbl_t;

/* The real rank of renumbered rank q. */
static int real_rank(const recdbl_t *h, int q) { return q < h->rem ? 2 * q + 1 : q + h->rem; }

/* Chunk j: its first element and its length. */
static size_t chunk_range(const recdbl_t *h, size_t j, size_t *off) {
  *off = j * h->chunk;
  return h->a->count - *off < h->chunk ? h->a->count - *off : h->chunk;
}

/* The doubling steps of chunk j, from `in` (ready after step `ready`).
 * Returns the step after which the chunk's result is in recvbuff. */
static int plan_doubling(rcoll_plan_t *p, const recdbl_t *h, size_t j, const char *in, int ready) {
  const rcoll_coll_args_t *a = h->a;
  size_t off, len = chunk_range(h, j, &off), bytes = len * h->tsz;
  char *home = (char *)a->recvbuff + off * h->tsz;
  int from_home = in == home, first = RCOLL_NO_DEP;
  const char *cur = in;
  for (int s = 0; s < h->steps; s++) {
    int partner = real_rank(h, h->newrank ^ (1 << s)), last = s == h->steps - 1;
    /* Send our partial result to the partner ... */
    int snd = rcoll_plan_send(p, partner, cur, bytes, ready, RCOLL_NO_DEP);
    if (s == 0)
      first = snd;
    /* ... and reduce theirs into a buffer no send of this step reads. */
    int reuse = RCOLL_NO_DEP, direct = last && !(from_home && s == 0);
    char *dst = direct ? home : rcoll_plan_scratch_get(p, &reuse);
    int red = rcoll_plan_recv_reduce(p, partner, dst, cur, len, a->dtype, a->op,
                                     last ? RCOLL_STEP_FINISH : 0, ready,
                                     direct && from_home ? first : reuse);
    if (s > 0) /* cur is the previous step's piece: free once sent and read */
      rcoll_plan_scratch_set_reader(p, cur, rcoll_plan_join(p, snd, red));
    if (!direct && last) { /* a single step from recvbuff: move the result home */
      int cp = rcoll_plan_copy(p, home, dst, bytes, red, first);
      rcoll_plan_scratch_set_reader(p, dst, cp);
      return cp;
    }
    cur = dst;
    ready = red;
  }
  return ready;
}

/* Chunk j on a rank of a folded pair, or on one that only doubles. */
static void plan_chunk(rcoll_plan_t *p, const recdbl_t *h, size_t j) {
  const rcoll_coll_args_t *a = h->a;
  int r = a->rank;
  size_t off, len = chunk_range(h, j, &off), at = off * h->tsz, bytes = len * h->tsz;
  const char *sb = (const char *)a->sendbuff + at;
  char *rb = (char *)a->recvbuff + at;
  if (h->newrank < 0) { /* folded: give our part away, get the result back */
    int sent = rcoll_plan_send(p, r + 1, sb, bytes, RCOLL_NO_DEP, RCOLL_NO_DEP);
    rcoll_plan_recv(p, r + 1, rb, bytes, sent, RCOLL_NO_DEP);
    return;
  }
  if (r >= 2 * h->rem) {
    plan_doubling(p, h, j, sb, RCOLL_NO_DEP);
    return;
  }
  /* A helper: reduce the folded rank's part into ours, double, hand back. */
  int folded = rcoll_plan_recv_reduce(p, r - 1, rb, sb, len, a->dtype, a->op, 0, RCOLL_NO_DEP,
                                      RCOLL_NO_DEP);
  int done = plan_doubling(p, h, j, rb, folded);
  rcoll_plan_send(p, r - 1, rb, bytes, done, RCOLL_NO_DEP);
}

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  recdbl_t h = {.a = a, .tsz = rcoll_type_size(a->dtype), .p2 = 1};
  int n = a->nranks;
  if (n == 1) { /* the result is the input (avg divides by 1) */
    rcoll_plan_copy(p, a->recvbuff, a->sendbuff, a->count * h.tsz, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  while (2 * h.p2 <= n)
    h.p2 *= 2, h.steps++;
  h.rem = n - h.p2;
  h.newrank = a->rank < 2 * h.rem ? (a->rank % 2 ? a->rank / 2 : -1) : a->rank - h.rem;
  h.chunk = p->chunk_bytes / h.tsz;
  h.nchunks = rcoll_chunk_count(a->count, h.chunk);
  for (size_t j = 0; j < h.nchunks; j++)
    plan_chunk(p, &h, j);
}

/* Each step pays a latency, a message per chunk, the whole vector's
 * transfer and its reduction; the fold and the hand-back each pay a step
 * more. Steps do not overlap (each needs the last one's result). Where
 * ranks of one node share its cores, every rank copies and adds the whole
 * vector at every step at once with all the others
 * (rcoll_cost_shared_bytes): without that, 64 KiB on 8 ranks on 2 cores
 * stayed with recursive doubling at 145 us where Rabenseifner took 94, and
 * 256 KiB on 4 ranks at 145 where Rabenseifner took 97 (shm processes,
 * medians of 3 alternating rounds); 16 KiB stays its (44 against 48 us on
 * 8 ranks, 12.5 against 14.1 on 4). */
static double cost(const rcoll_tuner_t *t, double m, size_t c) {
  double gamma = rcoll_cost_beta(t->prm.reduce_gbps), cs = fmin((double)c, m), time = 0;
  double k = rcoll_cost_chunks(m, c), share = rcoll_cost_shared_bytes(t);
  if (t->rhd_rem > 0) {
    rcoll_cost_link_t l = rcoll_cost_link(t, t->fold_cross, t->fold_share);
    time += 2 * (l.lat + k * rcoll_cost_msg_us(l, cs) + share * m * l.b) + share * m * gamma;
  }
  for (int s = 0; s < t->rhd_steps && s < RCOLL_TUNE_MAX_STEPS; s++) {
    rcoll_cost_link_t l = rcoll_cost_link(t, t->step_cross[s], t->step_share[s]);
    time += l.lat + k * rcoll_cost_msg_us(l, cs) + share * m * (l.b + gamma);
  }
  return time;
}

/* log2(p2) S each way and log2(p2) count reduced; a folded rank moves S
 * each way, and its helper S more each way and count more reduced. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  int n = a->nranks, r = a->rank, p2 = 1, k = 0;
  while (2 * p2 <= n)
    p2 *= 2, k++;
  int rem = n - p2, folded = r < 2 * rem && r % 2 == 0, helper = r < 2 * rem && r % 2 == 1;
  double s = rcoll_traffic_bytes(a), c = (double)a->count;
  double move = folded ? s : (k + helper) * s;
  rcoll_traffic_set(out, move, move, folded ? 0 : (k + helper) * c,
                    "log2(p2) S each way, log2(p2) count reduced (p2: largest power of 2 <= n); "
                    "a folded pair adds S each way");
}

RCOLL_ALGORITHM(allreduce_recdbl) = {
    .name = "recdbl",
    .coll = RCOLL_COLL_ALLREDUCE,
    .summary = "Recursive doubling: log2(n) swaps of the whole vector with rank ^ 2^s, for small vectors",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = 0,
    .tie_order = 9,
};
