/* rcoll_linkcheck: the slow-link finder. Every pair of ranks, in rounds,
 * measures latency and bandwidth over the transport the library uses
 * between them; rank 0 prints both matrices, the medians, and a line for
 * every link and node out of line with the median, and exits 1 when there
 * is one (docs/operators.md). Launched as the benches are: -t N threads,
 * mpiexec, or RANK/WORLD_SIZE with RCOLL_COMM_ID (or MASTER_ADDR/PORT). */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rcoll_linkcheck_run.h"

static const char usage_text[] =
    "usage: %s [-t N] [-b BYTES] [-n N] [-k N] [--threshold F] [-J FILE] [-T SECONDS]\n"
    "       %s --print-schedule N\n"
    "Every pair of ranks, in round-robin rounds (each rank in one pair at a time),\n"
    "measures latency (8-byte round trips) and bandwidth (-b byte messages) in both\n"
    "directions, over the transport rcoll uses between them. Rank 0 prints the\n"
    "bandwidth and latency matrices, the medians, and one line per link or node out of\n"
    "line, e.g. \"rank 5 (node-b) \u2192 rank 9 (node-c): 0.31 of median bandwidth\".\n"
    "Each link is compared with the median of links on the same transport.\n"
    "  -t N              ranks in this process, one thread each (default 1; launch\n"
    "                    more processes with mpiexec or RANK/WORLD_SIZE)\n"
    "  -b BYTES          bandwidth message size, K/M/G suffixes (default 4M)\n"
    "  -n N              timed bandwidth messages per direction, each acknowledged;\n"
    "                    the median rate is kept (default 5)\n"
    "  -k N              timed round trips per direction (default 100)\n"
    "  --threshold F     out of line: under F of the median bandwidth, or over 1/F of\n"
    "                    the median latency; 0 < F <= 1 (default 0.5)\n"
    "  -J FILE           write the results as JSON (schema in docs/operators.md)\n"
    "  -T SECONDS        end the run (status 2) if it has not finished by then, naming\n"
    "                    what each rank was measuring; 0: no limit (default 0)\n"
    "  --print-schedule N  print the rounds for N ranks and exit\n"
    "Exit status: 0 every link within the threshold; 1 some link or node out of line;\n"
    "2 bad usage or a failed call. RCOLL_TIMEOUT bounds each call's wait as usual.\n";

/* ------------------------------------------------------------ options */

static int parse_int(const char *flag, const char *text, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (end == text || *end || errno || v < lo || v > hi) {
    fprintf(stderr, "rcoll_linkcheck: %s '%s': want a whole number in %d..%d\n", flag, text, lo,
            hi);
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int parse_threshold(const char *text, double *out) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || *end || errno || !(v > 0 && v <= 1)) {
    fprintf(stderr, "rcoll_linkcheck: --threshold '%s': want a fraction of the median, "
                    "0 < F <= 1 (0.5: half the median bandwidth, twice the latency)\n", text);
    return -1;
  }
  *out = v;
  return 0;
}

static int parse_bytes(const char *text, size_t *out) {
  if (bench_parse_size(text, out) != 0 || *out == 0 || *out > ((size_t)1 << 34)) {
    fprintf(stderr, "rcoll_linkcheck: -b '%s': want a size of 1 byte to 16G "
                    "(K/M/G suffixes)\n", text);
    return -1;
  }
  return 0;
}

/* Returns 0 to run, 1 after --help, -1 on a bad flag (printed). */
static int parse_args(int argc, char **argv, lc_opts_t *o) {
  static const struct option longs[] = {
      {"threshold", required_argument, NULL, 'F'}, {"print-schedule", required_argument, NULL, 'P'},
      {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  *o = (lc_opts_t){.nthreads = 1, .bytes = 4 << 20, .iters = 5, .pings = 100, .threshold = 0.5};
  int c, bad = 0;
  while (!bad && (c = getopt_long(argc, argv, "t:b:n:k:J:T:h", longs, NULL)) != -1) {
    switch (c) {
    case 't': bad = parse_int("-t", optarg, 1, 1024, &o->nthreads); break;
    case 'b': bad = parse_bytes(optarg, &o->bytes); break;
    case 'n': bad = parse_int("-n", optarg, 1, 1000000, &o->iters); break;
    case 'k': bad = parse_int("-k", optarg, 1, 10000000, &o->pings); break;
    case 'F': bad = parse_threshold(optarg, &o->threshold); break;
    case 'J': o->json_path = optarg; break;
    case 'T': bad = parse_int("-T", optarg, 0, 31 * 86400, &o->timeout); break;
    case 'P': bad = parse_int("--print-schedule", optarg, 2, 100000, &o->print_schedule); break;
    case 'h': printf(usage_text, argv[0], argv[0]); return 1;
    default: bad = -1; break; /* getopt printed it */
    }
  }
  if (!bad && optind < argc) {
    fprintf(stderr, "rcoll_linkcheck: unexpected argument '%s' (see --help)\n", argv[optind]);
    bad = -1;
  }
  return bad ? -1 : 0;
}

/* ------------------------------------------------------------ -T */

static struct {
  lc_rank_t *ranks;
  int nthreads, seconds;
  bench_world_t *world;
  atomic_int done;
} dog;

static void *watch(void *arg) {
  (void)arg;
  struct timespec step = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};
  for (long ms = 0; ms < (long)dog.seconds * 1000; ms += 100) {
    nanosleep(&step, NULL);
    if (atomic_load(&dog.done))
      return NULL;
  }
  fflush(stdout);
  for (int i = 0; i < dog.nthreads; i++) {
    lc_rank_t *r = &dog.ranks[i];
    char doing[128];
    lc_describe(r, doing, sizeof doing);
    int who = atomic_load(&r->who);
    if (who >= 0)
      fprintf(stderr, "rcoll_linkcheck: -T %d s passed: rank %d was %s\n", dog.seconds, who, doing);
    else
      fprintf(stderr, "rcoll_linkcheck: -T %d s passed: thread %d was %s\n", dog.seconds, i, doing);
  }
  bench_world_abort(dog.world, LC_EXIT_ERROR);
}

static void watchdog_start(lc_rank_t *ranks, int nthreads, bench_world_t *w, int seconds) {
  pthread_t tid;
  dog.ranks = ranks, dog.nthreads = nthreads, dog.world = w, dog.seconds = seconds;
  if (pthread_create(&tid, NULL, watch, NULL) == 0)
    pthread_detach(tid);
  else
    fprintf(stderr, "rcoll_linkcheck: -T %d: cannot start the watchdog thread; no limit\n",
            seconds);
}

/* ------------------------------------------------------------ one rank */

static double start_sec;

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* RCOLL_HOSTID (or NCCL_HOSTID) names the node when set, as for the
 * library; else the host name. */
static void host_label(char *out) {
  const char *id = getenv("RCOLL_HOSTID");
  if (!id || !*id)
    id = getenv("NCCL_HOSTID");
  if (id && *id)
    snprintf(out, LC_HOST_MAX, "%s", id);
  else if (gethostname(out, LC_HOST_MAX - 1) != 0)
    snprintf(out, LC_HOST_MAX, "?");
  out[LC_HOST_MAX - 1] = '\0';
}

static void fail_alloc(lc_rank_t *r, const char *what) {
  fprintf(stderr, "rank %d: cannot allocate %s\n", r->rank, what);
  rcollCommAbort(r->comm);
  bench_world_abort(r->world, LC_EXIT_ERROR);
}

/* Rank 0: the analysis, the report and the JSON; returns the exit status. */
static int report(const lc_opts_t *o, int n, char (*hosts)[LC_HOST_MAX], const lc_link_t *links) {
  lc_analysis_t a;
  double seconds = now_sec() - start_sec;
  if (lc_label_hosts(n, hosts, links) != 0 || lc_analyze(&a, n, (const char(*)[LC_HOST_MAX])hosts,
                                                          links, o->threshold) != 0) {
    fprintf(stderr, "rank 0: out of memory analysing %d x %d links\n", n, n);
    return LC_EXIT_ERROR;
  }
  lc_report_print(stdout, &a, o, seconds);
  int status = a.noutliers || a.nslow_nodes ? LC_EXIT_SLOW : LC_EXIT_OK;
  if (o->json_path && lc_report_json(o->json_path, &a, o, seconds) != 0)
    status = LC_EXIT_ERROR;
  lc_analysis_free(&a);
  return status;
}

/* Everything's rows and host names to rank 0. */
static int gather(lc_rank_t *r) {
  int n = r->nranks, status = 0;
  char host[LC_HOST_MAX] = "";
  char(*hosts)[LC_HOST_MAX] = NULL;
  lc_link_t *links = NULL;
  host_label(host);
  if (r->rank == 0) {
    hosts = calloc((size_t)n, sizeof *hosts);
    links = calloc((size_t)n * n, sizeof *links);
    if (!hosts || !links)
      fail_alloc(r, "the matrix of results");
  }
  atomic_store(&r->phase, LC_PHASE_GATHER);
  rcollResult_t res = rcollGather(host, hosts, LC_HOST_MAX, rcollInt8, 0, r->comm, NULL);
  if (res == rcollSuccess)
    res = rcollGather(r->row, links, (size_t)n * sizeof *links, rcollInt8, 0, r->comm, NULL);
  if (res != rcollSuccess)
    bench_fail(r->world, r->rank, r->comm, "rcollGather (results to rank 0)", res);
  if (r->rank == 0)
    status = report(r->opts, n, hosts, links);
  free(hosts);
  free(links);
  return status;
}

static void *rank_main(void *arg) {
  lc_rank_t *r = arg;
  r->rank = bench_world_comm_init(r->world, r->thread, &r->comm);
  atomic_store(&r->who, r->rank);
  r->buf = malloc(r->opts->bytes);
  r->rtt = malloc((size_t)r->opts->pings * sizeof *r->rtt);
  r->bw = malloc((size_t)r->opts->iters * sizeof *r->bw);
  r->row = calloc((size_t)r->nranks, sizeof *r->row);
  if (!r->buf || !r->rtt || !r->bw || !r->row)
    fail_alloc(r, "the message buffers");
  memset(r->buf, r->rank & 0xff, r->opts->bytes); /* page faults now, not while timed */
  lc_measure_all(r);
  int status = gather(r);
  atomic_store(&r->phase, LC_PHASE_DONE);
  /* Every process leaves with rank 0's verdict, so a launcher sees it. */
  status = (int)bench_world_reduce(r->world, r->thread, status, BENCH_RED_MAX);
  free(r->buf);
  free(r->rtt);
  free(r->bw);
  free(r->row);
  rcollResult_t res = rcollCommDestroy(r->comm);
  if (res != rcollSuccess)
    bench_fail(r->world, r->rank, NULL, "rcollCommDestroy", res);
  r->status = status;
  return NULL;
}

int main(int argc, char **argv) {
  setlinebuf(stdout);
  start_sec = now_sec();
  lc_opts_t o;
  int parsed = parse_args(argc, argv, &o);
  if (parsed != 0)
    return parsed > 0 ? LC_EXIT_OK : LC_EXIT_ERROR;
  if (o.print_schedule) {
    lc_print_schedule(stdout, o.print_schedule);
    return LC_EXIT_OK;
  }
  bench_world_t world;
  if (bench_world_init(&world, &argc, &argv, o.nthreads) != 0)
    return LC_EXIT_ERROR;
  if (world.nranks < 2) {
    fprintf(stderr, "rcoll_linkcheck: %d rank: a link needs two; launch -t N threads, or N "
                    "processes with mpiexec or RANK/WORLD_SIZE\n", world.nranks);
    bench_world_finalize(&world);
    return LC_EXIT_ERROR;
  }
  lc_rank_t *ranks = calloc((size_t)o.nthreads, sizeof *ranks);
  if (!ranks)
    return LC_EXIT_ERROR;
  for (int i = 0; i < o.nthreads; i++) {
    ranks[i] = (lc_rank_t){.opts = &o, .world = &world, .thread = i, .rank = -1,
                           .nranks = world.nranks};
    atomic_init(&ranks[i].peer, -1);
    atomic_init(&ranks[i].who, -1);
  }
  if (o.timeout)
    watchdog_start(ranks, o.nthreads, &world, o.timeout);
  for (int i = 1; i < o.nthreads; i++)
    if (pthread_create(&ranks[i].tid, NULL, rank_main, &ranks[i]) != 0) {
      fprintf(stderr, "rcoll_linkcheck: cannot start thread %d\n", i);
      bench_world_abort(&world, LC_EXIT_ERROR);
    }
  rank_main(&ranks[0]);
  for (int i = 1; i < o.nthreads; i++)
    pthread_join(ranks[i].tid, NULL);
  atomic_store(&dog.done, 1);
  int status = ranks[0].status;
  free(ranks);
  bench_world_finalize(&world);
  return status;
}
