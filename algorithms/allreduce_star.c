/* Star all-reduce: every rank sends its vector to rank 0, which reduces them
 * in rank order, ((x0 op x1) op x2) op ... op x(n-1), and sends the result
 * back to each. Two message latencies whatever the rank count, where
 * recursive doubling needs log2(n) (two more when n is no power of two),
 * at the price of rank 0 receiving and sending n-1 whole vectors: for small
 * vectors only.
 *
 * Where ranks outnumber cores, what a small call costs is how often a rank
 * must wait for another to be scheduled: here twice (rank 0 for the
 * others' vectors, the others for the result), however many ranks; each
 * step of recursive doubling waits for its partner once more.
 *
 * The order is fixed, so the results are bit-identical to the other
 * deterministic algorithms' (RCOLL_ALGO_DETERMINISTIC): rank 0 computes
 * partial op x_q, the same operands allreduce_deterministic.c gives rank q.
 * Unlike those it is quick where its cost says so (RCOLL_ALGO_AUTO): the
 * tuner weighs it with the rest, and RCOLL_DETERMINISTIC=1 gets small
 * vectors in two latencies instead of the chain's 2(n-1).
 *
 * Deadlock freedom: the links q -> 0 carry only inputs and 0 -> q only
 * results, in chunk order on both ends. Rank 0's reductions of a chunk wait
 * for each other in rank order and its sends for the last of them; a rank
 * q waits only for its own send before taking the result. No wait points
 * from an earlier chunk to a later one, so the earliest unfinished chunk
 * always completes, with or without buffering.
 *
 * Buffers: rank 0 accumulates in recvbuff, starting from sendbuff (in place
 * the two are one buffer, which reduction allows: each element is read
 * before it is written); the others receive the result into recvbuff after
 * their send from sendbuff is done, so in place needs nothing more. */
#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks, r = a->rank;
  size_t tsz = rcoll_type_size(a->dtype), bytes = a->count * tsz;
  const char *sb = a->sendbuff;
  char *rb = a->recvbuff;
  if (n == 1) {
    rcoll_plan_copy(p, rb, sb, bytes, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  size_t chunk = p->chunk_bytes, nchunks = rcoll_chunk_count(bytes, chunk);
  for (size_t j = 0; j < nchunks; j++) {
    size_t off = j * chunk, len = bytes - off < chunk ? bytes - off : chunk;
    if (r != 0) {
      int sent = rcoll_plan_send(p, 0, sb + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
      rcoll_plan_recv(p, 0, rb + off, len, sent, RCOLL_NO_DEP);
      continue;
    }
    int acc = RCOLL_NO_DEP;
    for (int q = 1; q < n; q++)
      acc = rcoll_plan_recv_reduce(p, q, rb + off, q == 1 ? sb + off : rb + off, len / tsz, a->dtype, a->op,
                                   q == n - 1 ? RCOLL_STEP_FINISH : 0, acc, RCOLL_NO_DEP);
    for (int q = 1; q < n; q++)
      rcoll_plan_send(p, q, rb + off, len, acc, RCOLL_NO_DEP);
  }
}

/* Two latencies; rank 0's n-1 receptions (each reduced) and n-1 sends go
 * one after the other. Where cores are shared, the wait for a descheduled
 * rank (the shared part of a message's overhead, tune_cost.h) is paid once
 * per phase, not per message: rank 0 finds every vector that has arrived
 * when it runs, and so does each rank the result; but its bytes share the
 * cores with its n-1 peers' copies (rcoll_cost_shared_bytes). Without that
 * (once recursive doubling paid for its bytes) the star took vectors it
 * loses: 8 ranks on 2 cores, 4 KiB 44.6 us against recursive doubling's
 * 33.2; 6 ranks 32 KiB 80.0 against the tree's 52.2. */
static double cost(const rcoll_tuner_t *t, double m, size_t c) {
  int n = t->nranks;
  rcoll_cost_link_t l = rcoll_cost_link(t, t->nnodes > 1, 1);
  double shared = l.eng_us > RCOLL_COST_ENGINE_US ? l.eng_us - RCOLL_COST_ENGINE_US : 0;
  l.eng_us -= shared;
  double gamma = rcoll_cost_beta(t->prm.reduce_gbps), k = rcoll_cost_chunks(m, c);
  double cs = m < (double)c ? m : (double)c, share = rcoll_cost_shared_bytes(t);
  return 2 * (l.lat + shared) + 2 * (n - 1) * k * rcoll_cost_msg_us(l, cs) + share * (n - 1) * m * (2 * l.b + gamma);
}

/* Rank 0 takes in and sends out (n-1) S and reduces (n-1) count; the
 * others send S and receive S. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  int n = a->nranks, hub = a->rank == 0;
  double s = rcoll_traffic_bytes(a), move = n == 1 ? 0 : hub ? (n - 1) * s : s;
  rcoll_traffic_set(out, move, move, hub && n > 1 ? (n - 1) * (double)a->count : 0,
                    "S each way, and on rank 0 (n-1) S each way and (n-1) count reduced");
}

RCOLL_ALGORITHM(allreduce_star) = {
    .name = "star",
    .coll = RCOLL_COLL_ALLREDUCE,
    .summary = "Rank 0 reduces every vector in rank order and sends the result back: 2 latencies",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = RCOLL_ALGO_DETERMINISTIC | RCOLL_ALGO_AUTO,
    .tie_order = 10,
};
