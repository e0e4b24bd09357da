/* rcoll_tune: prints the tuner's predictions for a topology, without running
 * anything: for each size, every algorithm's predicted time (at its best
 * chunk) and what the tuner would choose.
 *
 *   bench/rcoll_tune -n 4 -N 2 -t socket           4 ranks on 2 nodes, socket between them
 *   bench/rcoll_tune -n 8 -N 2 -i shm -t ib -c all every collective
 *   -b 8 -e 256M -f 4    sizes (bytes of the whole vector), as in the perf tools
 *   -r                   ranks round robin over the nodes instead of in blocks
 *   -s                   machines run more ranks than they have cores
 *   -p R                 machines run R ranks per core (R > 1 implies -s; tune_cost.h:
 *                        rcoll_cost_shared_bytes)
 *   -w slots             receives in flight per connection (default RCOLL_NSLOTS)
 *   -m FILE              predicted vs measured: FILE is the output of a bench/XXX_perf run
 *                        of the collective (-c) on this topology (repeat -m for several);
 *                        each of its rows is printed beside the model's time for the
 *                        algorithm and chunk that ran (its "# Algorithm" lines) and the
 *                        ratio measured / predicted, so a reader sees how good the model is
 *
 * Link parameters are the transports' defaults, adjusted by RCOLL_TUNE_ALPHA,
 * RCOLL_TUNE_BW and RCOLL_TUNE_REDUCE_BW; RCOLL_ALGO, RCOLL_DETERMINISTIC and
 * RCOLL_CHUNK_SIZE apply as in a communicator.
 *
 * Built by `make` as a tool of its own, linked with the static library
 * (rcoll_info likewise): it calls the tuner's internal API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "topo.h"
#include "tune_cost.h"
#include "tuner.h"

typedef struct tool_opts {
  int nranks, nnodes, round_robin, coll; /* coll -1: all */
  int cores_shared, window;               /* window 0: RCOLL_NSLOTS */
  double ranks_per_core;                  /* 0: not given */
  const char *intra, *inter;
  size_t min_bytes, max_bytes;
  double factor;
  const char *measured[16];
  int nmeasured;
} tool_opts_t;

static size_t parse_size(const char *s) {
  int64_t v;
  if (rcoll_settings_parse_int(s, &v) != 0 || v <= 0) {
    fprintf(stderr, "rcoll_tune: bad size \"%s\"\n", s);
    exit(2);
  }
  return (size_t)v;
}

static int parse_coll(const char *s) {
  if (!strcmp(s, "all"))
    return -1;
  for (int c = 0; c < RCOLL_COLL_NKINDS; c++)
    if (!rcoll_coll_is_p2p(c) && !strcmp(s, rcoll_coll_name(c)))
      return c;
  fprintf(stderr, "rcoll_tune: unknown collective \"%s\" (allreduce, broadcast, reduce, allgather, "
          "reduce_scatter, alltoall, gather, scatter, all)\n", s);
  exit(2);
}

static void usage(void) {
  fprintf(stderr, "usage: rcoll_tune [-n ranks] [-N nodes] [-r] [-s] [-p ranks-per-core] [-w slots]\n"
                  "                  [-i intra-net] [-t inter-net] [-c collective|all]\n"
                  "                  [-b min] [-e max] [-f factor] [-m perf-output]...\n");
  exit(2);
}

static void parse(int argc, char **argv, tool_opts_t *o) {
  *o = (tool_opts_t){4, 2, 0, RCOLL_COLL_ALLREDUCE, 0, 0, 0, "shm", "socket", 8, 256 << 20, 4, {NULL}, 0};
  int c;
  while ((c = getopt(argc, argv, "n:N:rsp:w:i:t:c:b:e:f:m:h")) != -1) {
    switch (c) {
    case 'n': o->nranks = atoi(optarg); break;
    case 'N': o->nnodes = atoi(optarg); break;
    case 'r': o->round_robin = 1; break;
    case 's': o->cores_shared = 1; break;
    case 'p':
      o->ranks_per_core = atof(optarg);
      if (!(o->ranks_per_core > 0))
        usage();
      o->cores_shared |= o->ranks_per_core > 1;
      break;
    case 'w': o->window = atoi(optarg); break;
    case 'i': o->intra = optarg; break;
    case 't': o->inter = optarg; break;
    case 'c': o->coll = parse_coll(optarg); break;
    case 'b': o->min_bytes = parse_size(optarg); break;
    case 'e': o->max_bytes = parse_size(optarg); break;
    case 'f': o->factor = atof(optarg); break;
    case 'm':
      if (o->nmeasured == 16)
        usage();
      o->measured[o->nmeasured++] = optarg;
      break;
    default: usage();
    }
  }
  if (o->nranks < 1 || o->nnodes < 1 || o->nnodes > o->nranks || o->factor <= 1 ||
      (o->nmeasured > 0 && o->coll < 0))
    usage();
}

/* Host ids "node<k>" in blocks or round robin, as a launcher would place. */
static int make_topo(const tool_opts_t *o, rcoll_topo_t *topo) {
  char(*ids)[16] = calloc((size_t)o->nranks, sizeof *ids);
  int per = (o->nranks + o->nnodes - 1) / o->nnodes;
  for (int r = 0; r < o->nranks; r++)
    snprintf(ids[r], sizeof ids[r], "node%d", o->round_robin ? r % o->nnodes : r / per);
  int rc = rcoll_topo_build(topo, ids[0], sizeof ids[0], o->nranks, 0) == rcollSuccess ? 0 : -1;
  free(ids);
  return rc;
}

static void print_table(const rcoll_tuner_t *t, int coll, const tool_opts_t *o) {
  printf("\n# %s: predicted us at each algorithm's best chunk\n# %12s", rcoll_coll_name(coll), "bytes");
  for (int a = 0; a < rcoll_algo_family_count(); a++)
    if (rcoll_tune_applies(t, coll, a))
      printf(" %13s", rcoll_algo_name(a));
  printf(" %14s %9s\n", "choice", "chunk");
  for (double b = (double)o->min_bytes; b <= (double)o->max_bytes; b *= o->factor) {
    size_t bytes = (size_t)b;
    printf("  %12zu", bytes);
    for (int a = 0; a < rcoll_algo_family_count(); a++) {
      double us = rcoll_tune_applies(t, coll, a) ? rcoll_tune_best(t, coll, a, bytes).time_us : 0;
      if (us < 0) /* not at this size (flat: above its slot) */
        printf(" %13s", "-");
      else if (rcoll_tune_applies(t, coll, a))
        printf(" %13.1f", us);
    }
    rcoll_tune_choice_t ch = rcoll_tune_choose((rcoll_tuner_t *)t, coll, bytes);
    printf(" %14s %9zu\n", rcoll_algo_name(ch.algo), ch.chunk);
  }
}

/* ---- predicted vs measured (-m) ---- */

/* What a *_perf run printed: "# Algorithm LO - HI B : NAME, chunk C B"
 * for each range of sizes, and rows "SIZE COUNT TYPE REDOP ROOT TIME ...". */
#define MAX_RANGES 64
typedef struct ran_range {
  size_t lo, hi, chunk;
  int algo;      /* -1: not one of the tuner's (the flat board, lib/flat.h: no model) */
  char name[64];
} ran_range_t;

static int algo_by_name(const char *name) {
  for (int a = 0; a < rcoll_algo_family_count(); a++)
    if (!strcmp(name, rcoll_algo_name(a)))
      return a;
  return -1;
}

static int read_ranges(FILE *f, ran_range_t *r) {
  char line[1024];
  int n = 0;
  while (n < MAX_RANGES && fgets(line, sizeof line, f) != NULL) {
    unsigned long long lo, hi, chunk;
    char name[64];
    if (sscanf(line, "# Algorithm %llu - %llu B : %63[^,], chunk %llu B", &lo, &hi, name, &chunk) == 4)
    {
      r[n] = (ran_range_t){(size_t)lo, (size_t)hi, (size_t)chunk, algo_by_name(name), ""};
      snprintf(r[n++].name, sizeof r->name, "%s", name);
    }
  }
  return n;
}

static const ran_range_t *range_of(const ran_range_t *r, int n, size_t bytes) {
  for (int i = 0; i < n; i++)
    if (bytes >= r[i].lo && bytes <= r[i].hi)
      return &r[i];
  return NULL;
}

/* One table per file: each row's out-of-place time beside the model's
 * prediction for what ran, and what the model would choose itself. */
static int print_measured(const rcoll_tuner_t *t, int coll, const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "rcoll_tune: cannot open %s\n", path);
    return -1;
  }
  ran_range_t ranges[MAX_RANGES];
  int nr = read_ranges(f, ranges), rows = 0;
  rewind(f);
  printf("\n# %s measured in %s (out of place) beside the model: predicted us for the algorithm and\n"
         "# chunk that ran; meas/pred > 1: the model is optimistic\n# %12s %14s %9s %11s %11s %9s %14s %11s\n",
         rcoll_coll_name(coll), path, "bytes", "ran", "chunk", "predicted", "measured", "meas/pred",
         "model's choice", "its pred");
  char line[1024];
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long long bytes, count;
    char type[32], op[32], root[32];
    double us;
    if (line[0] == '#' || sscanf(line, "%llu %llu %31s %31s %31s %lf", &bytes, &count, type, op, root, &us) != 6)
      continue;
    const ran_range_t *r = range_of(ranges, nr, (size_t)bytes);
    double pred = r != NULL && r->algo >= 0 ? rcoll_tune_predict(t, coll, r->algo, (size_t)bytes, r->chunk) : -1;
    rcoll_tune_choice_t ch = rcoll_tune_choose((rcoll_tuner_t *)t, coll, (size_t)bytes);
    char ratio[16] = "-", predicted[24] = "-";
    if (pred > 0)
      snprintf(ratio, sizeof ratio, "%.2f", us / pred), snprintf(predicted, sizeof predicted, "%.1f", pred);
    printf("  %12llu %14s %9zu %11s %11.1f %9s %14s %11.1f\n", bytes,
           r != NULL ? r->name : "?", r != NULL ? r->chunk : 0, predicted, us,
           ratio, rcoll_algo_name(ch.algo), ch.time_us);
    rows++;
  }
  fclose(f);
  if (rows == 0)
    fprintf(stderr, "rcoll_tune: no rows of a *_perf table in %s\n", path);
  return rows > 0 ? 0 : -1;
}

int main(int argc, char **argv) {
  tool_opts_t o;
  parse(argc, argv, &o);
  rcoll_settings_t s;
  rcoll_topo_t topo;
  if (rcoll_settings_load(&s) != rcollSuccess || make_topo(&o, &topo) != 0)
    return 1;
  const char *nets[2] = {o.intra, o.inter};
  rcoll_tune_link_t links[2] = {rcoll_tune_default_link(o.intra), rcoll_tune_default_link(o.inter)};
  rcoll_tune_params_t prm;
  size_t chunk = (size_t)(s.chunk_size < 4096 ? 4096 : s.chunk_size) & ~(size_t)63;
  if (rcoll_tune_params_from_settings(&s, nets, links, chunk, &prm) != rcollSuccess)
    return 1;
  prm.window = o.window > 0 ? o.window : (int)s.nslots;
  prm.cores_shared = o.cores_shared;
  prm.ranks_per_core = o.ranks_per_core;
  /* Ranks of one machine over shared memory get the flat board (lib/flat.h). */
  if (o.nnodes == 1 && strcmp(o.intra, "shm") == 0 && s.trace[0] == '\0')
    prm.flat_max = (size_t)s.flat_max;
  rcoll_tuner_t *t = malloc(sizeof *t);
  if (t == NULL || rcoll_tuner_setup(t, &topo, &prm) != rcollSuccess)
    return 1;
  printf("# rcoll tuner model: %d ranks on %d nodes (%s, at most %d per node)\n", t->nranks, t->nnodes,
         o.round_robin ? "round robin" : "in blocks", t->ppn);
  printf("# intra %s: %.1f us, %.2f GB/s; inter %s: %.1f us, %.2f GB/s; reduce %.1f GB/s; "
         "chunk <= %zu; window %d%s%s\n", o.intra, prm.intra.alpha_us, prm.intra.gbps, o.inter,
         prm.inter.alpha_us, prm.inter.gbps, prm.reduce_gbps, prm.max_chunk, prm.window,
         prm.cores_shared ? "; cores shared" : "", prm.deterministic ? "; deterministic" : "");
  if (prm.ranks_per_core > 1)
    printf("# %.1f ranks per core: a byte of recursive doubling or the star costs %.2f times as much\n",
           prm.ranks_per_core, rcoll_cost_shared_bytes(t));
  for (int c = 0; c < RCOLL_COLL_NKINDS; c++)
    if (!rcoll_coll_is_p2p(c) && (o.coll < 0 || o.coll == c))
      print_table(t, c, &o);
  int rc = 0;
  for (int i = 0; i < o.nmeasured; i++)
    rc |= print_measured(t, o.coll, o.measured[i]) != 0;
  free(t);
  rcoll_topo_free(&topo);
  return rc;
}
