/* Bruck's all-to-all: ceil(log2 n) steps instead of n-1 exchanges, for
 * small blocks, where the number of messages costs more than the bytes.
 *
 * Number the blocks of rank r by distance: slot i (0 <= i < n) starts as
 * the block rank r sends to rank r+i. At step s (distance d = 2^s) every
 * rank sends all slots whose index has bit s set to rank r+d, as one packed
 * message, and receives the same slots of rank r-d in their place. After
 * the steps for every bit, slot i holds the block rank r-i sent to rank r,
 * so its home is block r-i of the receive buffer. Each rank sends and
 * receives about (n/2) log2 n blocks, against n-1 for the pairwise
 * exchange: it wins only when messages are small.
 *
 * Out of place, a slot is read from the send buffer until it is first
 * received, and received straight into its home. In place, slot i lives at
 * block r+i of the buffer throughout, and a last pass swaps blocks r+i and
 * r-i (through scratch) to bring every slot home.
 *
 * Packed messages are cut into chunks; each chunk is packed into a piece
 * of the scratch ring, sent from there, received into another piece and
 * unpacked into place. Every dependency points to an earlier message or to
 * local copies of the same chunk, so the schedule is deadlock-free on
 * unbuffered connections. */
#include <math.h>

#include "algo.h"
#include "reduce.h"
#include "tune_cost.h"

typedef struct bruck {
  int n, r, inplace;
  size_t block;
  const char *sb;
  char *rb;
  int *last;     /* per slot: the step after which its home holds its latest data */
  int *fresh;    /* per slot: last[] as this step leaves it */
  int *set;      /* the slots sent at this step, in order */
  int *packed;   /* per fragment of the chunk: the copy that packed it */
  char *moved;   /* per slot: received at least once (then it lives at home) */
} bruck_t;

/* Where slot i lives once received. */
static size_t home(const bruck_t *b, int i) {
  int blk = b->inplace ? (b->r + i) % b->n : (b->r - i + b->n) % b->n;
  return (size_t)blk * b->block;
}

static const char *slot_data(const bruck_t *b, int i) {
  if (b->inplace || b->moved[i])
    return b->rb + home(b, i);
  return b->sb + (size_t)((b->r + i) % b->n) * b->block;
}

/* One chunk [c0, c0+len) of step s's packed message: pack, send, receive,
 * unpack. */
static void chunk(rcoll_plan_t *p, bruck_t *b, int d, size_t c0, size_t len) {
  int sdep, rdep, packs = RCOLL_NO_DEP, unpacks = RCOLL_NO_DEP, nf = 0;
  char *out = rcoll_plan_scratch_get(p, &sdep);
  for (size_t pos = c0; out != NULL && pos < c0 + len; nf++) {
    int i = b->set[pos / b->block];
    size_t boff = pos % b->block, flen = b->block - boff < c0 + len - pos ? b->block - boff : c0 + len - pos;
    b->packed[nf] = rcoll_plan_copy(p, out + (pos - c0), slot_data(b, i) + boff, flen, sdep, b->last[i]);
    packs = rcoll_plan_join(p, packs, b->packed[nf]);
    pos += flen;
  }
  int send = rcoll_plan_send(p, (b->r + d) % b->n, out, len, packs, RCOLL_NO_DEP);
  rcoll_plan_scratch_set_reader(p, out, send);
  char *in = rcoll_plan_scratch_get(p, &rdep);
  if (in == NULL)
    return;
  int recv = rcoll_plan_recv(p, (b->r - d + b->n) % b->n, in, len, rdep, RCOLL_NO_DEP);
  nf = 0;
  for (size_t pos = c0; pos < c0 + len; nf++) {
    int i = b->set[pos / b->block];
    size_t boff = pos % b->block, flen = b->block - boff < c0 + len - pos ? b->block - boff : c0 + len - pos;
    /* Overwrites what this step packed from the same place: after it. */
    int u = rcoll_plan_copy(p, b->rb + home(b, i) + boff, in + (pos - c0), flen, recv, b->packed[nf]);
    unpacks = rcoll_plan_join(p, unpacks, u);
    b->fresh[i] = rcoll_plan_join(p, b->fresh[i], u);
    pos += flen;
  }
  rcoll_plan_scratch_set_reader(p, in, unpacks);
}

static void step(rcoll_plan_t *p, bruck_t *b, int d) {
  int ns = 0;
  for (int i = 1; i < b->n; i++)
    if (i & d)
      b->set[ns++] = i;
  /* A slot sent now is rewritten now: its unpacks (which follow its
   * packs, which follow last[]) will be all that matters. */
  for (int i = 0; i < b->n; i++)
    b->fresh[i] = i & d ? RCOLL_NO_DEP : b->last[i];
  size_t total = (size_t)ns * b->block, c = p->chunk_bytes;
  for (size_t c0 = 0; c0 < total; c0 += c)
    chunk(p, b, d, c0, total - c0 < c ? total - c0 : c);
  for (int k = 0; k < ns; k++)
    b->moved[b->set[k]] = 1;
  for (int i = 0; i < b->n; i++)
    b->last[i] = b->fresh[i];
}

/* In place: slot i sits at block r+i, its home is block r-i, where slot
 * n-i sits: swap the two, a chunk at a time through scratch. */
static void swap_home(rcoll_plan_t *p, bruck_t *b) {
  for (int i = 1; i < b->n - i; i++) {
    char *x = b->rb + (size_t)((b->r + i) % b->n) * b->block;
    char *y = b->rb + (size_t)((b->r - i + b->n) % b->n) * b->block;
    for (size_t off = 0; off < b->block; off += p->chunk_bytes) {
      size_t len = b->block - off < p->chunk_bytes ? b->block - off : p->chunk_bytes;
      int dep;
      char *piece = rcoll_plan_scratch_get(p, &dep);
      if (piece == NULL)
        return;
      int c1 = rcoll_plan_copy(p, piece, x + off, len, dep, b->last[i]);
      int c2 = rcoll_plan_copy(p, x + off, y + off, len, c1, b->last[b->n - i]);
      int c3 = rcoll_plan_copy(p, y + off, piece, len, c2, RCOLL_NO_DEP);
      rcoll_plan_scratch_set_reader(p, piece, c3);
    }
  }
}

static void plan(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks;
  bruck_t b = {n, a->rank, a->sendbuff == a->recvbuff, a->count * rcoll_type_size(a->dtype),
               a->sendbuff, a->recvbuff, NULL, NULL, NULL, NULL, NULL};
  if (!b.inplace) /* slot 0 is our block to ourselves */
    rcoll_plan_copy(p, b.rb + (size_t)b.r * b.block, b.sb + (size_t)b.r * b.block, b.block, RCOLL_NO_DEP,
                    RCOLL_NO_DEP);
  if (n == 1)
    return;
  int *tmp = rcoll_plan_tmp(p, (size_t)(4 * n + 2) * sizeof(int) + (size_t)n);
  if (tmp == NULL)
    return;
  b.last = tmp, b.fresh = tmp + n, b.set = tmp + 2 * n, b.packed = tmp + 3 * n;
  b.moved = (char *)(tmp + 4 * n + 2);
  for (int i = 0; i < n; i++)
    b.last[i] = RCOLL_NO_DEP;
  for (int d = 1; d < n; d *= 2)
    step(p, &b, d);
  if (b.inplace)
    swap_home(p, &b);
}

/* Slots sent at the step of distance d. */
static int slots_at(int n, int d) {
  int k = 0;
  for (int i = 1; i < n; i++)
    k += (i & d) != 0;
  return k;
}

/* Steps one after the other (a step packs what the previous one
 * unpacked): each pays a latency, its chunks' overheads and transfers, and
 * the local copies that pack and unpack them at the reduction rate. */
static double cost(const rcoll_tuner_t *t, double m, size_t c) {
  int n = t->nranks;
  rcoll_cost_link_t l = rcoll_cost_link(t, t->nnodes > 1, t->ppn);
  double block = m / n, gamma = rcoll_cost_beta(t->prm.reduce_gbps), total = 0;
  for (int d = 1; d < n; d *= 2) {
    double bytes = slots_at(n, d) * block, k = rcoll_cost_chunks(bytes, c);
    double cs = fmin((double)c, bytes), msg = rcoll_cost_msg_us(l, cs) + cs * l.b;
    total += l.lat + k * fmax(msg, rcoll_cost_window_slot(t, l.lat, k)) + 2 * bytes * gamma;
  }
  return total;
}

static void traffic(const rcoll_coll_args_t *a, const rcoll_topo_t *topo, rcoll_traffic_t *out) {
  (void)topo;
  double slots = 0;
  for (int d = 1; d < a->nranks; d *= 2)
    slots += slots_at(a->nranks, d);
  double b = slots * rcoll_traffic_bytes(a);
  rcoll_traffic_set(out, b, b, 0,
                    "sent = received = B x the sum over steps d = 1, 2, 4 ... < n of #{0 < i < n: i & d} "
                    "(about (n/2) log2 n B; B: the block for one rank)");
}

RCOLL_ALGORITHM(alltoall_bruck) = {
    .name = "bruck",
    .coll = RCOLL_COLL_ALLTOALL,
    .summary = "Bruck: log2 n steps of packed messages to rank+2^s, for small blocks",
    .plan = plan,
    .cost = cost,
    .traffic = traffic,
    .flags = 0,
    .tie_order = 8,
};
