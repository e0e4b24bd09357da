/* Plans of every algorithm in the table (lib/algo.h), built for 1..9 ranks on fake communicators (no
 * network) and checked three ways:
 *   - structure: dependencies point backwards; no receive-reduce is larger
 *     than a staging slot; for every pair (a, b) the sizes a plans to send
 *     to b are, in order, the sizes b plans to receive from a;
 *   - execution: the plans run in an in-memory simulator (lib/plan_sim.h) with
 *     unbuffered (rendezvous) connections, which proves them deadlock-free
 *     under the engine's rules, and with buffered ones;
 *   - results: element by element against sums computed here, and for the
 *     deterministic algorithms bit for bit against a float sum in rank order.
 * Chunks are tiny (8 doubles) so that every call has many of them, and one
 * case has more chunks than the engine's window of steps. The fake
 * communicators and the simulator are library code (lib/plan_world.h,
 * lib/plan_sim.h), which bench/rcoll_sched uses too. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "algo_ids.h"
#include "comm.h"
#include "plan_world.h"
#include "reduce.h"
#include "reduce_math.h"

/* Short names for the collectives; P2P is a send and a receive planned
 * together (each rank sends to the next and receives from the previous). */
enum coll {
  AR = RCOLL_COLL_ALLREDUCE,
  BC = RCOLL_COLL_BROADCAST,
  RD = RCOLL_COLL_REDUCE,
  AG = RCOLL_COLL_ALLGATHER,
  RS = RCOLL_COLL_REDUCE_SCATTER,
  P2P = RCOLL_COLL_SEND,
  A2A = RCOLL_COLL_ALLTOALL,
  GA = RCOLL_COLL_GATHER,
  SC = RCOLL_COLL_SCATTER,
};

typedef struct layout {
  int nodes;       /* ranks are spread over this many nodes ... */
  int interleaved; /* ... round robin (1) or in contiguous blocks (0) */
  int uneven;      /* the last node gets one rank more (when possible) */
} layout_t;

typedef rcoll_world_t world_t;

static int node_of(const layout_t *l, int n, int r) {
  int nodes = l->nodes < n ? l->nodes : n;
  if (l->interleaved)
    return r % nodes;
  if (l->uneven && nodes > 1) /* node k < nodes-1 holds per ranks, the last the rest */
    return r / (n / nodes) < nodes - 1 ? r / (n / nodes) : nodes - 1;
  int per = (n + nodes - 1) / nodes;
  return r / per;
}

static void world_init(world_t *w, int n, const layout_t *l, size_t comm_chunk, size_t plan_chunk,
                       int nslots) {
  int node[RCOLL_WORLD_MAX_RANKS];
  for (int r = 0; r < n; r++)
    node[r] = node_of(l, n, r);
  cr_assert_eq(rcoll_world_init(w, n, node, comm_chunk, plan_chunk, nslots), rcollSuccess);
}

static void world_free(world_t *w) { rcoll_world_free(w); }

/* Send and receive buffer elements per rank for count. */
static size_t send_elems(enum coll k, size_t count, int n) { return rcoll_world_send_elems((int)k, count, n); }
static size_t recv_elems(enum coll k, size_t count, int n) { return rcoll_world_recv_elems((int)k, count, n); }

static double input_f64(int r, size_t i) { return (double)((r + 1) * 1000 + (int)(i % 1013)); }

/* The expected element i of rank r's result (for the ranks that get one). */
static double expected_f64(enum coll k, int n, int root, int r, size_t count, size_t i) {
  double sum = 0;
  switch (k) {
  case AR: case RD:
    for (int q = 0; q < n; q++)
      sum += input_f64(q, i);
    return sum;
  case RS:
    for (int q = 0; q < n; q++)
      sum += input_f64(q, (size_t)r * count + i);
    return sum;
  case BC: return input_f64(root, i);
  case AG: return input_f64((int)(i / count), i % count);
  case P2P: return input_f64((r + n - 1) % n, i);
  case A2A: return input_f64((int)(i / count), (size_t)r * count + i % count);
  case GA: return input_f64((int)(i / count), i % count);
  case SC: return input_f64(root, (size_t)r * count + i);
  default: break;
  }
  return 0;
}

static int gets_result(enum coll k, int r, int root) { return (k != RD && k != GA) || r == root; }

/* Plans every rank (in place where asked), then fills each rank's input,
 * which the planners never read. */
/* For P2P, plan is the send's; the receive of the same family comes with it. */
static void plan_all(world_t *w, enum coll k, const rcoll_algorithm_t *plan, size_t count, int root,
                     int inplace, rcollDataType_t t, double (*input)(int, size_t)) {
  int n = w->n;
  if (k == P2P)
    cr_assert_not_null(rcoll_algorithm_find(RCOLL_COLL_RECV, rcoll_algorithm_family(plan)),
                       "%s: no receive to go with the send", plan->name);
  rcoll_world_call_t call = {plan, count, t, t == rcollInt64 ? rcollAvg : rcollSum, root, inplace};
  cr_assert_eq(rcoll_world_plan(w, &call), rcollSuccess, "%s: planning failed", plan->name);
  for (int r = 0; r < n; r++) {
    cr_assert(!w->plans[r]->failed, "rank %d: planning failed", r);
    void *in = (void *)w->args[r].sendbuff;
    for (size_t i = 0; i < send_elems(k, count, n); i++) {
      double v = input(r, i);
      if (t == rcollFloat64) ((double *)in)[i] = v;
      else if (t == rcollFloat32) ((float *)in)[i] = (float)v;
      else ((int64_t *)in)[i] = (int64_t)v;
    }
  }
}

/* The result buffer of rank r as planned (in-place reduce-scatter: its
 * block of the send buffer). */
static const char *result_of(world_t *w, int r) { return w->args[r].recvbuff; }

/* Structural invariants across all ranks' plans. */
static void check_structure(world_t *w, const char *what) {
  int n = w->n;
  for (int r = 0; r < n; r++) {
    const rcoll_plan_t *p = &w->comms[r]->plan;
    for (int i = 0; i < p->nsteps; i++) {
      const rcoll_step_t *st = &p->steps[i];
      for (int d = 0; d < 2; d++)
        cr_assert(st->dep[d] == RCOLL_NO_DEP || (st->dep[d] >= 0 && st->dep[d] < i),
                  "%s: rank %d step %d depends on %d", what, r, i, st->dep[d]);
      if (st->kind == RCOLL_STEP_RECV_REDUCE)
        cr_assert(st->bytes <= w->comms[r]->chunk_bytes, "%s: rank %d step %d reduces %zu bytes",
                  what, r, i, st->bytes);
      if (st->kind != RCOLL_STEP_COPY)
        cr_assert(st->peer >= 0 && st->peer < n && st->peer != r, "%s: rank %d step %d peer %d",
                  what, r, i, st->peer);
    }
  }
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) { /* the k-th send a -> b meets the k-th receive of b from a */
      const rcoll_plan_t *pa = &w->comms[a]->plan, *pb = &w->comms[b]->plan;
      int i = 0, j = 0;
      for (;;) {
        while (i < pa->nsteps && !(pa->steps[i].kind == RCOLL_STEP_SEND && pa->steps[i].peer == b))
          i++;
        while (j < pb->nsteps && !(pb->steps[j].kind != RCOLL_STEP_SEND &&
                                   pb->steps[j].kind != RCOLL_STEP_COPY && pb->steps[j].peer == a))
          j++;
        cr_assert_eq(i < pa->nsteps, j < pb->nsteps, "%s: %d sends to %d and %d receives differ in number",
                     what, a, b, b);
        if (i == pa->nsteps)
          break;
        cr_assert_eq(pa->steps[i].bytes, pb->steps[j].bytes,
                     "%s: %d -> %d: a send of %zu bytes meets a receive of %zu", what, a, b,
                     pa->steps[i].bytes, pb->steps[j].bytes);
        i++, j++;
      }
    }
}

static void run_sim(world_t *w, int zero_buffer, unsigned seed, const char *what) {
  static rcoll_sim_t s; /* large: keep it off the stack */
  rcoll_sim_init(&s, w->plans, w->n, zero_buffer, w->comms[0]->nslots, seed);
  cr_assert_eq(rcoll_sim_run(&s, zero_buffer ? 30 : 0), 0, "%s: %s", what, s.error);
}

typedef struct algo_case {
  const char *name;
  enum coll k;
  const rcoll_algorithm_t *plan;
} algo_case_t;

static algo_case_t case_of(const rcoll_algorithm_t *d) {
  return (algo_case_t){d->name, (enum coll)d->coll, d};
}

/* The table's algorithm of a collective by family name. */
static const rcoll_algorithm_t *algo_of(int coll, const char *name) {
  const rcoll_algorithm_t *d = rcoll_algorithm_find(coll, algo_id(name));
  cr_assert_not_null(d, "no %s algorithm for %s", name, rcoll_coll_name(coll));
  return d;
}

/* Plans, checks and runs one case at a root; float64 sums (int64 avg when
 * avg is set). */
static void run_case_at(const algo_case_t *ac, int n, const layout_t *l, size_t count, int inplace,
                        int zero_buffer, int avg, int root) {
  world_t w;
  world_init(&w, n, l, 64, 64, 2);
  char what[160];
  snprintf(what, sizeof what, "%s n=%d nodes=%d%s%s count=%zu root=%d%s%s", ac->name, n, l->nodes,
           l->interleaved ? " interleaved" : "", l->uneven ? " uneven" : "", count, root,
           inplace ? " in place" : "", zero_buffer ? " unbuffered" : " buffered");
  rcollDataType_t t = avg ? rcollInt64 : rcollFloat64;
  plan_all(&w, ac->k, ac->plan, count, root, inplace, t, input_f64);
  check_structure(&w, what);
  run_sim(&w, zero_buffer, (unsigned)(n * 7919 + count), what);
  for (int r = 0; r < n; r++) {
    if (!gets_result(ac->k, r, root))
      continue;
    const char *res = result_of(&w, r);
    for (size_t i = 0; i < recv_elems(ac->k, count, n); i++) {
      double want = expected_f64(ac->k, n, root, r, count, i);
      if (avg) { /* integer avg: the sum divided once by n */
        int64_t got = ((const int64_t *)res)[i], w64 = (int64_t)want / n;
        cr_assert_eq(got, w64, "%s avg: rank %d element %zu is %lld, want %lld", what, r, i,
                     (long long)got, (long long)w64);
      } else {
        double got = ((const double *)res)[i];
        cr_assert_eq(got, want, "%s: rank %d element %zu is %g, want %g", what, r, i, got, want);
      }
    }
  }
  world_free(&w);
}

/* The sweep's root: n-2, so that it is neither the first nor the last rank. */
static void run_case(const algo_case_t *ac, int n, const layout_t *l, size_t count, int inplace,
                     int zero_buffer, int avg) {
  run_case_at(ac, n, l, count, inplace, zero_buffer, avg, n > 2 ? n - 2 : 0);
}

static const layout_t layouts[] = {
    {1, 0, 0}, {2, 0, 0}, {3, 0, 0}, {2, 1, 0}, {3, 1, 0}, {2, 0, 1}, {64, 0, 0},
};
#define NLAYOUTS (sizeof layouts / sizeof layouts[0])

/* Every rank count 1..9, several counts, in and out of place, both
 * buffering modes; all layouts for the topology-aware algorithm. */
static void sweep(const algo_case_t *ac, int all_layouts) {
  for (int n = ac->k == P2P ? 2 : 1; n <= 9; n++) {
    size_t counts[] = {0, 1, 2, 7, (size_t)n + 1, 37, 1000};
    for (size_t li = 0; li < (all_layouts ? NLAYOUTS : 2); li++)
      for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
        for (int mode = 0; mode < 4; mode++)
          run_case(ac, n, &layouts[li], counts[ci], mode & 1, mode >> 1, 0);
    if (ac->k == AR || ac->k == RD || ac->k == RS) /* avg: finished exactly once */
      run_case(ac, n, &layouts[1], 37, 0, 1, 1);
  }
}

/* One test per algorithm of the table, so that a new algorithm file is
 * tested without being listed here. A receive is planned together with its
 * family's send (the P2P case), so it has no test of its own. */
#define MAX_ALGOS 64
ParameterizedTestParameters(plans, every_algorithm) {
  static int index[MAX_ALGOS];
  size_t n = 0;
  for (int i = 0; rcoll_algorithms[i] != NULL && n < MAX_ALGOS; i++)
    if (rcoll_algorithms[i]->coll != RCOLL_COLL_RECV)
      index[n++] = i;
  return cr_make_param_array(int, index, n);
}

ParameterizedTest(int *i, plans, every_algorithm, .timeout = 120) {
  const rcoll_algorithm_t *d = rcoll_algorithms[*i];
  algo_case_t ac = case_of(d);
  sweep(&ac, (d->flags & RCOLL_ALGO_TOPOLOGY) != 0);
}

Test(plans, the_table_has_every_collective) {
  int n = 0;
  for (int coll = 0; coll < RCOLL_COLL_NKINDS; coll++) {
    int fallbacks = 0;
    for (int i = 0; rcoll_algorithms[i] != NULL; i++)
      fallbacks += rcoll_algorithms[i]->coll == (rcoll_coll_kind_t)coll &&
                   (rcoll_algorithms[i]->flags & RCOLL_ALGO_FALLBACK);
    cr_assert_eq(fallbacks, 1, "%s: %d fallback algorithms, want exactly 1", rcoll_coll_name(coll),
                 fallbacks);
  }
  while (rcoll_algorithms[n] != NULL)
    n++;
  cr_assert_lt(n, MAX_ALGOS, "the parameterized test above sees only %d algorithms", MAX_ALGOS);
}

/* Every root of the rooted collectives: rotating the tree by the root
 * makes some subtrees wrap around the end of the root's buffer (binomial
 * gather and scatter), which the sweep's single root never does. */
Test(plans, every_root, .timeout = 120) {
  for (int i = 0; rcoll_algorithms[i] != NULL; i++) {
    const rcoll_algorithm_t *d = rcoll_algorithms[i];
    if (!rcoll_coll_rooted(d->coll))
      continue;
    algo_case_t ac = case_of(d);
    const size_t counts[] = {1, 3, 37};
    for (int n = 2; n <= 9; n++)
      for (int root = 0; root < n; root++)
        for (size_t ci = 0; ci < 3; ci++)
          run_case_at(&ac, n, &layouts[0], counts[ci], (root + (int)ci) & 1, 1, 0, root);
  }
}

/* More chunks than the engine looks at in one pass (its window of 512
 * steps): a plan that needed a step beyond the window to free an earlier
 * one would deadlock here. */
Test(plans, beyond_engine_window, .timeout = 240) {
  const int ns[] = {3, 4, 6};
  for (int i = 0; rcoll_algorithms[i] != NULL; i++) {
    const rcoll_algorithm_t *d = rcoll_algorithms[i];
    if (d->coll == RCOLL_COLL_SEND || d->coll == RCOLL_COLL_RECV)
      continue;
    algo_case_t ac = case_of(d);
    for (size_t k = 0; k < 3; k++)
      run_case(&ac, ns[k], &layouts[1], 8 * 1100, 0, 1, 0);
  }
}

/* Floats of mixed magnitudes and signs, so that the order of additions shows
 * in the rounding. */
static double input_mixed(int r, size_t i) {
  uint32_t h = (uint32_t)(r * 2654435761u) ^ (uint32_t)(i * 40503u + 17u);
  h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
  double m = (double)(h & 0xffffff) / (double)0x1000000 - 0.5;
  return (float)ldexp(m, (int)(h >> 27) - 8);
}

/* Rank-order sum ((x0 + x1) + x2) + ... in float, as the mode promises. */
static float rank_order_sum(int n, size_t i) {
  float acc = (float)input_mixed(0, i);
  for (int r = 1; r < n; r++)
    acc = acc + (float)input_mixed(r, i);
  return acc;
}

/* Runs an all-reduce of count floats; returns how many elements of rank 0's
 * result differ bit for bit from the rank-order sum. */
static size_t float_mismatches(const rcoll_algorithm_t *plan, int n, const layout_t *l, size_t chunk, size_t count) {
  world_t w;
  world_init(&w, n, l, 256, chunk, 2);
  plan_all(&w, AR, plan, count, 0, 0, rcollFloat32, input_mixed);
  run_sim(&w, 1, 99, "float sum");
  size_t bad = 0;
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < count; i++) {
      float got = ((const float *)w.recv[r])[i], want = rank_order_sum(n, i);
      bad += memcmp(&got, &want, sizeof got) != 0;
    }
  world_free(&w);
  return bad;
}

/* Every all-reduce that claims RCOLL_ALGO_DETERMINISTIC keeps the promise. */
Test(plans, deterministic_is_rank_order_bit_for_bit, .timeout = 120) {
  const size_t chunks[] = {64, 128, 256};
  int checked = 0;
  for (int i = 0; rcoll_algorithms[i] != NULL; i++) {
    const rcoll_algorithm_t *d = rcoll_algorithms[i];
    if (d->coll != RCOLL_COLL_ALLREDUCE || !(d->flags & RCOLL_ALGO_DETERMINISTIC))
      continue;
    checked++;
    for (int n = 2; n <= 9; n++)
      for (size_t li = 0; li < NLAYOUTS; li++)
        for (size_t c = 0; c < 3; c++)
          cr_assert_eq(float_mismatches(d, n, &layouts[li], chunks[c], 999), 0,
                       "%s n=%d layout %zu chunk %zu: not the rank-order sum", d->name, n, li, chunks[c]);
  }
  cr_assert_gt(checked, 0, "no deterministic all-reduce in the table");
  /* The check has teeth: orders other than rank order round differently. */
  cr_assert_gt(float_mismatches(algo_of(AR, "ring"), 5, &layouts[0], 64, 999), 0);
  cr_assert_gt(float_mismatches(algo_of(AR, "tree"), 5, &layouts[0], 64, 999), 0);
}

/* Reduce and reduce-scatter in deterministic mode give the same bits as the
 * deterministic all-reduce, at any root. */
Test(plans, deterministic_reduce_and_reduce_scatter_match, .timeout = 120) {
  for (int n = 2; n <= 7; n++) {
    size_t count = 301;
    for (int root = 0; root < n; root += n - 1 > 2 ? 2 : 1) {
      world_t w;
      world_init(&w, n, &layouts[2], 256, 128, 2);
      plan_all(&w, RD, algo_of(RD, "deterministic"), count, root, root & 1, rcollFloat32, input_mixed);
      run_sim(&w, 1, 5, "deterministic reduce");
      for (size_t i = 0; i < count; i++) {
        float got = ((const float *)w.recv[root])[i], want = rank_order_sum(n, i);
        cr_assert(memcmp(&got, &want, sizeof got) == 0, "reduce n=%d root %d element %zu", n, root, i);
      }
      world_free(&w);
    }
    world_t w;
    world_init(&w, n, &layouts[3], 256, 64, 2);
    plan_all(&w, RS, algo_of(RS, "deterministic"), count, 0, n % 2, rcollFloat32, input_mixed);
    run_sim(&w, 1, 6, "deterministic reduce-scatter");
    for (int r = 0; r < n; r++) {
      const float *res = (const float *)result_of(&w, r);
      for (size_t i = 0; i < count; i++) {
        float want = rank_order_sum(n, (size_t)r * count + i);
        cr_assert(memcmp(&res[i], &want, sizeof want) == 0, "reduce-scatter n=%d rank %d element %zu",
                  n, r, i);
      }
    }
    world_free(&w);
  }
}

/* Recursive doubling at 16 ranks (four doubling steps; the sweep above
 * stops at 9), and at 10..15, where 2..7 pairs fold. */
Test(plans, recdbl_up_to_16_ranks, .timeout = 120) {
  algo_case_t ac = case_of(algo_of(AR, "recdbl"));
  for (int n = 10; n <= 16; n++) {
    size_t counts[] = {0, 1, 7, (size_t)n - 1, (size_t)n + 1, 1000};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
      for (int mode = 0; mode < 4; mode++)
        run_case(&ac, n, &layouts[mode & 2 ? 3 : 0], counts[ci], mode & 1, mode >> 1, 0);
    run_case(&ac, n, &layouts[1], 37, 1, 1, 1);
  }
}

/* Inputs that round and that include both zeros: element i of rank r,
 * rounded to the type (integers: a scaled integer part). Every third
 * element is a zero on every rank, +0 or -0 as a hash of (r, i) says, so
 * that max and min must choose between zeros. */
static void store_input(void *p, rcollDataType_t t, int r, size_t i) {
  double m = input_mixed(r, i), v = i % 3 == 0 ? (m < 0 ? -0.0 : 0.0)
                                   : i % 3 == 1 ? 1.0 + m /* products stay finite */
                                                : ldexp(m, (int)(i % 7));
  float f = (float)v;
  int64_t k = (int64_t)(v * 1e6);
  uint16_t h;
  uint8_t b;
  switch (t) {
  case rcollFloat64: memcpy(p, &v, 8); break;
  case rcollFloat32: memcpy(p, &f, 4); break;
  case rcollFloat16: h = rcoll_float_to_half(f); memcpy(p, &h, 2); break;
  case rcollBfloat16: h = rcoll_float_to_bf16(f); memcpy(p, &h, 2); break;
  case rcollFloat8e4m3: b = rcoll_float_to_e4m3(f); memcpy(p, &b, 1); break;
  case rcollFloat8e5m2: b = rcoll_float_to_e5m2(f); memcpy(p, &b, 1); break;
  default: memcpy(p, &k, rcoll_type_size(t)); break; /* little endian: the low bytes */
  }
}

/* Recursive doubling reduces each pair of partial results on both ranks of
 * the pair, in opposite orders, and a folded rank gets its helper's copy:
 * every rank must still end with the same bits, for every type and op, in
 * place or not, with fewer elements than ranks. Max and min must moreover
 * be the rank-order reduction bit for bit (+0 and -0 included): they do not
 * round, so any order gives the same bits. */
static void recdbl_same_bits(int n, rcollDataType_t t, rcollRedOp_t op, size_t count, int inplace) {
  world_t w;
  world_init(&w, n, &layouts[0], 64, 64, 2);
  rcoll_world_call_t call = {algo_of(AR, "recdbl"), count, t, op, 0, inplace};
  cr_assert_eq(rcoll_world_plan(&w, &call), rcollSuccess);
  size_t tsz = rcoll_type_size(t);
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < count; i++)
      store_input((char *)w.args[r].sendbuff + i * tsz, t, r, i);
  char *want = calloc(count + 1, tsz);
  for (size_t i = 0; i < count; i++) { /* inputs are set: the rank-order max or min */
    store_input(want + i * tsz, t, 0, i);
    for (int r = 1; r < n; r++) {
      char x[8];
      store_input(x, t, r, i);
      rcoll_reduce(want + i * tsz, want + i * tsz, x, 1, t, op == rcollMin ? rcollMin : rcollMax);
    }
  }
  char what[96];
  snprintf(what, sizeof what, "recdbl n=%d %s %s count=%zu%s", n, rcoll_type_name(t), rcoll_op_name(op),
           count, inplace ? " in place" : "");
  run_sim(&w, 1, (unsigned)n, what);
  for (int r = 0; r < n; r++) {
    const char *got = w.args[r].recvbuff, *first = w.args[0].recvbuff;
    for (size_t i = 0; i < count; i++) {
      cr_assert(memcmp(got + i * tsz, first + i * tsz, tsz) == 0, "%s: rank %d element %zu differs from rank 0's",
                what, r, i);
      cr_assert(!(op == rcollMax || op == rcollMin) || memcmp(got + i * tsz, want + i * tsz, tsz) == 0,
                "%s: rank %d element %zu is not the rank-order %s", what, r, i, rcoll_op_name(op));
    }
  }
  free(want);
  world_free(&w);
}

Test(plans, recdbl_every_rank_gets_the_same_bits, .timeout = 120) {
  const int ns[] = {2, 3, 4, 5, 6, 7, 9, 16};
  for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
    for (int t = 0; t < rcollNumTypes; t++)
      for (int op = 0; op < rcollNumOps; op++) {
        size_t counts[] = {1, (size_t)ns[k] - 1, 37};
        for (size_t c = 0; c < 3; c++)
          recdbl_same_bits(ns[k], (rcollDataType_t)t, (rcollRedOp_t)op, counts[c], (int)c % 2);
      }
}
