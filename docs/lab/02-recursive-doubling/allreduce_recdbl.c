/* Recursive-doubling all-reduce: lab exercise 02 (README.md next to this
 * file). Fill in plan() and traffic() where the TODOs are; the rest builds
 * as it is. Grade it with `make lab-check EX=2`.
 *
 * The idea: with p2 = 2^k ranks, at step s (s = 0 .. k-1) every rank swaps
 * its whole partial result with partner rank ^ 2^s and adds the partner's
 * copy into its own. After k steps every rank holds the sum of all.
 * Rank counts that are not a power of two fold first (see the README). */
#include <math.h>

#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

/* A suggestion for the planner's state; change it as you like. */
typedef struct recdbl {
  const rcoll_coll_args_t *a;
  size_t tsz, ce, nchunks;     /* element size, elements per chunk, chunks */
  int p2, rem, steps, newrank; /* newrank -1: this rank folded into rank + 1 */
} recdbl_t;

/* The real rank of renumbered rank q, when even ranks r < 2 rem fold into
 * r + 1: renumbered q < rem is real 2q + 1, the others are q + rem. */
static int real_rank(const recdbl_t *h, int q) { return q < h->rem ? 2 * q + 1 : q + h->rem; }

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  recdbl_t h = {.a = a, .tsz = rcoll_type_size(a->dtype), .p2 = 1};
  if (a->nranks == 1) { /* one rank: the result is the input (avg divides by 1) */
    rcoll_plan_copy(p, a->recvbuff, a->sendbuff, a->count * h.tsz, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  h.ce = p->chunk_bytes / h.tsz; /* a receive-reduce may hold at most one chunk */
  h.nchunks = (a->count + h.ce - 1) / h.ce;
  (void)real_rank;
  /* TODO 1: p2, steps (= log2 p2), rem = n - p2, and this rank's newrank.
   * TODO 2: for each chunk:
   *   - a folded rank (even, r < 2 rem) sends its chunk to r + 1 and later
   *     receives the result back from r + 1 (rcoll_plan_send, rcoll_plan_recv);
   *   - a helper (odd, r < 2 rem) first adds the folded rank's chunk
   *     (rcoll_plan_recv_reduce from r - 1), and at the end sends the result back;
   *   - every remaining rank runs the k doubling steps: send the partial
   *     result to real_rank(newrank ^ (1 << s)), receive-reduce the partner's.
   *     Do not add into the buffer you are sending from in the same step:
   *     use rcoll_plan_scratch_get() pieces (README: "buffers").
   *     Mark the last reduction of each element with RCOLL_STEP_FINISH. */
}

/* Each step pays a latency and moves the whole vector, then adds it
 * (given: the tuner's model, not graded). */
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

/* What rank a->rank sends and receives (bytes) and reduces (elements), by
 * the formula: S = rcoll_traffic_bytes(a), count = a->count. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  /* TODO 3: the formula (README), for folded ranks, helpers and the others. */
  rcoll_traffic_set(out, 0, 0, 0 * (double)a->count, "TODO: the formula in words");
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
