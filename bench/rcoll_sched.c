/* rcoll_sched: the schedule of one collective, as every rank would run it.
 * It builds each rank's real plan (the algorithm's own planner, on fake
 * communicators: lib/plan_world.h), runs them in the in-memory simulator,
 * and prints them: a table of every step, each rank's totals against the
 * algorithm's formula, and the time of the schedule replayed under the
 * tuner's alpha-beta figures next to the tuner's own prediction. With
 * --svg it draws the ranks as lanes and the messages as arrows.
 *
 *   bench/rcoll_sched --coll allreduce --algo ring --ranks 4 --bytes 4096
 *   bench/rcoll_sched --coll allreduce --algo hier --ranks 8 --nodes 2 --bytes 64K --svg hier.svg
 *   bench/rcoll_sched --algo list
 *
 * --bytes is nccl-tests' size: the whole vector (the receive side of
 * all-gather, the send side of reduce-scatter). docs/sched.md says more.
 * Built by `make` as a tool of its own, linked with the static library
 * (rcoll_tune likewise): it calls internal APIs. */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "comm.h"
#include "config.h"
#include "plan_sim.h"
#include "rcoll_sched.h"
#include "reduce.h"
#include "tune_cost.h"
#include "tuner.h"

/* Plans grow with the chunks of the vector; past this many the tables and
 * pictures say nothing more, and memory would. */
#define MAX_CHUNKS 65536

typedef struct opts {
  const char *coll, *algo, *svg, *alpha, *bw, *intra, *inter, *type;
  int ranks, nodes, root, quiet;
  size_t bytes, chunk; /* chunk 0: the tuner's best */
} opts_t;

static void usage(FILE *f) {
  fprintf(f, "usage: rcoll_sched --coll C --algo A [--ranks N] [--bytes S] [--chunk B] [--svg FILE]\n"
             "                  [--nodes K] [--root R] [--type T] [-a ALPHA] [-B BW] [-i NET] [-t NET] [-q]\n"
             "       rcoll_sched --algo list [--coll C]\n"
             "  --coll       allreduce, broadcast, reduce, allgather, reduce_scatter, alltoall, gather,\n"
             "               scatter, send\n"
             "  --algo       an algorithm of the collective (--algo list shows them)\n"
             "  --ranks      1..%d (default 4); --nodes K puts them in blocks on K nodes (default 1)\n"
             "  --bytes      the whole vector, K/M/G suffixes (default 4096)\n"
             "  --chunk      pipeline chunk, a multiple of 64 (default: the tuner's best for the algorithm)\n"
             "  --svg        draw the schedule (and a PNG beside it when a converter is found)\n"
             "  --root       root of broadcast and reduce (default 0); --type element type (default float32)\n"
             "  -a, -B       latency in us and bandwidth in GB/s of the links: one number for both\n"
             "               classes, or as RCOLL_TUNE_ALPHA / RCOLL_TUNE_BW (intra=1,inter=250)\n"
             "  -i, -t       transports whose figures model intra- and inter-node links (shm, socket)\n"
             "  -q           totals and times only, no table of steps\n", RCOLL_WORLD_MAX_RANKS);
}

/* A bad argument: says which and why, exits 2. */
static _Noreturn void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "rcoll_sched: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

static size_t parse_size(const char *s, const char *what) {
  int64_t v;
  if (rcoll_settings_parse_int(s, &v) != 0 || v < 0)
    die(what, s);
  return (size_t)v;
}

static int parse_int(const char *s, const char *what) {
  char *end;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 0 || v > 1 << 20)
    die(what, s);
  return (int)v;
}

static void parse(int argc, char **argv, opts_t *o) {
  static const struct option longs[] = {
      {"coll", 1, 0, 'c'}, {"algo", 1, 0, 'A'}, {"ranks", 1, 0, 'n'}, {"bytes", 1, 0, 'b'},
      {"chunk", 1, 0, 'C'}, {"svg", 1, 0, 's'}, {"nodes", 1, 0, 'N'}, {"root", 1, 0, 'r'},
      {"type", 1, 0, 'T'}, {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  *o = (opts_t){.ranks = 4, .nodes = 1, .bytes = 4096, .intra = "shm", .inter = "socket", .type = "float32"};
  int c;
  while ((c = getopt_long(argc, argv, "c:A:n:b:C:s:N:r:T:a:B:i:t:qh", longs, NULL)) != -1) {
    switch (c) {
    case 'c': o->coll = optarg; break;
    case 'A': o->algo = optarg; break;
    case 'n': o->ranks = parse_int(optarg, "--ranks \"%s\": not a rank count"); break;
    case 'b': o->bytes = parse_size(optarg, "--bytes \"%s\": not a size (e.g. 4096, 64K, 1M)"); break;
    case 'C': o->chunk = parse_size(optarg, "--chunk \"%s\": not a size (e.g. 4096, 64K)"); break;
    case 's': o->svg = optarg; break;
    case 'N': o->nodes = parse_int(optarg, "--nodes \"%s\": not a node count"); break;
    case 'r': o->root = parse_int(optarg, "--root \"%s\": not a rank"); break;
    case 'T': o->type = optarg; break;
    case 'a': o->alpha = optarg; break;
    case 'B': o->bw = optarg; break;
    case 'i': o->intra = optarg; break;
    case 't': o->inter = optarg; break;
    case 'q': o->quiet = 1; break;
    case 'h': usage(stdout); exit(0);
    default: usage(stderr); exit(2);
    }
  }
  if (optind < argc)
    die("unexpected argument \"%s\" (rcoll_sched --help)", argv[optind]);
}

/* ------------------------------------------------------------ names */

/* "allreduce, broadcast, ...": the collectives, into buf. */
static const char *colls(char *buf, size_t len) {
  buf[0] = '\0';
  for (int c = 0; c < RCOLL_COLL_NKINDS; c++)
    snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", c ? ", " : "", rcoll_coll_name(c));
  return buf;
}

static int coll_of(const char *name) {
  char known[160];
  for (int c = 0; c < RCOLL_COLL_NKINDS; c++)
    if (strcasecmp(name, rcoll_coll_name(c)) == 0)
      return c;
  die("unknown collective \"%s\" (known: %s)", name, colls(known, sizeof known));
}

/* The algorithms of a collective, "ring, tree, ..." into buf. */
static const char *algos_of(int coll, char *buf, size_t len) {
  buf[0] = '\0';
  for (int i = 0; rcoll_algorithms[i] != NULL; i++)
    if (rcoll_algorithms[i]->coll == (rcoll_coll_kind_t)coll)
      snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? ", " : "", rcoll_algorithms[i]->name);
  return buf;
}

static const rcoll_algorithm_t *algo_of(int coll, const char *name) {
  int fam = rcoll_algo_from_name(name, strlen(name));
  const rcoll_algorithm_t *d = rcoll_algorithm_find(coll, fam);
  char known[256];
  if (d != NULL)
    return d;
  die("%s has no algorithm \"%s\" (%s has: %s; --algo list shows all)", rcoll_coll_name(coll), name,
      rcoll_coll_name(coll), algos_of(coll, known, sizeof known));
}

static void list_algos(const char *coll) {
  int only = coll ? coll_of(coll) : -1;
  printf("# %-15s %-14s %s\n", "collective", "algorithm", "what it does");
  for (int i = 0; rcoll_algorithms[i] != NULL; i++) {
    const rcoll_algorithm_t *d = rcoll_algorithms[i];
    if (only < 0 || (int)d->coll == only)
      printf("  %-15s %-14s %s\n", rcoll_coll_name(d->coll), d->name, d->summary);
  }
}

static rcollDataType_t type_of(const char *name) {
  for (int t = 0; t < rcollNumTypes; t++)
    if (strcasecmp(name, rcoll_type_name((rcollDataType_t)t)) == 0)
      return (rcollDataType_t)t;
  char known[200] = "";
  for (int t = 0; t < rcollNumTypes; t++)
    snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", t ? ", " : "",
             rcoll_type_name((rcollDataType_t)t));
  die("unknown type \"%s\" (known: %s)", name, known);
}

/* ------------------------------------------------------------ the model */

/* -a / -B: one number for both classes, else RCOLL_TUNE_* syntax. */
static void set_links(char *field, const char *arg) {
  if (arg == NULL)
    return;
  if (strchr(arg, '=') != NULL)
    snprintf(field, RCOLL_SETTING_STR_MAX, "%s", arg);
  else
    snprintf(field, RCOLL_SETTING_STR_MAX, "intra=%s,inter=%s", arg, arg);
}

/* The tuner of a communicator of this placement, as rcoll_tune builds it. */
static rcoll_tuner_t *make_tuner(const opts_t *o, rcoll_settings_t *st, const rcoll_topo_t *topo) {
  set_links(st->tune_alpha, o->alpha);
  set_links(st->tune_bw, o->bw);
  const char *nets[2] = {o->intra, o->inter};
  rcoll_tune_link_t links[2] = {rcoll_tune_default_link(o->intra), rcoll_tune_default_link(o->inter)};
  int64_t chunk = st->chunk_size < 4096 ? 4096 : st->chunk_size > (64 << 20) ? 64 << 20 : st->chunk_size;
  rcoll_tune_params_t prm;
  if (rcoll_tune_params_from_settings(st, nets, links, (size_t)chunk & ~(size_t)63, &prm) != rcollSuccess) {
    fprintf(stderr, "rcoll_sched: the tuner's settings (-a \"%s\", -B \"%s\", RCOLL_TUNE_*, RCOLL_ALGO): %s\n",
            o->alpha ? o->alpha : "", o->bw ? o->bw : "", rcollGetLastError(NULL));
    exit(2);
  }
  prm.window = (int)st->nslots;
  if (topo->nnodes == 1 && strcmp(o->intra, "shm") == 0) /* as a communicator over shm maps the board */
    prm.flat_max = (size_t)st->flat_max;
  rcoll_tuner_t *t = malloc(sizeof *t);
  if (t == NULL || rcoll_tuner_setup(t, topo, &prm) != rcollSuccess) {
    fprintf(stderr, "rcoll_sched: cannot build the tuner's model\n");
    exit(1);
  }
  return t;
}

/* ------------------------------------------------------------ building */

static void check_shape(const opts_t *o, sched_t *s) {
  if (o->ranks < 1 || o->ranks > RCOLL_WORLD_MAX_RANKS)
    die("--ranks %d: from 1 to %d", o->ranks, RCOLL_WORLD_MAX_RANKS);
  if (o->nodes < 1 || o->nodes > o->ranks)
    die("--nodes %d: from 1 to the number of ranks (%d)", o->nodes, o->ranks);
  if (o->root >= o->ranks)
    die("--root %d: a rank below --ranks (%d)", o->root, o->ranks);
  if (o->chunk != 0 && (o->chunk % 64 != 0 || o->chunk > (64 << 20)))
    die("--chunk %zu: a multiple of 64 bytes, up to 64M", o->chunk);
  s->n = o->ranks;
  s->nodes = o->nodes;
  s->root = o->root;
}

/* count from --bytes (whole elements, n blocks for all-gather,
 * reduce-scatter, all-to-all, gather and scatter); says when it rounded. */
static void set_count(const opts_t *o, sched_t *s) {
  int blocks = rcoll_coll_per_rank(s->coll);
  size_t unit = s->tsz * (blocks ? (size_t)s->n : 1);
  s->count = o->bytes / unit;
  s->vector = s->count * unit;
  if (s->vector != o->bytes)
    printf("# --bytes %zu is not a whole number of %s%s: using %zu bytes\n", o->bytes,
           blocks ? "blocks of " : "", rcoll_type_name(s->dtype), s->vector);
}

static void build(const opts_t *o, sched_t *s, rcoll_tuner_t *t, const rcoll_settings_t *st) {
  int fam = rcoll_algorithm_family(s->algo);
  s->chunk = o->chunk ? o->chunk : rcoll_tune_best(t, s->coll, fam, s->vector).chunk;
  if (s->vector / s->chunk > MAX_CHUNKS)
    die("%zu bytes in chunks of %zu: %zu chunks, more than a schedule worth printing (%d); give a larger "
        "--chunk", s->vector, s->chunk, s->vector / s->chunk, MAX_CHUNKS);
  s->tuner_us = rcoll_tune_predict(t, s->coll, fam, s->vector, s->chunk);
  size_t slot = (size_t)(st->chunk_size < 4096 ? 4096 : st->chunk_size > (64 << 20) ? 64 << 20 : st->chunk_size);
  slot = (slot & ~(size_t)63) > s->chunk ? slot & ~(size_t)63 : s->chunk;
  int nslots = st->nslots < 2 ? 2 : st->nslots > RCOLL_MAX_SLOTS ? RCOLL_MAX_SLOTS : (int)st->nslots;
  rcoll_world_call_t call = {s->algo, s->count, s->dtype, rcollSum, s->root, 0};
  if (rcoll_world_init(&s->world, s->n, s->node_of, slot, s->chunk, nslots) != rcollSuccess ||
      rcoll_world_plan(&s->world, &call) != rcollSuccess) {
    fprintf(stderr, "rcoll_sched: %s\n", rcollGetLastError(NULL));
    exit(1);
  }
  if (rcoll_replay_run(&s->unit, s->world.plans, s->n, NULL) != 0 ||
      rcoll_replay_run(&s->timed, s->world.plans, s->n, t) != 0) {
    fprintf(stderr, "rcoll_sched: the plans do not fit together: %s\n",
            s->unit.error[0] ? s->unit.error : s->timed.error);
    exit(1);
  }
}

/* Runs the plans over unbuffered connections, the strictest transport:
 * they must complete. Skipped where the buffers would be large. */
static void simulate(sched_t *s) {
  static rcoll_sim_t sim;
  if (s->world.send_bytes > (64u << 20) || s->world.recv_bytes > (64u << 20)) {
    printf("# simulator: skipped (buffers over 64 MiB)\n");
    return;
  }
  rcoll_sim_init(&sim, s->world.plans, s->n, 1, s->world.comms[0]->nslots, 1);
  if (rcoll_sim_run(&sim, 0) != 0) {
    printf("# simulator: the plans FAILED: %s\n", sim.error);
    exit(1);
  }
  printf("# simulator: every rank's plan ran to completion over unbuffered connections\n");
}

/* ------------------------------------------------------------ what a step carries */

const char *sched_kind(const rcoll_step_t *st) {
  static const char *const kinds[] = {"send", "recv", "recv-reduce", "copy"};
  if (rcoll_step_is_join(st))
    return "join";
  if (st->flags & RCOLL_STEP_BOARD)
    return "board";
  if (st->kind == RCOLL_STEP_COPY && st->src == NULL)
    return "finish";
  return st->kind < RCOLL_STEP_NKINDS ? kinds[st->kind] : "?";
}

/* Offset in the whole vector of a pointer into rank r's own buffers: its
 * all-gather and gather input is block r, its reduce-scatter and scatter
 * result block r. */
static long long user_offset(const sched_t *s, int r, const void *ptr) {
  const char *p = ptr, *sb = s->world.send[r], *rb = s->world.recv[r];
  long long block = (long long)(s->count * s->tsz);
  if (p != NULL && p >= sb && p < sb + s->world.send_bytes)
    return (p - sb) + (s->coll == RCOLL_COLL_ALLGATHER || s->coll == RCOLL_COLL_GATHER ? r * block : 0);
  if (p != NULL && p >= rb && p < rb + s->world.recv_bytes)
    return (p - rb) + (s->coll == RCOLL_COLL_REDUCE_SCATTER || s->coll == RCOLL_COLL_SCATTER ? r * block : 0);
  return -1;
}

/* A pointer's offset; a scratch piece holds what the latest earlier step
 * that wrote it made from a user buffer. */
static long long ptr_offset(const sched_t *s, int r, const void *ptr, int before) {
  long long off = user_offset(s, r, ptr);
  const rcoll_plan_t *p = s->world.plans[r];
  for (int j = before - 1; off < 0 && ptr != NULL && j >= 0; j--) {
    const rcoll_step_t *st = &p->steps[j];
    const char *d = st->dst, *q = ptr;
    if (d != NULL && q >= d && q < d + st->bytes && st->src != NULL && user_offset(s, r, st->src) >= 0)
      return user_offset(s, r, st->src) + (q - d);
  }
  return off;
}

long long sched_step_offset(const sched_t *s, int r, int k) {
  const rcoll_step_t *st = &s->world.plans[r]->steps[k];
  if (rcoll_step_is_join(st))
    return -1;
  if (st->kind == RCOLL_STEP_SEND)
    return ptr_offset(s, r, st->src, k);
  long long off = ptr_offset(s, r, st->dst, k);
  return off >= 0 ? off : ptr_offset(s, r, st->src, k);
}

/* Adds an offset to the sorted set of pieces; -1 when it is full. */
static int add_piece(sched_t *s, long long off) {
  int i = 0;
  while (i < s->npieces && s->piece[i] < off)
    i++;
  if (i < s->npieces && s->piece[i] == off)
    return 0;
  if (s->npieces == SCHED_MAX_PIECES)
    return -1;
  memmove(&s->piece[i + 1], &s->piece[i], (size_t)(s->npieces - i) * sizeof s->piece[0]);
  s->piece[i] = off;
  s->npieces++;
  return 0;
}

void sched_find_pieces(sched_t *s) {
  s->npieces = 0;
  for (int r = 0; r < s->n; r++)
    for (int k = 0; k < s->world.plans[r]->nsteps; k++) {
      long long off = sched_step_offset(s, r, k);
      if (off >= 0 && add_piece(s, off) != 0) {
        s->npieces = 0;
        return;
      }
    }
}

int sched_bands(const sched_t *s) { return s->npieces > 0 ? s->npieces : SCHED_MAX_PIECES; }

int sched_band(const sched_t *s, long long offset) {
  if (offset < 0 || s->vector == 0)
    return -1;
  if (s->npieces > 0) { /* the last piece that starts at or before it */
    int b = 0;
    while (b + 1 < s->npieces && s->piece[b + 1] <= offset)
      b++;
    return b;
  }
  long long b = offset * SCHED_MAX_PIECES / (long long)s->vector;
  return b >= SCHED_MAX_PIECES ? SCHED_MAX_PIECES - 1 : (int)b;
}

/* ------------------------------------------------------------ printing */

/* Where a pointer of rank r lies: "send+64", "recv+0", "scratch[2]+0". */
static const char *where(const sched_t *s, int r, const void *ptr, char *buf, size_t len) {
  const char *p = ptr, *sb = s->world.send[r], *rb = s->world.recv[r];
  const struct rcollComm *c = s->world.comms[r];
  size_t piece = c->chunk_bytes;
  if (p == NULL)
    snprintf(buf, len, "-");
  else if (p >= sb && p < sb + s->world.send_bytes)
    snprintf(buf, len, "send+%td", p - sb);
  else if (p >= rb && p < rb + s->world.recv_bytes)
    snprintf(buf, len, "recv+%td", p - rb);
  else if (p >= c->scratch && p < c->scratch + (size_t)c->nscratch * piece)
    snprintf(buf, len, "scratch[%zu]+%zu", (size_t)(p - c->scratch) / piece, (size_t)(p - c->scratch) % piece);
  else
    snprintf(buf, len, "?");
  return buf;
}

/* The buffers a step reads and writes, in words. */
static void step_buffers(const sched_t *s, int r, const rcoll_step_t *st, char *out, size_t len) {
  char a[64], b[64];
  switch (st->kind) {
  case RCOLL_STEP_SEND: snprintf(out, len, "from %s", where(s, r, st->src, a, sizeof a)); break;
  case RCOLL_STEP_RECV: snprintf(out, len, "into %s", where(s, r, st->dst, a, sizeof a)); break;
  case RCOLL_STEP_RECV_REDUCE:
    snprintf(out, len, "%s = %s + message%s", where(s, r, st->dst, a, sizeof a), where(s, r, st->src, b, sizeof b),
             st->flags & RCOLL_STEP_FINISH ? " (last: finish)" : "");
    break;
  default:
    if (rcoll_step_is_join(st))
      snprintf(out, len, "waits for both");
    else if (st->src == NULL)
      snprintf(out, len, "finish %s on %s", rcoll_op_name((rcollRedOp_t)st->op), where(s, r, st->dst, a, sizeof a));
    else
      snprintf(out, len, "%s <- %s", where(s, r, st->dst, a, sizeof a), where(s, r, st->src, b, sizeof b));
  }
}

static void print_steps(const sched_t *s) {
  printf("#\n# %4s %4s %-11s %4s %10s %10s %-11s %s\n", "rank", "step", "kind", "peer", "offset", "bytes", "after",
         "buffers");
  for (int r = 0; r < s->n; r++) {
    const rcoll_plan_t *p = s->world.plans[r];
    for (int k = 0; k < p->nsteps; k++) {
      const rcoll_step_t *st = &p->steps[k];
      char peer[16] = "-", off[24] = "-", after[24] = "-", bufs[200];
      if (st->kind != RCOLL_STEP_COPY)
        snprintf(peer, sizeof peer, "%d", st->peer);
      long long o = sched_step_offset(s, r, k);
      if (o >= 0)
        snprintf(off, sizeof off, "%lld", o);
      if (st->dep[0] != RCOLL_NO_DEP && st->dep[1] != RCOLL_NO_DEP)
        snprintf(after, sizeof after, "%d,%d", st->dep[0], st->dep[1]);
      else if (st->dep[0] != RCOLL_NO_DEP || st->dep[1] != RCOLL_NO_DEP)
        snprintf(after, sizeof after, "%d", st->dep[0] != RCOLL_NO_DEP ? st->dep[0] : st->dep[1]);
      step_buffers(s, r, st, bufs, sizeof bufs);
      printf("  %4d %4d %-11s %4s %10s %10zu %-11s %s\n", r, k, sched_kind(st), peer, off, st->bytes, after, bufs);
    }
  }
}

static void print_line(const char *label, int r, const rcoll_traffic_t *t) {
  int whole = t->sent == floor(t->sent) && t->received == floor(t->received) && t->reduced == floor(t->reduced);
  printf(whole ? "%s %d: sent %.0f bytes, received %.0f bytes, reduced %.0f elements\n"
               : "%s %d: sent %.2f bytes, received %.2f bytes, reduced %.2f elements\n",
         label, r, t->sent, t->received, t->reduced);
}

/* Each rank's totals, then the formula's; whether they agree. */
static void print_totals(const sched_t *s) {
  rcoll_traffic_t got[RCOLL_WORLD_MAX_RANKS], want[RCOLL_WORLD_MAX_RANKS];
  int have = 1;
  double worst = 0;
  printf("#\n# what each rank's plan moves (bytes sent and received, elements reduced on arrival)\n");
  for (int r = 0; r < s->n; r++) {
    rcoll_world_totals(&s->world, r, &got[r]);
    print_line("rank", r, &got[r]);
    have &= rcoll_world_formula(&s->world, s->algo, r, &want[r]) == 0;
  }
  if (!have) {
    printf("# %s %s declares no formula (.traffic in its descriptor)\n", rcoll_coll_name(s->coll), s->algo->name);
    return;
  }
  printf("# the formula: %s (S = %zu bytes, count = %zu, n = %d)\n", want[0].formula,
         s->count * s->tsz, s->count, s->n);
  for (int r = 0; r < s->n; r++) {
    print_line("formula", r, &want[r]);
    worst = fmax(worst, fmax(fabs(got[r].sent - want[r].sent), fabs(got[r].received - want[r].received)));
    worst = fmax(worst, fabs(got[r].reduced - want[r].reduced) * (double)s->tsz);
  }
  if (worst < 1e-6)
    printf("# every rank moves exactly what the formula says\n");
  else
    printf("# differences up to %.2f bytes: the vector does not split evenly, and each message rounds to "
           "whole elements\n", worst);
}

static void print_times(const sched_t *s, rcoll_tuner_t *t) {
  const rcoll_tune_params_t *m = &t->prm;
  printf("#\n# time, by the tuner's figures: intra %.2f us + %.2f GB/s, inter %.2f us + %.2f GB/s, "
         "reductions %.2f GB/s, %.1f us per message\n", m->intra.alpha_us, m->intra.gbps, m->inter.alpha_us,
         m->inter.gbps, m->reduce_gbps, RCOLL_COST_ENGINE_US);
  printf("# ranks done at (us):");
  for (int r = 0; r < s->n; r++)
    printf(" %.1f", s->timed.rank_end[r]);
  printf("\nsimulated: %.2f us (the plans' dependency graph replayed message by message)\n", s->timed.total);
  if (s->tuner_us >= 0)
    printf("predicted: %.2f us (the tuner's formula for %s at chunk %zu)\n", s->tuner_us, s->algo->name, s->chunk);
  else
    printf("predicted: none (the tuner models %s only where it applies; here its planner falls back)\n",
           s->algo->name);
  rcoll_tune_choice_t ch = rcoll_tune_choose(t, s->coll, s->vector);
  if (ch.algo >= 0)
    printf("# the tuner would choose %s at chunk %zu: %.2f us\n", rcoll_algo_name(ch.algo), ch.chunk, ch.time_us);
}

static void print_header(const opts_t *o, const sched_t *s) {
  int steps = 0;
  for (int r = 0; r < s->n; r++)
    steps += s->world.plans[r]->nsteps;
  printf("# rcoll_sched: %s %s, %d rank%s on %d node%s (in blocks), %zu bytes = %zu x %s%s, chunk %zu%s, "
         "%d steps\n", rcoll_coll_name(s->coll), s->algo->name, s->n, s->n > 1 ? "s" : "", s->nodes,
         s->nodes > 1 ? "s" : "", s->vector, s->count, rcoll_type_name(s->dtype),
         rcoll_coll_per_rank(s->coll) ? " per rank" : "", s->chunk, o->chunk ? "" : " (the tuner's best)",
         steps);
  if (rcoll_coll_rooted(s->coll))
    printf("# root %d\n", s->root);
  if (s->coll == RCOLL_COLL_SEND || s->coll == RCOLL_COLL_RECV)
    printf("# send and receive are planned together: each rank sends to the next and receives from the "
           "previous\n");
  printf("# offset: where in the whole vector (bytes) the data of a step lies; after: steps it waits for\n");
}

int main(int argc, char **argv) {
  opts_t o;
  parse(argc, argv, &o);
  if (o.algo != NULL && strcasecmp(o.algo, "list") == 0) {
    list_algos(o.coll);
    return 0;
  }
  char known[256];
  if (o.coll == NULL)
    die("--coll is required (known: %s; rcoll_sched --help)", colls(known, sizeof known));
  sched_t s = {.coll = coll_of(o.coll), .dtype = type_of(o.type)};
  if (o.algo == NULL) {
    die("--algo is required (%s has: %s)", rcoll_coll_name(s.coll), algos_of(s.coll, known, sizeof known));
  }
  s.algo = algo_of(s.coll, o.algo);
  s.tsz = rcoll_type_size(s.dtype);
  check_shape(&o, &s);
  rcoll_settings_t st;
  rcoll_topo_t topo;
  char ids[RCOLL_WORLD_MAX_RANKS][16];
  for (int r = 0, per = (s.n + s.nodes - 1) / s.nodes; r < s.n; r++) {
    s.node_of[r] = r / per;
    snprintf(ids[r], sizeof ids[r], "node%d", s.node_of[r]);
  }
  if (rcoll_settings_load(&st) != rcollSuccess ||
      rcoll_topo_build(&topo, ids[0], sizeof ids[0], s.n, 0) != rcollSuccess)
    return 1;
  s.nodes = topo.nnodes;
  rcoll_tuner_t *t = make_tuner(&o, &st, &topo);
  set_count(&o, &s);
  build(&o, &s, t, &st);
  sched_find_pieces(&s);
  print_header(&o, &s);
  simulate(&s);
  if (!o.quiet)
    print_steps(&s);
  print_totals(&s);
  print_times(&s, t);
  int rc = o.svg != NULL && sched_svg_write(&s, o.svg) != 0 ? 1 : 0;
  rcoll_replay_free(&s.unit);
  rcoll_replay_free(&s.timed);
  rcoll_world_free(&s.world);
  rcoll_topo_free(&topo);
  free(t);
  return rc;
}
