/* Fingerprints (call.h): each call sends a 40-byte description of itself to
 * each peer it exchanges messages with, ahead of its data on that
 * connection, and checks the one that comes back before it uses any data
 * from that peer. Ranks that called different things then fail at once,
 * naming both calls, instead of waiting for data that never comes or
 * reading one call's data as another's.
 *
 * The messages are ordinary plan steps, so every transport carries them
 * without code of its own, and the engine's per-connection order puts each
 * in front of its call's data. A fingerprint send depends on nothing, and
 * the data receives only wait for the check at completion (the step's
 * gate), so posting is not delayed: the cost is one small message each way
 * per peer and call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "comm.h"
#include "reduce.h"

static int fp_scratch(struct rcollComm *c) {
  if (c->fp_mark != NULL)
    return 0;
  c->fp_peers = malloc((size_t)c->nranks * sizeof *c->fp_peers);
  c->fp_mark = calloc((size_t)c->nranks, sizeof *c->fp_mark);
  return c->fp_peers != NULL && c->fp_mark != NULL ? 0 : -1;
}

/* The peers the call's steps exchange messages with, in order of first use. */
static int fp_peers(struct rcollComm *c, const rcoll_call_t *call) {
  int n = 0;
  for (int i = call->first_step; i < call->first_step + call->nsteps; i++) {
    const rcoll_step_t *st = &c->plan.steps[i];
    if (st->kind != RCOLL_STEP_COPY && c->fp_mark[st->peer] == 0) {
      c->fp_peers[n] = st->peer;
      c->fp_mark[st->peer] = ++n;
    }
  }
  return n;
}

/* The sender's side of an inline message: a first message to a peer that
 * is small and depends on nothing travels inside the fingerprint message,
 * built in a slot of its own. It keeps its number on the connection (the
 * engine counts it as sent), so that both sides number the messages after
 * it alike, whether it came inline or not (traces match them by number). */
static int fp_inline_send(struct rcollComm *c, rcoll_step_t *steps, int fp, int i,
                          const rcoll_fp_t *call_fp) {
  rcoll_step_t *st = &steps[i];
  if (st->bytes == 0 || st->bytes > RCOLL_FP_INLINE || st->dep[0] != RCOLL_NO_DEP ||
      st->dep[1] != RCOLL_NO_DEP)
    return 0;
  rcoll_fp_slot_t *slot = rcoll_fp_alloc(c);
  if (slot == NULL)
    return 0; /* then it goes as a message of its own */
  slot->fp = *call_fp;
  slot->inline_step = i;
  steps[fp].src = slot;
  steps[fp].bytes = sizeof slot->fp + st->bytes;
  st->flags |= RCOLL_STEP_INLINE;
  st->gate = fp;
  return 1;
}

/* The receiver's side: a small first receive may come inline; which, its
 * fingerprint message says (rcoll_fp_check). */
static void fp_inline_recv(rcoll_step_t *steps, int fp, int i) {
  if (steps[i].bytes == 0 || steps[i].bytes > RCOLL_FP_INLINE)
    return;
  steps[i].flags |= RCOLL_STEP_MAYBE_INLINE;
  ((rcoll_fp_slot_t *)steps[fp].dst)->inline_step = i;
}

/* Numbers the fingerprint steps first on their connections: the call's own
 * messages on each move one place down, and each fingerprint takes the
 * place of the first (or the next free one, where the call sends nothing
 * that way). Receives from a peer are gated on its fingerprint. */
static void fp_number(struct rcollComm *c, rcoll_call_t *call, int npeers, int per) {
  rcoll_step_t *steps = c->plan.steps;
  const uint64_t unset = UINT64_MAX;
  for (int k = 0; k < npeers * per; k++)
    steps[call->first_step + k].seq = unset;
  for (int i = call->first_step + npeers * per; i < call->first_step + call->nsteps; i++) {
    rcoll_step_t *st = &steps[i];
    if (st->kind == RCOLL_STEP_COPY)
      continue;
    int sending = st->kind == RCOLL_STEP_SEND;
    int fp = call->first_step + (c->fp_mark[st->peer] - 1) * per + (per == 2 ? !sending : 0);
    if (steps[fp].kind != st->kind && !(steps[fp].kind == RCOLL_STEP_RECV && !sending))
      continue; /* no fingerprint this way (send/recv: the receiver's side only) */
    int first = steps[fp].seq == unset;
    if (first)
      steps[fp].seq = st->seq;
    /* A device call's data is in device memory, which only the proxy's
     * device steps may read or write: none of it travels inline. */
    if (first && sending && !call->device)
      fp_inline_send(c, steps, fp, i, call->fp);
    else if (first && !call->device)
      fp_inline_recv(steps, fp, i);
    st->seq++;
    if (!sending)
      st->gate = fp;
  }
  for (int k = 0; k < npeers * per; k++) {
    rcoll_step_t *fp = &steps[call->first_step + k];
    rcoll_peer_t *pe = &c->peers[fp->peer];
    uint64_t *planned = fp->kind == RCOLL_STEP_SEND ? &pe->send_planned : &pe->recv_planned;
    if (fp->seq == unset)
      fp->seq = *planned;
    ++*planned;
  }
}

rcollResult_t rcoll_fp_insert(struct rcollComm *c, rcoll_call_t *call) {
  rcoll_plan_t *p = &c->plan;
  if (p->failed)
    return rcollSuccess; /* the engine refuses the plan, naming the cause */
  if (fp_scratch(c) != 0)
    goto oom;
  int npeers = fp_peers(c, call);
  /* Collectives both ways; a send only sends its fingerprint and a receive
   * only receives one: which of a pair's sends and receives a group lists
   * first is free, so a fingerprint the other way could meet the wrong call. */
  int kind = call->fp->kind;
  int per = kind == RCOLL_COLL_SEND || kind == RCOLL_COLL_RECV ? 1 : 2;
  if (npeers > 0 && rcoll_plan_insert(p, call->first_step, npeers * per) != 0)
    goto oom;
  for (int k = 0; k < npeers; k++) {
    for (int d = 0; d < per; d++) {
      rcoll_step_t *st = &p->steps[call->first_step + k * per + d];
      int sending = per == 2 ? d == 0 : kind == RCOLL_COLL_SEND;
      st->kind = sending ? RCOLL_STEP_SEND : RCOLL_STEP_RECV;
      st->flags = RCOLL_STEP_FP;
      st->peer = c->fp_peers[k];
      st->bytes = sizeof(rcoll_fp_t);
      st->src = call->fp; /* a receive compares what came with it; its slot has no inline bytes */
      if (sending)
        continue;
      if ((st->dst = rcoll_fp_alloc(c)) == NULL)
        goto oom;
      st->bytes += RCOLL_FP_INLINE; /* room for a first message inline */
    }
  }
  call->nsteps += npeers * per;
  fp_number(c, call, npeers, per);
  for (int k = 0; k < npeers; k++)
    c->fp_mark[c->fp_peers[k]] = 0;
  return rcollSuccess;
oom:
  p->failed = 1;
  return rcoll_error(rcollSystemError, "rank %d: out of memory adding a call's fingerprints", c->rank);
}

/* The calls match; `extra` bytes came inline: they are the first receive's
 * (marked for the engine, which moves them when the receive's dependencies
 * are done), and that receive's place on the connection is taken. */
static rcollResult_t fp_took_inline(rcoll_plan_t *p, const rcoll_step_t *st, size_t extra) {
  struct rcollComm *c = p->comm;
  const rcoll_fp_slot_t *slot = st->dst;
  if (extra == 0)
    return rcollSuccess;
  rcoll_step_t *data = slot->inline_step >= 0 ? &p->steps[slot->inline_step] : NULL;
  rcoll_peer_t *pe = &c->peers[st->peer];
  if (data == NULL || data->bytes != extra || pe->recv_posted != data->seq)
    return rcoll_error(rcollInvalidUsage, "rank %d: rank %d sent %zu bytes with a matching "
                       "fingerprint where this rank's first message from it is %zu bytes: the "
                       "ranks planned the same call differently", c->rank, st->peer, extra,
                       data != NULL ? data->bytes : 0);
  data->flags |= RCOLL_STEP_INLINE;
  pe->recv_posted++;
  return rcollSuccess;
}

void rcoll_fp_fill_inline(rcoll_plan_t *p, rcoll_step_t *st) {
  rcoll_fp_slot_t *slot = (rcoll_fp_slot_t *)st->src;
  if (slot->inline_step >= 0) {
    const rcoll_step_t *data = &p->steps[slot->inline_step];
    memcpy(slot->data, data->src, data->bytes);
  }
}

/* Two calls of different magic: on host against device buffers ("memory
 * type"), or on device buffers by two paths ("path": bounced or not). */
static const char *fp_mem_differs(const rcoll_fp_t *mine, const rcoll_fp_t *theirs) {
  return mine->magic == RCOLL_FP_MAGIC || theirs->magic == RCOLL_FP_MAGIC ? "memory type" : "path";
}

/* The first field in which two calls that should match differ, or NULL. */
static const char *fp_differs(const rcoll_fp_t *mine, const rcoll_fp_t *theirs, int me, int peer) {
  if (mine->kind == RCOLL_COLL_RECV) {
    if (theirs->kind != RCOLL_COLL_SEND || theirs->root != me)
      return "kind";
    if (theirs->magic != mine->magic)
      return fp_mem_differs(mine, theirs);
    if (theirs->dtype != mine->dtype)
      return "type";
    if (theirs->count * rcoll_type_size((rcollDataType_t)theirs->dtype) !=
        mine->count * rcoll_type_size((rcollDataType_t)mine->dtype))
      return "size";
    return theirs->seq != mine->seq ? "number" : NULL;
  }
  (void)peer;
  if (theirs->kind != mine->kind)
    return "kind";
  if (theirs->magic != mine->magic)
    return fp_mem_differs(mine, theirs);
  if (theirs->seq != mine->seq)
    return "number";
  if (theirs->count != mine->count)
    return "count";
  if (theirs->dtype != mine->dtype)
    return "type";
  if (theirs->op != mine->op)
    return "op";
  if (theirs->root != mine->root)
    return "root";
  /* Both are zero-padded (call.c), so memcmp compares the names. */
  return memcmp(theirs->algo, mine->algo, sizeof mine->algo) != 0 ? "algorithm" : NULL;
}

rcollResult_t rcoll_fp_check(rcoll_plan_t *p, int step, size_t got) {
  struct rcollComm *c = p->comm;
  const rcoll_step_t *st = &p->steps[step];
  const rcoll_fp_t *mine = st->src, *theirs = st->dst;
  char a[160];
  int garbled = got < sizeof *theirs || got > sizeof *theirs + RCOLL_FP_INLINE ||
                (theirs->magic != RCOLL_FP_MAGIC && theirs->magic != RCOLL_FP_MAGIC_DEVICE &&
                 theirs->magic != RCOLL_FP_MAGIC_BOUNCED);
  const char *field = garbled ? NULL : fp_differs(mine, theirs, c->rank, st->peer);
  if (!garbled && field == NULL)
    return fp_took_inline(p, st, got - sizeof *theirs); /* the usual case: nothing formatted */
  rcoll_fp_describe(mine, c->rank, a, sizeof a);
  if (garbled)
    return rcoll_error(rcollInvalidUsage,
                       "rank %d: call mismatch: rank %d sent a %zu-byte message where the "
                       "fingerprint of its next call was expected, while rank %d called %s: the "
                       "ranks' calls are out of step (an earlier call differed)", c->rank,
                       st->peer, got, c->rank, a);
  return rcoll_fp_mismatch(c, mine, theirs, st->peer);
}

rcollResult_t rcoll_fp_mismatch(const struct rcollComm *c, const rcoll_fp_t *mine, const rcoll_fp_t *theirs,
                                int peer) {
  char a[160], b[160];
  const char *field = fp_differs(mine, theirs, c->rank, peer);
  rcoll_fp_describe(mine, c->rank, a, sizeof a);
  rcoll_fp_describe(theirs, peer, b, sizeof b);
  /* The same device call, made in a group on one rank only. */
  int bounce = (mine->magic == RCOLL_FP_MAGIC_BOUNCED && theirs->magic == RCOLL_FP_MAGIC_DEVICE) ||
               (mine->magic == RCOLL_FP_MAGIC_DEVICE && theirs->magic == RCOLL_FP_MAGIC_BOUNCED);
  return rcoll_error(rcollInvalidUsage,
                     "rank %d: call mismatch (%s differs): rank %d called %s, rank %d called %s; "
                     "every rank must make the same calls in the same order, with the same count, "
                     "type, op and root%s", c->rank, field != NULL ? field : "algorithm", c->rank, a, peer, b,
                     bounce ? ", and a small device call in a group on all of them or on none (outside "
                              "a group, one of at most RCOLL_CUDA_BOUNCE bytes runs through host memory)"
                            : "");
}
