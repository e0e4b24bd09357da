/* Call records (call.h): numbers, fingerprints' storage, descriptions and
 * progress summaries for error messages. */
#include "call.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "flight_recorder.h"
#include "reduce.h"

#define FP_BLOCK 64

/* A fingerprint slot that stays where it is until the plan is reset. */
static rcoll_fp_slot_t *fp_alloc(struct rcollComm *c) {
  int b = c->fp_used / FP_BLOCK;
  if (b == c->fp_nblocks) {
    rcoll_fp_slot_t **blocks = realloc(c->fp_blocks, (size_t)(b + 1) * sizeof *blocks);
    if (blocks == NULL)
      return NULL;
    c->fp_blocks = blocks;
    blocks[b] = calloc(FP_BLOCK, sizeof **blocks);
    if (blocks[b] == NULL)
      return NULL;
    c->fp_nblocks++;
  }
  rcoll_fp_slot_t *slot = &c->fp_blocks[b][c->fp_used++ % FP_BLOCK];
  memset(&slot->fp, 0, sizeof slot->fp); /* the inline bytes are written before they are read */
  slot->inline_step = -1;
  return slot;
}

rcoll_fp_slot_t *rcoll_fp_alloc(struct rcollComm *c) { return fp_alloc(c); }

static uint64_t *call_counter(struct rcollComm *c, int kind, int peer) {
  if (kind == RCOLL_COLL_SEND)
    return &c->peers[peer].p2p_sent;
  if (kind == RCOLL_COLL_RECV)
    return &c->peers[peer].p2p_recvd;
  return &c->coll_seq;
}

static void fp_fill(rcoll_fp_t *fp, struct rcollComm *c, rcoll_coll_kind_t kind,
                    const rcoll_coll_args_t *a, rcollRedOp_t user_op, uint16_t mem) {
  int p2p = rcoll_coll_is_p2p(kind);
  fp->magic = mem;
  fp->kind = (uint8_t)kind;
  fp->dtype = (uint8_t)a->dtype;
  fp->count = a->count;
  fp->root = p2p || rcoll_coll_rooted(kind) ? a->root : RCOLL_FP_NONE;
  fp->op = !rcoll_coll_reduces(kind) ? RCOLL_FP_NONE
           : (int)user_op >= (int)rcollNumOps ? RCOLL_FP_OP_PREMUL : (int32_t)user_op;
  fp->seq = ++*call_counter(c, kind, a->root);
  if (!p2p && c->plan.algo != NULL) /* no snprintf: this runs on every planned call */
    memcpy(fp->algo, c->plan.algo, strnlen(c->plan.algo, sizeof fp->algo));
}

static rcoll_call_t *call_new(struct rcollComm *c) {
  if (c->ncalls == c->calls_cap) {
    int cap = c->calls_cap ? 2 * c->calls_cap : 8;
    rcoll_call_t *calls = realloc(c->calls, (size_t)cap * sizeof *calls);
    if (calls == NULL)
      return NULL;
    c->calls = calls;
    c->calls_cap = cap;
  }
  rcoll_call_t *call = &c->calls[c->ncalls++];
  memset(call, 0, sizeof *call);
  return call;
}

rcollResult_t rcoll_call_add(struct rcollComm *c, rcoll_coll_kind_t kind, const rcoll_coll_args_t *a,
                             rcollRedOp_t user_op, int first_step, uint16_t mem) {
  rcoll_call_t *call = call_new(c);
  rcoll_fp_slot_t *slot = call != NULL ? fp_alloc(c) : NULL;
  rcoll_fp_t *fp = slot != NULL ? &slot->fp : NULL;
  if (fp == NULL) {
    c->ncalls -= call != NULL;
    c->plan.failed = 1; /* the engine refuses the plan, naming the cause */
    return rcoll_error(rcollSystemError, "rank %d: out of memory recording a call", c->rank);
  }
  fp_fill(fp, c, kind, a, user_op, mem);
  call->fp = fp;
  call->first_step = first_step;
  call->nsteps = c->plan.nsteps - first_step;
  call->device = mem != RCOLL_FP_MAGIC;
  if (c->fingerprint && c->nranks > 1)
    RCOLL_CHECK(rcoll_fp_insert(c, call));
  call->fr_id = rcoll_fr_post(c, call);
  return rcollSuccess;
}

const rcoll_fp_t *rcoll_call_board(struct rcollComm *c, rcoll_coll_kind_t kind, const rcoll_coll_args_t *a,
                                   rcollRedOp_t user_op, rcoll_fp_t *fp) {
  rcoll_call_t *call = call_new(c);
  if (call == NULL)
    return NULL;
  c->plan.algo = "flat";
  memset(fp, 0, sizeof *fp);
  fp_fill(fp, c, kind, a, user_op, RCOLL_FP_MAGIC);
  call->fp = fp;
  call->nsteps = 1;
  call->fr_id = rcoll_fr_post(c, call);
  return call->fp;
}

void rcoll_calls_reset(struct rcollComm *c) {
  c->ncalls = 0;
  c->fp_used = 0;
}

void rcoll_calls_discard(struct rcollComm *c) {
  for (int i = c->ncalls - 1; i >= 0; i--) {
    const rcoll_fp_t *fp = c->calls[i].fp;
    --*call_counter(c, fp->kind, fp->root);
    rcoll_fr_set_state(c, c->calls[i].fr_id, RCOLL_FR_DISCARDED, rcollSuccess);
  }
  rcoll_calls_reset(c);
}

void rcoll_calls_free(struct rcollComm *c) {
  for (int b = 0; b < c->fp_nblocks; b++)
    free(c->fp_blocks[b]);
  free(c->fp_blocks);
  free(c->calls);
  free(c->fp_peers);
  free(c->fp_mark);
  c->fp_blocks = NULL;
  c->calls = NULL;
  c->fp_nblocks = c->ncalls = c->calls_cap = 0;
}

/* The whole name of the fingerprint's algorithm: the table's name that
 * starts with its bytes (all ranks run one build), or those bytes. */
static const char *fp_algo_name(const rcoll_fp_t *fp) {
  static __thread char raw[RCOLL_FP_ALGO + 1];
  size_t n = strnlen(fp->algo, sizeof fp->algo);
  if (n == 0)
    return "?";
  for (int i = 0; rcoll_algorithms[i] != NULL; i++) {
    const char *name = rcoll_algorithms[i]->name;
    if (strncmp(name, fp->algo, n) == 0 && (n == RCOLL_FP_ALGO || name[n] == '\0'))
      return name;
  }
  memcpy(raw, fp->algo, n);
  raw[n] = '\0';
  return raw;
}

const char *rcoll_fp_describe(const rcoll_fp_t *fp, int self, char *buf, size_t len) {
  const char *type = rcoll_type_name((rcollDataType_t)fp->dtype);
  const char *mem = fp->magic == RCOLL_FP_MAGIC_DEVICE    ? ", device buffers"
                    : fp->magic == RCOLL_FP_MAGIC_BOUNCED ? ", device buffers through host memory"
                                                          : "";
  if (fp->kind == RCOLL_COLL_SEND || fp->kind == RCOLL_COLL_RECV) {
    snprintf(buf, len, "%s #%llu %s rank %d (%llu x %s%s)", rcoll_coll_name(fp->kind),
             (unsigned long long)fp->seq, fp->kind == RCOLL_COLL_SEND ? "to" : "from", fp->root,
             (unsigned long long)fp->count, type, mem);
    return buf;
  }
  (void)self;
  char op[24] = "", root[24] = "";
  if (fp->op == RCOLL_FP_OP_PREMUL)
    snprintf(op, sizeof op, " premulsum");
  else if (fp->op != RCOLL_FP_NONE)
    snprintf(op, sizeof op, " %s", rcoll_op_name((rcollRedOp_t)fp->op));
  if (fp->root != RCOLL_FP_NONE)
    snprintf(root, sizeof root, " root %d", fp->root);
  snprintf(buf, len, "%s #%llu (%llu x %s%s%s, %s%s)", rcoll_coll_name(fp->kind),
           (unsigned long long)fp->seq, (unsigned long long)fp->count, type, op, root,
           fp_algo_name(fp), mem);
  return buf;
}

const rcoll_call_t *rcoll_call_of_step(const struct rcollComm *c, int step) {
  for (int i = 0; i < c->ncalls; i++) {
    const rcoll_call_t *call = &c->calls[i];
    if (step >= call->first_step && step < call->first_step + call->nsteps)
      return call;
  }
  return NULL;
}

static int same_line(const rcoll_step_t *a, const rcoll_step_t *b) {
  return a->peer == b->peer && (a->kind == RCOLL_STEP_SEND) == (b->kind == RCOLL_STEP_SEND) &&
         b->kind != RCOLL_STEP_COPY;
}

const rcoll_call_t *rcoll_call_progress(const struct rcollComm *c, int step,
                                        rcoll_call_progress_t *out) {
  const rcoll_call_t *call = rcoll_call_of_step(c, step);
  memset(out, 0, sizeof *out);
  out->peer = -1;
  if (call == NULL)
    return NULL;
  const rcoll_step_t *steps = c->plan.steps, *w = &steps[step];
  int lined = w->kind != RCOLL_STEP_COPY;
  if (lined) {
    out->peer = w->peer;
    out->sending = w->kind == RCOLL_STEP_SEND;
    out->bytes = w->bytes;
  }
  out->steps = call->nsteps;
  for (int i = call->first_step; i < call->first_step + call->nsteps; i++) {
    int done = steps[i].state == RCOLL_STEP_DONE;
    out->steps_done += done;
    if (lined && same_line(w, &steps[i])) {
      out->msgs++;
      out->msgs_done += done;
    }
  }
  return call;
}

const char *rcoll_call_where(const struct rcollComm *c, int step, char *buf, size_t len) {
  rcoll_call_progress_t pr;
  const rcoll_call_t *call = rcoll_call_progress(c, step, &pr);
  if (call == NULL) {
    snprintf(buf, len, "%s", "");
    return buf;
  }
  char what[160];
  rcoll_fp_describe(call->fp, c->rank, what, sizeof what);
  int n = snprintf(buf, len, " in %s: %d of %d steps done", what, pr.steps_done, pr.steps);
  if (pr.peer >= 0 && n > 0 && (size_t)n < len)
    snprintf(buf + n, len - (size_t)n, ", %d of %d messages %s rank %d %s", pr.msgs_done, pr.msgs,
             pr.sending ? "to" : "from", pr.peer, pr.sending ? "sent" : "received");
  return buf;
}

const char *rcoll_calls_where(const struct rcollComm *c, char *buf, size_t len) {
  char what[160];
  if (c->ncalls == 0)
    snprintf(buf, len, "%s", "");
  else if (c->ncalls == 1)
    snprintf(buf, len, " in %s", rcoll_fp_describe(c->calls[0].fp, c->rank, what, sizeof what));
  else
    snprintf(buf, len, " in a group of %d calls from %s", c->ncalls,
             rcoll_fp_describe(c->calls[0].fp, c->rank, what, sizeof what));
  return buf;
}
