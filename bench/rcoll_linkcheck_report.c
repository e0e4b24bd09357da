/* What rank 0 prints and writes: the matrices, the medians, the outlier
 * lines, and the JSON that plotting tools read (its names are the schema in
 * docs/operators.md; keep them). */
#include <string.h>

#include "common.h"
#include "rcoll_linkcheck.h"

static const char *what_name(int what) {
  return what == LC_BANDWIDTH ? "bandwidth" : "latency";
}

/* One matrix, row = src, column = dst; "-" on the diagonal. */
static void print_matrix(FILE *f, const lc_analysis_t *a, int what) {
  int n = a->nranks;
  fprintf(f, "# %s\n#  src\\dst", what == LC_BANDWIDTH
                                        ? "Bandwidth (GB/s), row = sender, column = receiver"
                                        : "Latency (us, one way: half the median round trip), "
                                          "row = the rank that started the round trips");
  for (int d = 0; d < n; d++)
    fprintf(f, " %8d", d);
  fprintf(f, "\n");
  for (int s = 0; s < n; s++) {
    fprintf(f, "# %7d ", s);
    for (int d = 0; d < n; d++) {
      const lc_link_t *l = &a->links[(size_t)s * n + d];
      if (s == d)
        fprintf(f, " %8s", "-");
      else
        fprintf(f, " %8.*f", what == LC_BANDWIDTH ? 3 : 1,
                what == LC_BANDWIDTH ? l->bandwidth_gbps : l->latency_us);
    }
    fprintf(f, "  %s\n", a->hosts[s]);
  }
}

void lc_report_print(FILE *f, const lc_analysis_t *a, const lc_opts_t *o, double seconds) {
  int n = a->nranks;
  fprintf(f, "# rcoll_linkcheck: %d ranks on %d node%s, %d round%s; %zu bytes x %d per direction, "
             "%d round trips of 8 bytes\n", n, a->nnodes, a->nnodes == 1 ? "" : "s", lc_rounds(n),
          lc_rounds(n) == 1 ? "" : "s", o->bytes, o->iters, o->pings);
  print_matrix(f, a, LC_BANDWIDTH);
  print_matrix(f, a, LC_LATENCY);
  fprintf(f, "# Median over %d links: bandwidth %.3f GB/s, latency %.1f us\n", n * (n - 1),
          a->median_bandwidth_gbps, a->median_latency_us);
  for (int c = 0; a->nclasses > 1 && c < a->nclasses; c++)
    fprintf(f, "#   %s (%d links): bandwidth %.3f GB/s, latency %.1f us\n", a->classes[c].name,
            a->classes[c].links, a->classes[c].bandwidth_gbps, a->classes[c].latency_us);
  if (a->nclasses > 1)
    fprintf(f, "#   each link is compared with the median of its own transport\n");
  else if (a->nclasses == 1)
    fprintf(f, "#   every link on %s\n", a->classes[0].name);
  fprintf(f, "# Out of line (--threshold %g): under %g of the median bandwidth or over %.3g x "
             "the median latency\n", a->threshold, a->threshold, 1 / a->threshold);
  for (int i = 0; i < a->noutliers; i++)
    fprintf(f, "%s\n", a->outliers[i].text);
  if (!a->node_check)
    fprintf(f, "# Nodes: %d, too few to tell a slow node from its peer (it takes 3)\n", a->nnodes);
  for (int i = 0; i < a->nslow_nodes; i++)
    fprintf(f, "%s\n", a->slow_nodes[i].text);
  int nodes = 0; /* a node slow in bandwidth and latency has two entries */
  for (int i = 0; i < a->nslow_nodes; i++)
    nodes += i == 0 || a->slow_nodes[i].node != a->slow_nodes[i - 1].node;
  if (a->noutliers || a->nslow_nodes)
    fprintf(f, "# FAILED: %d link measurement%s and %d node%s out of line\n", a->noutliers,
            a->noutliers == 1 ? "" : "s", nodes, nodes == 1 ? "" : "s");
  else
    fprintf(f, "# OK: every link and node within the threshold\n");
  fprintf(f, "# Run time: %.2f s\n", seconds);
}

/* ------------------------------------------------------------ JSON */

/* A finite number, as JSON has no inf or nan. */
static void json_num(FILE *f, double v) {
  fprintf(f, "%.6g", v == v && v < 1e300 && v > -1e300 ? v : 0.0);
}

static void json_links(FILE *f, const lc_analysis_t *a) {
  int n = a->nranks, first = 1;
  fprintf(f, "\"links\":[");
  for (int s = 0; s < n; s++)
    for (int d = 0; d < n; d++) {
      size_t i = (size_t)s * n + d;
      if (s == d)
        continue;
      fprintf(f, "%s\n  {\"src\":%d,\"dst\":%d,\"src_host\":", first ? "" : ",", s, d);
      first = 0;
      bench_json_str(f, a->hosts[s]);
      fprintf(f, ",\"dst_host\":");
      bench_json_str(f, a->hosts[d]);
      fprintf(f, ",\"transport\":");
      bench_json_str(f, a->classes[a->class_of[i]].name);
      fprintf(f, ",\"device\":");
      bench_json_str(f, a->links[i].transport);
      fprintf(f, ",\"latency_us\":");
      json_num(f, a->links[i].latency_us);
      fprintf(f, ",\"bandwidth_gbps\":");
      json_num(f, a->links[i].bandwidth_gbps);
      fprintf(f, ",\"bw_ratio\":");
      json_num(f, a->bw_ratio[i]);
      fprintf(f, ",\"lat_ratio\":");
      json_num(f, a->lat_ratio[i]);
      fprintf(f, "}");
    }
  fprintf(f, "],\n");
}

static void json_outliers(FILE *f, const lc_analysis_t *a) {
  fprintf(f, "\"outliers\":[");
  for (int i = 0; i < a->noutliers; i++) {
    const lc_outlier_t *o = &a->outliers[i];
    fprintf(f, "%s\n  {\"src\":%d,\"dst\":%d,\"what\":\"%s\",\"ratio\":", i ? "," : "", o->src,
            o->dst, what_name(o->what));
    json_num(f, o->ratio);
    fprintf(f, ",\"text\":");
    bench_json_str(f, o->text);
    fprintf(f, "}");
  }
  fprintf(f, "],\n\"slow_nodes\":[");
  for (int i = 0; i < a->nslow_nodes; i++) {
    const lc_slow_node_t *sn = &a->slow_nodes[i];
    fprintf(f, "%s\n  {\"node\":%d,\"host\":", i ? "," : "", sn->node);
    int first = 0;
    while (first < a->nranks && a->node_of[first] != sn->node)
      first++;
    bench_json_str(f, a->hosts[first]);
    fprintf(f, ",\"ranks\":[");
    for (int r = 0, k = 0; r < a->nranks; r++)
      if (a->node_of[r] == sn->node)
        fprintf(f, "%s%d", k++ ? "," : "", r);
    fprintf(f, "],\"what\":\"%s\",\"links\":%d,\"ratio\":", what_name(sn->what), sn->nlinks);
    json_num(f, sn->ratio);
    fprintf(f, ",\"text\":");
    bench_json_str(f, sn->text);
    fprintf(f, "}");
  }
  fprintf(f, "],\n");
}

int lc_report_json(const char *path, const lc_analysis_t *a, const lc_opts_t *o, double seconds) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return -1;
  }
  fprintf(f, "{\"tool\":\"rcoll_linkcheck\",\"version\":1,\"ranks\":%d,\n\"hosts\":[", a->nranks);
  for (int r = 0; r < a->nranks; r++) {
    fprintf(f, "%s", r ? "," : "");
    bench_json_str(f, a->hosts[r]);
  }
  fprintf(f, "],\n\"bytes\":%zu,\"iters\":%d,\"pings\":%d,\"threshold\":", o->bytes, o->iters,
          o->pings);
  json_num(f, o->threshold);
  fprintf(f, ",\n\"median\":{\"latency_us\":");
  json_num(f, a->median_latency_us);
  fprintf(f, ",\"bandwidth_gbps\":");
  json_num(f, a->median_bandwidth_gbps);
  fprintf(f, "},\n\"medians_by_transport\":{");
  for (int c = 0; c < a->nclasses; c++) {
    fprintf(f, "%s", c ? "," : "");
    bench_json_str(f, a->classes[c].name);
    fprintf(f, ":{\"links\":%d,\"latency_us\":", a->classes[c].links);
    json_num(f, a->classes[c].latency_us);
    fprintf(f, ",\"bandwidth_gbps\":");
    json_num(f, a->classes[c].bandwidth_gbps);
    fprintf(f, "}");
  }
  fprintf(f, "},\n");
  json_links(f, a);
  json_outliers(f, a);
  fprintf(f, "\"seconds\":");
  json_num(f, seconds);
  fprintf(f, "}\n");
  if (fclose(f) != 0) {
    perror(path);
    return -1;
  }
  return 0;
}

/* --print-schedule N: the pairs of every round, without running. */
void lc_print_schedule(FILE *f, int n) {
  fprintf(f, "# %d ranks: %d rounds\n", n, lc_rounds(n));
  for (int r = 0; r < lc_rounds(n); r++) {
    fprintf(f, "round %d:", r);
    for (int x = 0; x < n; x++) {
      int p = lc_partner(n, r, x);
      if (p > x)
        fprintf(f, " %d-%d", x, p);
    }
    for (int x = 0; x < n; x++)
      if (lc_partner(n, r, x) < 0)
        fprintf(f, " (%d sits out)", x);
    fprintf(f, "\n");
  }
}
