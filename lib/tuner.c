/* The tuner's cost model and choice (tuner.h). Set-up from a communicator's
 * transports and settings is in tuner_comm.c.
 *
 * Times are in microseconds. A message of b bytes over a link costs its
 * latency alpha (which messages in flight overlap), a per-message overhead
 * (which they do not) and b * beta (beta = 1 / bandwidth); ranks of a node
 * that send across nodes at once share the node's inter-node bandwidth. A
 * pipelined algorithm whose chunks pass S hops costs the latency of its
 * longest path plus (chunks + S - 1) chunk times; phases that overlap chunk
 * by chunk cost one chunk's phases plus (chunks - 1) times the slowest.
 *
 * Two limits keep that from flattering pipelines on slow links. A
 * connection has `window` receives in flight (its staging slots), and a
 * chunk's slot is held from the receive's posting until the chunk, which
 * its sender could only forward after receiving it, has come the whole way:
 * at most window x chunk bytes move per round trip (2 alpha), so a link of
 * 260 us moves 4 x 8 KiB chunks at 60 MB/s, not at its 1.25 GB/s: a
 * pipeline of more chunks than the window spends at least 2 alpha / window
 * per chunk. A ring step lasts as long as the ring's slowest hop: 2
 * namespaces x 2 ranks with 260 us between them took 1250-1930 us for an
 * 8-byte ring all-reduce, 6 steps at the crossing hop's latency each, not
 * at the mean of the four hops (two of which stay inside a node). And phases only
 * overlap on idle cores: where a machine runs more ranks than it has cores
 * (cores_shared), the reductions, copies and the network stack of one
 * phase take the cores the other phases would need, so the hierarchical
 * algorithm's phases are costed one after the other (measured, 2 namespaces
 * x 2 ranks on 2 cores, 200 us links, 64 MiB: hier 117 ms against 57
 * predicted with overlap; rabenseifner, whose steps never overlap, 94 ms
 * against 68). */
#include "tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "log.h"

static const char *const algo_names[RCOLL_ALGO_NALGOS] = {
    [RCOLL_ALGO_RING] = "ring",           [RCOLL_ALGO_TREE] = "tree",
    [RCOLL_ALGO_HIER] = "hier",           [RCOLL_ALGO_RABENSEIFNER] = "rabenseifner",
    [RCOLL_ALGO_CHAIN] = "chain",         [RCOLL_ALGO_DETERMINISTIC] = "deterministic",
    [RCOLL_ALGO_P2P] = "p2p",
};

static const char *const coll_names[RCOLL_COLL_NKINDS] = {
    "allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "send", "recv"};

/* Which planner implements each (collective, algorithm). */
static const rcoll_planner_t planners[RCOLL_COLL_NKINDS][RCOLL_ALGO_NALGOS] = {
    [RCOLL_COLL_ALLREDUCE] = {[RCOLL_ALGO_RING] = rcoll_allreduce_ring,
                              [RCOLL_ALGO_TREE] = rcoll_allreduce_tree,
                              [RCOLL_ALGO_HIER] = rcoll_allreduce_hier,
                              [RCOLL_ALGO_RABENSEIFNER] = rcoll_allreduce_rabenseifner,
                              [RCOLL_ALGO_DETERMINISTIC] = rcoll_allreduce_deterministic},
    [RCOLL_COLL_BROADCAST] = {[RCOLL_ALGO_CHAIN] = rcoll_broadcast_chain,
                              [RCOLL_ALGO_TREE] = rcoll_broadcast_tree},
    [RCOLL_COLL_REDUCE] = {[RCOLL_ALGO_CHAIN] = rcoll_reduce_chain,
                           [RCOLL_ALGO_DETERMINISTIC] = rcoll_reduce_deterministic},
    [RCOLL_COLL_ALLGATHER] = {[RCOLL_ALGO_RING] = rcoll_allgather_ring},
    [RCOLL_COLL_REDUCE_SCATTER] = {[RCOLL_ALGO_RING] = rcoll_reduce_scatter_ring,
                                   [RCOLL_ALGO_DETERMINISTIC] = rcoll_reduce_scatter_deterministic},
    [RCOLL_COLL_SEND] = {[RCOLL_ALGO_P2P] = rcoll_send_p2p},
    [RCOLL_COLL_RECV] = {[RCOLL_ALGO_P2P] = rcoll_recv_p2p},
};

/* What a collective uses when RCOLL_ALGO allows none of its algorithms. */
static const rcoll_algo_id_t default_algo[RCOLL_COLL_NKINDS] = {
    RCOLL_ALGO_RING, RCOLL_ALGO_CHAIN, RCOLL_ALGO_CHAIN, RCOLL_ALGO_RING,
    RCOLL_ALGO_RING, RCOLL_ALGO_P2P,   RCOLL_ALGO_P2P};

const char *rcoll_algo_name(int algo) {
  return algo >= 0 && algo < RCOLL_ALGO_NALGOS ? algo_names[algo] : "invalid";
}

const char *rcoll_coll_name(int coll) {
  return coll >= 0 && coll < RCOLL_COLL_NKINDS ? coll_names[coll] : "invalid";
}

int rcoll_algo_from_name(const char *name, size_t len) {
  for (int a = 0; a < RCOLL_ALGO_NALGOS; a++)
    if (strlen(algo_names[a]) == len && strncasecmp(name, algo_names[a], len) == 0)
      return a;
  return -1;
}

rcoll_planner_t rcoll_tune_planner(int coll, int algo) {
  if (coll < 0 || coll >= RCOLL_COLL_NKINDS || algo < 0 || algo >= RCOLL_ALGO_NALGOS)
    return NULL;
  return planners[coll][algo];
}

/* The automatic choice considers every algorithm but the deterministic one,
 * which is slower and is asked for by RCOLL_DETERMINISTIC or by name. */
#define ALGOS_ALL ((1u << RCOLL_ALGO_NALGOS) - 1)
#define ALGOS_AUTO (ALGOS_ALL & ~(1u << RCOLL_ALGO_DETERMINISTIC))

rcollResult_t rcoll_tune_parse_algos(const char *text, unsigned *allowed) {
  const char *s = text ? text : "";
  while (*s == ' ')
    s++;
  int exclude = *s == '^';
  s += exclude;
  unsigned listed = 0;
  while (*s != '\0') {
    size_t len = strcspn(s, ",");
    while (len > 0 && s[len - 1] == ' ')
      len--;
    if (len > 0) {
      int a = rcoll_algo_from_name(s, len);
      if (a < 0 || a == RCOLL_ALGO_P2P)
        return rcoll_error(rcollInvalidArgument, "RCOLL_ALGO=\"%s\": unknown algorithm \"%.*s\" "
                           "(known: ring, tree, hier, rabenseifner, chain, deterministic; a leading ^ "
                           "excludes)", text, (int)len, s);
      listed |= 1u << a;
    }
    s += strcspn(s, ",");
    while (*s == ',' || *s == ' ')
      s++;
  }
  /* Point to point has no alternative: it is always allowed. */
  if (listed == 0)
    *allowed = ALGOS_AUTO;
  else
    *allowed = (exclude ? ALGOS_AUTO & ~listed : listed) | (1u << RCOLL_ALGO_P2P);
  return rcollSuccess;
}

/* ---------------------------------------------------------------- placement */

static int max_count(const int *per_node, int nnodes) {
  int m = 0;
  for (int k = 0; k < nnodes; k++)
    m = per_node[k] > m ? per_node[k] : m;
  return m;
}

/* Latency of a hop between ranks a and b. */
static double hop_us(const rcoll_tuner_t *t, const rcoll_topo_t *topo, int a, int b) {
  return topo->node_of[a] == topo->node_of[b] ? t->prm.intra.alpha_us : t->prm.inter.alpha_us;
}

static void setup_ring(rcoll_tuner_t *t, const rcoll_topo_t *topo, int *per_node) {
  int n = t->nranks;
  memset(per_node, 0, (size_t)t->nnodes * sizeof *per_node);
  for (int r = 0; r < n; r++) {
    double h = hop_us(t, topo, r, (r + 1) % n);
    t->ring_hop_us = fmax(t->ring_hop_us, h);
    t->chain_us += r < n - 1 ? h : 0;
    if (topo->node_of[(r + 1) % n] != topo->node_of[r])
      t->ring_cross = 1, per_node[topo->node_of[r]]++;
  }
  t->ring_share = max_count(per_node, t->nnodes);
}

/* The longest path (in latency) from a rank to the root of a tree. */
static double tree_path_us(const rcoll_tuner_t *t, const rcoll_topo_t *topo, int which, int root) {
  double most = 0;
  for (int r = 0; r < t->nranks; r++) {
    double us = 0;
    rcoll_tree_node_t nd;
    for (int v = r, hops = 0; hops <= t->nranks; hops++, v = nd.parent) {
      if (which < 2)
        rcoll_dbtree_node(t->nranks, which, v, &nd);
      else
        rcoll_btree_node(t->nranks, root, v, &nd);
      if (nd.parent < 0)
        break;
      us += hop_us(t, topo, v, nd.parent);
    }
    most = us > most ? us : most;
  }
  return most;
}

/* Edges of the double binary tree (and the broadcast tree rooted at 0)
 * crossing nodes, and what the busiest rank and node send. */
static void setup_trees(rcoll_tuner_t *t, const rcoll_topo_t *topo, int *per_node) {
  int n = t->nranks;
  memset(per_node, 0, (size_t)t->nnodes * sizeof *per_node);
  for (int r = 0; r < n; r++) {
    double out = 0;
    for (int w = 0; w < 2; w++) {
      rcoll_tree_node_t nd;
      rcoll_dbtree_node(n, w, r, &nd);
      out += 0.5 * ((nd.parent >= 0) + nd.nchild);
      if (nd.parent >= 0 && topo->node_of[nd.parent] != topo->node_of[r]) {
        t->tree_cross = 1; /* a chunk leaves each end of the edge */
        per_node[topo->node_of[r]]++;
        per_node[topo->node_of[nd.parent]]++;
      }
    }
    t->tree_out = out > t->tree_out ? out : t->tree_out;
  }
  t->tree_share = max_count(per_node, t->nnodes);
  t->tree_height = rcoll_btree_height(n);
  t->tree_us = fmax(tree_path_us(t, topo, 0, 0), tree_path_us(t, topo, 1, 0));
  memset(per_node, 0, (size_t)t->nnodes * sizeof *per_node);
  for (int r = 0; r < n; r++) {
    rcoll_tree_node_t nd;
    rcoll_btree_node(n, 0, r, &nd);
    if (nd.parent >= 0 && topo->node_of[nd.parent] != topo->node_of[r])
      t->btree_cross = 1, per_node[topo->node_of[nd.parent]]++;
  }
  t->btree_share = max_count(per_node, t->nnodes);
  t->btree_us = tree_path_us(t, topo, 2, 0);
}

/* Recursive halving: which steps (and the fold) pair ranks across nodes. */
static void setup_halving(rcoll_tuner_t *t, const rcoll_topo_t *topo, int *per_node) {
  int n = t->nranks, p2 = 1;
  while (2 * p2 <= n)
    p2 *= 2, t->rhd_steps++;
  t->rhd_rem = n - p2;
  memset(per_node, 0, (size_t)t->nnodes * sizeof *per_node);
  for (int i = 0; i < t->rhd_rem; i++)
    if (topo->node_of[2 * i] != topo->node_of[2 * i + 1])
      t->fold_cross = 1, per_node[topo->node_of[2 * i]]++;
  t->fold_share = max_count(per_node, t->nnodes);
  for (int s = 0; s < t->rhd_steps && s < RCOLL_TUNE_MAX_STEPS; s++) {
    memset(per_node, 0, (size_t)t->nnodes * sizeof *per_node);
    for (int q = 0; q < p2; q++) {
      int a = q < t->rhd_rem ? 2 * q + 1 : q + t->rhd_rem, pq = q ^ (1 << s);
      int b = pq < t->rhd_rem ? 2 * pq + 1 : pq + t->rhd_rem;
      if (topo->node_of[a] != topo->node_of[b])
        t->step_cross[s] = 1, per_node[topo->node_of[a]]++;
    }
    t->step_share[s] = max_count(per_node, t->nnodes);
  }
}

rcollResult_t rcoll_tuner_setup(rcoll_tuner_t *t, const rcoll_topo_t *topo,
                                const rcoll_tune_params_t *prm) {
  memset(t, 0, sizeof *t);
  t->prm = *prm;
  t->nranks = topo->nranks;
  t->nnodes = topo->nnodes;
  t->uniform = 1;
  for (int k = 0; k < topo->nnodes; k++) {
    int size = topo->node_first[k + 1] - topo->node_first[k];
    t->ppn = size > t->ppn ? size : t->ppn;
    t->uniform &= size == topo->node_first[1] - topo->node_first[0];
  }
  int *per_node = calloc((size_t)topo->nnodes + 1, sizeof *per_node);
  if (per_node == NULL)
    return rcoll_error(rcollSystemError, "tuner: out of memory");
  setup_ring(t, topo, per_node);
  setup_trees(t, topo, per_node);
  setup_halving(t, topo, per_node);
  free(per_node);
  for (int i = 0; i < RCOLL_TUNE_CACHE; i++)
    t->cache[i].coll = -1;
  return rcollSuccess;
}

/* ---------------------------------------------------------------- model */

/* What the engine spends on each message (posting, testing, completing;
 * more when ranks outnumber cores). Unlike latency, which messages in flight
 * overlap, overheads are paid message after message: they keep the model
 * from cutting vectors into chunks that only add cost. Messages over 64 KiB
 * also pay the link's own overhead (the socket hands them to helper
 * threads; smaller ones travel inline). */
#define ENGINE_US 2.0
#define BIG_MSG 65536.0

typedef struct cost_link {
  double lat, b; /* latency in us; us per byte */
  double big_us; /* extra overhead of a message over BIG_MSG */
} cost_link_t;

static double beta_of(double gbps) { return 1.0 / ((gbps > 1e-6 ? gbps : 1e-6) * 1e3); }

static double msg_us(cost_link_t l, double bytes) { return ENGINE_US + (bytes > BIG_MSG ? l.big_us : 0); }

/* The link a step runs at: the slower class when anything crosses nodes,
 * with `share` ranks of a node sending across together. */
static cost_link_t link_for(const rcoll_tuner_t *t, int cross, int share) {
  const rcoll_tune_link_t *in = &t->prm.intra, *ex = &t->prm.inter;
  double bi = beta_of(in->gbps), be = beta_of(ex->gbps) * (share > 1 ? share : 1);
  if (!cross)
    return (cost_link_t){in->alpha_us, bi, in->msg_us};
  return (cost_link_t){fmax(in->alpha_us, ex->alpha_us), fmax(bi, be), fmax(in->msg_us, ex->msg_us)};
}

/* The least time per chunk a pipeline of k chunks over a link of latency
 * lat can keep up: a window's worth per round trip, once there are more
 * chunks than fit in one window (fewer all go at once). */
static double window_slot(const rcoll_tuner_t *t, double lat, double k) {
  int w = t->prm.window;
  return w > 0 && k > w ? 2 * lat / w : 0;
}

static double chunks(double bytes, size_t chunk) {
  double k = ceil(bytes / (double)chunk);
  return k < 1 ? 1 : k;
}

/* Ring steps move a segment of s bytes each; a step lasts the hop latency
 * plus one chunk, or the whole segment's transfer once chunks keep the link
 * busy through the latency. */
static double ring_time(const rcoll_tuner_t *t, double m, size_t c, int phases, int reduce) {
  int n = t->nranks;
  cost_link_t l = link_for(t, t->ring_cross, t->ring_share);
  double s = m / n, k = chunks(s, c), gamma = beta_of(t->prm.reduce_gbps);
  double cs = fmin((double)c, s), o = msg_us(l, cs);
  double step = fmax(t->ring_hop_us + o + cs * l.b, k * fmax(o + cs * l.b, window_slot(t, l.lat, k)));
  return phases * (n - 1) * step + (reduce ? (n - 1) * s * gamma : 0);
}

/* A pipeline: the first chunk's path latency, then k + hops - 1 chunk
 * slots at the busiest link. */
static double pipeline(double path_us, double k, int hops, double slot) {
  return path_us + (k + hops - 1) * slot;
}

static double tree_time(const rcoll_tuner_t *t, double m, size_t c) {
  cost_link_t l = link_for(t, t->tree_cross, 1);
  double k = chunks(m / 2, c), cb = fmin((double)c, m / 2), gamma = beta_of(t->prm.reduce_gbps);
  double nic = t->tree_cross ? t->tree_share * beta_of(t->prm.inter.gbps) : 0;
  /* An inner rank reduces two children's chunks per slot. */
  double slot = msg_us(l, cb) + cb * (fmax(2 * t->tree_out * l.b, nic) + 2 * gamma);
  slot = fmax(slot, window_slot(t, l.lat, k));
  return pipeline(2 * t->tree_us, k, 2 * t->tree_height, slot);
}

/* Steps do not overlap: each pays its latency and its whole transfer. Its
 * chunks are all in hand when a step starts and are sent at once, so only
 * the first window waits a round trip: no window limit. */
static double halving_time(const rcoll_tuner_t *t, double m, size_t c) {
  double gamma = beta_of(t->prm.reduce_gbps), time = 0, size = m;
  if (t->rhd_rem > 0) { /* fold in and hand back: the whole vector twice */
    cost_link_t l = link_for(t, t->fold_cross, t->fold_share);
    double cs = fmin((double)c, m);
    time += 2 * (l.lat + chunks(m, c) * msg_us(l, cs) + m * l.b) + m * gamma;
  }
  for (int s = 0; s < t->rhd_steps && s < RCOLL_TUNE_MAX_STEPS; s++) {
    size /= 2;
    cost_link_t l = link_for(t, t->step_cross[s], t->step_share[s]);
    double cs = fmin((double)c, size);
    time += 2 * (l.lat + chunks(size, c) * msg_us(l, cs) + size * l.b) + size * gamma;
  }
  return time;
}

/* Three phases overlapping chunk by chunk: the latencies of one chunk's
 * path, each phase's work on one chunk, and (chunks - 1) times the busier
 * resource (phases 1 and 3 share the links inside the node). */
static double hier_time(const rcoll_tuner_t *t, double m, size_t c) {
  int L = t->ppn, N = t->nnodes;
  cost_link_t li = link_for(t, 0, 1), le = link_for(t, 1, L);
  double gamma = beta_of(t->prm.reduce_gbps), s1 = m / L, k = chunks(s1, c), cs = fmin((double)c, s1);
  double path = 2 * (L - 1) * li.lat + 2 * (N - 1) * le.lat;
  double w1 = (L - 1) * (msg_us(li, cs) + cs * (li.b + gamma));
  double w2 = 2 * (N - 1) * (msg_us(le, cs / N) + cs / N * le.b) + (N - 1) * cs / N * gamma;
  double w3 = (L - 1) * (msg_us(li, cs) + cs * li.b);
  double busiest = t->prm.cores_shared ? w1 + w2 + w3 : fmax(w1 + w3, w2);
  busiest = fmax(busiest, window_slot(t, le.lat, k));
  return path + w1 + w2 + w3 + (k - 1) * busiest;
}

/* Chains: `laps` passes along 0 -> n-1 (2 for the deterministic
 * all-reduce, whose results come back, so that a rank sends two chunks per
 * slot), `extra` hops beyond. */
static double chain_time(const rcoll_tuner_t *t, double m, size_t c, int laps, int extra, int reduce) {
  cost_link_t l = link_for(t, t->ring_cross, t->ring_share);
  double cs = fmin((double)c, m);
  double slot = laps * msg_us(l, cs) + cs * (laps * l.b + (reduce ? beta_of(t->prm.reduce_gbps) : 0));
  slot = fmax(slot, window_slot(t, l.lat, chunks(m, c)));
  return pipeline(laps * t->chain_us + extra * l.lat, chunks(m, c), laps * (t->nranks - 1) + extra, slot);
}

static double btree_time(const rcoll_tuner_t *t, double m, size_t c) {
  cost_link_t l = link_for(t, t->btree_cross, 1);
  double fan = t->nranks > 2 ? 2 : 1;
  double nic = t->btree_cross ? t->btree_share * beta_of(t->prm.inter.gbps) : 0;
  double cs = fmin((double)c, m), slot = fan * msg_us(l, cs) + cs * fmax(fan * l.b, nic);
  slot = fmax(slot, window_slot(t, l.lat, chunks(m, c)));
  return pipeline(t->btree_us, chunks(m, c), t->tree_height, slot);
}

int rcoll_tune_applies(const rcoll_tuner_t *t, int coll, int algo) {
  if (rcoll_tune_planner(coll, algo) == NULL)
    return 0;
  if (algo == RCOLL_ALGO_HIER) /* else the planner would fall back to ring */
    return t->nnodes > 1 && t->ppn > 1 && t->uniform;
  return 1;
}

double rcoll_tune_predict(const rcoll_tuner_t *t, int coll, int algo, size_t bytes, size_t chunk) {
  if (!rcoll_tune_applies(t, coll, algo) || chunk == 0)
    return -1;
  double m = (double)bytes;
  if (t->nranks == 1 || bytes == 0)
    return 0;
  switch (coll * RCOLL_ALGO_NALGOS + algo) {
#define CASE(c, a) case RCOLL_COLL_##c * RCOLL_ALGO_NALGOS + RCOLL_ALGO_##a
  CASE(ALLREDUCE, RING): return ring_time(t, m, chunk, 2, 1);
  CASE(ALLREDUCE, TREE): return tree_time(t, m, chunk);
  CASE(ALLREDUCE, HIER): return hier_time(t, m, chunk);
  CASE(ALLREDUCE, RABENSEIFNER): return halving_time(t, m, chunk);
  CASE(ALLREDUCE, DETERMINISTIC): return chain_time(t, m, chunk, 2, 0, 1);
  CASE(BROADCAST, CHAIN): return chain_time(t, m, chunk, 1, 0, 0);
  CASE(BROADCAST, TREE): return btree_time(t, m, chunk);
  CASE(REDUCE, CHAIN): return chain_time(t, m, chunk, 1, 0, 1);
  CASE(REDUCE, DETERMINISTIC): return chain_time(t, m, chunk, 1, 1, 1);
  CASE(ALLGATHER, RING): return ring_time(t, m, chunk, 1, 0);
  CASE(REDUCE_SCATTER, RING): return ring_time(t, m, chunk, 1, 1);
  CASE(REDUCE_SCATTER, DETERMINISTIC): return chain_time(t, m, chunk, 1, 1, 1);
#undef CASE
  default: { /* point to point */
    cost_link_t l = link_for(t, t->nnodes > 1, 1);
    return l.lat + msg_us(l, m) + m * l.b;
  }
  }
}

/* Chunks tried: the slot size (or the largest half of it within the link's
 * chunk cap), then halves down to 4 KiB, and no more than 8192 chunks,
 * which keeps plans small. Larger chunks win ties: fewer messages for the
 * same predicted time. */
rcoll_tune_choice_t rcoll_tune_best(const rcoll_tuner_t *t, int coll, int algo, size_t bytes) {
  size_t cap = t->nnodes > 1 ? t->prm.inter.chunk_cap : t->prm.intra.chunk_cap;
  size_t c = t->prm.max_chunk & ~(size_t)63;
  while (cap >= 4096 && c > cap) /* halves of the slot, as below */
    c /= 2;
  rcoll_tune_choice_t best = {(rcoll_algo_id_t)algo, c, rcoll_tune_predict(t, coll, algo, bytes, c)};
  for (c /= 2; c >= 4096 && best.time_us >= 0 && (double)c >= (double)bytes / 8192; c /= 2) {
    double time = rcoll_tune_predict(t, coll, algo, bytes, c);
    if (time < best.time_us) {
      best.time_us = time;
      best.chunk = c & ~(size_t)63;
    }
  }
  return best;
}

static int reduces(int coll) {
  return coll == RCOLL_COLL_ALLREDUCE || coll == RCOLL_COLL_REDUCE || coll == RCOLL_COLL_REDUCE_SCATTER;
}

static int candidate(const rcoll_tuner_t *t, int coll, int algo) {
  if (!rcoll_tune_applies(t, coll, algo))
    return 0;
  if (t->prm.deterministic && reduces(coll))
    return algo == RCOLL_ALGO_DETERMINISTIC;
  return (t->prm.allowed >> algo) & 1;
}

/* One line with every candidate's time, for RCOLL_DEBUG_SUBSYS=TUNE. */
static void log_choice(const rcoll_tuner_t *t, int coll, size_t bytes, rcoll_tune_choice_t ch) {
  char line[512];
  int len = snprintf(line, sizeof line, "%s %zu B, %d ranks on %d nodes: %s chunk %zu (%.1f us)",
                     rcoll_coll_name(coll), bytes, t->nranks, t->nnodes, rcoll_algo_name(ch.algo),
                     ch.chunk, ch.time_us);
  const char *sep = "; others:";
  for (int a = 0; a < RCOLL_ALGO_NALGOS && len < (int)sizeof line; a++) {
    if (a == (int)ch.algo || !rcoll_tune_applies(t, coll, a))
      continue;
    rcoll_tune_choice_t o = rcoll_tune_best(t, coll, a, bytes);
    len += snprintf(line + len, sizeof line - (size_t)len, "%s %s %.1f us%s", sep, rcoll_algo_name(a),
                    o.time_us, candidate(t, coll, a) ? "" : " (not allowed)");
    sep = ",";
  }
  RCOLL_INFO(RCOLL_SUB_TUNE, "tune: %s", line);
}

/* The order candidates are tried in, which near ties follow: rabenseifner
 * before hier, since where the model cannot tell them apart (phases that
 * cannot overlap on shared cores move the same bytes) its few large
 * messages with no hand-off between phases measured 10-50% faster (2 x 2
 * ranks on 2 cores, 200 us links, 128 KiB - 64 MiB). */
static const rcoll_algo_id_t try_order[RCOLL_ALGO_NALGOS] = {
    RCOLL_ALGO_RING,  RCOLL_ALGO_TREE,          RCOLL_ALGO_RABENSEIFNER, RCOLL_ALGO_HIER,
    RCOLL_ALGO_CHAIN, RCOLL_ALGO_DETERMINISTIC, RCOLL_ALGO_P2P};

static rcoll_tune_choice_t choose(const rcoll_tuner_t *t, int coll, size_t bytes) {
  rcoll_tune_choice_t best = {RCOLL_ALGO_NALGOS, 0, -1};
  for (int i = 0; i < RCOLL_ALGO_NALGOS; i++) {
    int a = (int)try_order[i];
    if (!candidate(t, coll, a))
      continue;
    rcoll_tune_choice_t c = rcoll_tune_best(t, coll, a, bytes);
    /* Near ties (0.1%) keep the earlier, simpler algorithm. */
    if (best.algo == RCOLL_ALGO_NALGOS || c.time_us < best.time_us * 0.999)
      best = c;
  }
  if (best.algo == RCOLL_ALGO_NALGOS) { /* RCOLL_ALGO left nothing for this collective */
    int a = t->prm.deterministic && reduces(coll) ? RCOLL_ALGO_DETERMINISTIC : default_algo[coll];
    best = rcoll_tune_best(t, coll, a, bytes);
  }
  return best;
}

rcoll_tune_choice_t rcoll_tune_choose(rcoll_tuner_t *t, int coll, size_t bytes) {
  /* Calls repeat their sizes: remember recent choices (exact keys only). */
  size_t slot = (bytes * 0x9E3779B97F4A7C15ull + (size_t)coll) % RCOLL_TUNE_CACHE;
  int logging = rcoll_log_enabled(RCOLL_LOG_INFO, RCOLL_SUB_TUNE);
  if (!logging && t->cache[slot].coll == coll && t->cache[slot].bytes == bytes)
    return t->cache[slot].choice;
  rcoll_tune_choice_t ch = choose(t, coll, bytes);
  t->cache[slot].coll = coll;
  t->cache[slot].bytes = bytes;
  t->cache[slot].choice = ch;
  if (logging)
    log_choice(t, coll, bytes, ch);
  return ch;
}
