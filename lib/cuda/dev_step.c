/* Steps of device plans: what the engine calls instead of its host code while
 * a proxy thread runs a plan whose buffers are device memory. Every buffer a
 * device plan names is device memory (the user's buffers, or the device twin
 * of the scratch ring that rcoll_cuda_plan_prepare substituted), so copies
 * and reductions run on the proxy's stream; messages go the way the peer's
 * mode says (stage.c, ipc.c). Staging copies, IPC parts and local copies
 * end in an event the proxy polls, so other steps move while the GPU
 * copies. */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda_comm.h"
#include "cuda/ipc.h"
#include "cuda/module.h"
#include "cuda/stage.h"
#include "cuda/unit.h"
#include "reduce.h"

int rcoll_cuda_executing(const struct rcollComm *c) {
  return c->cuda != NULL && atomic_load_explicit(&c->cuda->executing, memory_order_acquire);
}

rcoll_cuda_stepx_t *rcoll_cuda_stepx(const rcoll_plan_t *p, const rcoll_step_t *st) {
  const rcoll_cuda_unit_t *u = p->comm->cuda->run_unit;
  for (int i = 0; i < u->nplans; i++)
    if (u->plan_ptrs[i] == p)
      return &u->x[i][st - p->steps];
  return NULL; /* cannot happen: the proxy runs only its unit's plans */
}

/* Queues a local copy (memmove semantics) and the avg finish a step may
 * carry on the proxy stream. An overlapping copy runs piece by piece, each
 * waited for (rare: in-place layouts that shift a block). */
static rcollResult_t dev_copy_issue(rcoll_cuda_comm_t *cc, rcoll_step_t *st) {
  if (st->src != NULL && st->src != st->dst && st->bytes > 0) {
    const char *s = st->src;
    char *d = st->dst;
    if (s + st->bytes <= d || d + st->bytes <= s) {
      RCOLL_CHECK(rcoll_dev_copy_issue(cc, cc->stream, d, s, st->bytes));
    } else {
      rcoll_stage_piece_t pieces[64];
      size_t n = rcoll_stage_pieces(d, s, st->bytes, pieces, 64);
      if (n == 0)
        return rcoll_error(rcollInternalError, "rank %d: device copy over %zu bytes overlapping by "
                           "all but a few", cc->comm->rank, st->bytes);
      for (size_t i = 0; i < n; i++) {
        RCOLL_CHECK(rcoll_dev_copy_issue(cc, cc->stream, d + pieces[i].dst_off, s + pieces[i].src_off,
                                         pieces[i].bytes));
        RCOLL_CHECK(rcoll_cuda_sync(cc, "an overlapping device copy"));
      }
    }
  }
  if (st->flags & RCOLL_STEP_FINISH) {
    rcollDataType_t t = (rcollDataType_t)st->dtype;
    RCOLL_CHECK(rcoll_cuda_finish(st->dst, st->bytes / rcoll_type_size(t), t, (rcollRedOp_t)st->op,
                                  cc->comm->nranks, cc->stream));
  }
  return rcollSuccess;
}

/* A local copy ends in one of the comm's copy events; it is done when the
 * event fired, and meanwhile the proxy moves the other steps (a stream sync
 * here held it, and the network, for the copy's whole round trip). A step
 * that reads what it wrote is posted once it is done, as for any
 * dependency: a staged send copies on the other stream, a GPUDirect send
 * is read by the NIC. */
static int copy_post(rcoll_cuda_comm_t *cc, rcoll_step_t *st, rcoll_cuda_stepx_t *x,
                     rcollResult_t *err) {
  if ((st->src == NULL || st->src == st->dst || st->bytes == 0) && !(st->flags & RCOLL_STEP_FINISH)) {
    st->state = RCOLL_STEP_DONE; /* nothing to queue (in place) */
    return 1;
  }
  int ev = 0;
  while (ev < RCOLL_CUDA_COPY_EVENTS && cc->copy_busy[ev])
    ev++;
  if (ev == RCOLL_CUDA_COPY_EVENTS)
    return 0; /* the copies before it free one as they run */
  if ((*err = dev_copy_issue(cc, st)) != rcollSuccess)
    return 0;
  if ((*err = rcoll_dev_event_record(cc, cc->stream, cc->copy_ev[ev], "a device copy")) != rcollSuccess)
    return 0;
  cc->copy_busy[ev] = 1;
  cc->prof.local_copies++;
  x->mode = RCOLL_CUDA_MODE_LOCAL;
  x->slot = ev;
  st->state = RCOLL_STEP_POSTED;
  return 1;
}

static int copy_test(rcoll_cuda_comm_t *cc, rcoll_step_t *st, rcoll_cuda_stepx_t *x,
                     rcollResult_t *err) {
  if (!rcoll_dev_event_ran(cc, cc->copy_ev[x->slot], "a device copy", err))
    return 0;
  cc->copy_busy[x->slot] = 0;
  st->state = RCOLL_STEP_DONE;
  return 1;
}

int rcoll_cuda_step_post(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err) {
  struct rcollComm *c = p->comm;
  rcoll_cuda_comm_t *cc = c->cuda;
  if (st->kind == RCOLL_STEP_COPY)
    return copy_post(cc, st, rcoll_cuda_stepx(p, st), err);
  const rcoll_peer_t *pe = &c->peers[st->peer];
  int mode = cc->peers[st->peer].mode;
  /* An earlier message on this connection goes first; a send through host
   * slots checks its own turns (its copy may be queued early). */
  int own_turns = st->kind == RCOLL_STEP_SEND && mode != RCOLL_CUDA_MODE_IPC;
  if (!own_turns && st->seq != (st->kind == RCOLL_STEP_SEND ? pe->send_posted : pe->recv_posted))
    return 0;
  switch (mode) {
  case RCOLL_CUDA_MODE_IPC: return rcoll_ipc_post(p, st, err);
  case RCOLL_CUDA_MODE_GDR: return rcoll_gdr_post(p, st, err);
  default: return rcoll_stage_post(p, st, err);
  }
}

int rcoll_cuda_step_test(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err) {
  rcoll_cuda_stepx_t *x = rcoll_cuda_stepx(p, st);
  switch (x->mode) {
  case RCOLL_CUDA_MODE_LOCAL: return copy_test(p->comm->cuda, st, x, err);
  case RCOLL_CUDA_MODE_IPC: return rcoll_ipc_test(p, st, err);
  case RCOLL_CUDA_MODE_GDR: return rcoll_gdr_test(p, st, err);
  default: return rcoll_stage_test(p, st, err);
  }
}

/* IPC progress is visible only in shared memory, which no transport's wait
 * can watch: after the spin, short naps keep the latency of a part in the
 * tens of microseconds without burning the core. */
void rcoll_cuda_idle(int64_t idle_us, int64_t spin_us) {
  if (idle_us < spin_us || idle_us < 1000) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, 20000};
  nanosleep(&ts, NULL);
}
