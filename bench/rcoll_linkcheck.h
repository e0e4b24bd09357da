/* rcoll_linkcheck: every pair of ranks measures latency and bandwidth over
 * the transport the communicator uses between them, and rank 0 names the
 * links and nodes that fall out of line with the median.
 *
 *   rcoll_linkcheck.c          flags, launch (the benches' world), exit status
 *   rcoll_linkcheck_measure.c  the rounds, one pair at a time per rank
 *   rcoll_linkcheck_plan.c     the round-robin schedule, medians, outliers
 *   rcoll_linkcheck_report.c   the matrices, the outlier lines, the JSON
 *
 * The schedule and the analysis are pure functions (tests/test_linkcheck.c
 * runs them on made-up matrices); only the measuring part calls rcoll. */
#ifndef RCOLL_BENCH_LINKCHECK_H
#define RCOLL_BENCH_LINKCHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LC_HOST_MAX 64
#define LC_TRANSPORT_MAX 48
#define LC_TEXT_MAX 256
#define LC_MAX_CLASSES 8

/* Exit statuses: every link in line (0), some link or node out of line (1),
 * bad usage or a failed call (2, as the benches' BENCH_EXIT_ERROR). */
#define LC_EXIT_OK 0
#define LC_EXIT_SLOW 1
#define LC_EXIT_ERROR 2

typedef struct lc_opts {
  int nthreads;      /* -t: ranks in this process */
  size_t bytes;      /* -b: one bandwidth message */
  int iters;         /* -n: timed bandwidth messages per direction */
  int pings;         /* -k: timed 8-byte round trips per direction */
  double threshold;  /* --threshold F: under F of the median bandwidth, or
                        over 1/F of the median latency, is out of line */
  const char *json_path;
  int timeout;       /* -T: seconds for the whole run; 0: no limit */
  int print_schedule; /* --print-schedule N: the rounds for N ranks, no run */
} lc_opts_t;

/* One ordered pair src -> dst as src measured it; gathered to rank 0 as
 * raw bytes (every rank runs the same binary), so no pointers. */
typedef struct lc_link {
  double latency_us;     /* one way: the median round trip started by src, halved */
  double bandwidth_gbps; /* src sending to dst, 1e9 bytes per second */
  char transport[LC_TRANSPORT_MAX]; /* rcollCommPeerTransport's text */
  int32_t same_node;     /* the library counts dst on src's node */
  int32_t unused;
} lc_link_t;

/* ------------------------------------------------------------ schedule */

/* Rounds of the round-robin tournament for n ranks (n - 1, or n when n is
 * odd and each rank sits out one round). */
int lc_rounds(int n);
/* The partner of `rank` in `round`, or -1 when it sits the round out.
 * Every pair meets exactly once, and each rank is in one pair per round. */
int lc_partner(int n, int round, int rank);

/* ------------------------------------------------------------ analysis */

enum lc_what { LC_BANDWIDTH = 0, LC_LATENCY = 1 };

/* Links are compared with others of the same transport: shm between ranks
 * of one node is not held against the network's figures. */
typedef struct lc_class {
  char name[LC_TRANSPORT_MAX]; /* the transport's name: the text's first word */
  int links;
  double latency_us, bandwidth_gbps; /* medians */
} lc_class_t;

typedef struct lc_outlier {
  int src, dst;
  int what; /* enum lc_what */
  double ratio;
  char text[LC_TEXT_MAX];
} lc_outlier_t;

typedef struct lc_slow_node {
  int node;
  int nlinks; /* the links between this node and the others */
  int what;
  double ratio; /* median over those links of their ratios */
  char text[LC_TEXT_MAX];
} lc_slow_node_t;

/* Everything rank 0 prints, from the gathered matrix. */
typedef struct lc_analysis {
  int nranks;
  const char (*hosts)[LC_HOST_MAX]; /* one per rank, unique per node */
  const lc_link_t *links;           /* nranks x nranks, [src * nranks + dst] */
  double threshold;
  int *node_of;                     /* node of each rank, numbered by first rank */
  int nnodes;
  double median_latency_us, median_bandwidth_gbps; /* over every link */
  int nclasses;
  lc_class_t classes[LC_MAX_CLASSES];
  int *class_of;                    /* per link; -1 on the diagonal */
  double *bw_ratio, *lat_ratio;     /* per link, against its class's median */
  lc_outlier_t *outliers;
  int noutliers;
  lc_slow_node_t *slow_nodes;
  int nslow_nodes;
  int node_check; /* 0: fewer than 3 nodes, no node stands out of a pair */
} lc_analysis_t;

double lc_median(const double *v, int n);
/* With an even count: side > 0 the upper middle value, side < 0 the lower,
 * 0 their mean (lc_median). */
double lc_median_side(const double *v, int n, int side);
/* Fills a from the matrix; hosts must already be unique per node
 * (lc_label_hosts). Returns 0, or -1 when out of memory. */
int lc_analyze(lc_analysis_t *a, int nranks, const char (*hosts)[LC_HOST_MAX],
               const lc_link_t *links, double threshold);
void lc_analysis_free(lc_analysis_t *a);
/* Nodes from the links' same_node flags; where ranks on different nodes
 * share a host name (namespaces of one machine without RCOLL_HOSTID),
 * "#<node>" is appended so that the lines tell them apart. */
int lc_label_hosts(int nranks, char (*hosts)[LC_HOST_MAX], const lc_link_t *links);

/* ------------------------------------------------------------ report */

void lc_report_print(FILE *f, const lc_analysis_t *a, const lc_opts_t *o, double seconds);
/* Returns 0, or -1 after printing why the file could not be written. */
int lc_report_json(const char *path, const lc_analysis_t *a, const lc_opts_t *o, double seconds);
void lc_print_schedule(FILE *f, int n);

#endif
