/* Building a communicator's tuner (tuner.h): which transport serves ranks
 * of one node and which serves ranks of different nodes, their properties,
 * and the RCOLL_ALGO / RCOLL_DETERMINISTIC / RCOLL_TUNE_* settings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "flat.h"
#include "log.h"
#include "tuner.h"

/* The figures for a transport that does not describe itself (a name
 * bench/rcoll_tune does not know): TCP's, whose bandwidth and per-message
 * costs are the most conservative of the built-in transports' (its 5 us
 * latency is not the longest: UCX's is the same). */
static const rcoll_tune_link_t undescribed_link = {5.0, 1.25, 60.0, 0, 5.0};

static rcoll_tune_link_t link_of(const rcoll_transport_desc_t *d) {
  if (d == NULL)
    return undescribed_link;
  return (rcoll_tune_link_t){d->link.alpha_us, d->link.gbps, d->link.msg_us, d->link.chunk_cap, d->link.each_us};
}

/* By name, so that bench/rcoll_tune can model a transport that is not built
 * here: every transport is described whether built or not. */
rcoll_tune_link_t rcoll_tune_default_link(const char *net) { return link_of(rcoll_net_desc_find(net)); }

/* The transport lib/comm_net.c picks for the pair (a, b), computed from
 * what every rank announced, so that all ranks get the same answer. */
static int pair_net(const struct rcollComm *c, int a, int b) {
  return rcoll_net_best(c->infos[a].nets & c->infos[b].nets, c->topo.node_of[a] == c->topo.node_of[b]);
}

/* The transport of the first pair of ranks on one node (same = 1) or on
 * different nodes (same = 0), in rank order; -1 when there is none. */
static int class_net(const struct rcollComm *c, int same) {
  for (int a = 0; a < c->nranks; a++)
    for (int b = a + 1; b < c->nranks; b++)
      if ((c->topo.node_of[a] == c->topo.node_of[b]) == same)
        return pair_net(c, a, b);
  return -1;
}

static rcoll_tune_link_t net_link(struct rcollComm *c, int t, const char **name) {
  const rcoll_transport_ops_t *ops = rcoll_net_at(t);
  *name = ops ? ops->name : "";
  rcoll_tune_link_t l = link_of(ops ? ops->desc : NULL);
  rcoll_net_props_t props;
  if (ops != NULL && c->nets[t].ops != NULL && ops->get_properties(c->nets[t].ctx, 0, &props) == rcollSuccess) {
    if (props.latency_us > 0)
      l.alpha_us = props.latency_us;
    if (props.speed_mbps > 0)
      l.gbps = props.speed_mbps / 8000.0;
  }
  return l;
}

/* Applies "key=value,..." (keys: transport names, intra, inter) to one of
 * the two fields of each class. Class keys win over transport keys. */
static rcollResult_t apply_overrides(const char *setting, const char *text, const char *const net_of[2],
                                     rcoll_tune_link_t *cls[2], int bw) {
  for (int pass = 0; pass < 2; pass++) {
    const char *s = text;
    while (*s != '\0') {
      size_t len = strcspn(s, ","), klen = strcspn(s, "=");
      char *end = NULL;
      double v = klen < len ? strtod(s + klen + 1, &end) : -1;
      /* strtod takes "nan" and "inf": no cost model survives either. */
      if (klen >= len || end != s + len || !isfinite(v) || v <= 0)
        return rcoll_error(rcollInvalidArgument, "RCOLL_%s=\"%s\": expected name=positive number "
                           "pairs (names: a transport, intra or inter)", setting, text);
      for (int k = 0; k < 2; k++) {
        int hit = pass == 0 ? strlen(net_of[k]) == klen && strncasecmp(s, net_of[k], klen) == 0
                            : klen == 5 && strncasecmp(s, k == 0 ? "intra" : "inter", 5) == 0;
        if (hit)
          *(bw ? &cls[k]->gbps : &cls[k]->alpha_us) = v;
      }
      s += len + (s[len] == ',');
    }
  }
  return rcollSuccess;
}

rcollResult_t rcoll_tune_params_from_settings(const rcoll_settings_t *st, const char *const net_of[2],
                                             rcoll_tune_link_t links[2], size_t max_chunk,
                                             rcoll_tune_params_t *out) {
  rcoll_tune_params_t prm = {.max_chunk = max_chunk, .deterministic = st->deterministic != 0};
  RCOLL_CHECK(rcoll_algo_parse(st->algo, &prm.allowed));
  char *end = NULL;
  prm.reduce_gbps = strtod(st->tune_reduce_bw, &end);
  if (end == st->tune_reduce_bw || *end != '\0' || !isfinite(prm.reduce_gbps) || prm.reduce_gbps <= 0)
    return rcoll_error(rcollInvalidArgument, "RCOLL_TUNE_REDUCE_BW=\"%s\" is not a positive number "
                       "of GB/s", st->tune_reduce_bw);
  rcoll_tune_link_t *cls[2] = {&links[0], &links[1]};
  RCOLL_CHECK(apply_overrides("TUNE_ALPHA", st->tune_alpha, net_of, cls, 0));
  RCOLL_CHECK(apply_overrides("TUNE_BW", st->tune_bw, net_of, cls, 1));
  prm.intra = links[0];
  prm.inter = links[1];
  *out = prm;
  return rcollSuccess;
}

/* ------------------------------------------------------------ agreement */

void rcoll_tune_params_agree(const rcoll_tune_params_t *all, int nranks, rcoll_tune_params_t *out) {
  rcoll_tune_params_t a = all[0];
  for (int r = 1; r < nranks; r++) {
    const rcoll_tune_params_t *p = &all[r];
    rcoll_tune_link_t *mine[2] = {&a.intra, &a.inter};
    const rcoll_tune_link_t *theirs[2] = {&p->intra, &p->inter};
    for (int k = 0; k < 2; k++) {
      mine[k]->alpha_us = fmax(mine[k]->alpha_us, theirs[k]->alpha_us);
      mine[k]->gbps = fmin(mine[k]->gbps, theirs[k]->gbps);
      mine[k]->msg_us = fmax(mine[k]->msg_us, theirs[k]->msg_us);
      mine[k]->each_us = fmax(mine[k]->each_us, theirs[k]->each_us);
      /* 0 means "no cap": the smallest cap anyone has wins. */
      size_t cap = theirs[k]->chunk_cap;
      if (cap != 0 && (mine[k]->chunk_cap == 0 || cap < mine[k]->chunk_cap))
        mine[k]->chunk_cap = cap;
    }
    a.reduce_gbps = fmin(a.reduce_gbps, p->reduce_gbps);
    a.max_chunk = p->max_chunk < a.max_chunk ? p->max_chunk : a.max_chunk;
    a.allowed &= p->allowed;
    a.deterministic |= p->deterministic;
    if (p->window > 0 && (a.window <= 0 || p->window < a.window))
      a.window = p->window;
    a.cores_shared |= p->cores_shared;
    a.ranks_per_core = fmax(a.ranks_per_core, p->ranks_per_core);
    a.flat_max = p->flat_max < a.flat_max ? p->flat_max : a.flat_max;
  }
  *out = a;
}

static int positive(double v) { return isfinite(v) && v > 0; }

static const char *link_bad(const rcoll_tune_link_t *l) {
  if (!positive(l->alpha_us) || !positive(l->gbps))
    return "latency or bandwidth not a positive number";
  if (!isfinite(l->msg_us) || l->msg_us < 0 || !isfinite(l->each_us) || l->each_us < 0)
    return "message overhead not a number of 0 or more";
  return NULL;
}

/* Why one rank's parameters cannot be used, or NULL. */
static const char *params_bad(const rcoll_tune_params_t *p) {
  const char *why = link_bad(&p->intra);
  if (why == NULL)
    why = link_bad(&p->inter);
  if (why == NULL && !positive(p->reduce_gbps))
    why = "reduction rate not a positive number";
  /* Every rank's slot is its RCOLL_CHUNK_SIZE rounded down to 64 bytes: a
   * chunk of 0 would divide by zero in every plan. */
  if (why == NULL && (p->max_chunk < 4096 || p->max_chunk > ((size_t)64 << 20)))
    why = "staging slot outside 4096..64M bytes";
  if (why == NULL && (p->window < 0 || p->window > 1 << 20))
    why = "window negative or absurd";
  if (why == NULL && p->flat_max > 4096)
    why = "flat board larger than RCOLL_FLAT_MAX allows";
  if (why == NULL && !(p->ranks_per_core >= 0 && p->ranks_per_core <= 1 << 20))
    why = "ranks per core negative, absurd or not a number";
  return why;
}

/* The parameters come from every rank over the bootstrap: a rank of another
 * build, or corrupted bytes, must fail the communicator naming that rank
 * rather than make plans with chunks of 0 or NaN costs (found by
 * tests/fuzz/fuzz_rankinfo.c). */
rcollResult_t rcoll_tune_params_check(const rcoll_tune_params_t *all, int nranks) {
  for (int r = 0; r < nranks; r++) {
    const char *why = params_bad(&all[r]);
    if (why != NULL)
      return rcoll_error(rcollRemoteError, "tuner parameters from rank %d are corrupt (%s): is every rank "
                         "running the same rcoll?", r, why);
  }
  return rcollSuccess;
}

rcollResult_t rcoll_tune_params_exchange(struct rcoll_bootstrap *b, int rank, int nranks,
                                         rcoll_tune_params_t *prm) {
  rcoll_tune_params_t *all = calloc((size_t)nranks, sizeof *all);
  if (all == NULL)
    return rcoll_error(rcollSystemError, "rank %d: out of memory exchanging tuner parameters", rank);
  memcpy(&all[rank], prm, sizeof *prm);
  rcollResult_t r = rcoll_bootstrap_allgather(b, all, sizeof *all);
  if (r == rcollSuccess)
    r = rcoll_tune_params_check(all, nranks);
  if (r == rcollSuccess)
    rcoll_tune_params_agree(all, nranks, prm);
  free(all);
  return r;
}

/* ---------------------------------------------------------- measurement */

/* The latency of a hop between nodes is measured by ping-pongs with the
 * left neighbour over the bootstrap ring (rcoll_bootstrap_clock_left), the
 * one set of connections every communicator already has: no new
 * connection, no transport, no cooperation from the bootstrap's owner. A
 * rank whose left neighbour is on another node takes the shortest of
 * MEASURE_PINGS round trips, halved: a round trip cannot look shorter than
 * the link makes it, and the shortest is the one that init-time load (other
 * ranks still starting, hwloc, helper threads) did not lengthen. The
 * figure it replaces, 4 timed turns of a ring allgather right after
 * creation, logged 465-504 us on a veth whose TCP ping-pong has a median
 * round trip of 128 us: one descheduled rank in 4 turns was enough.
 * Ranks then allgather their figures and all take rcoll_tune_inter_agree's
 * (the lower median of the crossing ranks'), so one rank's bad luck does not
 * become everybody's model. Cost: 2 x MEASURE_PINGS round trips, whatever
 * the number of ranks, plus one allgather. */
#define MEASURE_PINGS 16

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double rcoll_tune_inter_agree(const double *fig, int n) {
  double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
  int k = 0;
  if (v == NULL)
    return 0;
  for (int r = 0; r < n; r++)
    if (isfinite(fig[r]) && fig[r] > 0) /* 0: no crossing hop; others: corrupt */
      v[k++] = fmin(fig[r], RCOLL_TUNE_INTER_MAX_US);
  /* Insertion sort: figures are few that cross, and any order agrees. */
  for (int i = 1; i < k; i++)
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double x = v[j];
      v[j] = v[j - 1];
      v[j - 1] = x;
    }
  /* The lower median: with 2 nodes, both figures are round trips of the
   * same link, and the shorter is the one less disturbed by load (a run on
   * a machine at load 6 had one rank at 228 us where the other's and a
   * ping-pong's were under 10). */
  double m = k > 0 ? v[(k - 1) / 2] : 0;
  free(v);
  return m;
}

rcollResult_t rcoll_tune_measure_inter(struct rcoll_bootstrap *b, const rcoll_topo_t *topo,
                                       double *inter_us) {
  int n = topo->nranks, me = topo->rank, left = (me + n - 1) % n, cross = 0;
  *inter_us = 0;
  for (int r = 0; r < n; r++)
    cross += topo->node_of[r] != topo->node_of[(r + 1) % n];
  if (cross == 0) /* one node: every rank knows it from the topology alone */
    return rcollSuccess;
  int64_t offset_ns, rtt_ns;
  RCOLL_CHECK(rcoll_bootstrap_clock_left(b, MEASURE_PINGS, mono_ns, &offset_ns, &rtt_ns));
  double *fig = calloc((size_t)n, sizeof *fig);
  if (fig == NULL)
    return rcoll_error(rcollSystemError, "tuner: out of memory measuring the network");
  fig[me] = topo->node_of[left] != topo->node_of[me] ? (double)rtt_ns / 2e3 : 0;
  rcollResult_t r = rcoll_bootstrap_allgather(b, fig, sizeof *fig);
  if (r == rcollSuccess)
    *inter_us = rcoll_tune_inter_agree(fig, n);
  free(fig);
  return r;
}

/* ------------------------------------------------------------ creation */

/* How many of the communicator's ranks this machine runs per core (0 when
 * it cannot tell); more than 1: cores are shared. */
static double ranks_per_core_here(const struct rcollComm *c) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus > 0 ? (double)rcoll_comm_ranks_on_machine(c) / (double)cpus : 0;
}

/* Each rank's figures come from its own transports (a socket's speed from
 * its interface, which network namespaces or bonding may report
 * differently per rank) and its own settings; ranks that modelled different
 * links could choose different algorithms for one call and wait on each
 * other forever. So every rank measures, applies its settings, and then all
 * take the most conservative figure of any rank. */
rcollResult_t rcoll_tuner_create(struct rcollComm *c, rcoll_tuner_t **out) {
  /* With one node the inter class is never used, and vice versa. */
  int nets[2] = {class_net(c, 1), class_net(c, 0)};
  const char *names[2] = {"", ""};
  rcoll_tune_link_t links[2];
  for (int k = 0; k < 2; k++)
    links[k] = nets[k] >= 0 ? net_link(c, nets[k], &names[k]) : undescribed_link;
  /* The bootstrap runs over TCP: its latency is what a transport over the
   * same network pays at least (its desc says bootstrap_latency), but says
   * nothing of one that may not even use that network. The transport's own
   * figure stays the other floor: it adds its stack to the link's. Every
   * rank takes the same branch (class_net comes from what all ranks
   * announced), and gets the same figure. Bandwidth is
   * not measured this way: 256 KiB
   * blocks round the bootstrap ring gave 0.15 GB/s where the socket
   * transport moves 0.8 (2 namespaces, 260 us): an idle connection with
   * default buffers is limited by its receive window, not by the link. */
  double measured = 0;
  if (nets[1] >= 0 && rcoll_net_at(nets[1])->desc->bootstrap_latency) {
    RCOLL_CHECK(rcoll_tune_measure_inter(c->bootstrap, &c->topo, &measured));
    links[1].alpha_us = fmax(links[1].alpha_us, measured);
  }
  rcoll_tune_params_t prm;
  RCOLL_CHECK(rcoll_tune_params_from_settings(&c->settings, names, links, c->chunk_bytes, &prm));
  prm.window = c->nslots;
  prm.ranks_per_core = ranks_per_core_here(c);
  prm.cores_shared = prm.ranks_per_core > 1;
  prm.flat_max = rcoll_flat_max(c); /* agreed by every rank already (rcoll_flat_open) */
  RCOLL_CHECK(rcoll_tune_params_exchange(c->bootstrap, c->rank, c->nranks, &prm));
  rcoll_tuner_t *t = malloc(sizeof *t);
  if (t == NULL)
    return rcoll_error(rcollSystemError, "rank %d: out of memory for the tuner", c->rank);
  rcollResult_t r = rcoll_tuner_setup(t, &c->topo, &prm);
  if (r != rcollSuccess) {
    free(t);
    return r;
  }
  char shared[48] = "";
  if (prm.cores_shared)
    snprintf(shared, sizeof shared, ", cores shared (%.1f ranks per core)", prm.ranks_per_core);
  RCOLL_INFO(RCOLL_SUB_TUNE | RCOLL_SUB_INIT, "tune: rank %d: %d ranks on %d nodes (at most %d per node%s); "
             "intra %s %.1f us %.2f GB/s, inter %s %.1f us %.2f GB/s (link measured %.1f us one way), "
             "reduce %.1f GB/s, chunk <= %zu, window %d%s%s (agreed by all ranks)",
             c->rank, t->nranks, t->nnodes, t->ppn, t->uniform ? "" : ", uneven",
             names[0][0] ? names[0] : "-", prm.intra.alpha_us, prm.intra.gbps,
             names[1][0] ? names[1] : "-", prm.inter.alpha_us, prm.inter.gbps, measured, prm.reduce_gbps,
             prm.max_chunk, prm.window, shared,
             prm.deterministic ? ", deterministic" : "");
  *out = t;
  return rcollSuccess;
}
