/* Flat all-reduce: every rank writes its vector to its slot on the
 * communicator's flat board, a segment all ranks of one machine share
 * (lib/flat.h), and reads every other rank's from theirs once it is there,
 * summing all n in rank order ((x0 op x1) op x2) ... op x(n-1). One wait
 * per call whatever the rank count, where recursive doubling waits log2(n)
 * times and the star twice: with more ranks than cores, waiting for a
 * descheduled rank is what a small call costs. The price is that every
 * rank reads and reduces n vectors, so it is for small ones only, up to a
 * slot (RCOLL_FLAT_MAX bytes).
 *
 * The order is fixed, so every rank gets the same bits as the other
 * deterministic algorithms give (RCOLL_ALGO_DETERMINISTIC), and it is fast
 * where its cost says so (RCOLL_ALGO_AUTO).
 *
 * The plan is one step, RCOLL_STEP_BOARD; lib/flat.c runs it, and runs a
 * call the tuner gives to this algorithm outside a group without a plan at
 * all. No message moves, so deadlock freedom is the board's: a rank waits
 * only for peers to write the call it is in, and never for readers (flat.c
 * says why). */
#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  if (a->nranks == 1)
    rcoll_plan_copy(p, a->recvbuff, a->sendbuff, a->count * rcoll_type_size(a->dtype), RCOLL_NO_DEP,
                    RCOLL_NO_DEP);
  else
    rcoll_plan_board(p, a->recvbuff, a->sendbuff, a->count, a->dtype, a->op);
}

/* Only on one machine with a board, up to a slot. One latency (the write
 * seen by the last reader) plus, where cores are shared, the wait for a
 * descheduled rank once (tune_cost.h); none of the engine's per-message
 * overhead, since no plan runs (8 B, 2 ranks with a core each: 0.33-0.46
 * us against recursive doubling's 0.48-0.68); a copy in, n vectors read
 * and n - 1 reduced. A size above the slot is not taken (-1). */
static int applies(const rcoll_tuner_t *t) { return t->prm.flat_max > 0 && t->nnodes == 1; }

static double cost(const rcoll_tuner_t *t, double m, size_t c) {
  (void)c;
  if (m > (double)t->prm.flat_max)
    return -1;
  int n = t->nranks;
  rcoll_cost_link_t l = rcoll_cost_link(t, 0, 1);
  double shared = l.eng_us > RCOLL_COST_ENGINE_US ? l.eng_us - RCOLL_COST_ENGINE_US : 0;
  double gamma = rcoll_cost_beta(t->prm.reduce_gbps);
  return l.lat + shared + n * m * l.b + (n - 1) * m * gamma;
}

/* Each rank writes S to the board and reads the others' (n-1) S, reducing
 * (n-1) count. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  int n = a->nranks;
  double s = n == 1 ? 0 : rcoll_traffic_bytes(a);
  rcoll_traffic_set(out, s, (n - 1) * s, n > 1 ? (n - 1) * (double)a->count : 0,
                    "S written to the board, (n-1) S read from it and (n-1) count reduced");
}

RCOLL_ALGORITHM(allreduce_flat) = {
    .name = "flat",
    .coll = RCOLL_COLL_ALLREDUCE,
    .summary = "Every rank writes its vector to a shared board and sums all of them in rank order: 1 wait",
    .plan = plan,
    .cost = cost,
    .applies = applies,
    .traffic = traffic,
    .flags = RCOLL_ALGO_DETERMINISTIC | RCOLL_ALGO_AUTO,
    .tie_order = 1,
};
