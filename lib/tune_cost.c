/* Building blocks of the cost model (tune_cost.h), and the costs of the
 * shapes several algorithms share: ring, chain, fan and binomial tree. */
#include "tune_cost.h"

#include <math.h>

#include "tree.h"

double rcoll_cost_beta(double gbps) { return 1.0 / ((gbps > 1e-6 ? gbps : 1e-6) * 1e3); }

double rcoll_cost_shared_bytes(const rcoll_tuner_t *t) {
  return t->nnodes == 1 && t->prm.ranks_per_core > 1 ? pow(t->prm.ranks_per_core, 0.75) : 1;
}

double rcoll_cost_msg_us(rcoll_cost_link_t l, double bytes) {
  return l.eng_us + (bytes > RCOLL_COST_BIG_MSG ? l.big_us : 0);
}

rcoll_cost_link_t rcoll_cost_link(const rcoll_tuner_t *t, int cross, int share) {
  const rcoll_tune_link_t *in = &t->prm.intra, *ex = &t->prm.inter;
  double bi = rcoll_cost_beta(in->gbps), be = rcoll_cost_beta(ex->gbps) * (share > 1 ? share : 1);
  double eng = RCOLL_COST_ENGINE_US + (t->prm.cores_shared ? RCOLL_COST_SHARED_US : 0);
  double big = t->prm.cores_shared ? RCOLL_COST_SHARED_BIG : 1;
  if (!cross)
    return (rcoll_cost_link_t){in->alpha_us, bi, big * in->msg_us, eng + in->each_us};
  return (rcoll_cost_link_t){fmax(in->alpha_us, ex->alpha_us), fmax(bi, be), big * fmax(in->msg_us, ex->msg_us),
                             eng + fmax(in->each_us, ex->each_us)};
}

double rcoll_cost_window_slot(const rcoll_tuner_t *t, double lat, double k) {
  int w = t->prm.window;
  return w > 0 && k > w ? 2 * lat / w : 0;
}

double rcoll_cost_chunks(double bytes, size_t chunk) {
  double k = ceil(bytes / (double)chunk);
  return k < 1 ? 1 : k;
}

double rcoll_cost_pipeline(double path_us, double k, int hops, double slot) {
  return path_us + (k + hops - 1) * slot;
}

/* Ring steps move a segment of s bytes each; a step lasts the hop latency
 * plus one chunk, or the whole segment's transfer once chunks keep the link
 * busy through the latency. A reducing step adds each chunk as it arrives,
 * while the peer sends the next: where a chunk is reduced faster than the
 * link brings the next, only the last chunk's reduction lengthens the step
 * (a 4 MiB all-reduce of 2 ranks over loopback TCP took 1.93 ms in 64 KiB
 * chunks and 2.13 ms as one message per step, 7 alternating rounds each).
 * Where reducing is the slower (shared memory), the whole segment's
 * reduction is added, as the shared-memory choices were measured with. */
double rcoll_cost_ring(const rcoll_tuner_t *t, double m, size_t c, int phases, int reduce) {
  int n = t->nranks;
  rcoll_cost_link_t l = rcoll_cost_link(t, t->ring_cross, t->ring_share);
  double s = m / n, k = rcoll_cost_chunks(s, c), gamma = rcoll_cost_beta(t->prm.reduce_gbps);
  double cs = fmin((double)c, s), o = rcoll_cost_msg_us(l, cs);
  double slot = fmax(o + cs * l.b, rcoll_cost_window_slot(t, l.lat, k));
  double step = fmax(t->ring_hop_us + o + cs * l.b, k * slot);
  if (!reduce)
    return phases * (n - 1) * step;
  return phases * (n - 1) * step + (n - 1) * (gamma <= l.b ? cs : s) * gamma;
}

double rcoll_cost_chain(const rcoll_tuner_t *t, double m, size_t c, int laps, int extra, int reduce) {
  rcoll_cost_link_t l = rcoll_cost_link(t, t->ring_cross, t->ring_share);
  double cs = fmin((double)c, m), k = rcoll_cost_chunks(m, c);
  double slot = laps * rcoll_cost_msg_us(l, cs) +
                cs * (laps * l.b + (reduce ? rcoll_cost_beta(t->prm.reduce_gbps) : 0));
  slot = fmax(slot, rcoll_cost_window_slot(t, l.lat, k));
  return rcoll_cost_pipeline(laps * t->chain_us + extra * l.lat, k, laps * (t->nranks - 1) + extra, slot);
}

/* One latency, then each chunk's overhead and transfer one after the other
 * on the root's links. */
double rcoll_cost_fan(const rcoll_tuner_t *t, double m, size_t c) {
  int n = t->nranks;
  rcoll_cost_link_t l = rcoll_cost_link(t, t->nnodes > 1, 1);
  double block = m / n, k = rcoll_cost_chunks(block, c), cs = block < (double)c ? block : (double)c;
  double msg = rcoll_cost_msg_us(l, cs) + cs * l.b, win = rcoll_cost_window_slot(t, l.lat, k);
  return l.lat + (n - 1) * k * (msg > win ? msg : win);
}

/* Messages of v's subtree (as rcoll_binomial_msgs lists them). */
static double msgs_of(int n, int v, double block, double c) {
  double subtree = rcoll_binomial_size(n, v) * block;
  if (subtree <= c)
    return 1;
  double k = rcoll_cost_chunks(block, (size_t)c);
  for (int d = 1; d < rcoll_binomial_span(n, v) && v + d < n; d *= 2)
    k += msgs_of(n, v + d, block, c);
  return k;
}

/* The root's links carry every child's messages one after the other
 * ((n-1) blocks, and a message per subtree that fits a chunk); the blocks
 * of the deepest subtree pass log2 n hops, each paying a latency and an
 * overhead, and a subtree that is forwarded whole must first be whole. */
double rcoll_cost_binomial(const rcoll_tuner_t *t, double m, size_t c) {
  int n = t->nranks, height = 0;
  rcoll_cost_link_t l = rcoll_cost_link(t, t->nnodes > 1, 1);
  double block = m / n, msgs = 0, cs = block < (double)c ? block : (double)c;
  int big = 1; /* the root's largest child */
  for (int d = 1; d < n; d *= 2) {
    msgs += msgs_of(n, d, block, (double)c);
    height++;
    big = d;
  }
  /* A subtree that travels as one message is stored and forwarded whole
   * (a larger one, chunk by chunk: a chunk's delay):
   * the largest one waits for its other s-1 blocks to pass. */
  double s = rcoll_binomial_size(n, big), forwarded = fmin((s - 1) * block, (double)c) * l.b;
  return height * (l.lat + rcoll_cost_msg_us(l, cs)) + msgs * rcoll_cost_msg_us(l, cs) +
         (n - 1) * block * l.b + forwarded;
}
