/* Building plans: appending steps, reserving each message's place in its
 * connection's order, and the scratch ring. */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "comm.h"
#include "redop.h"
#include "reduce.h"

void rcoll_plan_reset(rcoll_plan_t *p, struct rcollComm *comm) {
  p->comm = comm;
  p->nsteps = 0;
  p->head = 0;
  p->failed = 0;
  p->chunk_bytes = comm ? comm->chunk_bytes : 0;
  p->p2p_part_bytes = 0;
  p->scratch_pieces = comm ? comm->nscratch : 0;
  p->algo = "none";
  p->predicted_us = 0;
  p->connected = 0;
  p->topo = comm ? &comm->topo : NULL;
  if (comm != NULL)
    for (int i = 0; i < comm->nscratch; i++)
      comm->scratch_reader[i] = RCOLL_NO_DEP;
  if (comm != NULL) /* the scaled inputs of PreMulSum calls were read by the plan */
    rcoll_redop_release(comm);
  if (comm != NULL)
    rcoll_calls_reset(comm);
}

void rcoll_plan_free(rcoll_plan_t *p) {
  free(p->tuner);
  p->tuner = NULL;
  free(p->tmp);
  p->tmp = NULL;
  p->tmp_bytes = 0;
  free(p->steps);
  p->steps = NULL;
  p->cap = p->nsteps = 0;
}

/* The step array grows by doubling and is kept across calls, so a
 * communicator allocates only while its calls reach new sizes. */
static rcoll_step_t *plan_add(rcoll_plan_t *p, int kind, int dep0, int dep1) {
  if (p->failed)
    return NULL;
  if (p->nsteps == p->cap) {
    int cap = p->cap ? p->cap * 2 : 256;
    rcoll_step_t *s = realloc(p->steps, (size_t)cap * sizeof *s);
    if (s == NULL) {
      p->failed = 1;
      return NULL;
    }
    p->steps = s;
    p->cap = cap;
  }
  rcoll_step_t *st = &p->steps[p->nsteps++];
  memset(st, 0, sizeof *st);
  st->kind = (uint8_t)kind;
  st->dep[0] = dep0;
  st->dep[1] = dep1;
  st->slot = -1;
  st->gate = RCOLL_NO_DEP;
  return st;
}

int rcoll_plan_send(rcoll_plan_t *p, int peer, const void *src, size_t bytes, int dep0, int dep1) {
  rcoll_step_t *st = plan_add(p, RCOLL_STEP_SEND, dep0, dep1);
  if (st == NULL)
    return RCOLL_NO_DEP;
  st->peer = peer;
  st->src = src;
  st->bytes = bytes;
  st->seq = p->comm->peers[peer].send_planned++;
  return p->nsteps - 1;
}

int rcoll_plan_send_single(rcoll_plan_t *p, int peer, const void *src, size_t bytes, int dep0, int dep1) {
  int i = rcoll_plan_send(p, peer, src, bytes, dep0, dep1);
  if (i != RCOLL_NO_DEP)
    p->steps[i].flags |= RCOLL_STEP_SINGLE_COPY;
  return i;
}

int rcoll_plan_recv(rcoll_plan_t *p, int peer, void *dst, size_t bytes, int dep0, int dep1) {
  rcoll_step_t *st = plan_add(p, RCOLL_STEP_RECV, dep0, dep1);
  if (st == NULL)
    return RCOLL_NO_DEP;
  st->peer = peer;
  st->dst = dst;
  st->bytes = bytes;
  st->seq = p->comm->peers[peer].recv_planned++;
  return p->nsteps - 1;
}

int rcoll_plan_recv_reduce(rcoll_plan_t *p, int peer, void *dst, const void *src, size_t count,
                           rcollDataType_t t, rcollRedOp_t op, int flags, int dep0, int dep1) {
  rcoll_step_t *st = plan_add(p, RCOLL_STEP_RECV_REDUCE, dep0, dep1);
  if (st == NULL)
    return RCOLL_NO_DEP;
  st->peer = peer;
  st->dst = dst;
  st->src = src;
  st->bytes = count * rcoll_type_size(t);
  st->dtype = (uint8_t)t;
  st->op = (uint8_t)op;
  st->flags = (uint8_t)flags;
  st->seq = p->comm->peers[peer].recv_planned++;
  return p->nsteps - 1;
}

int rcoll_plan_copy(rcoll_plan_t *p, void *dst, const void *src, size_t bytes, int dep0, int dep1) {
  rcoll_step_t *st = plan_add(p, RCOLL_STEP_COPY, dep0, dep1);
  if (st == NULL)
    return RCOLL_NO_DEP;
  st->dst = dst;
  st->src = src;
  st->bytes = bytes;
  return p->nsteps - 1;
}

int rcoll_plan_board(rcoll_plan_t *p, void *dst, const void *src, size_t count, rcollDataType_t t,
                     rcollRedOp_t op) {
  int prev = p->nsteps - 1;
  while (prev >= 0 && !(p->steps[prev].flags & RCOLL_STEP_BOARD))
    prev--;
  int i = rcoll_plan_copy(p, dst, src, count * rcoll_type_size(t), prev, RCOLL_NO_DEP);
  if (i != RCOLL_NO_DEP) {
    p->steps[i].flags = RCOLL_STEP_BOARD;
    p->steps[i].dtype = (uint8_t)t;
    p->steps[i].op = (uint8_t)op;
  }
  return i;
}

int rcoll_plan_copy_out(rcoll_plan_t *p, void *dst, const void *src, size_t bytes, int dep0, int dep1) {
  int i = rcoll_plan_copy(p, dst, src, bytes, dep0, dep1);
  if (i != RCOLL_NO_DEP)
    p->steps[i].flags |= RCOLL_STEP_COPY_OUT;
  return i;
}

int rcoll_plan_finish(rcoll_plan_t *p, void *dst, size_t count, rcollDataType_t t, rcollRedOp_t op,
                      int dep0) {
  int i = rcoll_plan_copy(p, dst, NULL, count * rcoll_type_size(t), dep0, RCOLL_NO_DEP);
  if (i != RCOLL_NO_DEP) {
    p->steps[i].flags = RCOLL_STEP_FINISH;
    p->steps[i].dtype = (uint8_t)t;
    p->steps[i].op = (uint8_t)op;
  }
  return i;
}

size_t rcoll_chunk_count(size_t total, size_t chunk) {
  return chunk == 0 ? 0 : (total + chunk - 1) / chunk;
}

int rcoll_plan_join(rcoll_plan_t *p, int dep0, int dep1) {
  if (dep1 == RCOLL_NO_DEP || dep0 == dep1)
    return dep0; /* nothing to join */
  if (dep0 == RCOLL_NO_DEP)
    return dep1;
  return rcoll_plan_copy(p, NULL, NULL, 0, dep0, dep1);
}

void *rcoll_plan_tmp(rcoll_plan_t *p, size_t bytes) {
  if (bytes == 0) /* an empty call: still a valid pointer */
    bytes = sizeof(int);
  if (bytes > p->tmp_bytes) {
    void *t = realloc(p->tmp, bytes);
    if (t == NULL) {
      p->failed = 1;
      return NULL;
    }
    p->tmp = t;
    p->tmp_bytes = bytes;
  }
  memset(p->tmp, 0, bytes);
  return p->tmp;
}

/* The scratch ring is made when a plan first needs it (reduce-scatter,
 * reduce, in-place or Bruck all-to-all, binomial gather and scatter) and
 * touched at once, so later calls pay no page faults. */
static int plan_scratch_alloc(rcoll_plan_t *p) {
  struct rcollComm *c = p->comm;
  /* aligned_alloc wants a multiple of the alignment. */
  size_t bytes = ((size_t)c->nscratch * c->chunk_bytes + 4095) & ~(size_t)4095;
  c->scratch = aligned_alloc(4096, bytes);
  if (c->scratch == NULL) {
    p->failed = 1;
    return -1;
  }
  memset(c->scratch, 0, bytes);
  return 0;
}

void *rcoll_plan_scratch_get(rcoll_plan_t *p, int *dep) {
  struct rcollComm *c = p->comm;
  *dep = RCOLL_NO_DEP;
  if (c->scratch == NULL && plan_scratch_alloc(p) != 0)
    return NULL;
  int i = c->scratch_next;
  c->scratch_next = (i + 1) % c->nscratch;
  *dep = c->scratch_reader[i];
  return c->scratch + (size_t)i * c->chunk_bytes;
}

void rcoll_plan_scratch_set_reader(rcoll_plan_t *p, const void *piece, int step) {
  struct rcollComm *c = p->comm;
  if (piece == NULL || c->scratch == NULL)
    return; /* allocation failed: the plan is marked failed and will not run */
  size_t i = (size_t)((const char *)piece - c->scratch) / c->chunk_bytes;
  c->scratch_reader[i] = step;
}

static void plan_shift(int *index, int at, int n) {
  if (*index != RCOLL_NO_DEP && *index >= at)
    *index += n;
}

int rcoll_plan_insert(rcoll_plan_t *p, int at, int n) {
  int old = p->nsteps;
  for (int i = 0; i < n; i++) /* grows the array; the new steps are moved into the gap below */
    if (plan_add(p, RCOLL_STEP_COPY, RCOLL_NO_DEP, RCOLL_NO_DEP) == NULL)
      return -1;
  memmove(&p->steps[at + n], &p->steps[at], (size_t)(old - at) * sizeof *p->steps);
  for (int i = at + n; i < p->nsteps; i++) {
    plan_shift(&p->steps[i].dep[0], at, n);
    plan_shift(&p->steps[i].dep[1], at, n);
    plan_shift(&p->steps[i].gate, at, n);
  }
  for (int i = 0; i < n; i++) {
    rcoll_step_t *st = &p->steps[at + i];
    memset(st, 0, sizeof *st);
    st->dep[0] = st->dep[1] = st->gate = RCOLL_NO_DEP;
    st->slot = -1;
  }
  struct rcollComm *c = p->comm;
  for (int i = 0; c != NULL && c->scratch_reader != NULL && i < c->nscratch; i++)
    plan_shift(&c->scratch_reader[i], at, n);
  return 0;
}

void rcoll_plan_discard(rcoll_plan_t *p) {
  for (int i = 0; i < p->nsteps; i++) {
    rcoll_step_t *st = &p->steps[i];
    if (st->kind == RCOLL_STEP_SEND)
      p->comm->peers[st->peer].send_planned--;
    else if (st->kind == RCOLL_STEP_RECV || st->kind == RCOLL_STEP_RECV_REDUCE)
      p->comm->peers[st->peer].recv_planned--;
  }
  rcoll_plan_reset(p, p->comm);
}

void rcoll_plan_print(const rcoll_plan_t *p, void *file) {
  static const char *kinds[] = {"send", "recv", "recv-reduce", "copy"};
  FILE *f = file;
  fprintf(f, "# plan of rank %d (%s): %d steps, chunk %zu bytes\n", p->comm->rank, p->algo,
          p->nsteps, p->chunk_bytes);
  for (int i = 0; i < p->nsteps; i++) {
    const rcoll_step_t *st = &p->steps[i];
    fprintf(f, "%5d %-11s", i, kinds[st->kind]);
    if (st->kind != RCOLL_STEP_COPY)
      fprintf(f, " peer %-3d msg %-4llu", st->peer, (unsigned long long)st->seq);
    fprintf(f, " %9zu B", st->bytes);
    if (st->dep[0] != RCOLL_NO_DEP)
      fprintf(f, " after %d", st->dep[0]);
    if (st->dep[1] != RCOLL_NO_DEP)
      fprintf(f, ",%d", st->dep[1]);
    if (st->flags & RCOLL_STEP_FINISH)
      fprintf(f, " finish(%s)", rcoll_op_name((rcollRedOp_t)st->op));
    fputc('\n', f);
  }
}
