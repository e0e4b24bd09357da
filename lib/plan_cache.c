/* The kept plan of the last call (plan_cache.h). */
#include "plan_cache.h"

#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "comm.h"
#include "flight_recorder.h"

/* Larger plans move enough data that planning them is cheap by comparison. */
#define PLAN_CACHE_MAX_STEPS 64

typedef struct rcoll_plan_cache {
  int valid;
  /* The call. */
  rcoll_coll_kind_t kind;
  const void *sendbuff;
  void *recvbuff;
  size_t count;
  rcollDataType_t dtype;
  rcollRedOp_t op;
  int root;
  /* Its plan as it was before it ran, numbered for the next repeat. */
  rcoll_step_t steps[PLAN_CACHE_MAX_STEPS];
  int adv[PLAN_CACHE_MAX_STEPS]; /* messages of the call on the step's connection */
  int nsteps;
  size_t chunk_bytes;
  const char *algo;
  double predicted_us;
  rcoll_fp_t *fp; /* the call's fingerprint, in a slot of the comm's first block */
  int fp_used;
} rcoll_plan_cache_t;

/* Whether two steps are messages on the same connection (local copies and
 * joins are not messages). */
static int same_conn(const rcoll_step_t *a, const rcoll_step_t *b) {
  return a->kind != RCOLL_STEP_COPY && b->kind != RCOLL_STEP_COPY && a->peer == b->peer &&
         (a->kind == RCOLL_STEP_SEND) == (b->kind == RCOLL_STEP_SEND);
}

void rcoll_plan_cache_drop(struct rcollComm *c) {
  if (c->plan_cache != NULL)
    c->plan_cache->valid = 0;
}

void rcoll_plan_cache_free(struct rcollComm *c) {
  free(c->plan_cache);
  c->plan_cache = NULL;
}

void rcoll_plan_cache_save(struct rcollComm *c, rcoll_coll_kind_t kind, const rcoll_coll_args_t *a,
                           rcollRedOp_t user_op) {
  const rcoll_plan_t *p = &c->plan;
  if (p->failed || c->ncalls != 1 || p->nsteps > PLAN_CACHE_MAX_STEPS || rcoll_coll_is_p2p(kind) ||
      (int)user_op >= (int)rcollNumOps || c->calls[0].device)
    return;
  if (c->plan_cache == NULL && (c->plan_cache = malloc(sizeof *c->plan_cache)) == NULL)
    return; /* then every call plans */
  rcoll_plan_cache_t *k = c->plan_cache;
  *k = (rcoll_plan_cache_t){.kind = kind, .sendbuff = a->sendbuff, .recvbuff = a->recvbuff,
                            .count = a->count, .dtype = a->dtype, .op = user_op, .root = a->root,
                            .nsteps = p->nsteps, .chunk_bytes = p->chunk_bytes, .algo = p->algo,
                            .predicted_us = p->predicted_us, .fp = c->calls[0].fp,
                            .fp_used = c->fp_used};
  if (p->nsteps > 0) /* a call with none (one rank) may have no steps array: a device call took it */
    memcpy(k->steps, p->steps, (size_t)p->nsteps * sizeof *p->steps);
  for (int i = 0; i < p->nsteps; i++)
    for (int j = 0; j < p->nsteps; j++)
      k->adv[i] += same_conn(&p->steps[i], &p->steps[j]);
  k->valid = 1;
}

/* The kept steps are numbered for the call they were planned for; the next
 * call's messages come after all of that call's on each connection. The
 * fingerprint sends that carry a first message inline have a copy of the
 * fingerprint in their own slot. */
static void renumber(struct rcollComm *c, rcoll_plan_cache_t *k) {
  for (int i = 0; i < k->nsteps; i++) {
    rcoll_step_t *st = &k->steps[i];
    if (st->kind == RCOLL_STEP_COPY)
      continue;
    st->seq += (uint64_t)k->adv[i];
    rcoll_peer_t *pe = &c->peers[st->peer];
    ++*(st->kind == RCOLL_STEP_SEND ? &pe->send_planned : &pe->recv_planned);
  }
  k->fp->seq = ++c->coll_seq;
  for (int i = 0; i < k->nsteps; i++)
    if (k->steps[i].flags & RCOLL_STEP_BOARD) /* numbered by its call (flat.h) */
      k->steps[i].seq = k->fp->seq;
  for (int i = 0; i < k->nsteps; i++) {
    rcoll_step_t *st = &k->steps[i];
    if ((st->flags & RCOLL_STEP_FP) && st->kind == RCOLL_STEP_SEND && st->src != k->fp)
      ((rcoll_fp_slot_t *)st->src)->fp.seq = k->fp->seq;
  }
}

int rcoll_plan_cache_hit(struct rcollComm *c, rcoll_coll_kind_t kind, const rcoll_coll_args_t *a) {
  rcoll_plan_cache_t *k = c->plan_cache;
  if (k == NULL || !k->valid || k->kind != kind || k->sendbuff != a->sendbuff ||
      k->recvbuff != a->recvbuff || k->count != a->count || k->dtype != a->dtype ||
      k->op != a->op || k->root != a->root || c->plan.nsteps != 0)
    return 0;
  renumber(c, k);
  rcoll_plan_t *p = &c->plan;
  memcpy(p->steps, k->steps, (size_t)k->nsteps * sizeof *p->steps);
  p->nsteps = k->nsteps;
  p->chunk_bytes = k->chunk_bytes;
  p->algo = k->algo;
  p->predicted_us += k->predicted_us;
  p->connected = 1;
  c->fp_used = k->fp_used;
  c->ncalls = 1;
  c->calls[0] = (rcoll_call_t){.fp = k->fp, .first_step = 0, .nsteps = k->nsteps};
  c->calls[0].fr_id = rcoll_fr_post(c, &c->calls[0]);
  return 1;
}
