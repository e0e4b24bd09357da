/* The tuner (lib/tuner.c): RCOLL_ALGO parsing, the settings that adjust the
 * model, and the shape of its choices on model topologies: latency-bound
 * algorithms for small vectors, bandwidth-bound ones for large, the
 * hierarchical one only on several nodes of several ranks, predicted times
 * that grow with size, deterministic mode, and fallbacks. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo_ids.h"
#include "config.h"
#include "error.h"
#include "topo.h"
#include "tuner.h"

#define BIT(a) (1u << (a))
#define P2P BIT(ALGO(p2p))

Test(tuner, parse_algo_lists) {
  unsigned m;
  cr_assert_eq(rcoll_algo_parse("", &m), rcollSuccess);
  unsigned autom = m;
  cr_assert(autom & BIT(ALGO(ring)) && autom & BIT(ALGO(hier)) && autom & P2P);
  cr_assert(!(autom & BIT(ALGO(deterministic))), "auto never picks deterministic by itself");
  cr_assert_eq(rcoll_algo_parse("ring", &m), rcollSuccess);
  cr_assert_eq(m, BIT(ALGO(ring)) | P2P);
  cr_assert_eq(rcoll_algo_parse(" Ring , TREE,,", &m), rcollSuccess);
  cr_assert_eq(m, BIT(ALGO(ring)) | BIT(ALGO(tree)) | P2P);
  cr_assert_eq(rcoll_algo_parse("deterministic", &m), rcollSuccess);
  cr_assert_eq(m, BIT(ALGO(deterministic)) | P2P);
  cr_assert_eq(rcoll_algo_parse("^tree", &m), rcollSuccess);
  cr_assert_eq(m, autom & ~BIT(ALGO(tree)));
  cr_assert_eq(rcoll_algo_parse("^ring,hier", &m), rcollSuccess);
  cr_assert_eq(m, autom & ~BIT(ALGO(ring)) & ~BIT(ALGO(hier)));
  m = 12345;
  cr_assert_eq(rcoll_algo_parse("ring,bogus", &m), rcollInvalidArgument);
  cr_assert_eq(rcoll_algo_parse("p2p", &m), rcollInvalidArgument);
  cr_assert_eq(m, 12345u, "the output is untouched on error");
}

/* A model of nranks on nnodes (in blocks; sizes[] when given) with shm
 * inside nodes and a slower network between them. */
static rcoll_tuner_t *model_at(int nranks, int nnodes, const int *sizes, const char *algo, int det,
                              double inter_us) {
  char ids[64][16];
  for (int r = 0, k = 0, left = sizes ? sizes[0] : 0; r < nranks; r++) {
    if (sizes && left == 0)
      left = sizes[++k];
    snprintf(ids[r], sizeof ids[r], "n%d", sizes ? k : r * nnodes / nranks);
    left--;
  }
  rcoll_topo_t topo;
  cr_assert_eq(rcoll_topo_build(&topo, ids[0], sizeof ids[0], nranks, 0), rcollSuccess);
  cr_assert_eq(topo.nnodes, nnodes);
  rcoll_tune_params_t prm = {.intra = rcoll_tune_default_link("shm"),
                             .inter = rcoll_tune_default_link("socket"), .reduce_gbps = 8,
                             .max_chunk = 4 << 20, .deterministic = det};
  prm.inter.alpha_us = inter_us;
  cr_assert_eq(rcoll_algo_parse(algo, &prm.allowed), rcollSuccess);
  rcoll_tuner_t *t = malloc(sizeof *t);
  cr_assert_eq(rcoll_tuner_setup(t, &topo, &prm), rcollSuccess);
  rcoll_topo_free(&topo);
  return t;
}

static rcoll_tuner_t *model(int nranks, int nnodes, const int *sizes, const char *algo, int det) {
  return model_at(nranks, nnodes, sizes, algo, det, 20);
}

static int is_one_of(int a, unsigned set) { return (set >> a) & 1; }

Test(tuner, small_vectors_pick_latency_algorithms_large_pick_bandwidth) {
  unsigned latency = BIT(ALGO(tree)) | BIT(ALGO(rabenseifner)) | BIT(ALGO(hier)) | BIT(ALGO(recdbl));
  unsigned bandwidth = BIT(ALGO(ring)) | BIT(ALGO(rabenseifner)) | BIT(ALGO(hier));
  for (int n = 8; n <= 32; n *= 2) {
    rcoll_tuner_t *t = model(n, 1, NULL, "", 0);
    rcoll_tune_choice_t s = rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 8);
    rcoll_tune_choice_t l = rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 256 << 20);
    cr_assert(is_one_of(s.algo, latency) && s.algo != ALGO(ring), "n=%d: 8 B -> %s", n,
              rcoll_algo_name(s.algo));
    cr_assert(is_one_of(l.algo, bandwidth), "n=%d: 256 MiB -> %s", n, rcoll_algo_name(l.algo));
    /* The ring's 2(n-1) latencies lose to log2 n for 8 bytes by a margin. */
    cr_assert_lt(s.time_us * 1.5, rcoll_tune_best(t, RCOLL_COLL_ALLREDUCE, ALGO(ring), 8).time_us);
    cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_BROADCAST, 8).algo, ALGO(tree));
    cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_BROADCAST, 256 << 20).algo, ALGO(chain));
    free(t);
  }
}

Test(tuner, hier_only_on_several_nodes_of_several_ranks) {
  const int uneven[] = {3, 5};
  struct { int n, nodes; const int *sizes; int applies; } cases[] = {
      {8, 1, NULL, 0}, {8, 8, NULL, 0}, {8, 2, uneven, 0}, {8, 2, NULL, 1}, {12, 3, NULL, 1},
      {4, 2, NULL, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rcoll_tuner_t *t = model(cases[i].n, cases[i].nodes, cases[i].sizes, "", 0);
    cr_assert_eq(rcoll_tune_applies(t, RCOLL_COLL_ALLREDUCE, ALGO(hier)), cases[i].applies,
                 "case %zu", i);
    for (size_t b = 8; b <= (1u << 30); b *= 8) {
      rcoll_tune_choice_t c = rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, b);
      cr_assert(c.algo != ALGO(hier) || cases[i].applies, "case %zu, %zu B: hier chosen", i, b);
    }
    /* Forcing hier where it does not apply falls back to the default. */
    free(t);
    t = model(cases[i].n, cases[i].nodes, cases[i].sizes, "hier", 0);
    rcoll_tune_choice_t c = rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 1 << 20);
    cr_assert_eq(c.algo, cases[i].applies ? ALGO(hier) : ALGO(ring), "case %zu", i);
    free(t);
  }
  /* Where the network is the bottleneck, large vectors go hierarchical:
   * only 1/L of the data crosses per rank, against 2(n-1)/n for the ring. */
  rcoll_tuner_t *t = model(8, 2, NULL, "", 0);
  cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 64 << 20).algo, ALGO(hier));
  free(t);
}

Test(tuner, predicted_times_grow_with_size) {
  const int uneven[] = {2, 3};
  rcoll_tuner_t *ts[] = {model(1, 1, NULL, "", 0), model(2, 1, NULL, "", 0), model(5, 2, uneven, "", 0),
                         model(8, 2, NULL, "", 0), model(9, 9, NULL, "", 0), model(12, 3, NULL, "", 0)};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
    for (int coll = 0; coll < RCOLL_COLL_NKINDS; coll++)
      for (int a = 0; a < rcoll_algo_family_count(); a++) {
        if (!rcoll_tune_applies(ts[i], coll, a))
          continue;
        double prev = 0, prev_fixed = 0;
        for (size_t b = 1; b <= (1ull << 31); b = b * 3 / 2 + 1) {
          double best = rcoll_tune_best(ts[i], coll, a, b).time_us;
          double fixed = rcoll_tune_predict(ts[i], coll, a, b, 1 << 20);
          cr_assert_geq(best, prev, "model %zu %s/%s: %zu B predicted %.3f < %.3f", i,
                        rcoll_coll_name(coll), rcoll_algo_name(a), b, best, prev);
          cr_assert_geq(fixed, prev_fixed, "model %zu %s/%s at a fixed chunk", i,
                        rcoll_coll_name(coll), rcoll_algo_name(a));
          prev = best, prev_fixed = fixed;
        }
      }
    free(ts[i]);
  }
}

Test(tuner, chunks_fit_the_staging_slot) {
  /* Within one node, chunks stay within shared memory's cap (1 MiB); over
   * sockets, whose large messages cost helper-thread hand-offs, large
   * vectors go in whole slots. */
  rcoll_tuner_t *t = model(4, 1, NULL, "", 0);
  for (size_t b = 8; b <= (1ull << 32); b *= 4)
    cr_assert_leq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, b).chunk, (size_t)1 << 20);
  free(t);
  t = model(4, 4, NULL, "ring", 0);
  cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 1ull << 30).chunk, (size_t)4 << 20);
  free(t);
  t = model(8, 2, NULL, "", 0);
  for (int coll = 0; coll < RCOLL_COLL_NKINDS; coll++)
    for (size_t b = 1; b <= (1ull << 32); b *= 7) {
      rcoll_tune_choice_t c = rcoll_tune_choose(t, coll, b);
      cr_assert(c.chunk <= t->prm.max_chunk && c.chunk % 64 == 0 && c.chunk >= 4096);
      cr_assert_not_null(rcoll_algorithm_find(coll, c.algo));
      /* Repeated sizes come from the cache: the same answer. */
      rcoll_tune_choice_t again = rcoll_tune_choose(t, coll, b);
      cr_assert(again.algo == c.algo && again.chunk == c.chunk);
    }
  free(t);
}

/* Deterministic mode: only algorithms that reduce in rank order, whatever
 * RCOLL_ALGO says: for all-reduce the chain, or for small vectors the star
 * (two latencies where the chain has 2(n-1)). */
Test(tuner, deterministic_mode_reduces_only_in_rank_order) {
  rcoll_tuner_t *t = model(8, 2, NULL, "ring,tree", 1);
  cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 8).algo, ALGO(star));
  for (size_t b = 8; b <= (1u << 30); b *= 4) {
    int ar = rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, b).algo;
    cr_assert(ar == ALGO(deterministic) || (ar == ALGO(star) && b < (1u << 20)), "%zu B: %s", b,
              rcoll_algo_name(ar));
    cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_REDUCE, b).algo, ALGO(deterministic));
    cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_REDUCE_SCATTER, b).algo, ALGO(deterministic));
    /* Nothing to reduce: RCOLL_ALGO still rules. */
    cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLGATHER, b).algo, ALGO(ring));
    int bc = rcoll_tune_choose(t, RCOLL_COLL_BROADCAST, b).algo;
    cr_assert(bc == ALGO(tree) || bc == ALGO(chain));
  }
  free(t);
}

Test(tuner, forced_lists_fall_back_per_collective) {
  rcoll_tuner_t *t = model(8, 1, NULL, "tree", 0);
  cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 256 << 20).algo, ALGO(tree));
  cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_BROADCAST, 256 << 20).algo, ALGO(tree));
  cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_REDUCE, 8).algo, ALGO(chain));
  cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLGATHER, 8).algo, ALGO(ring));
  cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_SEND, 8).algo, ALGO(p2p));
  free(t);
  t = model(8, 1, NULL, "^tree,rabenseifner", 0);
  for (size_t b = 8; b <= (1u << 30); b *= 4) {
    int a = rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, b).algo;
    cr_assert(a != ALGO(tree) && a != ALGO(rabenseifner), "%zu B -> %s", b, rcoll_algo_name(a));
  }
  free(t);
}

Test(tuner, settings_adjust_links) {
  rcoll_settings_t s;
  cr_assert_eq(rcoll_settings_load(&s), rcollSuccess);
  const char *nets[2] = {"shm", "socket"};
  rcoll_tune_link_t links[2] = {rcoll_tune_default_link("shm"), rcoll_tune_default_link("socket")};
  snprintf(s.tune_alpha, sizeof s.tune_alpha, "socket=30,inter=250,shm=2");
  snprintf(s.tune_bw, sizeof s.tune_bw, "intra=7.5");
  snprintf(s.algo, sizeof s.algo, "ring");
  rcoll_tune_params_t prm;
  cr_assert_eq(rcoll_tune_params_from_settings(&s, nets, links, 1 << 20, &prm), rcollSuccess);
  cr_assert_float_eq(prm.inter.alpha_us, 250, 1e-9, "the class key wins over the transport key");
  cr_assert_float_eq(prm.intra.alpha_us, 2, 1e-9);
  cr_assert_float_eq(prm.intra.gbps, 7.5, 1e-9);
  cr_assert_float_eq(prm.inter.gbps, rcoll_tune_default_link("socket").gbps, 1e-9);
  cr_assert_eq(prm.allowed, BIT(ALGO(ring)) | P2P);
  cr_assert_eq(prm.max_chunk, (size_t)1 << 20);
  snprintf(s.tune_alpha, sizeof s.tune_alpha, "socket=fast");
  cr_assert_eq(rcoll_tune_params_from_settings(&s, nets, links, 1 << 20, &prm), rcollInvalidArgument);
  snprintf(s.tune_alpha, sizeof s.tune_alpha, "%s", "");
  snprintf(s.tune_reduce_bw, sizeof s.tune_reduce_bw, "0");
  cr_assert_eq(rcoll_tune_params_from_settings(&s, nets, links, 1 << 20, &prm), rcollInvalidArgument);
}

/* Seen while writing tests/fuzz/fuzz_settings.c: strtod reads "nan" and "inf", which
 * were taken as positive figures and made every cost NaN or infinite. */
Test(tuner, settings_refuse_nan_and_inf) {
  rcoll_settings_t s;
  cr_assert_eq(rcoll_settings_load(&s), rcollSuccess);
  const char *nets[2] = {"shm", "socket"};
  rcoll_tune_params_t prm;
  const char *bad[] = {"shm=nan", "socket=inf", "intra=INFINITY", "inter=1e999", "shm=-nan"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rcoll_tune_link_t links[2] = {rcoll_tune_default_link("shm"), rcoll_tune_default_link("socket")};
    snprintf(s.tune_alpha, sizeof s.tune_alpha, "%s", bad[i]);
    cr_assert_eq(rcoll_tune_params_from_settings(&s, nets, links, 1 << 20, &prm), rcollInvalidArgument,
                 "RCOLL_TUNE_ALPHA=%s", bad[i]);
    cr_assert(strstr(rcoll_error_text(), "RCOLL_TUNE_ALPHA"), "%s", rcoll_error_text());
  }
  s.tune_alpha[0] = '\0';
  const char *bad_bw[] = {"nan", "inf", "1e999"};
  for (size_t i = 0; i < sizeof bad_bw / sizeof bad_bw[0]; i++) {
    rcoll_tune_link_t links[2] = {rcoll_tune_default_link("shm"), rcoll_tune_default_link("socket")};
    snprintf(s.tune_reduce_bw, sizeof s.tune_reduce_bw, "%s", bad_bw[i]);
    cr_assert_eq(rcoll_tune_params_from_settings(&s, nets, links, 1 << 20, &prm), rcollInvalidArgument,
                 "RCOLL_TUNE_REDUCE_BW=%s", bad_bw[i]);
  }
}

/* Found by tests/fuzz/fuzz_rankinfo.c: a staging slot of 64 x an odd number
 * (RCOLL_CHUNK_SIZE=8388672, legal) halved under shm's 512 KiB chunk cap to
 * 262146 bytes, a chunk that is no multiple of 64 nor of a double. */
Test(tuner, chunks_stay_multiples_of_64_under_a_cap) {
  rcoll_tuner_t *t = model(4, 1, NULL, "", 0);
  t->prm.max_chunk = 8388672;
  t->prm.intra.chunk_cap = 512 << 10;
  for (int algo = 0; algo < rcoll_algo_family_count(); algo++)
    for (size_t bytes = 8; bytes <= ((size_t)64 << 20); bytes *= 8) {
      if (!rcoll_tune_applies(t, RCOLL_COLL_ALLREDUCE, algo))
        continue;
      rcoll_tune_choice_t ch = rcoll_tune_best(t, RCOLL_COLL_ALLREDUCE, algo, bytes);
      cr_assert_eq(ch.chunk % 64, 0, "%s, %zu bytes: chunk %zu", rcoll_algo_name(algo), bytes, ch.chunk);
      cr_assert_leq(ch.chunk, (size_t)512 << 10);
      cr_assert_geq(ch.chunk, 4096);
    }
  free(t);
}

/* A slower network moves the latency/bandwidth crossover: the tree stays
 * ahead of the ring to larger sizes when each message costs more. */
Test(tuner, crossover_moves_with_latency) {
  rcoll_tuner_t *fast = model_at(16, 16, NULL, "ring,tree", 0, 20);
  rcoll_tuner_t *slow = model_at(16, 16, NULL, "ring,tree", 0, 500);
  size_t cross_fast = 0, cross_slow = 0;
  for (size_t b = 8; b <= (1u << 30); b *= 2) {
    if (!cross_fast && rcoll_tune_choose(fast, RCOLL_COLL_ALLREDUCE, b).algo == ALGO(ring))
      cross_fast = b;
    if (!cross_slow && rcoll_tune_choose(slow, RCOLL_COLL_ALLREDUCE, b).algo == ALGO(ring))
      cross_slow = b;
  }
  cr_assert(cross_fast > 8 && cross_slow > cross_fast, "crossovers %zu and %zu", cross_fast, cross_slow);
  free(fast);
  free(slow);
}

/* A connection keeps `window` receives in flight: a pipeline of more chunks
 * than that over a 260 us link moves at most window chunks per round trip,
 * so 8 KiB chunks of a 512 KiB ring cost at least 6 steps x 16 chunks x
 * 2 x 260 / 4 us; without the window the model would not see it. */
Test(tuner, window_bounds_pipelines_of_small_chunks) {
  rcoll_tuner_t *t = model_at(4, 2, NULL, "", 0, 260);
  t->prm.window = 0;
  double open = rcoll_tune_predict(t, RCOLL_COLL_ALLREDUCE, ALGO(ring), 512 << 10, 8192);
  t->prm.window = 4;
  double bound = 6 * 16 * 2 * 260.0 / 4;
  double held = rcoll_tune_predict(t, RCOLL_COLL_ALLREDUCE, ALGO(ring), 512 << 10, 8192);
  cr_assert_lt(open, bound, "without a window: %.1f us", open);
  cr_assert_geq(held, bound, "with a window of 4: %.1f us", held);
  /* So the choice takes chunks the window can carry: a ring segment of
   * 128 KiB in at most 4 chunks. */
  rcoll_tune_choice_t c = rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 512 << 10);
  cr_assert_geq(c.chunk, (size_t)32 << 10, "%s chunk %zu", rcoll_algo_name(c.algo), c.chunk);
  free(t);
}

/* Where ranks outnumber cores, the hierarchical phases cannot overlap:
 * hier then costs no less than the sum of its phases, and large vectors on
 * 2 x 2 ranks go to rabenseifner, which moves the same bytes in fewer
 * messages; with idle cores hier's overlap wins. */
Test(tuner, shared_cores_serialize_hier) {
  rcoll_tuner_t *t = model_at(4, 2, NULL, "", 0, 260);
  cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 64 << 20).algo, ALGO(hier));
  double overlapped = rcoll_tune_best(t, RCOLL_COLL_ALLREDUCE, ALGO(hier), 64 << 20).time_us;
  free(t);
  t = model_at(4, 2, NULL, "", 0, 260);
  t->prm.cores_shared = 1;
  double serial = rcoll_tune_best(t, RCOLL_COLL_ALLREDUCE, ALGO(hier), 64 << 20).time_us;
  cr_assert_gt(serial, overlapped * 1.1, "serial %.1f us, overlapped %.1f us", serial, overlapped);
  cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 64 << 20).algo, ALGO(rabenseifner));
  free(t);
}

/* A ring step waits for the ring's slowest hop: on 2 x 2 ranks whose two
 * crossing hops take 260 us, a tiny all-reduce costs 2 (n - 1) crossings,
 * not 2 (n - 1) times the mean hop (measured 1250-1930 us), and a 512 KiB
 * one does not go to ring (measured 1.3-1.6 ms, rabenseifner 1.0-1.1). */
Test(tuner, ring_steps_wait_for_the_slowest_hop) {
  rcoll_tuner_t *t = model_at(4, 2, NULL, "", 0, 260);
  double tiny = rcoll_tune_best(t, RCOLL_COLL_ALLREDUCE, ALGO(ring), 8).time_us;
  cr_assert_geq(tiny, 6 * 260.0, "ring, 8 bytes: %.1f us", tiny);
  cr_assert_lt(tiny, 6 * 260.0 * 1.2, "ring, 8 bytes: %.1f us", tiny);
  t->prm.cores_shared = 1;
  cr_assert_neq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 512 << 10).algo, ALGO(ring));
  free(t);
}

/* Recursive doubling: log2 n latencies win small vectors on one node at
 * powers of two; from 4 ranks it moves log2 n >= 2 times the vector, so
 * from 1 MiB the choice is what it would be without it (with 2 or 3 ranks
 * its one step moves the vector once, as the others do, and it may win: 3
 * ranks on 2 nodes, 1 MiB, took 0.88-1.18 ms, Rabenseifner 0.90-1.00 and
 * the ring 0.74-1.10 over shm and loopback TCP); it does not sum in rank
 * order, so deterministic mode never runs it, even when RCOLL_ALGO names
 * it. */
Test(tuner, recdbl_small_vectors_only_never_deterministic) {
  for (int n = 2; n <= 16; n++) {
    for (int nodes = 1; nodes <= 2 && nodes <= n; nodes++) {
      rcoll_tuner_t *t = model(n, nodes, NULL, "", 0), *without = model(n, nodes, NULL, "^recdbl", 0);
      if (nodes == 1 && (n & (n - 1)) == 0)
        cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 8).algo, ALGO(recdbl), "n=%d", n);
      for (size_t b = 1 << 20; n >= 4 && b <= (1u << 30); b *= 4)
        cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, b).algo,
                     rcoll_tune_choose(without, RCOLL_COLL_ALLREDUCE, b).algo, "n=%d nodes=%d %zu B", n,
                     nodes, b);
      free(t);
      free(without);
    }
    rcoll_tuner_t *t = model(n, 1, NULL, "recdbl", 1);
    int det = rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 8).algo;
    cr_assert(det == ALGO(deterministic) || det == ALGO(star), "n=%d: %s", n, rcoll_algo_name(det));
    free(t);
  }
}

/* The star all-reduce (2 latencies, rank 0 handling n-1 vectors each way)
 * against recursive doubling (log2 n latencies, more with a fold). Where
 * ranks share cores it pays the wait for a descheduled rank once per phase,
 * so it wins small vectors from 5 ranks (up to where rank 0's messages
 * add up to more) and at rank counts that fold;
 * measured, shm processes on 2 cores, 8 B, medians of 5 (3 at 6 ranks)
 * alternating rounds: 8 ranks 23.2 us against 23.5 (64 B 18.2 against
 * 22.0), 6 ranks 11.4 against 14.4, 4 ranks 7.3 against 7.0. With a core
 * per rank, recursive doubling keeps powers of two. Never at 2 ranks, nor
 * from 1 MiB, where rank 0's n-1 vectors dominate (at 5 ranks, 64 KiB, the
 * three were level: star 25-48 us, recdbl 27-36, Rabenseifner 29-37). */
Test(tuner, star_for_small_vectors_where_cores_are_shared) {
  for (int n = 2; n <= 16; n++) {
    rcoll_tuner_t *t = model(n, 1, NULL, "", 0);
    t->prm.cores_shared = n > 2;
    int small = rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 8).algo;
    if (n == 2 || n == 4)
      cr_assert_eq(small, ALGO(recdbl), "n=%d: %s", n, rcoll_algo_name(small));
    if (n >= 5 && n <= 12) /* beyond, rank 0's 2(n-1) messages catch up with log2 n steps */
      cr_assert_eq(small, ALGO(star), "n=%d: %s", n, rcoll_algo_name(small));
    cr_assert_neq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 1 << 20).algo, ALGO(star), "n=%d", n);
    free(t);
    t = model(n, 1, NULL, "", 0); /* a fresh tuner: choices are cached */
    if ((n & (n - 1)) == 0)
      cr_assert_neq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 8).algo, ALGO(star), "n=%d, idle cores", n);
    free(t);
  }
}

/* Where R ranks share each core, recursive doubling's log2 n whole vectors
 * per rank are copied and added by all ranks at once, and the star's hub
 * shares the cores with its peers' copies (rcoll_cost_shared_bytes).
 * Measured, shm processes on 2 cores, medians of 3 alternating rounds (us):
 * 8 ranks 64 KiB recdbl 145, Rabenseifner 94; 16 KiB 44 / 48; 4 ranks
 * 256 KiB 145 / 97, 128 KiB 66 / 56, 64 KiB 30 / 29; 16 ranks 16 KiB
 * 261 / 344; 8 ranks 4 KiB star 44.6, recdbl 33.2; 6 ranks 32 KiB star 80,
 * tree 52. With a core per rank, R unknown, or several nodes, the choices
 * are the old ones. */
/* n ranks on one node, R ranks per core (the choice reads t->prm). */
static int choice(int nranks, double ranks_per_core, size_t bytes) {
  rcoll_tuner_t *t = model(nranks, 1, NULL, "", 0);
  t->prm.cores_shared = ranks_per_core > 1;
  t->prm.ranks_per_core = ranks_per_core;
  int a = rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, bytes).algo;
  free(t);
  return a;
}

Test(tuner, shared_cores_charge_the_extra_vectors) {
  cr_assert_eq(choice(8, 4, 16 << 10), ALGO(recdbl));
  cr_assert_eq(choice(8, 4, 64 << 10), ALGO(rabenseifner));
  cr_assert_eq(choice(8, 4, 128 << 10), ALGO(rabenseifner));
  cr_assert_eq(choice(4, 2, 64 << 10), ALGO(recdbl));
  cr_assert_eq(choice(4, 2, 128 << 10), ALGO(rabenseifner));
  cr_assert_eq(choice(4, 2, 256 << 10), ALGO(rabenseifner));
  cr_assert_eq(choice(16, 8, 16 << 10), ALGO(recdbl));
  cr_assert_neq(choice(8, 4, 4 << 10), ALGO(star));
  cr_assert_neq(choice(6, 3, 32 << 10), ALGO(star));
  /* A core per rank, or fewer ranks than cores: the model without R. */
  for (int n = 4; n <= 8; n *= 2)
    for (size_t b = 4; b <= (256u << 20); b *= 4) {
      rcoll_tuner_t *t = model(n, 1, NULL, "", 0);
      int without = rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, b).algo;
      free(t);
      cr_assert_eq(choice(n, 1, b), without, "n=%d %zu B", n, b);
      cr_assert_eq(choice(n, 0.5, b), without, "n=%d %zu B", n, b);
    }
  /* Across nodes, too (recursive doubling kept winning there: 2 namespaces
   * x 4 ranks on 2 cores, 32 KiB, 219 us against Rabenseifner's 276). */
  for (size_t b = 4; b <= (256u << 20); b *= 4) {
    rcoll_tuner_t *with = model(8, 2, NULL, "", 0), *without = model(8, 2, NULL, "", 0);
    with->prm.cores_shared = without->prm.cores_shared = 1;
    with->prm.ranks_per_core = 4;
    cr_assert_eq(rcoll_tune_choose(with, RCOLL_COLL_ALLREDUCE, b).algo,
                 rcoll_tune_choose(without, RCOLL_COLL_ALLREDUCE, b).algo, "%zu B", b);
    free(with);
    free(without);
  }
}

/* The flat board (algorithms/allreduce_flat.c) exists only where the
 * communicator mapped one (prm.flat_max, agreed at creation): there it
 * takes every all-reduce up to its slot, cores shared or not (one wait and
 * no engine: 8 ranks on 2 cores, 8 B, 5.3-8.4 us against 23-32 for the
 * plans; 2 ranks 0.33-0.37 against 0.48-0.68); above the slot, or across
 * nodes, or without a board, never. */
Test(tuner, flat_board_up_to_its_slot) {
  for (int n = 2; n <= 16; n++)
    for (int shared = 0; shared <= 1; shared++) {
      rcoll_tuner_t *t = model(n, 1, NULL, "", 0);
      t->prm.cores_shared = shared;
      t->prm.flat_max = 2048;
      for (size_t b = 4; b <= 2048; b *= 2)
        cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, b).algo, ALGO(flat), "n=%d %zu B", n, b);
      cr_assert_neq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 2052).algo, ALGO(flat), "n=%d", n);
      free(t);
      t = model(n, 1, NULL, "", 0); /* no board */
      cr_assert_neq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 8).algo, ALGO(flat), "n=%d", n);
      free(t);
    }
  rcoll_tuner_t *t = model(4, 2, NULL, "", 0);
  t->prm.flat_max = 2048;
  cr_assert(!rcoll_tune_applies(t, RCOLL_COLL_ALLREDUCE, ALGO(flat)), "two nodes share no board");
  free(t);
  t = model(4, 1, NULL, "", 1); /* deterministic: it sums in rank order */
  t->prm.flat_max = 2048;
  cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 8).algo, ALGO(flat));
  free(t);
}

/* Device calls on one node ask, every call, for the choice without the
 * board (coll.c); both choices are remembered, each under its own key: the
 * one without the board never comes back as the board, in either order,
 * and repeats give what the first asking gave. */
Test(tuner, choices_without_the_board_are_remembered_apart) {
  rcoll_tuner_t *t = model(4, 1, NULL, "", 0);
  t->prm.flat_max = 2048;
  const int flat = ALGO(flat);
  for (size_t b = 8; b <= 2048; b *= 4) {
    rcoll_tune_choice_t with = rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, b);
    rcoll_tune_choice_t without = rcoll_tune_choose_without(t, RCOLL_COLL_ALLREDUCE, b, flat);
    cr_assert_eq(with.algo, flat, "%zu B", b);
    cr_assert_neq(without.algo, flat, "%zu B: the choice without the board is the board", b);
    for (int again = 0; again < 3; again++) {
      cr_assert_eq(rcoll_tune_choose_without(t, RCOLL_COLL_ALLREDUCE, b, flat).algo, without.algo, "%zu B", b);
      cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, b).algo, flat, "%zu B", b);
    }
  }
  free(t);
  t = model(4, 1, NULL, "", 0); /* the other order: without first */
  t->prm.flat_max = 2048;
  cr_assert_neq(rcoll_tune_choose_without(t, RCOLL_COLL_ALLREDUCE, 8, flat).algo, flat);
  cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 8).algo, flat);
  free(t);
}

/* Where ranks outnumber cores every message costs a scheduling of its peer
 * (RCOLL_COST_SHARED_US): hier of 64 MiB on 2 namespaces x 2 ranks on 2
 * cores took 116-123 ms in 128 KiB chunks and 90-95 ms in 4 MiB ones
 * (issue 18), which the model without that cost predicted alike. With idle
 * cores the two stay close (a message costs the engine's 2 us). */
Test(tuner, shared_cores_make_small_chunks_cost_more) {
  rcoll_tuner_t *t = model_at(4, 2, NULL, "", 0, 20);
  double idle_small = rcoll_tune_predict(t, RCOLL_COLL_ALLREDUCE, ALGO(hier), 64 << 20, 128 << 10);
  double idle_big = rcoll_tune_predict(t, RCOLL_COLL_ALLREDUCE, ALGO(hier), 64 << 20, 4 << 20);
  cr_assert_lt(idle_small, idle_big * 1.1, "idle cores: 128 KiB %.1f us, 4 MiB %.1f us", idle_small, idle_big);
  t->prm.cores_shared = 1;
  double small = rcoll_tune_predict(t, RCOLL_COLL_ALLREDUCE, ALGO(hier), 64 << 20, 128 << 10);
  double big = rcoll_tune_predict(t, RCOLL_COLL_ALLREDUCE, ALGO(hier), 64 << 20, 4 << 20);
  /* Measured: 116-123 / 90-95, a ratio of 1.22-1.37. */
  cr_assert(small > big * 1.2 && small < big * 1.6, "shared cores: 128 KiB %.1f us, 4 MiB %.1f us", small, big);
  cr_assert_geq(rcoll_tune_best(t, RCOLL_COLL_ALLREDUCE, ALGO(hier), 64 << 20).chunk, (size_t)1 << 20);
  free(t);
}

/* n ranks of one machine over the socket transport (loopback). */
static rcoll_tuner_t *socket_model(int nranks, int cores_shared) {
  char ids[16][8] = {{0}};
  for (int r = 0; r < nranks; r++)
    strcpy(ids[r], "n0");
  rcoll_topo_t topo;
  cr_assert_eq(rcoll_topo_build(&topo, ids[0], sizeof ids[0], nranks, 0), rcollSuccess);
  rcoll_tune_params_t prm = {.intra = rcoll_tune_default_link("socket"), .inter = rcoll_tune_default_link("socket"),
                             .reduce_gbps = 8, .max_chunk = 4 << 20, .window = 4, .cores_shared = cores_shared};
  cr_assert_eq(rcoll_algo_parse("", &prm.allowed), rcollSuccess);
  rcoll_tuner_t *t = malloc(sizeof *t);
  cr_assert_eq(rcoll_tuner_setup(t, &topo, &prm), rcollSuccess);
  rcoll_topo_free(&topo);
  return t;
}

/* Every socket message pays its system calls (each_us): 64 KiB between 2
 * ranks over loopback took 37-39 us as one message each way (recdbl) and
 * 85-95 us by ring in 8 KiB chunks, which the ring was chosen for while a
 * message cost the engine's 2 us. A ring step still overlaps the
 * reduction of one chunk with the arrival of the next, so 4 MiB stays
 * chunked (1.93 ms in 64 KiB chunks, 2.13 ms in one message per step). */
Test(tuner, socket_messages_cost_their_system_calls) {
  rcoll_tuner_t *t = socket_model(2, 0);
  cr_assert_eq(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 64 << 10).algo, ALGO(recdbl));
  cr_assert_gt(rcoll_tune_predict(t, RCOLL_COLL_ALLREDUCE, ALGO(ring), 64 << 10, 8 << 10),
               rcoll_tune_predict(t, RCOLL_COLL_ALLREDUCE, ALGO(ring), 64 << 10, 32 << 10));
  cr_assert_lt(rcoll_tune_choose(t, RCOLL_COLL_ALLREDUCE, 4 << 20).chunk, (size_t)2 << 20,
               "a step of 2 MiB in one message");
  free(t);
}

/* Where ranks outnumber cores, a message over 64 KiB waits for its helper
 * thread to get a core (RCOLL_COST_SHARED_BIG): Rabenseifner over 8 ranks
 * on 2 cores, 1 MiB, took 3.2-3.5 ms in 64 KiB chunks and 4.5-4.6 ms in
 * messages of up to 512 KiB: sharing the cores costs the 6 large messages
 * more than the 28 small ones. */
Test(tuner, shared_cores_make_large_messages_cost_more) {
  rcoll_tuner_t *t = socket_model(8, 1);
  double small = rcoll_tune_predict(t, RCOLL_COLL_ALLREDUCE, ALGO(rabenseifner), 1 << 20, 64 << 10);
  double large = rcoll_tune_predict(t, RCOLL_COLL_ALLREDUCE, ALGO(rabenseifner), 1 << 20, 4 << 20);
  cr_assert_lt(small, large, "64 KiB chunks %.1f us, one message per step %.1f us", small, large);
  t->prm.cores_shared = 0;
  double idle_small = rcoll_tune_predict(t, RCOLL_COLL_ALLREDUCE, ALGO(rabenseifner), 1 << 20, 64 << 10);
  double idle_large = rcoll_tune_predict(t, RCOLL_COLL_ALLREDUCE, ALGO(rabenseifner), 1 << 20, 4 << 20);
  cr_assert_gt(large - idle_large, small - idle_small);
  free(t);
}
