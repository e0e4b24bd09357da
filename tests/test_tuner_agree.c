/* The tuner's agreement (lib/tuner_comm.c): ranks whose transports report
 * different link figures must end with identical parameters, hence the
 * same algorithm for every call; the exchange over a real bootstrap, and
 * the inter-node latency measured over the bootstrap ring. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo_ids.h"
#include "bootstrap.h"
#include "config.h"
#include "error.h"
#include "topo.h"
#include "tuner.h"

#define NR 4

/* What two ranks of one job might derive: rank 1's interface reports
 * 1 Gb/s where rank 0's reports 10 Gb/s, and its latency is higher. */
static rcoll_tune_params_t rank_params(int which) {
  rcoll_tune_params_t p = {.intra = rcoll_tune_default_link("shm"),
                           .inter = rcoll_tune_default_link("socket"), .reduce_gbps = 8,
                           .max_chunk = 4 << 20};
  cr_assert_eq(rcoll_algo_parse("", &p.allowed), rcollSuccess);
  if (which == 1) {
    p.inter.gbps = 0.125;
    p.inter.alpha_us = 35;
    p.intra.chunk_cap = 256 << 10;
    p.reduce_gbps = 6;
    p.max_chunk = 1 << 20;
  }
  return p;
}

static rcoll_tuner_t *tuner_on(const rcoll_tune_params_t *prm, int nranks, int nnodes) {
  char ids[16][16];
  for (int r = 0; r < nranks; r++)
    snprintf(ids[r], sizeof ids[r], "n%d", r * nnodes / nranks);
  rcoll_topo_t topo;
  cr_assert_eq(rcoll_topo_build(&topo, ids[0], sizeof ids[0], nranks, 0), rcollSuccess);
  rcoll_tuner_t *t = malloc(sizeof *t);
  cr_assert_eq(rcoll_tuner_setup(t, &topo, prm), rcollSuccess);
  rcoll_topo_free(&topo);
  return t;
}

/* Sizes at which two models choose differently (algorithm or chunk). */
static int disagreements(rcoll_tuner_t *a, rcoll_tuner_t *b) {
  int n = 0;
  for (int coll = 0; coll < RCOLL_COLL_NKINDS; coll++)
    for (size_t bytes = 8; !rcoll_coll_is_p2p(coll) && bytes <= ((size_t)1 << 30); bytes *= 2) {
      rcoll_tune_choice_t x = rcoll_tune_choose(a, coll, bytes), y = rcoll_tune_choose(b, coll, bytes);
      n += x.algo != y.algo || x.chunk != y.chunk;
    }
  return n;
}

Test(tuner_agree, merge_takes_the_conservative_figure_in_any_order) {
  rcoll_tune_params_t p[2] = {rank_params(0), rank_params(1)}, q[2] = {p[1], p[0]}, a, b;
  rcoll_tune_params_agree(p, 2, &a);
  rcoll_tune_params_agree(q, 2, &b);
  cr_assert_eq(memcmp(&a, &b, sizeof a), 0, "the order of the ranks changed the result");
  cr_assert_float_eq(a.inter.alpha_us, 35, 1e-12);
  cr_assert_float_eq(a.inter.gbps, 0.125, 1e-12);
  cr_assert_float_eq(a.intra.gbps, rcoll_tune_default_link("shm").gbps, 1e-12);
  cr_assert_eq(a.intra.chunk_cap, (size_t)256 << 10);
  cr_assert_float_eq(a.reduce_gbps, 6, 1e-12);
  cr_assert_eq(a.max_chunk, (size_t)1 << 20);
  /* A rank that forbids an algorithm or asks for determinism binds all. */
  p[1].allowed &= ~(1u << ALGO(tree));
  p[0].deterministic = 1;
  p[0].window = 4, p[1].window = 2;
  p[1].cores_shared = 1;
  p[0].ranks_per_core = 0.5, p[1].ranks_per_core = 4; /* the busiest machine's */
  rcoll_tune_params_agree(p, 2, &a);
  cr_assert_eq(a.window, 2);
  cr_assert_eq(a.cores_shared, 1);
  cr_assert_float_eq(a.ranks_per_core, 4, 1e-12);
  cr_assert_eq(a.allowed & (1u << ALGO(tree)), 0u);
  cr_assert(a.allowed & (1u << ALGO(ring)));
  cr_assert_eq(a.deterministic, 1);
}

/* Found by tests/fuzz/fuzz_rankinfo.c: parameters allgathered from a peer
 * were merged unchecked, and a staging slot of 0 made every chunk 0. */
Test(tuner_agree, corrupt_parameters_of_a_rank_are_refused_naming_it) {
  rcoll_tune_params_t p[3] = {rank_params(0), rank_params(1), rank_params(0)};
  cr_assert_eq(rcoll_tune_params_check(p, 3), rcollSuccess, "%s", rcoll_error_text());
  p[2].max_chunk = 0;
  cr_assert_eq(rcoll_tune_params_check(p, 3), rcollRemoteError);
  cr_assert(strstr(rcoll_error_text(), "rank 2"), "%s", rcoll_error_text());
  p[2] = rank_params(0);
  p[1].inter.gbps = NAN;
  cr_assert_eq(rcoll_tune_params_check(p, 3), rcollRemoteError);
  cr_assert(strstr(rcoll_error_text(), "rank 1"), "%s", rcoll_error_text());
  p[1] = rank_params(1);
  p[0].window = -1;
  cr_assert_eq(rcoll_tune_params_check(p, 3), rcollRemoteError);
  p[0] = rank_params(0);
  p[0].reduce_gbps = INFINITY;
  cr_assert_eq(rcoll_tune_params_check(p, 3), rcollRemoteError);
  p[0] = rank_params(0);
  p[2].ranks_per_core = NAN;
  cr_assert_eq(rcoll_tune_params_check(p, 3), rcollRemoteError);
  cr_assert(strstr(rcoll_error_text(), "rank 2") && strstr(rcoll_error_text(), "ranks per core"), "%s",
            rcoll_error_text());
  p[2].ranks_per_core = -1;
  cr_assert_eq(rcoll_tune_params_check(p, 3), rcollRemoteError);
  p[2].ranks_per_core = 4;
  cr_assert_eq(rcoll_tune_params_check(p, 3), rcollSuccess, "%s", rcoll_error_text());
}

Test(tuner_agree, agreed_ranks_choose_alike_where_unagreed_ones_do_not) {
  rcoll_tune_params_t p[2] = {rank_params(0), rank_params(1)}, agreed;
  /* Without agreement the two ranks' models part ways somewhere: the case
   * the exchange exists for (else this test could not fail). */
  rcoll_tuner_t *t0 = tuner_on(&p[0], 8, 2), *t1 = tuner_on(&p[1], 8, 2);
  cr_assert_gt(disagreements(t0, t1), 0, "the two ranks' own figures should lead apart");
  free(t0);
  free(t1);
  rcoll_tune_params_agree(p, 2, &agreed);
  t0 = tuner_on(&agreed, 8, 2);
  t1 = tuner_on(&agreed, 8, 2);
  cr_assert_eq(disagreements(t0, t1), 0);
  free(t0);
  free(t1);
}

/* The measured inter-node latency: one rank descheduled while it measured
 * (500 us where the link gives 10) must not become every rank's figure,
 * ranks with no crossing hop (0) and corrupt figures do not count, and the
 * order of the ranks does not matter. */
Test(tuner_agree, measured_latency_ignores_one_rank_far_off) {
  double fig[5] = {10, 0, 500, 12, 11}, rev[5];
  for (int r = 0; r < 5; r++)
    rev[r] = fig[4 - r];
  cr_assert_float_eq(rcoll_tune_inter_agree(fig, 5), 11, 1e-12);
  cr_assert_float_eq(rcoll_tune_inter_agree(rev, 5), 11, 1e-12);
  double two[2] = {9, 480};
  /* Two figures (2 nodes: two measurements of one link): the shorter. */
  cr_assert_float_eq(rcoll_tune_inter_agree(two, 2), 9, 1e-12);
  double bad[4] = {NAN, -3, INFINITY, 0};
  cr_assert_float_eq(rcoll_tune_inter_agree(bad, 4), 0, 1e-12);
  bad[3] = 7;
  cr_assert_float_eq(rcoll_tune_inter_agree(bad, 4), 7, 1e-12);
  double stalled[1] = {5e7}; /* 50 s: a stalled rank, not a link */
  cr_assert_float_eq(rcoll_tune_inter_agree(stalled, 1), RCOLL_TUNE_INTER_MAX_US, 1e-6);
}

/* ------------------------------------------------ over a real bootstrap */

typedef struct job_rank {
  int rank, nranks;
  rcollUniqueId id;
  rcoll_settings_t settings;
  const char *nodes; /* node letter per rank */
  rcoll_tune_params_t prm;
  double inter_us;
  rcollResult_t rc;
  char err[256];
} job_rank_t;

static void *rank_main(void *arg) {
  job_rank_t *j = arg;
  rcoll_bootstrap_t *b = NULL;
  rcoll_topo_t topo = {0};
  char ids[NR][8];
  for (int r = 0; r < j->nranks; r++)
    snprintf(ids[r], sizeof ids[r], "%c", j->nodes[r]);
  j->rc = rcoll_bootstrap_init(&j->settings, &j->id, j->rank, j->nranks, &b);
  if (j->rc == rcollSuccess)
    j->rc = rcoll_topo_build(&topo, ids[0], sizeof ids[0], j->nranks, j->rank);
  if (j->rc == rcollSuccess)
    j->rc = rcoll_tune_measure_inter(b, &topo, &j->inter_us);
  if (j->rc == rcollSuccess)
    j->rc = rcoll_tune_params_exchange(b, j->rank, j->nranks, &j->prm);
  if (j->rc != rcollSuccess)
    snprintf(j->err, sizeof j->err, "%s", rcoll_error_text());
  rcoll_topo_free(&topo);
  rcoll_bootstrap_close(b);
  return NULL;
}

/* Runs nranks threads as one job; rank r starts from rank_params(r % 2). */
static void run_job(job_rank_t *j, int nranks, const char *nodes) {
  rcoll_settings_t s;
  cr_assert_eq(rcoll_settings_load(&s), rcollSuccess);
  s.timeout = 20;
  s.socket_ifname[0] = '\0';
  s.socket_family[0] = '\0';
  rcoll_sockaddr_t at;
  rcollUniqueId id;
  cr_assert_eq(rcoll_sockaddr_parse("127.0.0.1:0", -1, &at), rcollSuccess);
  cr_assert_eq(rcoll_bootstrap_root_start(&s, &at, 0x5eed5eedull, &id), rcollSuccess, "%s",
               rcoll_error_text());
  pthread_t th[NR];
  for (int r = 0; r < nranks; r++) {
    j[r] = (job_rank_t){.rank = r, .nranks = nranks, .id = id, .settings = s, .nodes = nodes,
                        .prm = rank_params(r % 2)};
    cr_assert_eq(pthread_create(&th[r], NULL, rank_main, &j[r]), 0);
  }
  for (int r = 0; r < nranks; r++)
    pthread_join(th[r], NULL);
  for (int r = 0; r < nranks; r++)
    cr_assert_eq(j[r].rc, rcollSuccess, "rank %d: %s", r, j[r].err);
}

Test(tuner_agree, exchange_gives_every_rank_the_same_parameters, .timeout = 60) {
  job_rank_t j[NR];
  run_job(j, NR, "aabb");
  rcoll_tune_params_t in[2] = {rank_params(0), rank_params(1)}, want;
  rcoll_tune_params_agree(in, 2, &want);
  for (int r = 0; r < NR; r++) {
    cr_assert_eq(memcmp(&j[r].prm, &want, sizeof want), 0, "rank %d ends with other figures", r);
    /* Two crossing hops of a loopback ring: a latency, small and sane. */
    cr_assert(j[r].inter_us > 0 && j[r].inter_us < 1e6, "rank %d measured %.1f us", r, j[r].inter_us);
    /* The model's inputs must agree too: every rank the same figure. */
    cr_assert_eq(memcmp(&j[r].inter_us, &j[0].inter_us, sizeof j[0].inter_us), 0,
                 "rank %d measured %.3f us, rank 0 %.3f us", r, j[r].inter_us, j[0].inter_us);
  }
}

Test(tuner_agree, one_node_measures_nothing, .timeout = 60) {
  job_rank_t j[2];
  run_job(j, 2, "aa");
  cr_assert_float_eq(j[0].inter_us, 0, 1e-12);
  cr_assert_float_eq(j[1].inter_us, 0, 1e-12);
  cr_assert_eq(memcmp(&j[0].prm, &j[1].prm, sizeof j[0].prm), 0);
}
