/* The tuner (tuner.h): what the placement implies for the shapes the
 * algorithms share, and the choice among the algorithms of the generated
 * table (algo.h). Each algorithm's cost function is in its own file, built
 * from tune_cost.h; set-up from a communicator's transports and settings is
 * in tuner_comm.c. */
#include "tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "tree.h"

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

/* ---------------------------------------------------------------- choice */

int rcoll_tune_applies(const rcoll_tuner_t *t, int coll, int algo) {
  const rcoll_algorithm_t *a = rcoll_algorithm_find(coll, algo);
  return a != NULL && (a->applies == NULL || a->applies(t));
}

double rcoll_tune_predict(const rcoll_tuner_t *t, int coll, int algo, size_t bytes, size_t chunk) {
  if (!rcoll_tune_applies(t, coll, algo) || chunk == 0)
    return -1;
  if (t->nranks == 1 || bytes == 0)
    return 0;
  return rcoll_algorithm_find(coll, algo)->cost(t, (double)bytes, chunk);
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
  /* A slot of 64 x an odd number halves to chunks that are not multiples of
   * 64, nor of an element (RCOLL_CHUNK_SIZE=8388672 under shm's 512 KiB cap
   * gave 262146 bytes; found by fuzz_rankinfo). */
  c &= ~(size_t)63;
  rcoll_tune_choice_t best = {algo, c, rcoll_tune_predict(t, coll, algo, bytes, c),
                              rcoll_algorithm_find(coll, algo)};
  for (c /= 2; c >= 4096 && best.time_us >= 0 && (double)c >= (double)bytes / 8192; c /= 2) {
    double time = rcoll_tune_predict(t, coll, algo, bytes, c);
    if (time < best.time_us) {
      best.time_us = time;
      best.chunk = c & ~(size_t)63;
    }
  }
  return best;
}

static int candidate(const rcoll_tuner_t *t, int coll, int algo) {
  if (!rcoll_tune_applies(t, coll, algo))
    return 0;
  if (t->prm.deterministic && rcoll_coll_reduces(coll))
    return (rcoll_algorithm_find(coll, algo)->flags & RCOLL_ALGO_DETERMINISTIC) != 0;
  return (t->prm.allowed >> algo) & 1;
}

/* One line with every candidate's time, for RCOLL_DEBUG_SUBSYS=TUNE. */
static void log_choice(const rcoll_tuner_t *t, int coll, size_t bytes, rcoll_tune_choice_t ch) {
  char line[512];
  int len = snprintf(line, sizeof line, "%s %zu B, %d ranks on %d nodes: %s chunk %zu (%.1f us)",
                     rcoll_coll_name(coll), bytes, t->nranks, t->nnodes, rcoll_algo_name(ch.algo),
                     ch.chunk, ch.time_us);
  const char *sep = "; others:";
  for (int a = 0; a < rcoll_algo_family_count() && len < (int)sizeof line; a++) {
    if (a == ch.algo || !rcoll_tune_applies(t, coll, a))
      continue;
    rcoll_tune_choice_t o = rcoll_tune_best(t, coll, a, bytes);
    len += snprintf(line + len, sizeof line - (size_t)len, "%s %s %.1f us%s", sep, rcoll_algo_name(a),
                    o.time_us, candidate(t, coll, a) ? "" : " (not allowed)");
    sep = ",";
  }
  RCOLL_INFO(RCOLL_SUB_TUNE, "tune: %s", line);
}

/* The collective's algorithms in the order candidates are tried, which
 * near ties follow: by tie_order (e.g. rabenseifner before hier, since
 * where the model cannot tell them apart, phases that cannot overlap on
 * shared cores moving the same bytes, its few large messages with no
 * hand-off between phases measured 10-50% faster: 2 x 2 ranks on 2 cores,
 * 200 us links, 128 KiB - 64 MiB). Returns how many. */
#define MAX_PER_COLL 32
static int try_order(int coll, const rcoll_algorithm_t *out[MAX_PER_COLL]) {
  int n = 0;
  for (int i = 0; rcoll_algorithms[i] != NULL && n < MAX_PER_COLL; i++) {
    const rcoll_algorithm_t *d = rcoll_algorithms[i];
    if (d->coll != (rcoll_coll_kind_t)coll)
      continue;
    int k = n++;
    for (; k > 0 && out[k - 1]->tie_order > d->tie_order; k--)
      out[k] = out[k - 1];
    out[k] = d;
  }
  return n;
}

static rcoll_tune_choice_t choose(const rcoll_tuner_t *t, int coll, size_t bytes, int skip) {
  const rcoll_algorithm_t *order[MAX_PER_COLL];
  int n = try_order(coll, order);
  rcoll_tune_choice_t best = {-1, 0, -1, NULL};
  for (int i = 0; i < n; i++) {
    int a = rcoll_algorithm_family(order[i]);
    if (a == skip || !candidate(t, coll, a))
      continue;
    rcoll_tune_choice_t c = rcoll_tune_best(t, coll, a, bytes);
    if (c.time_us < 0) /* not at this size (the flat board: up to its slot) */
      continue;
    /* Near ties (0.1%) keep the earlier, simpler algorithm. */
    if (best.algo < 0 || c.time_us < best.time_us * 0.999)
      best = c;
  }
  if (best.algo >= 0)
    return best;
  /* RCOLL_ALGO left nothing for this collective: its fallback, or in
   * deterministic mode its deterministic algorithm. */
  unsigned want = t->prm.deterministic && rcoll_coll_reduces(coll) ? RCOLL_ALGO_DETERMINISTIC
                                                                     : RCOLL_ALGO_FALLBACK;
  for (int i = 0; i < n; i++)
    if ((order[i]->flags & want) && rcoll_algorithm_family(order[i]) != skip)
      return rcoll_tune_best(t, coll, rcoll_algorithm_family(order[i]), bytes);
  return best;
}

/* Calls repeat their sizes: recent choices are remembered (exact keys
 * only). A device call on one node asks without the flat board (host
 * memory) every time: that choice is kept too. */
static rcoll_tune_choice_t choose_cached(rcoll_tuner_t *t, int coll, size_t bytes, int skip) {
  size_t slot = (bytes * 0x9E3779B97F4A7C15ull + (size_t)coll * 31u + (size_t)(skip + 1)) % RCOLL_TUNE_CACHE;
  int logging = rcoll_log_enabled(RCOLL_LOG_INFO, RCOLL_SUB_TUNE);
  if (!logging && t->cache[slot].coll == coll && t->cache[slot].bytes == bytes && t->cache[slot].skip == skip)
    return t->cache[slot].choice;
  rcoll_tune_choice_t ch = choose(t, coll, bytes, skip);
  t->cache[slot].coll = coll;
  t->cache[slot].bytes = bytes;
  t->cache[slot].skip = skip;
  t->cache[slot].choice = ch;
  if (logging && skip < 0)
    log_choice(t, coll, bytes, ch);
  return ch;
}

rcoll_tune_choice_t rcoll_tune_choose_without(rcoll_tuner_t *t, int coll, size_t bytes, int skip) {
  return choose_cached(t, coll, bytes, skip);
}

rcoll_tune_choice_t rcoll_tune_choose(rcoll_tuner_t *t, int coll, size_t bytes) {
  return choose_cached(t, coll, bytes, -1);
}
