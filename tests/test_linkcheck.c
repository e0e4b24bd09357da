/* bench/rcoll_linkcheck's schedule and analysis on matrices made here, where
 * the answer is known: which link or node is out of line, its ratio and
 * its line of text, and that each other link is left alone. The measuring
 * itself runs for real in tests/check_linkcheck.sh.
 *
 * The tool's pure part is bench code, not the library's, so its source is
 * compiled into this test rather than linked. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/rcoll_linkcheck_plan.c"

/* ------------------------------------------------------------ schedule */

Test(linkcheck, every_pair_meets_once_and_each_rank_once_per_round) {
  for (int n = 2; n <= 33; n++) {
    int *met = calloc((size_t)n * n, sizeof *met);
    cr_assert_not_null(met);
    cr_assert_eq(lc_rounds(n), n % 2 ? n : n - 1, "n=%d", n);
    for (int r = 0; r < lc_rounds(n); r++) {
      int byes = 0;
      for (int x = 0; x < n; x++) {
        int p = lc_partner(n, r, x);
        if (p < 0) {
          byes++;
          continue;
        }
        cr_assert(p != x && p < n, "n=%d round %d: %d meets %d", n, r, x, p);
        cr_assert_eq(lc_partner(n, r, p), x, "n=%d round %d: %d-%d not mutual", n, r, x, p);
        met[x * n + p]++;
      }
      cr_assert_eq(byes, n % 2, "n=%d round %d: %d byes", n, r, byes);
    }
    for (int x = 0; x < n; x++)
      for (int y = 0; y < n; y++)
        cr_assert_eq(met[x * n + y], x != y, "n=%d: %d and %d met %d times", n, x, y, met[x * n + y]);
    free(met);
  }
}

Test(linkcheck, partner_refuses_what_is_not_a_round_or_rank) {
  cr_assert_eq(lc_rounds(1), 0);
  cr_assert_eq(lc_partner(1, 0, 0), -1);
  cr_assert_eq(lc_partner(4, 3, 0), -1);
  cr_assert_eq(lc_partner(4, -1, 0), -1);
  cr_assert_eq(lc_partner(4, 0, 4), -1);
}

Test(linkcheck, median_of_odd_and_even_counts) {
  double odd[] = {5, 1, 3}, even[] = {4, 1, 3, 2};
  cr_assert_float_eq(lc_median(odd, 3), 3, 1e-12);
  cr_assert_float_eq(lc_median(even, 4), 2.5, 1e-12);
  cr_assert_float_eq(lc_median(odd, 0), 0, 1e-12);
  cr_assert_float_eq(lc_median_side(even, 4, 1), 3, 1e-12);
  cr_assert_float_eq(lc_median_side(even, 4, -1), 2, 1e-12);
  cr_assert_float_eq(lc_median_side(odd, 3, 1), 3, 1e-12);
}

/* ------------------------------------------------------------ analysis */

#define N 6

typedef struct world {
  char hosts[N][LC_HOST_MAX];
  lc_link_t links[N * N];
} world_t;

/* n <= N ranks on nodes given by node[r], every link at `bw` GB/s and `lat`
 * us (node-local ones on shm, others on socket, at 10x and 1/10 of that);
 * link src -> dst is links[src * n + dst]. */
static void make_world_n(world_t *w, int n, const int *node, double bw, double lat) {
  memset(w, 0, sizeof *w);
  for (int s = 0; s < n; s++) {
    snprintf(w->hosts[s], LC_HOST_MAX, "node-%c", 'a' + node[s]);
    for (int d = 0; d < n; d++) {
      lc_link_t *l = &w->links[s * n + d];
      l->same_node = node[s] == node[d];
      l->bandwidth_gbps = l->same_node ? 10 * bw : bw;
      l->latency_us = l->same_node ? lat / 10 : lat;
      snprintf(l->transport, sizeof l->transport, "%s", l->same_node ? "shm" : "socket eth0 25000 Mb/s");
    }
  }
}

static void make_world(world_t *w, const int *node, double bw, double lat) {
  make_world_n(w, N, node, bw, lat);
}

static const int one_per_node[N] = {0, 1, 2, 3, 4, 5};

Test(linkcheck, names_the_one_slow_link_and_nothing_else) {
  world_t w;
  make_world(&w, one_per_node, 2.0, 20.0);
  w.links[1 * N + 4].bandwidth_gbps = 0.62; /* 0.31 of 2.0 */
  lc_analysis_t a;
  cr_assert_eq(lc_analyze(&a, N, (const char(*)[LC_HOST_MAX])w.hosts, w.links, 0.5), 0);
  cr_assert_float_eq(a.median_bandwidth_gbps, 2.0, 1e-12);
  cr_assert_eq(a.noutliers, 1);
  cr_assert_eq(a.outliers[0].src, 1);
  cr_assert_eq(a.outliers[0].dst, 4);
  cr_assert_eq(a.outliers[0].what, LC_BANDWIDTH);
  cr_assert_float_eq(a.outliers[0].ratio, 0.31, 1e-9);
  cr_assert_str_eq(a.outliers[0].text, "rank 1 (node-b) \u2192 rank 4 (node-e): 0.31 of median bandwidth");
  cr_assert_eq(a.nslow_nodes, 0, "one slow link is not a slow node");
  cr_assert_eq(a.node_check, 1);
  lc_analysis_free(&a);
}

Test(linkcheck, latency_over_the_inverse_threshold) {
  world_t w;
  make_world(&w, one_per_node, 2.0, 20.0);
  w.links[5 * N + 0].latency_us = 64;  /* 3.2x: out at 0.5 */
  w.links[2 * N + 3].latency_us = 39;  /* 1.95x: in */
  lc_analysis_t a;
  cr_assert_eq(lc_analyze(&a, N, (const char(*)[LC_HOST_MAX])w.hosts, w.links, 0.5), 0);
  cr_assert_eq(a.noutliers, 1);
  cr_assert_eq(a.outliers[0].what, LC_LATENCY);
  cr_assert_str_eq(a.outliers[0].text, "rank 5 (node-f) \u2192 rank 0 (node-a): 3.2\u00d7 median latency");
  lc_analysis_free(&a);
  /* A stricter threshold (0.5 -> 0.25: over 4x) lets 3.2x pass. */
  cr_assert_eq(lc_analyze(&a, N, (const char(*)[LC_HOST_MAX])w.hosts, w.links, 0.25), 0);
  cr_assert_eq(a.noutliers, 0);
  lc_analysis_free(&a);
}

Test(linkcheck, shm_links_are_not_held_against_the_network) {
  /* Five ranks on one node and one alone: 20 shm links 10x faster than
   * the 10 socket ones. Against one median (a shm link's) every socket
   * link would be "0.1 of median bandwidth"; against its own transport's
   * nothing is out of line. */
  static const int node[N] = {0, 0, 0, 0, 0, 1};
  world_t w;
  make_world(&w, node, 2.0, 20.0);
  lc_analysis_t a;
  cr_assert_eq(lc_analyze(&a, N, (const char(*)[LC_HOST_MAX])w.hosts, w.links, 0.5), 0);
  cr_assert_eq(a.nnodes, 2);
  cr_assert_eq(a.nclasses, 2);
  cr_assert_float_eq(a.median_bandwidth_gbps, 20.0, 1e-12);
  cr_assert_eq(a.noutliers, 0);
  for (int c = 0; c < a.nclasses; c++) {
    int shm = strcmp(a.classes[c].name, "shm") == 0;
    cr_assert(shm || strcmp(a.classes[c].name, "socket") == 0, "class %s", a.classes[c].name);
    cr_assert_eq(a.classes[c].links, shm ? 20 : 10);
    cr_assert_float_eq(a.classes[c].bandwidth_gbps, shm ? 20.0 : 2.0, 1e-12);
  }
  lc_analysis_free(&a);
}

Test(linkcheck, a_node_whose_links_are_all_slow) {
  world_t w;
  make_world(&w, one_per_node, 2.0, 20.0);
  for (int r = 0; r < N; r++)
    if (r != 3) {
      w.links[3 * N + r].bandwidth_gbps = 0.5;
      w.links[r * N + 3].bandwidth_gbps = 0.5;
    }
  lc_analysis_t a;
  cr_assert_eq(lc_analyze(&a, N, (const char(*)[LC_HOST_MAX])w.hosts, w.links, 0.5), 0);
  cr_assert_eq(a.noutliers, 2 * (N - 1));
  for (int i = 0; i < a.noutliers; i++)
    cr_assert(a.outliers[i].src == 3 || a.outliers[i].dst == 3);
  cr_assert_eq(a.nslow_nodes, 1);
  cr_assert_eq(a.slow_nodes[0].node, 3);
  cr_assert_eq(a.slow_nodes[0].nlinks, 2 * (N - 1));
  cr_assert_str_eq(a.slow_nodes[0].text,
                   "node node-d (rank 3): 0.25 of median bandwidth over its 10 links to other nodes");
  lc_analysis_free(&a);
}

/* One slow node of four: half the links are slow, both ways. The better
 * middle value stays the reference, so all six links and the node are
 * named for latency as well as bandwidth (the mean of the middle values,
 * half a slow link's latency, would let every latency pass at 2x). */
Test(linkcheck, one_slow_node_of_four_touches_half_the_links) {
  world_t w;
  make_world_n(&w, 4, one_per_node, 2.0, 20.0);
  for (int r = 0; r < 4; r++)
    for (int s = 0; s < 4; s++)
      if (r != s && (r == 3 || s == 3)) {
        w.links[r * 4 + s].bandwidth_gbps = 0.02;
        w.links[r * 4 + s].latency_us = 2000;
      }
  lc_analysis_t a;
  cr_assert_eq(lc_analyze(&a, 4, (const char(*)[LC_HOST_MAX])w.hosts, w.links, 0.5), 0);
  cr_assert_float_eq(a.median_bandwidth_gbps, 2.0, 1e-12);
  cr_assert_float_eq(a.median_latency_us, 20.0, 1e-12);
  cr_assert_eq(a.noutliers, 12, "6 links x bandwidth and latency, got %d", a.noutliers);
  for (int i = 0; i < a.noutliers; i++)
    cr_assert(a.outliers[i].src == 3 || a.outliers[i].dst == 3);
  cr_assert_eq(a.nslow_nodes, 2);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(a.slow_nodes[i].node, 3);
    cr_assert_eq(a.slow_nodes[i].what, i == 0 ? LC_BANDWIDTH : LC_LATENCY);
  }
  cr_assert_str_eq(a.slow_nodes[1].text,
                   "node node-d (rank 3): 100.0\u00d7 median latency over its 6 links to other nodes");
  lc_analysis_free(&a);
}

Test(linkcheck, two_nodes_are_not_judged) {
  static const int node[N] = {0, 0, 0, 1, 1, 1};
  world_t w;
  make_world(&w, node, 2.0, 20.0);
  lc_analysis_t a;
  cr_assert_eq(lc_analyze(&a, N, (const char(*)[LC_HOST_MAX])w.hosts, w.links, 0.5), 0);
  cr_assert_eq(a.nnodes, 2);
  cr_assert_eq(a.node_check, 0);
  cr_assert_eq(a.nslow_nodes, 0);
  lc_analysis_free(&a);
}

Test(linkcheck, hosts_told_apart_only_across_nodes) {
  /* Namespaces of one machine: one host name, three nodes. */
  static const int node[N] = {0, 0, 1, 1, 2, 2};
  world_t w;
  make_world(&w, node, 2.0, 20.0);
  for (int r = 0; r < N; r++)
    snprintf(w.hosts[r], LC_HOST_MAX, "box");
  cr_assert_eq(lc_label_hosts(N, w.hosts, w.links), 0);
  const char *want[N] = {"box#0", "box#0", "box#2", "box#2", "box#4", "box#4"};
  for (int r = 0; r < N; r++)
    cr_assert_str_eq(w.hosts[r], want[r]);
  /* Distinct names stay as they are. */
  make_world(&w, node, 2.0, 20.0);
  cr_assert_eq(lc_label_hosts(N, w.hosts, w.links), 0);
  cr_assert_str_eq(w.hosts[2], "node-b");
}
