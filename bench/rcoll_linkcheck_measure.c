/* The rounds: in each, every rank meets at most one partner (lc_partner),
 * and the pair measures both directions of its link with rcollSend and
 * rcollRecv on the job's communicator, so the bytes take the transport the
 * library chose for that peer, as a collective's would.
 *
 * Latency: 8-byte round trips, started by one side, then by the other; a
 * direction's latency is half the median round trip its src started.
 * Bandwidth: src sends `-n` messages of `-b` bytes, each acknowledged, and
 * keeps the median of their rates. One untimed
 * exchange of each kind comes first: connections are made on first use,
 * and the first message pays for them and for the buffers' page faults. */
#include <stdio.h>
#include <time.h>

#include "rcoll_linkcheck_run.h"

/* Untimed round trips before the timed ones. */
#define LC_WARM_PINGS 5

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

void lc_describe(lc_rank_t *r, char *buf, size_t len) {
  int phase = atomic_load(&r->phase), round = atomic_load(&r->round) + 1;
  int rounds = lc_rounds(r->nranks);
  switch (phase) {
  case LC_PHASE_INIT: snprintf(buf, len, "setting up its communicator"); break;
  case LC_PHASE_WAIT:
    snprintf(buf, len, "waiting for every rank to start round %d of %d", round, rounds);
    break;
  case LC_PHASE_LATENCY:
  case LC_PHASE_BANDWIDTH:
    snprintf(buf, len, "measuring %s with rank %d in round %d of %d",
             phase == LC_PHASE_LATENCY ? "latency" : "bandwidth", atomic_load(&r->peer), round,
             rounds);
    break;
  case LC_PHASE_GATHER: snprintf(buf, len, "sending its results to rank 0"); break;
  default: snprintf(buf, len, "done"); break;
  }
}

static void check(lc_rank_t *r, rcollResult_t res, const char *fn, int peer) {
  if (res == rcollSuccess)
    return;
  char doing[128];
  lc_describe(r, doing, sizeof doing);
  fflush(stdout);
  fprintf(stderr, "rank %d: %s with rank %d failed while %s: %s : %s\n", r->rank, fn, peer, doing,
          rcollGetErrorString(res), rcollGetLastError(r->comm));
  rcollCommAbort(r->comm);
  bench_world_abort(r->world, LC_EXIT_ERROR);
}

static void send_to(lc_rank_t *r, const void *buf, size_t bytes, int peer) {
  check(r, rcollSend(buf, bytes, rcollUint8, peer, r->comm, NULL), "rcollSend", peer);
}

static void recv_from(lc_rank_t *r, void *buf, size_t bytes, int peer) {
  check(r, rcollRecv(buf, bytes, rcollUint8, peer, r->comm, NULL), "rcollRecv", peer);
}

/* Round trips with `peer`: the starting side returns the one-way latency
 * in us, the echoing side 0. */
static double round_trips(lc_rank_t *r, int peer, int start) {
  int pings = r->opts->pings;
  for (int i = 0; i < LC_WARM_PINGS + pings; i++) {
    if (!start) {
      recv_from(r, &r->pong, sizeof r->pong, peer);
      send_to(r, &r->ping, sizeof r->ping, peer);
      continue;
    }
    double t0 = now_us();
    send_to(r, &r->ping, sizeof r->ping, peer);
    recv_from(r, &r->pong, sizeof r->pong, peer);
    if (i >= LC_WARM_PINGS)
      r->rtt[i - LC_WARM_PINGS] = now_us() - t0;
  }
  return start ? lc_median(r->rtt, pings) / 2 : 0;
}

/* One direction's bandwidth: the sending side returns GB/s, the receiving
 * side 0. Each message is timed from its send until the receiver's 8-byte
 * "arrived" (one latency more than the transfer, a small part of a large
 * message), and the median over `-n` of them is kept: on a shared machine
 * a preempted message is an outlier of the time, not of the link. */
static double stream(lc_rank_t *r, int peer, int sending) {
  size_t bytes = r->opts->bytes;
  int iters = r->opts->iters;
  for (int i = 0; i < 1 + iters; i++) { /* the first is untimed */
    if (!sending) {
      recv_from(r, r->buf, bytes, peer);
      send_to(r, &r->ping, sizeof r->ping, peer);
      continue;
    }
    double t0 = now_us();
    send_to(r, r->buf, bytes, peer);
    recv_from(r, &r->pong, sizeof r->pong, peer);
    double us = now_us() - t0;
    if (i > 0)
      r->bw[i - 1] = us > 0 ? (double)bytes / us * 1e-3 : 0;
  }
  return sending ? lc_median(r->bw, iters) : 0;
}

/* Both directions of one pair: the lower rank starts each kind, then the
 * roles swap, so both sides run the same sequence of calls. */
static void measure_pair(lc_rank_t *r, int peer) {
  lc_link_t *l = &r->row[peer];
  int lower = r->rank < peer;
  atomic_store(&r->phase, LC_PHASE_LATENCY);
  for (int turn = 0; turn < 2; turn++) {
    int mine = (turn == 0) == lower;
    double v = round_trips(r, peer, mine);
    if (mine)
      l->latency_us = v;
  }
  atomic_store(&r->phase, LC_PHASE_BANDWIDTH);
  for (int turn = 0; turn < 2; turn++) {
    int mine = (turn == 0) == lower;
    double v = stream(r, peer, mine);
    if (mine)
      l->bandwidth_gbps = v;
  }
}

void lc_measure_all(lc_rank_t *r) {
  int rounds = lc_rounds(r->nranks);
  for (int round = 0; round < rounds; round++) {
    /* Pairs start together, so that a rank is in one pair at a time and
     * the pairs of a round share the network only with each other. */
    int peer = lc_partner(r->nranks, round, r->rank);
    atomic_store(&r->round, round);
    atomic_store(&r->peer, peer);
    atomic_store(&r->phase, LC_PHASE_WAIT);
    bench_world_barrier(r->world, r->thread);
    if (peer >= 0)
      measure_pair(r, peer);
  }
  for (int peer = 0; peer < r->nranks; peer++) {
    lc_link_t *l = &r->row[peer];
    int same = 0;
    if (peer == r->rank) {
      snprintf(l->transport, sizeof l->transport, "self");
      l->same_node = 1;
      continue;
    }
    check(r, rcollCommPeerTransport(r->comm, peer, &same, l->transport, sizeof l->transport),
          "rcollCommPeerTransport", peer);
    l->same_node = same;
  }
}
