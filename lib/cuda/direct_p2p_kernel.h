/* The direct path's sends and receives, device side: included by
 * direct_kernel.h (whose protocol comment says how they work) after the
 * macros, the argument type and rcoll_direct_copy they use, so that nvcc,
 * the host fake and kernel_emu compile them with the rest. */
#ifndef RCOLL_CUDA_DIRECT_P2P_KERNEL_H
#define RCOLL_CUDA_DIRECT_P2P_KERNEL_H

/* Point-to-point: flag `kind` (SENT, TAKEN) that rank `from` set for block
 * b, and the region of block b for messages to rank `to`, in `box`. */
RCOLL_DK_FN uint64_t *rcoll_direct_p2p_flag(const rcoll_direct_args_t *a, char *box, int kind,
                                            uint32_t from, uint32_t b) {
  (void)a;
  size_t line = ((size_t)(kind - RCOLL_DIRECT_SENT) * RCOLL_DIRECT_MAX_RANKS + from) * RCOLL_DIRECT_P2P_BLOCKS + b;
  return (uint64_t *)(void *)(box + RCOLL_DIRECT_COLL_FLAG_BYTES) + line * RCOLL_DIRECT_FLAG_WORDS;
}

RCOLL_DK_FN char *rcoll_direct_p2p_region(const rcoll_direct_args_t *a, char *box, uint32_t to, uint32_t b) {
  return box + RCOLL_DIRECT_HDR_BYTES + RCOLL_DIRECT_REGIONS * a->region_bytes +
         ((size_t)to * RCOLL_DIRECT_P2P_BLOCKS + b) * (a->region_bytes / RCOLL_DIRECT_P2P_BLOCKS);
}

/* Rounds of a message: P2P_BLOCKS stretches of a region's eighth each. */
RCOLL_DK_FN uint64_t rcoll_direct_p2p_rounds(const rcoll_direct_args_t *a, uint64_t bytes) {
  const uint64_t round = a->region_bytes; /* P2P_BLOCKS x region_bytes / P2P_BLOCKS */
  return bytes == 0 ? 1 : (bytes + round - 1) / round;
}

/* Whether op j may move its next round now (read by thread 0): a send once
 * the peer took the round before from our region, a receive once the peer
 * sent this one (*bad on a message of another size, with *failed set). */
RCOLL_DK_FN int rcoll_direct_p2p_ready(const rcoll_direct_args_t *a, const rcoll_direct_op_t *op,
                                       uint64_t g, uint32_t b, int *bad) {
  const uint64_t *f = rcoll_direct_p2p_flag(a, a->box[a->rank], op->send ? RCOLL_DIRECT_TAKEN : RCOLL_DIRECT_SENT,
                                            op->peer, b);
  if (RCOLL_DK_FLAG_LOAD(f) < (op->send ? g - 1 : g))
    return 0;
  RCOLL_DK_FENCE();
  uint64_t sig = op->send ? 0 : RCOLL_DK_FLAG_LOAD(f + 1);
  if (!op->send && sig != RCOLL_DIRECT_P2P_SIG(op->bytes)) {
    ((volatile uint64_t *)a->sigs)[0] = sig;
    ((volatile uint64_t *)a->sigs)[1] = RCOLL_DIRECT_P2P_SIG(op->bytes);
    *(volatile uint32_t *)a->failed = RCOLL_DIRECT_FAILED(op->peer, RCOLL_DIRECT_MISMATCH);
    *bad = 1;
  }
  return 1;
}

/* One block's part of every send and receive of the call: round after
 * round of whichever op may move, until all are done; 1 when a wait gave
 * up (after timeout_ns without any op moving). */
RCOLL_DK_FN int rcoll_direct_p2p(const rcoll_direct_args_t *a, uint32_t b, uint32_t tid, uint32_t nt) {
  const uint64_t part = a->region_bytes / RCOLL_DIRECT_P2P_BLOCKS;
  uint64_t next[RCOLL_DIRECT_P2P_OPS];
  uint32_t left = a->nops;
  for (uint32_t j = 0; j < a->nops; j++)
    next[j] = 0;
  uint64_t t0 = tid == 0 ? RCOLL_DK_NOW_NS() : 0;
  uint32_t polls = 0;
  while (left > 0) {
    int moved = 0;
    for (uint32_t j = 0; j < a->nops; j++) {
      const rcoll_direct_op_t *op = &a->ops[j];
      const uint64_t rounds = rcoll_direct_p2p_rounds(a, op->bytes);
      if (next[j] == rounds)
        continue;
      const uint64_t g = op->base + next[j] + 1;
      int bad = 0, ready = tid == 0 && rcoll_direct_p2p_ready(a, op, g, b, &bad);
      if (RCOLL_DK_SYNC_OR(bad))
        return 1;
      if (!RCOLL_DK_SYNC_OR(ready))
        continue;
      const uint64_t at = (next[j] * RCOLL_DIRECT_P2P_BLOCKS + b) * part;
      const uint64_t len = at >= op->bytes ? 0 : op->bytes - at < part ? op->bytes - at : part;
      const int vec = (((uintptr_t)op->buf | part) & 15) == 0;
      char *mine = a->box[a->rank], *theirs = a->box[op->peer];
      if (op->send)
        rcoll_direct_copy(rcoll_direct_p2p_region(a, mine, op->peer, b), op->buf + at, len, vec, tid, nt);
      else
        rcoll_direct_copy(op->buf + at, rcoll_direct_p2p_region(a, theirs, a->rank, b), len, vec, tid, nt);
      RCOLL_DK_SYNC();
      if (tid == 0) { /* our stores (or reads) first, then the flag in the peer's box */
        uint64_t *f = rcoll_direct_p2p_flag(a, theirs, op->send ? RCOLL_DIRECT_SENT : RCOLL_DIRECT_TAKEN,
                                            a->rank, b);
        RCOLL_DK_FLAG_STORE(f + 1, RCOLL_DIRECT_P2P_SIG(op->bytes));
        RCOLL_DK_FENCE();
        RCOLL_DK_FLAG_STORE(f, g);
      }
      left -= ++next[j] == rounds;
      moved = 1;
    }
    int bad = 0;
    if (moved && tid == 0) {
      t0 = RCOLL_DK_NOW_NS();
    } else if (tid == 0) {
      for (uint32_t j = 0; j < a->nops && RCOLL_DK_NOW_NS() - t0 > a->timeout_ns && !bad; j++)
        if (next[j] < rcoll_direct_p2p_rounds(a, a->ops[j].bytes)) {
          *(volatile uint32_t *)a->failed =
              RCOLL_DIRECT_FAILED(a->ops[j].peer, a->ops[j].send ? RCOLL_DIRECT_TAKEN : RCOLL_DIRECT_SENT);
          bad = 1;
        }
      if (!bad && ++polls % 256 == 0 && *(volatile uint32_t *)a->failed != 0)
        bad = 1;
      RCOLL_DK_PAUSE();
    }
    if (RCOLL_DK_SYNC_OR(bad))
      return 1;
  }
  return 0;
}

#endif
