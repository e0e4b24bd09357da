/* What bench/rcoll_sched shows, pinned: every algorithm's real plans (built
 * on fake communicators, lib/plan_world.h) move per rank what its formula
 * (rcoll_algorithm_t.traffic) says, at 2..8 ranks, every root, and for the
 * topology-aware ones every block placement; and the replay of plans in
 * time (lib/plan_replay.h) agrees with the tuner's closed forms where both
 * model the same thing. Each check has a counterpart that must fail: a
 * formula off by one element, plans that do not match. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "algo.h"
#include "algo_ids.h"
#include "comm.h"
#include "plan_replay.h"
#include "plan_world.h"
#include "reduce.h"
#include "tuner.h"

/* Exact case: every split is even. 161280 = 840 x 192 elements is a
 * multiple of every n <= 8 and of its powers of two, and with 192-element
 * chunks each node's shard of the hierarchical algorithm is whole chunks
 * whose pieces split evenly across 2..4 nodes. */
#define EVEN_COUNT 161280
#define EVEN_CHUNK (192 * 4)

typedef struct counts {
  int sends, recvs, reduces; /* steps of each kind */
} counts_t;

static counts_t count_steps(const rcoll_plan_t *p) {
  counts_t c = {0, 0, 0};
  for (int i = 0; i < p->nsteps; i++) {
    c.sends += p->steps[i].kind == RCOLL_STEP_SEND;
    c.recvs += p->steps[i].kind == RCOLL_STEP_RECV || p->steps[i].kind == RCOLL_STEP_RECV_REDUCE;
    c.reduces += p->steps[i].kind == RCOLL_STEP_RECV_REDUCE;
  }
  return c;
}

/* Ranks in blocks on `nodes` nodes, as a launcher places them. */
static void plan_world(rcoll_world_t *w, const rcoll_algorithm_t *d, int n, int nodes, size_t count,
                       size_t chunk, int root) {
  int node[RCOLL_WORLD_MAX_RANKS], per = (n + nodes - 1) / nodes;
  for (int r = 0; r < n; r++)
    node[r] = r / per;
  cr_assert_eq(rcoll_world_init(w, n, node, chunk, chunk, 2), rcollSuccess);
  rcoll_world_call_t call = {d, count, rcollFloat32, rcollSum, root, 0};
  cr_assert_eq(rcoll_world_plan(w, &call), rcollSuccess, "%s: planning failed", d->name);
}

/* Rank by rank, the plans' totals against the formula: within `slack`
 * elements per message (0: exactly, up to rounding of the formula). */
static void check_totals(const rcoll_algorithm_t *d, int n, int nodes, size_t count, size_t chunk,
                         int root, double slack) {
  rcoll_world_t w;
  plan_world(&w, d, n, nodes, count, chunk, root);
  for (int r = 0; r < n; r++) {
    rcoll_traffic_t got, want;
    rcoll_world_totals(&w, r, &got);
    cr_assert_eq(rcoll_world_formula(&w, d, r, &want), 0, "%s: no formula", d->name);
    counts_t c = count_steps(w.plans[r]);
    double tsz = 4, eps = 1e-6;
    const char *what = rcoll_coll_name(d->coll);
    cr_assert_leq(fabs(got.sent - want.sent), slack * (c.sends + 2) * tsz + eps,
                  "%s %s n=%d nodes=%d count=%zu root=%d rank %d: sent %.0f bytes, formula (%s) %.2f",
                  what, d->name, n, nodes, count, root, r, got.sent, want.formula, want.sent);
    cr_assert_leq(fabs(got.received - want.received), slack * (c.recvs + 2) * tsz + eps,
                  "%s %s n=%d nodes=%d count=%zu root=%d rank %d: received %.0f bytes, formula (%s) %.2f",
                  what, d->name, n, nodes, count, root, r, got.received, want.formula, want.received);
    cr_assert_leq(fabs(got.reduced - want.reduced), slack * (c.reduces + 2) + eps,
                  "%s %s n=%d nodes=%d count=%zu root=%d rank %d: reduced %.0f elements, formula (%s) %.2f",
                  what, d->name, n, nodes, count, root, r, got.reduced, want.formula, want.reduced);
  }
  rcoll_world_free(&w);
}

/* Every placement in blocks for a topology-aware algorithm, every root for
 * a rooted collective; uneven sizes within an element per message. */
static void sweep(const rcoll_algorithm_t *d) {
  int rooted = rcoll_coll_rooted(d->coll);
  for (int n = 2; n <= 8; n++) {
    int max_nodes = (d->flags & RCOLL_ALGO_TOPOLOGY) ? 4 : 1;
    for (int nodes = 1; nodes <= max_nodes && nodes <= n; nodes++)
      for (int root = 0; root < (rooted ? n : 1); root++) {
        check_totals(d, n, nodes, EVEN_COUNT, EVEN_CHUNK, root, 0);
        check_totals(d, n, nodes, 0, 64, root, 0);
        const size_t uneven[] = {1, 7, 1001, 4099};
        for (size_t k = 0; k < 4; k++)
          check_totals(d, n, nodes, uneven[k], 64, root, 1);
      }
  }
}

#define MAX_ALGOS 64
ParameterizedTestParameters(sched, totals_match_formula) {
  static int index[MAX_ALGOS];
  size_t n = 0;
  for (int i = 0; rcoll_algorithms[i] != NULL && n < MAX_ALGOS; i++)
    if (rcoll_algorithms[i]->coll != RCOLL_COLL_RECV) /* planned with its send */
      index[n++] = i;
  return cr_make_param_array(int, index, n);
}

ParameterizedTest(int *i, sched, totals_match_formula, .timeout = 120) { sweep(rcoll_algorithms[*i]); }

Test(sched, every_algorithm_brings_a_formula) {
  for (int i = 0; rcoll_algorithms[i] != NULL; i++) {
    const rcoll_algorithm_t *d = rcoll_algorithms[i];
    cr_expect_not_null(d->traffic, "%s %s: no .traffic formula in its descriptor", rcoll_coll_name(d->coll),
                       d->name);
  }
}

/* The check has teeth: an element more per rank, on a size that splits
 * evenly, is caught. */
Test(sched, a_formula_off_by_an_element_is_caught) {
  rcoll_world_t w;
  plan_world(&w, rcoll_algorithm_find(RCOLL_COLL_ALLREDUCE, ALGO(ring)), 4, 1, EVEN_COUNT, EVEN_CHUNK, 0);
  rcoll_traffic_t got, want;
  rcoll_world_totals(&w, 1, &got);
  rcoll_world_formula(&w, rcoll_algorithm_find(RCOLL_COLL_ALLREDUCE, ALGO(ring)), 1, &want);
  cr_assert_eq(got.sent, want.sent);
  cr_assert_neq(got.sent, want.sent + 4);
  cr_assert_eq(got.sent, 2.0 * 3 / 4 * EVEN_COUNT * 4, "ring all-reduce: 2(n-1)/n S");
  rcoll_world_free(&w);
}

/* ------------------------------------------------------------ replay */

static rcoll_tuner_t *tuner_of(const rcoll_world_t *w) {
  rcoll_tune_params_t prm = {.intra = rcoll_tune_default_link("shm"),
                             .inter = rcoll_tune_default_link("socket"),
                             .reduce_gbps = 8, .max_chunk = 4 << 20, .allowed = ~0u, .window = 4};
  rcoll_tuner_t *t = malloc(sizeof *t);
  cr_assert_not_null(t);
  cr_assert_eq(rcoll_tuner_setup(t, &w->comms[0]->topo, &prm), rcollSuccess);
  return t;
}

/* Replays a world's plans; returns the time in us. */
static double replay_time(rcoll_world_t *w, const rcoll_tuner_t *t) {
  rcoll_replay_t rp;
  cr_assert_eq(rcoll_replay_run(&rp, w->plans, w->n, t), 0, "%s", rp.error);
  double total = rp.total;
  rcoll_replay_free(&rp);
  return total;
}

/* One message each way: latency, overhead and transfer, as the tuner's
 * point-to-point cost says, on one node and across two. */
Test(sched, replay_of_one_message_is_the_tuners_cost) {
  const rcoll_algorithm_t *send = rcoll_algorithm_find(RCOLL_COLL_SEND, ALGO(p2p));
  for (int nodes = 1; nodes <= 2; nodes++)
    for (size_t count = 1; count <= (1 << 20); count *= 32) {
      rcoll_world_t w;
      plan_world(&w, send, 2, nodes, count, 4 << 20, 0);
      rcoll_tuner_t *t = tuner_of(&w);
      double want = rcoll_tune_predict(t, RCOLL_COLL_SEND, ALGO(p2p), count * 4, 4 << 20);
      cr_assert_float_eq(replay_time(&w, t), want, 1e-9 * want, "count %zu nodes %d", count, nodes);
      free(t);
      rcoll_world_free(&w);
    }
}

/* Ring all-reduce with one chunk per segment: 2(n-1) steps of latency,
 * overhead and a segment's transfer, plus n-1 reductions, both ways. */
Test(sched, replay_of_the_ring_is_the_tuners_ring) {
  const rcoll_algorithm_t *ring = rcoll_algorithm_find(RCOLL_COLL_ALLREDUCE, ALGO(ring));
  for (int n = 2; n <= 8; n++) {
    rcoll_world_t w;
    plan_world(&w, ring, n, 1, (size_t)n * 1024, 4096, 0);
    rcoll_tuner_t *t = tuner_of(&w);
    double want = rcoll_tune_predict(t, RCOLL_COLL_ALLREDUCE, ALGO(ring), (size_t)n * 4096, 4096);
    cr_assert_float_eq(replay_time(&w, t), want, 1e-9 * want, "n=%d", n);
    free(t);
    rcoll_world_free(&w);
  }
}

/* In unit steps, a rank does one step per column, after what it waits for
 * and a receive after its send: the drawing's columns. */
Test(sched, unit_steps_are_dependency_order) {
  for (int i = 0; rcoll_algorithms[i] != NULL; i++) {
    const rcoll_algorithm_t *d = rcoll_algorithms[i];
    if (d->coll == RCOLL_COLL_RECV)
      continue;
    rcoll_world_t w;
    plan_world(&w, d, 6, 2, 1000, 256, 1);
    rcoll_replay_t rp;
    cr_assert_eq(rcoll_replay_run(&rp, w.plans, w.n, NULL), 0, "%s: %s", d->name, rp.error);
    for (int r = 0; r < w.n; r++) {
      const rcoll_plan_t *p = w.plans[r];
      double last = -1;
      for (int k = 0; k < p->nsteps; k++) {
        const rcoll_step_t *st = &p->steps[k];
        double s = rp.start[rp.base[r] + k];
        for (int j = 0; j < 2; j++)
          cr_assert(st->dep[j] == RCOLL_NO_DEP || s >= rp.end[rp.base[r] + st->dep[j]],
                    "%s rank %d step %d starts before its dependency", d->name, r, k);
        if (!rcoll_step_is_join(st))
          cr_assert_neq(s, last, "%s rank %d: two steps in column %g", d->name, r, s);
        last = rcoll_step_is_join(st) ? last : s;
      }
    }
    rcoll_replay_free(&rp);
    rcoll_world_free(&w);
  }
}

/* Plans that do not match are refused, not replayed. */
Test(sched, replay_refuses_plans_that_do_not_match) {
  rcoll_world_t w;
  plan_world(&w, rcoll_algorithm_find(RCOLL_COLL_ALLREDUCE, ALGO(ring)), 3, 1, 300, 64, 0);
  w.plans[0]->nsteps--; /* rank 0 forgets its last receive */
  rcoll_replay_t rp;
  cr_assert_eq(rcoll_replay_run(&rp, w.plans, w.n, NULL), -1);
  cr_assert(strstr(rp.error, "sends") != NULL, "%s", rp.error);
  rcoll_replay_free(&rp);
  w.plans[0]->nsteps++;
  rcoll_world_free(&w);
}
