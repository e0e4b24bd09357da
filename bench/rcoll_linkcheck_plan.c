/* The round-robin schedule and the analysis of the measured matrix: which
 * links and nodes stand out from the median. Pure functions of their inputs. */
#include <stdlib.h>
#include <string.h>

#include "rcoll_linkcheck.h"

/* ------------------------------------------------------------ schedule */

/* The circle method: with m = n rounded up to even, rank m-1 stays put and
 * the others turn around it; in round r, x meets (2r - x) mod (m - 1), and
 * the one x for which that is itself meets m - 1. With n odd, m - 1 is a
 * phantom and meeting it is a bye. */
int lc_rounds(int n) {
  return n < 2 ? 0 : (n % 2 ? n : n - 1);
}

int lc_partner(int n, int round, int rank) {
  int m = n % 2 ? n + 1 : n;
  if (n < 2 || round < 0 || round >= m - 1 || rank < 0 || rank >= n)
    return -1;
  int p;
  if (rank == m - 1)
    p = round; /* 2p = 2r (mod m-1), and m - 1 is odd */
  else {
    p = ((2 * round - rank) % (m - 1) + (m - 1)) % (m - 1);
    if (p == rank)
      p = m - 1;
  }
  return p < n ? p : -1;
}

/* ------------------------------------------------------------ medians */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double lc_median_side(const double *v, int n, int side) {
  if (n <= 0)
    return 0;
  double *s = malloc((size_t)n * sizeof *s);
  if (!s)
    return 0;
  memcpy(s, v, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  double lo = s[(n - 1) / 2], hi = s[n / 2];
  free(s);
  return side > 0 ? hi : side < 0 ? lo : (lo + hi) / 2;
}

double lc_median(const double *v, int n) {
  return lc_median_side(v, n, 0);
}

/* ------------------------------------------------------------ hosts */

/* A rank's node is the lowest rank the library puts on its node. */
static void nodes_of(int n, const lc_link_t *links, int *node_first) {
  for (int r = 0; r < n; r++) {
    node_first[r] = r;
    for (int s = 0; s < r; s++)
      if (links[(size_t)r * n + s].same_node) {
        node_first[r] = node_first[s];
        break;
      }
  }
}

int lc_label_hosts(int n, char (*hosts)[LC_HOST_MAX], const lc_link_t *links) {
  int *first = malloc((size_t)n * sizeof *first);
  if (!first)
    return -1;
  nodes_of(n, links, first);
  int *clash = calloc((size_t)n, sizeof *clash);
  if (!clash) {
    free(first);
    return -1;
  }
  for (int r = 0; r < n; r++)
    for (int s = 0; s < n; s++)
      if (first[r] != first[s] && strcmp(hosts[r], hosts[s]) == 0)
        clash[r] = 1;
  for (int r = 0; r < n; r++)
    if (clash[r]) {
      char suffix[16];
      int len = snprintf(suffix, sizeof suffix, "#%d", first[r]);
      size_t keep = strnlen(hosts[r], LC_HOST_MAX - 1);
      if (keep + (size_t)len >= LC_HOST_MAX)
        keep = LC_HOST_MAX - 1 - (size_t)len;
      memcpy(hosts[r] + keep, suffix, (size_t)len + 1);
    }
  free(clash);
  free(first);
  return 0;
}

/* ------------------------------------------------------------ analysis */

static int link_class(lc_analysis_t *a, const char *transport) {
  char name[LC_TRANSPORT_MAX];
  size_t len = strcspn(transport, " ");
  if (len >= sizeof name)
    len = sizeof name - 1;
  memcpy(name, transport, len);
  name[len] = '\0';
  for (int c = 0; c < a->nclasses; c++)
    if (strcmp(a->classes[c].name, name) == 0)
      return c;
  /* More transports than slots cannot happen with today's four; share the
   * last slot rather than fail. */
  if (a->nclasses == LC_MAX_CLASSES)
    return LC_MAX_CLASSES - 1;
  memcpy(a->classes[a->nclasses].name, name, len + 1);
  return a->nclasses++;
}

/* Where an even count splits, the reference is the better of the two middle
 * values, not their mean: one slow node of four touches exactly half the
 * links, and the mean of a slow and a fast link would hide them all. */
#define LC_BETTER_BANDWIDTH 1
#define LC_BETTER_LATENCY (-1)

/* Medians over every link and per class, then each link's ratios. */
static int link_ratios(lc_analysis_t *a) {
  int n = a->nranks, nl = n * (n - 1);
  double *lat = malloc((size_t)nl * sizeof *lat), *bw = malloc((size_t)nl * sizeof *bw);
  if (!lat || !bw) {
    free(lat);
    free(bw);
    return -1;
  }
  for (int pass = -1; pass < a->nclasses; pass++) {
    int k = 0;
    for (int i = 0; i < n * n; i++)
      if (a->class_of[i] >= 0 && (pass < 0 || a->class_of[i] == pass)) {
        lat[k] = a->links[i].latency_us;
        bw[k++] = a->links[i].bandwidth_gbps;
      }
    if (pass < 0) {
      a->median_latency_us = lc_median_side(lat, k, LC_BETTER_LATENCY);
      a->median_bandwidth_gbps = lc_median_side(bw, k, LC_BETTER_BANDWIDTH);
    } else {
      a->classes[pass].links = k;
      a->classes[pass].latency_us = lc_median_side(lat, k, LC_BETTER_LATENCY);
      a->classes[pass].bandwidth_gbps = lc_median_side(bw, k, LC_BETTER_BANDWIDTH);
    }
  }
  free(lat);
  free(bw);
  for (int i = 0; i < n * n; i++) {
    if (a->class_of[i] < 0)
      continue;
    const lc_class_t *c = &a->classes[a->class_of[i]];
    a->bw_ratio[i] = c->bandwidth_gbps > 0 ? a->links[i].bandwidth_gbps / c->bandwidth_gbps : 1;
    a->lat_ratio[i] = c->latency_us > 0 ? a->links[i].latency_us / c->latency_us : 1;
  }
  return 0;
}

static int out_of_line(const lc_analysis_t *a, int what, double ratio) {
  return what == LC_BANDWIDTH ? ratio < a->threshold : ratio > 1 / a->threshold;
}

/* "0.31 of median bandwidth", "3.2× median latency". */
static void ratio_text(char *buf, size_t len, int what, double ratio) {
  if (what == LC_BANDWIDTH)
    snprintf(buf, len, "%.2g of median bandwidth", ratio);
  else
    snprintf(buf, len, "%.1f\u00d7 median latency", ratio);
}

static void find_link_outliers(lc_analysis_t *a) {
  int n = a->nranks;
  for (int src = 0; src < n; src++)
    for (int dst = 0; dst < n; dst++)
      for (int what = LC_BANDWIDTH; src != dst && what <= LC_LATENCY; what++) {
        size_t i = (size_t)src * n + dst;
        double ratio = what == LC_BANDWIDTH ? a->bw_ratio[i] : a->lat_ratio[i];
        if (!out_of_line(a, what, ratio))
          continue;
        lc_outlier_t *o = &a->outliers[a->noutliers++];
        *o = (lc_outlier_t){.src = src, .dst = dst, .what = what, .ratio = ratio};
        char r[64];
        ratio_text(r, sizeof r, what, ratio);
        snprintf(o->text, sizeof o->text, "rank %d (%s) \u2192 rank %d (%s): %s", src, a->hosts[src],
                 dst, a->hosts[dst], r);
      }
}

static int ranks_first(const lc_analysis_t *a, int node) {
  for (int r = 0; r < a->nranks; r++)
    if (a->node_of[r] == node)
      return r;
  return 0;
}

/* "rank 5" or "ranks 4,5,6,7" (cut with "..." when long). */
static void node_ranks(const lc_analysis_t *a, int node, char *buf, size_t len) {
  int count = 0;
  for (int r = 0; r < a->nranks; r++)
    count += a->node_of[r] == node;
  size_t used = (size_t)snprintf(buf, len, "rank%s ", count > 1 ? "s" : "");
  for (int r = 0, k = 0; r < a->nranks && used < len; r++) {
    if (a->node_of[r] != node)
      continue;
    if (used + 16 >= len) {
      snprintf(buf + used, len - used, "...");
      return;
    }
    used += (size_t)snprintf(buf + used, len - used, "%s%d", k++ ? "," : "", r);
  }
}

/* A node is slow when the median of its links to other nodes is out of
 * line: then it is the node, not one cable. With two nodes both share every
 * such link, so nodes are judged from three on. */
static int find_slow_nodes(lc_analysis_t *a) {
  int n = a->nranks;
  a->node_check = a->nnodes >= 3;
  if (!a->node_check)
    return 0;
  double *v = malloc((size_t)2 * n * n * sizeof *v);
  if (!v)
    return -1;
  for (int node = 0; node < a->nnodes; node++)
    for (int what = LC_BANDWIDTH; what <= LC_LATENCY; what++) {
      int k = 0;
      for (int s = 0; s < n; s++)
        for (int d = 0; d < n; d++)
          if ((a->node_of[s] == node) != (a->node_of[d] == node)) {
            size_t i = (size_t)s * n + d;
            v[k++] = what == LC_BANDWIDTH ? a->bw_ratio[i] : a->lat_ratio[i];
          }
      double ratio = lc_median_side(v, k, what == LC_BANDWIDTH ? LC_BETTER_BANDWIDTH
                                                                : LC_BETTER_LATENCY);
      if (k == 0 || !out_of_line(a, what, ratio))
        continue;
      lc_slow_node_t *sn = &a->slow_nodes[a->nslow_nodes++];
      *sn = (lc_slow_node_t){.node = node, .nlinks = k, .what = what, .ratio = ratio};
      char r[64], ranks[96];
      ratio_text(r, sizeof r, what, ratio);
      node_ranks(a, node, ranks, sizeof ranks);
      snprintf(sn->text, sizeof sn->text, "node %s (%s): %s over its %d links to other nodes",
               a->hosts[ranks_first(a, node)], ranks, r, k);
    }
  free(v);
  return 0;
}

int lc_analyze(lc_analysis_t *a, int n, const char (*hosts)[LC_HOST_MAX], const lc_link_t *links,
               double threshold) {
  memset(a, 0, sizeof *a);
  *a = (lc_analysis_t){.nranks = n, .hosts = hosts, .links = links, .threshold = threshold};
  size_t nn = (size_t)n * n;
  a->node_of = malloc((size_t)n * sizeof *a->node_of);
  a->class_of = malloc(nn * sizeof *a->class_of);
  a->bw_ratio = calloc(nn, sizeof *a->bw_ratio);
  a->lat_ratio = calloc(nn, sizeof *a->lat_ratio);
  a->outliers = calloc(2 * nn + 1, sizeof *a->outliers);
  a->slow_nodes = calloc(2 * (size_t)n + 1, sizeof *a->slow_nodes);
  if (!a->node_of || !a->class_of || !a->bw_ratio || !a->lat_ratio || !a->outliers ||
      !a->slow_nodes)
    goto fail;
  /* Number the nodes 0, 1, ... in the order of their first ranks. */
  nodes_of(n, links, a->node_of);
  for (int r = 0; r < n; r++)
    a->node_of[r] = a->node_of[r] == r ? a->nnodes++ : a->node_of[a->node_of[r]];
  for (size_t i = 0; i < nn; i++)
    a->class_of[i] = i / n == i % n ? -1 : link_class(a, links[i].transport);
  if (link_ratios(a) != 0)
    goto fail;
  find_link_outliers(a);
  if (find_slow_nodes(a) != 0)
    goto fail;
  return 0;
fail:
  lc_analysis_free(a);
  return -1;
}

void lc_analysis_free(lc_analysis_t *a) {
  free(a->node_of);
  free(a->class_of);
  free(a->bw_ratio);
  free(a->lat_ratio);
  free(a->outliers);
  free(a->slow_nodes);
  memset(a, 0, sizeof *a);
}
