/* Pairwise-exchange all-to-all: in each of n-1 rounds (n when n is odd, a
 * round in which every rank has a bye) the ranks pair up, as in a
 * round-robin tournament, and each pair swaps the blocks meant for each
 * other. Every pair meets exactly once. Rounds do not wait for each other:
 * the engine keeps as many exchanges in flight as its window allows, so
 * their latencies overlap and the cost is the n-1 blocks each rank moves.
 *
 * Out of place, a block goes straight from the send buffer to its peer and
 * arrives straight in place. Every send is half of an exchange (its peer
 * sends to us at once), marked so (rcoll_plan_send_single) that a transport
 * which can lets the receiver copy it straight from our buffer: one copy per
 * byte at each rank instead of one into a buffer between and one out.
 *
 * In place (sendbuff == recvbuff), the block we receive from a peer lands
 * where the block we send it sits, so it is received into the scratch ring
 * and copied into place once our own block to that peer has left. Each copy waits only for the send and the receive
 * of its own exchange, which keeps the schedule deadlock-free on
 * unbuffered connections. */
#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

/* The partner of rank r in round k of the circle method, or -1 for a bye.
 * Odd n: partner (k - r) mod n, a bye when that is r itself. Even n: ranks
 * 0..n-2 play the odd tournament among themselves, and whoever would have
 * the bye meets rank n-1 instead. */
static int partner(int n, int r, int k) {
  if (n % 2 == 1) {
    int q = ((k - r) % n + n) % n;
    return q == r ? -1 : q;
  }
  int m = n - 1;
  if (r == m) /* the rank r' with 2r' = k (mod m); (m+1)/2 is 2's inverse */
    return (int)(((long)k * ((m + 1) / 2)) % m);
  int q = ((k - r) % m + m) % m;
  return q == r ? m : q;
}

static int rounds(int n) { return n % 2 == 1 ? n : n - 1; }

/* In place: receive into scratch, copy into place after our send. */
static void exchange_in_place(rcoll_plan_t *p, int peer, char *blk, size_t len) {
  int free_dep;
  char *piece = rcoll_plan_scratch_get(p, &free_dep);
  if (piece == NULL)
    return;
  int recv = rcoll_plan_recv(p, peer, piece, len, free_dep, RCOLL_NO_DEP);
  int send = rcoll_plan_send_single(p, peer, blk, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
  int copy = rcoll_plan_copy(p, blk, piece, len, recv, send);
  rcoll_plan_scratch_set_reader(p, piece, copy);
}

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks, r = a->rank;
  size_t block = a->count * rcoll_type_size(a->dtype);
  char *rb = a->recvbuff;
  const char *sb = a->sendbuff;
  int inplace = sb == rb;
  size_t chunk = p->chunk_bytes, nchunks = rcoll_chunk_count(block, chunk);
  for (int k = 0; k < rounds(n) && n > 1; k++) {
    int q = partner(n, r, k);
    if (q < 0)
      continue;
    for (size_t j = 0; j < nchunks; j++) {
      size_t off = (size_t)q * block + j * chunk, len = block - j * chunk < chunk ? block - j * chunk : chunk;
      if (inplace) {
        exchange_in_place(p, q, rb + off, len);
        continue;
      }
      rcoll_plan_send_single(p, q, sb + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
      rcoll_plan_recv(p, q, rb + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
    }
  }
  /* Our own block last: the engine posts steps in plan order, so the
   * exchanges are under way (the peers can read our blocks) while we copy.
   * Nothing reads it again in the call: a large one skips the cache. */
  if (!inplace)
    rcoll_plan_copy_out(p, rb + (size_t)r * block, sb + (size_t)r * block, block, RCOLL_NO_DEP, RCOLL_NO_DEP);
}

/* All n-1 exchanges in flight at once: one latency, then every chunk of
 * every block pays its overhead and transfer on the rank's links (the
 * slower class when there are several nodes, whose ranks all send across
 * together). m is the whole vector, n blocks. Where ranks outnumber cores,
 * the wait for a peer to be scheduled (the cores-shared part of a message's
 * overhead) is paid once, as latency is: no message waits for another, so a
 * rank that runs finds all that has arrived. Bruck's steps, each waiting
 * for the last, pay it per step: at 4 ranks on 2 cores, 16 B, pairwise took
 * 6-7 us and Bruck 9-12 (same run), where the old model, charging pairwise
 * per message, chose Bruck. */
static double cost(const rcoll_tuner_t *t, double m, size_t c) {
  int n = t->nranks;
  rcoll_cost_link_t l = rcoll_cost_link(t, t->nnodes > 1, t->ppn);
  double shared = l.eng_us > RCOLL_COST_ENGINE_US ? l.eng_us - RCOLL_COST_ENGINE_US : 0;
  l.eng_us -= shared;
  double block = m / n, k = rcoll_cost_chunks(block, c), cs = block < (double)c ? block : (double)c;
  double msg = rcoll_cost_msg_us(l, cs) + cs * l.b;
  double slot = msg > rcoll_cost_window_slot(t, l.lat, k) ? msg : rcoll_cost_window_slot(t, l.lat, k);
  return l.lat + shared + (n - 1) * k * slot;
}

/* Every block but our own leaves once and arrives once. */
static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  double b = rcoll_traffic_bytes(a) * (a->nranks - 1);
  rcoll_traffic_set(out, b, b, 0, "sent = received = (n-1) B (B: the block for one rank)");
}

RCOLL_ALGORITHM(alltoall_pairwise) = {
    .name = "pairwise",
    .coll = RCOLL_COLL_ALLTOALL,
    .summary = "Pairwise exchange: n-1 rounds of a round-robin tournament, all in flight",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = RCOLL_ALGO_FALLBACK,
    .tie_order = 7,
};
