/* Worlds of fake communicators (plan_world.h). */
#include "plan_world.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "error.h"
#include "reduce.h"
#include "topo.h"

/* One rank's communicator: only what planning and the simulator read. */
static rcollResult_t comm_fake(struct rcollComm **out, int n, int r, const char *ids, size_t stride,
                               size_t comm_chunk, int nslots) {
  struct rcollComm *c = calloc(1, sizeof *c);
  if (c == NULL)
    return rcoll_error(rcollSystemError, "out of memory for a fake communicator");
  *out = c;
  c->rank = r;
  c->nranks = n;
  c->chunk_bytes = comm_chunk;
  c->nslots = nslots;
  c->nscratch = 2 * nslots;
  c->peers = calloc((size_t)n, sizeof *c->peers);
  c->scratch_reader = calloc((size_t)c->nscratch, sizeof(int));
  /* Made here: the library's lazy allocation aligns to pages, which tiny
   * test chunks do not fill. Untouched pages of a large one cost nothing. */
  c->scratch = calloc((size_t)c->nscratch, comm_chunk);
  if (c->peers == NULL || c->scratch_reader == NULL || c->scratch == NULL)
    return rcoll_error(rcollSystemError, "out of memory for rank %d's scratch (%d x %zu bytes)", r,
                       c->nscratch, comm_chunk);
  return rcoll_topo_build(&c->topo, ids, stride, n, r);
}

static void comm_fake_free(struct rcollComm *c) {
  if (c == NULL)
    return;
  rcoll_plan_free(&c->plan);
  rcoll_topo_free(&c->topo);
  free(c->scratch);
  free(c->scratch_reader);
  free(c->peers);
  free(c);
}

rcollResult_t rcoll_world_init(rcoll_world_t *w, int n, const int *node_of, size_t comm_chunk,
                               size_t plan_chunk, int nslots) {
  memset(w, 0, sizeof *w);
  if (n < 1 || n > RCOLL_WORLD_MAX_RANKS || nslots < 1 || nslots > RCOLL_MAX_SLOTS || comm_chunk == 0 ||
      plan_chunk == 0 || plan_chunk > comm_chunk)
    return rcoll_error(rcollInvalidArgument, "fake world: %d ranks (1..%d), %d slots (1..%d), chunk "
                       "%zu of a %zu-byte slot", n, RCOLL_WORLD_MAX_RANKS, nslots, RCOLL_MAX_SLOTS,
                       plan_chunk, comm_chunk);
  char ids[RCOLL_WORLD_MAX_RANKS][16];
  for (int r = 0; r < n; r++)
    snprintf(ids[r], sizeof ids[r], "node%d", node_of ? node_of[r] : 0);
  w->n = n;
  for (int r = 0; r < n; r++) {
    rcollResult_t rc = comm_fake(&w->comms[r], n, r, ids[0], sizeof ids[0], comm_chunk, nslots);
    if (rc != rcollSuccess) {
      rcoll_world_free(w);
      return rc;
    }
    rcoll_plan_reset(&w->comms[r]->plan, w->comms[r]);
    w->comms[r]->plan.chunk_bytes = plan_chunk;
    w->plans[r] = &w->comms[r]->plan;
  }
  return rcollSuccess;
}

void rcoll_world_free(rcoll_world_t *w) {
  for (int r = 0; r < w->n; r++) {
    comm_fake_free(w->comms[r]);
    free(w->send[r]);
    free(w->recv[r]);
  }
  memset(w, 0, sizeof *w);
}

size_t rcoll_world_send_elems(int coll, size_t count, int n) {
  int blocks = coll == RCOLL_COLL_REDUCE_SCATTER || coll == RCOLL_COLL_ALLTOALL || coll == RCOLL_COLL_SCATTER;
  return blocks ? count * (size_t)n : count;
}

size_t rcoll_world_recv_elems(int coll, size_t count, int n) {
  int blocks = coll == RCOLL_COLL_ALLGATHER || coll == RCOLL_COLL_ALLTOALL || coll == RCOLL_COLL_GATHER;
  return blocks ? count * (size_t)n : count;
}

/* Rank r's buffers and arguments; in place as each collective defines it. */
static void world_args(rcoll_world_t *w, const rcoll_world_call_t *call, int r) {
  int coll = call->algo->coll;
  size_t tsz = rcoll_type_size(call->dtype), block = call->count * tsz;
  char *sb = w->send[r], *rb = w->recv[r];
  int inplace = call->inplace && coll != RCOLL_COLL_SEND && coll != RCOLL_COLL_RECV;
  /* All-gather, gather: our block of the receive buffer is the input (for
   * gather only the root's placement matters; the others' receive buffers
   * are unused). Reduce-scatter, scatter: the result is our block of the
   * input. */
  if (inplace && (coll == RCOLL_COLL_ALLGATHER || coll == RCOLL_COLL_GATHER))
    sb = rb + (size_t)r * block;
  else if (inplace && (coll == RCOLL_COLL_REDUCE_SCATTER || coll == RCOLL_COLL_SCATTER))
    rb = sb + (size_t)r * block;
  else if (inplace)
    sb = rb;
  w->args[r] = (rcoll_coll_args_t){sb, rb, call->count, call->dtype, call->op, call->root, r, w->n};
}

/* Plans rank r; a send with its family's receive (recv, found by the caller). */
static void world_plan_rank(rcoll_world_t *w, const rcoll_world_call_t *call,
                            const rcoll_algorithm_t *recv, int r) {
  rcoll_plan_t *p = w->plans[r];
  rcoll_coll_args_t a = w->args[r];
  if (recv == NULL) {
    call->algo->plan(p, &a);
    return;
  }
  a.root = (r + 1) % w->n;
  call->algo->plan(p, &a);
  a.root = (r + w->n - 1) % w->n;
  recv->plan(p, &a);
}

rcollResult_t rcoll_world_plan(rcoll_world_t *w, const rcoll_world_call_t *call) {
  int coll = call->algo->coll, n = w->n;
  const rcoll_algorithm_t *recv = NULL;
  rcoll_world_call_t pair;
  if (coll == RCOLL_COLL_SEND || coll == RCOLL_COLL_RECV) {
    int fam = rcoll_algorithm_family(call->algo);
    recv = rcoll_algorithm_find(RCOLL_COLL_RECV, fam);
    const rcoll_algorithm_t *send = rcoll_algorithm_find(RCOLL_COLL_SEND, fam);
    if (recv == NULL || send == NULL)
      return rcoll_error(rcollInvalidArgument, "%s: a send and a receive are planned together, and "
                         "this family lacks one", call->algo->name);
    pair = (rcoll_world_call_t){send, call->count, call->dtype, call->op, call->root, 0};
    call = &pair;
  }
  size_t tsz = rcoll_type_size(call->dtype);
  w->send_bytes = (rcoll_world_send_elems(coll, call->count, n) + 1) * tsz;
  w->recv_bytes = (rcoll_world_recv_elems(coll, call->count, n) + 1) * tsz;
  for (int r = 0; r < n; r++) {
    free(w->send[r]);
    free(w->recv[r]);
    w->send[r] = calloc(1, w->send_bytes);
    w->recv[r] = calloc(1, w->recv_bytes);
    if (w->send[r] == NULL || w->recv[r] == NULL)
      return rcoll_error(rcollSystemError, "out of memory for rank %d's buffers (%zu + %zu bytes)", r,
                         w->send_bytes, w->recv_bytes);
    world_args(w, call, r);
    world_plan_rank(w, call, recv, r);
    if (w->plans[r]->failed)
      return rcoll_error(rcollSystemError, "rank %d: planning %s %s failed (out of memory)", r,
                         rcoll_coll_name(coll), call->algo->name);
  }
  return rcollSuccess;
}

void rcoll_world_totals(const rcoll_world_t *w, int r, rcoll_traffic_t *out) {
  const rcoll_plan_t *p = w->plans[r];
  *out = (rcoll_traffic_t){0, 0, 0, "the plan's steps"};
  for (int i = 0; i < p->nsteps; i++) {
    const rcoll_step_t *st = &p->steps[i];
    if (st->kind == RCOLL_STEP_SEND)
      out->sent += (double)st->bytes;
    else if (st->kind == RCOLL_STEP_RECV)
      out->received += (double)st->bytes;
    else if (st->kind == RCOLL_STEP_RECV_REDUCE) {
      out->received += (double)st->bytes;
      out->reduced += (double)(st->bytes / rcoll_type_size((rcollDataType_t)st->dtype));
    } else if (st->flags & RCOLL_STEP_BOARD) { /* writes its vector, reads the others' (lib/flat.h) */
      out->sent += (double)st->bytes;
      out->received += (double)(w->n - 1) * (double)st->bytes;
      out->reduced += (double)(w->n - 1) * (double)(st->bytes / rcoll_type_size((rcollDataType_t)st->dtype));
    }
  }
}

int rcoll_world_formula(const rcoll_world_t *w, const rcoll_algorithm_t *algo, int r,
                        rcoll_traffic_t *out) {
  const rcoll_topo_t *topo = &w->comms[r]->topo;
  *out = (rcoll_traffic_t){0, 0, 0, "no formula"};
  if (algo->coll != RCOLL_COLL_SEND && algo->coll != RCOLL_COLL_RECV) {
    if (algo->traffic == NULL)
      return -1;
    algo->traffic(&w->args[r], topo, out);
    return 0;
  }
  int fam = rcoll_algorithm_family(algo);
  const rcoll_algorithm_t *send = rcoll_algorithm_find(RCOLL_COLL_SEND, fam);
  const rcoll_algorithm_t *recv = rcoll_algorithm_find(RCOLL_COLL_RECV, fam);
  if (send == NULL || recv == NULL || send->traffic == NULL || recv->traffic == NULL)
    return -1;
  rcoll_traffic_t in;
  send->traffic(&w->args[r], topo, out);
  recv->traffic(&w->args[r], topo, &in);
  out->received += in.received;
  out->reduced += in.reduced;
  out->formula = "S sent to the next rank, S received from the previous";
  return 0;
}
