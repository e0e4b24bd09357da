/* The progress engine: executes plans (plan.h) over transport connections.
 *
 * Execution model: the calling thread drives progress. It posts every step
 * whose dependencies are done and whose connection is ready for it, tests
 * posted requests, and runs reductions as soon as a chunk has arrived, so
 * sending, receiving and reducing overlap. Transports may move large messages
 * with helper threads of their own (the socket transport does); small ones
 * are moved by the calling thread inside isend/test, which keeps latency low.
 * When nothing progresses the thread spins briefly (RCOLL_SPIN_US), then
 * yields, then sleeps in short naps: with more ranks than cores that is what
 * lets the other ranks run. Nothing waits forever: RCOLL_TIMEOUT without any
 * progress fails the call, naming the peer the oldest unfinished step waits
 * for.
 *
 * One subject: posting and testing steps, the loop, and its errors. Its
 * idle wait (engine_idle.c), copies out (copy_out.c), the flat board
 * (flat.c) and device work (cuda/) are elsewhere; engine_priv.h is what
 * engine.c and engine_idle.c share. If it grows again, the flight
 * recorder's and the trace's waits (engine_fr_wait, idle_trace_*) are the
 * next part to move. */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "call.h"
#include "clock.h"
#include "comm.h"
#include "copy_out.h"
#include "device.h"
#include "engine_priv.h"
#include "flat.h"
#include "flight_recorder.h"
#include "home_core.h"
#include "log.h"
#include "reduce.h"
#include "trace.h"

/* A wait this long is recorded in the flight recorder (how far the call
 * got): long enough never to cost a call that is merely slow to start. */
#define ENGINE_FR_WAIT_US 100000
/* While it spins, passes without progress between readings of the clock: a
 * pass over a small plan costs less than reading the clock (which was 12%
 * of an 8-byte all-reduce's samples), and the spin's length, timeouts and
 * the flight recorder's waits are all far coarser than a few passes. Once
 * it waits in the transport, every pass reads it, as before (skipping
 * waits there made UCX's tcp transport hit an assertion of its own when a
 * peer was killed: 5 of 16 kill trials). */
#define ENGINE_CLOCK_EVERY 8

static int deps_done(const rcoll_plan_t *p, const rcoll_step_t *st) {
  for (int k = 0; k < 2; k++)
    if (st->dep[k] != RCOLL_NO_DEP && p->steps[st->dep[k]].state != RCOLL_STEP_DONE)
      return 0;
  return 1;
}

/* " in allreduce #17 (...): 3 of 12 steps done, ..." for a step of a host
 * plan; the CUDA proxy's plans carry no call records (call.h). */
static const char *step_where(const rcoll_plan_t *p, const rcoll_step_t *st, char *buf, size_t len) {
  if (engine_device(p->comm) || p != &p->comm->plan)
    return buf[0] = '\0', buf;
  return rcoll_call_where(p->comm, (int)(st - p->steps), buf, len);
}

static rcollResult_t peer_error(rcoll_plan_t *p, const rcoll_step_t *st, rcollResult_t r,
                                const char *what) {
  char name[128], where[320];
  struct rcollComm *c = p->comm;
  /* A peer that gave up on the flat board over a mismatch, and left: say so. */
  rcollResult_t why = c->flat != NULL ? rcoll_flat_check(c, p) : rcollSuccess;
  if (why != rcollSuccess)
    return why;
  rcoll_comm_peer_name(c, st->peer, name, sizeof name);
  step_where(p, st, where, sizeof where);
  return rcoll_error(r, "rank %d: %s %s failed%s: %s", c->rank, what, name, where,
                     rcoll_error_text());
}

static void finish_local(struct rcollComm *c, rcoll_step_t *st) {
  if (st->flags & RCOLL_STEP_FINISH) {
    rcollDataType_t t = (rcollDataType_t)st->dtype;
    rcoll_reduce_finish(st->dst, st->bytes / rcoll_type_size(t), t, (rcollRedOp_t)st->op,
                        c->nranks);
  }
}

/* A step whose message travels inside its call's fingerprint message
 * (fingerprint.c; its gate is that message's step). A send is done once the
 * fingerprint message, which copied its bytes, is posted; it counts as
 * posted on its connection (it keeps its number there). A receive that
 * may come inline waits for the fingerprint, which says whether it did;
 * one that did is copied or reduced from there. Returns 1 when the step is
 * done, 0 while it waits, -1 when it is posted as an ordinary message. */
static int inline_post(rcoll_plan_t *p, rcoll_step_t *st) {
  const rcoll_step_t *fp = &p->steps[st->gate];
  if (st->kind == RCOLL_STEP_SEND) {
    rcoll_peer_t *pe = &p->comm->peers[st->peer];
    if (fp->state == RCOLL_STEP_PENDING || st->seq != pe->send_posted)
      return 0;
    pe->send_posted++;
    st->state = RCOLL_STEP_DONE;
    return 1;
  }
  if (fp->state != RCOLL_STEP_DONE)
    return 0;
  if (!(st->flags & RCOLL_STEP_INLINE))
    return -1;
  const rcoll_fp_slot_t *slot = fp->dst;
  rcollDataType_t t = (rcollDataType_t)st->dtype;
  if (st->kind == RCOLL_STEP_RECV)
    memcpy(st->dst, slot->data, st->bytes);
  else
    rcoll_reduce(st->dst, st->src, slot->data, st->bytes / rcoll_type_size(t), t, (rcollRedOp_t)st->op);
  finish_local(p->comm, st);
  st->state = RCOLL_STEP_DONE;
  return 1;
}

/* Whether the step's fingerprint check (its gate), if any, has passed. */
static int gate_open(const rcoll_plan_t *p, const rcoll_step_t *st) {
  return st->gate == RCOLL_NO_DEP || p->steps[st->gate].state == RCOLL_STEP_DONE;
}

/* Tries to post a pending step; returns 1 if it moved. `dev`: a device
 * plan (lib/device.h), whose steps the device ops move. */
static int step_post(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err, int dev) {
  struct rcollComm *c = p->comm;
  if (!deps_done(p, st))
    return 0;
  /* Fingerprints are host messages on either path. A device receive is
   * posted only once its fingerprint matched: posting may already read
   * what the peer sent (the CUDA IPC hello). */
  if (dev && !(st->flags & RCOLL_STEP_FP))
    return gate_open(p, st) ? rcoll_device_ops.step_post(p, st, err) : 0;
  if (st->flags & RCOLL_STEP_BOARD) { /* an all-reduce on the flat board, in a group */
    if (!rcoll_flat_step_post(c, st))
      return 0;
    st->state = RCOLL_STEP_POSTED;
    return 1;
  }
  if (st->kind == RCOLL_STEP_COPY) {
    if (st->src != NULL && st->src != st->dst && st->bytes > 0 && (st->flags & RCOLL_STEP_COPY_OUT))
      rcoll_copy_out(st->dst, st->src, st->bytes);
    else if (st->src != NULL && st->src != st->dst && st->bytes > 0)
      memmove(st->dst, st->src, st->bytes);
    finish_local(c, st);
    st->state = RCOLL_STEP_DONE;
    return 1;
  }
  if (st->flags & (RCOLL_STEP_INLINE | RCOLL_STEP_MAYBE_INLINE)) {
    int r = inline_post(p, st);
    if (r >= 0)
      return r;
  }
  rcoll_peer_t *pe = &c->peers[st->peer];
  void *req = NULL;
  rcollResult_t r;
  if (st->kind == RCOLL_STEP_SEND) {
    if (st->seq != pe->send_posted)
      return 0;
    if (st->flags & RCOLL_STEP_FP)
      rcoll_fp_fill_inline(p, st);
    const rcoll_transport_ops_t *ops = c->nets[pe->net].ops;
    if ((st->flags & RCOLL_STEP_SINGLE_COPY) && ops->isend_single != NULL)
      r = ops->isend_single(pe->send_comm, st->src, st->bytes, 0, NULL, &req);
    else
      r = ops->isend(pe->send_comm, st->src, st->bytes, 0, NULL, &req);
    if (r != rcollSuccess) {
      *err = peer_error(p, st, r, "send to");
      return 0;
    }
    if (req == NULL)
      return 0;
    pe->send_posted++;
  } else {
    if (st->seq != pe->recv_posted)
      return 0;
    void *buf = st->dst;
    void *mh = NULL;
    const rcoll_transport_ops_t *ops = c->nets[pe->net].ops;
    st->slot = -1;
    if (st->kind == RCOLL_STEP_RECV_REDUCE && ops->irecv_reduce != NULL && c->settings.recv_reduce) {
      /* Reduced on arrival: no staging slot, the message is read once. */
      r = ops->irecv_reduce(pe->recv_comm, st->dst, st->src, st->bytes, st->dtype, st->op, &req);
      if (r != rcollSuccess) {
        *err = peer_error(p, st, r, "receive from");
        return 0;
      }
      if (req == NULL)
        return 0;
      pe->recv_posted++;
      st->request = req;
      st->state = RCOLL_STEP_POSTED;
      return 1;
    }
    if (st->kind == RCOLL_STEP_RECV_REDUCE) {
      unsigned slot = pe->slot_next % (unsigned)c->nslots;
      if (pe->slot_busy[slot])
        return 0;
      buf = pe->staging + (size_t)slot * c->chunk_bytes;
      mh = pe->staging_mh;
      st->slot = (int)slot;
    }
    int tag = 0;
    r = c->nets[pe->net].ops->irecv(pe->recv_comm, 1, &buf, &st->bytes, &tag, &mh, &req);
    if (r != rcollSuccess) {
      *err = peer_error(p, st, r, "receive from");
      return 0;
    }
    if (req == NULL)
      return 0;
    if (st->kind == RCOLL_STEP_RECV_REDUCE) {
      pe->slot_busy[st->slot] = 1;
      pe->slot_next++;
    }
    pe->recv_posted++;
  }
  st->request = req;
  st->state = RCOLL_STEP_POSTED;
  return 1;
}

/* Tests a posted step; on completion runs its reduction. Returns 1 if done. */
static int step_test(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err, int dev) {
  struct rcollComm *c = p->comm;
  if (st->flags & RCOLL_STEP_BOARD) {
    if (!rcoll_flat_step_test(c, st, err))
      return 0;
    st->state = RCOLL_STEP_DONE;
    return 1;
  }
  /* Data from a peer is used only once its call's fingerprint matched. */
  if (!gate_open(p, st))
    return 0;
  if (dev && !(st->flags & RCOLL_STEP_FP))
    return rcoll_device_ops.step_test(p, st, err);
  int done = 0;
  size_t got = 0;
  rcollResult_t r = rcoll_peer_net(c, st->peer)->test(st->request, &done, &got);
  if (r != rcollSuccess) {
    *err = peer_error(p, st, r, st->kind == RCOLL_STEP_SEND ? "send to" : "receive from");
    return 0;
  }
  if (!done)
    return 0;
  st->request = NULL;
  if ((st->flags & RCOLL_STEP_FP) && st->kind != RCOLL_STEP_SEND) {
    *err = rcoll_fp_check(p, (int)(st - p->steps), got);
    if (*err != rcollSuccess)
      return 0;
  } else if (st->kind != RCOLL_STEP_SEND && got != st->bytes) {
    char name[128], where[320];
    rcoll_comm_peer_name(c, st->peer, name, sizeof name);
    *err = rcoll_error(rcollInvalidUsage,
                       "rank %d: %s sent %zu bytes where %zu were expected%s "
                       "(counts, types or call order differ between ranks)",
                       c->rank, name, got, st->bytes, step_where(p, st, where, sizeof where));
    return 0;
  }
  if (st->kind == RCOLL_STEP_RECV_REDUCE && st->slot < 0) {
    finish_local(c, st); /* reduced by the transport on arrival */
  } else if (st->kind == RCOLL_STEP_RECV_REDUCE) {
    if (c->trace != NULL)
      rcoll_trace_arrived(c->trace, p, (int)(st - p->steps));
    rcoll_peer_t *pe = &c->peers[st->peer];
    const void *staged = pe->staging + (size_t)st->slot * c->chunk_bytes;
    rcollDataType_t t = (rcollDataType_t)st->dtype;
    rcoll_reduce(st->dst, st->src, staged, st->bytes / rcoll_type_size(t), t, (rcollRedOp_t)st->op);
    finish_local(c, st);
    pe->slot_busy[st->slot] = 0;
  }
  st->state = RCOLL_STEP_DONE;
  return 1;
}

/* Records a step that moved in the communicator's trace: posted, done, or
 * both at once (a local copy). Cold: kept out of the loop that calls it,
 * which runs untraced almost always. */
__attribute__((cold)) static void step_traced(rcoll_plan_t *p, int i, int was_pending) {
  rcoll_trace_t *t = p->comm->trace;
  if (was_pending)
    rcoll_trace_posted(t, p, i);
  if (p->steps[i].state == RCOLL_STEP_DONE)
    rcoll_trace_done(t, p, i);
}

/* One pass over a plan's window. Returns the number of steps that moved. */
static int plan_progress(rcoll_plan_t *p, rcollResult_t *err) {
  int moved = 0, seen = 0;
  const int traced = p->comm->trace != NULL, dev = engine_device(p->comm);
  for (int i = p->head; i < p->nsteps && seen < ENGINE_WINDOW; i++) {
    rcoll_step_t *st = &p->steps[i];
    if (st->state == RCOLL_STEP_DONE)
      continue;
    seen++;
    int was_pending = st->state == RCOLL_STEP_PENDING, m = 0;
    if (was_pending)
      m = step_post(p, st, err, dev);
    if (*err == rcollSuccess && st->state == RCOLL_STEP_POSTED)
      m += step_test(p, st, err, dev);
    moved += m;
    if (traced && m) /* off, tracing costs this test here and a few per call */
      step_traced(p, i, was_pending);
    if (*err != rcollSuccess)
      return moved;
  }
  while (p->head < p->nsteps && p->steps[p->head].state == RCOLL_STEP_DONE)
    p->head++;
  return moved;
}

static rcollResult_t stalled_error(rcoll_plan_t *p, int64_t waited_ms) {
  struct rcollComm *c = p->comm;
  for (int i = p->head; i < p->nsteps; i++) {
    const rcoll_step_t *st = &p->steps[i];
    if (st->state != RCOLL_STEP_DONE && (st->flags & RCOLL_STEP_BOARD)) {
      char where[320];
      return rcoll_flat_step_timeout(c, st, waited_ms, step_where(p, st, where, sizeof where));
    }
    if (st->state == RCOLL_STEP_DONE || st->kind == RCOLL_STEP_COPY)
      continue;
    char name[128], where[320];
    rcoll_comm_peer_name(c, st->peer, name, sizeof name);
    /* A fingerprint that never came: the peer has not started this call. */
    int fp = (st->flags & RCOLL_STEP_FP) && st->kind != RCOLL_STEP_SEND;
    return rcoll_error(rcollTimeout,
                       "rank %d: no progress for %lld ms waiting to %s %zu bytes %s %s%s "
                       "(RCOLL_TIMEOUT=%lld s); %s%s", c->rank, (long long)waited_ms,
                       st->kind == RCOLL_STEP_SEND ? "send" : "receive", st->bytes,
                       st->kind == RCOLL_STEP_SEND ? "to" : "from", name,
                       step_where(p, st, where, sizeof where), (long long)c->settings.timeout,
                       fp ? "the call's fingerprint never came: that rank has not started this "
                            "call (it died, hangs elsewhere or made fewer calls)"
                          : "the peer may have died or stopped calling",
                       fp && c->cuda_direct ? ", or ran it as a direct kernel (RCOLL_CUDA_DIRECT runs "
                                              "device collectives as kernels but in a group that holds them "
                                              "for two communicators: group such calls alike on every rank)"
                                            : "");
  }
  return rcoll_error(rcollInternalError, "rank %d: plan stalled with no pending message", c->rank);
}

/* The first failure of a communicator dumps its flight recorder (after
 * rcoll_fr_run_end recorded how the calls ended). */
static rcollResult_t engine_fail(rcoll_plan_t **plans, int nplans, rcollResult_t r) {
  for (int i = 0; i < nplans; i++) {
    struct rcollComm *c = plans[i]->comm;
    snprintf(c->last_error, sizeof c->last_error, "%s", rcoll_error_text());
    if (rcoll_comm_set_error(c, r) && c->fr != NULL)
      rcoll_fr_dump(c, r == rcollTimeout ? "timeout" : "error");
  }
  return r;
}

/* Whether the flight recorder follows this plan: a host plan of the
 * calling thread (the CUDA proxy's plans are copies with no call records). */
static int engine_fr_follows(const rcoll_plan_t *p) {
  return p->comm->fr != NULL && p == &p->comm->plan && !engine_device(p->comm);
}

/* The oldest step of a plan still waiting on a peer (or head). */
static int engine_oldest(const rcoll_plan_t *p) {
  for (int i = p->head; i < p->nsteps; i++)
    if (p->steps[i].state != RCOLL_STEP_DONE && p->steps[i].kind != RCOLL_STEP_COPY)
      return i;
  return p->head;
}

/* Flight recorder: after a long wait, each plan's calls say how far they
 * got; `moving` says the wait is over. */
__attribute__((cold)) static void engine_fr_wait(rcoll_plan_t **plans, int nplans, int moving) {
  for (int i = 0; i < nplans; i++) {
    rcoll_plan_t *p = plans[i];
    if (!engine_fr_follows(p))
      continue;
    if (moving)
      rcoll_fr_moving(p->comm);
    else if (p->head < p->nsteps)
      rcoll_fr_waiting(p->comm, engine_oldest(p));
  }
}

/* The engine's waits, for the first plan's trace: one "wait" slice from
 * the first idle pass to the next progress. */
typedef struct engine_idle_trace {
  rcoll_trace_t *trace;
  int64_t begin_ns, passes, sleeps;
} engine_idle_trace_t;

__attribute__((cold)) static void idle_trace_pass(engine_idle_trace_t *it, int64_t idle_us,
                                                  int64_t spin_us) {
  if (it->passes++ == 0)
    it->begin_ns = rcoll_trace_now();
  it->sleeps += idle_us >= spin_us;
}

__attribute__((cold)) static void idle_trace_end(engine_idle_trace_t *it) {
  rcoll_trace_idle(it->trace, it->begin_ns, it->passes, it->sleeps);
  it->passes = it->sleeps = 0;
}

/* The clock is first read when the plans stop progressing: a call that
 * never waits long enough for that reads it not at all. */
static rcollResult_t engine_loop(rcoll_plan_t **plans, int nplans) {
  int64_t last_progress = 0;
  int progressed = 1;   /* since the clock was last read (or before its first reading) */
  int spun = 0;         /* the spin is over: wait in the transport */
  unsigned idle = 0;    /* passes without progress */
  int fr_waited = 0; /* this wait is in the flight recorder */
  int64_t flat_checked = 0;
  int64_t timeout_us = plans[0]->comm->timeout_ms * 1000;
  int64_t spin_us = plans[0]->comm->spin_us;
  engine_idle_trace_t it = {.trace = plans[0]->comm->trace};
  struct rcollComm *c = plans[0]->comm;
  if (!engine_device(c)) /* a call starts: where the last sleep's wake-up left it? (home_core.c) */
    c->home_moves += rcoll_home_core_return(c->home_cpu, c->home_cores);
  if (c->balance && c->flat != NULL)
    rcoll_flat_balance(c);
  for (;;) {
    int moved = 0, busy = 0;
    rcollResult_t err = rcollSuccess;
    for (int i = 0; i < nplans; i++) {
      rcoll_plan_t *p = plans[i];
      if (p->head == p->nsteps)
        continue;
      if (p->comm->aborted || p->comm->revoked) {
        char where[320] = "";
        if (!engine_device(p->comm) && p == &p->comm->plan)
          rcoll_calls_where(p->comm, where, sizeof where);
        return rcoll_error(rcollInvalidUsage, "rank %d: communicator %s during the call%s",
                           p->comm->rank,
                           p->comm->aborted ? "aborted" : "revoked (rcollCommRevoke or rcollCommShrink)",
                           where);
      }
      moved += plan_progress(p, &err);
      if (err != rcollSuccess)
        return err;
      busy += p->head < p->nsteps;
    }
    if (it.passes && (moved || !busy))
      idle_trace_end(&it);
    if (!busy)
      return rcollSuccess;
    if (moved) {
      progressed = 1;
      idle = spun = 0;
      if (fr_waited)
        engine_fr_wait(plans, nplans, 1), fr_waited = 0;
      continue;
    }
    if (!spun && ++idle % ENGINE_CLOCK_EVERY != 0) {
      if (plans[0]->comm->spin_yield == RCOLL_YIELD_EVERY_PASS)
        sched_yield();
      continue;
    }
    int64_t now = rcoll_now_us();
    if (progressed)
      last_progress = now, progressed = 0;
    spun = now - last_progress >= spin_us;
    if (!fr_waited && now - last_progress > ENGINE_FR_WAIT_US)
      engine_fr_wait(plans, nplans, 0), fr_waited = 1;
    if (now - last_progress > RCOLL_FLAT_CHECK_AFTER_MS * 1000 &&
        now - flat_checked > RCOLL_FLAT_CHECK_MS * 1000) {
      rcollResult_t r = rcoll_flat_check_plans(plans, nplans);
      if (r != rcollSuccess)
        return r;
      flat_checked = now;
    }
    if (it.trace != NULL)
      idle_trace_pass(&it, now - last_progress, spin_us);
    if (now - last_progress > timeout_us)
      for (int i = 0; i < nplans; i++)
        if (plans[i]->head < plans[i]->nsteps)
          return stalled_error(plans[i], (now - last_progress) / 1000);
    rcoll_engine_idle(plans, nplans, now - last_progress, spin_us);
  }
}

rcollResult_t rcoll_engine_run(rcoll_plan_t **plans, int nplans) {
  rcollResult_t r;
  int device_state = 0; /* without it there is no device call to divert or wait for (device.h) */
  for (int i = 0; i < nplans && !device_state; i++)
    device_state = plans[i]->comm->cuda != NULL;
  if (device_state && rcoll_device_ops.group_divert(plans, nplans, &r))
    return r;
  r = device_state ? rcoll_device_ops.drain_plans(plans, nplans) : rcollSuccess;
  if (r != rcollSuccess)
    return r;
  return rcoll_engine_run_now(plans, nplans);
}

static void engine_trace_begin(rcoll_plan_t **plans, int nplans) {
  for (int i = 0; i < nplans; i++)
    if (plans[i]->comm->trace != NULL)
      rcoll_trace_run_begin(plans[i]->comm->trace, plans[i]);
}

rcollResult_t rcoll_engine_run_now(rcoll_plan_t **plans, int nplans) {
  for (int i = 0; i < nplans; i++) {
    if (plans[i]->failed)
      return engine_fail(plans, nplans,
                         rcoll_error(rcollSystemError, "rank %d: out of memory while planning",
                                     plans[i]->comm->rank));
    plans[i]->comm->active++;
  }
  int64_t begin_us = rcoll_now_coarse_us(); /* for the record only (clock.h) */
  for (int i = 0; i < nplans; i++)
    if (engine_fr_follows(plans[i]))
      rcoll_fr_run_begin(plans[i]->comm, begin_us);
  engine_trace_begin(plans, nplans);
  int64_t connect_ns = plans[0]->comm->trace != NULL ? rcoll_trace_now() : 0;
  rcollResult_t r = nplans == 1 && plans[0]->connected ? rcollSuccess : rcoll_conn_ensure(plans, nplans);
  if (plans[0]->comm->trace != NULL)
    rcoll_trace_connected(plans[0]->comm->trace, connect_ns);
  if (r == rcollSuccess)
    r = engine_loop(plans, nplans);
  if (r != rcollSuccess) /* the dump shows where each call stopped */
    engine_fr_wait(plans, nplans, 0);
  for (int i = 0; i < nplans; i++)
    if (engine_fr_follows(plans[i]))
      rcoll_fr_run_end(plans[i]->comm, r);
  if (r != rcollSuccess)
    engine_fail(plans, nplans, r);
  for (int i = 0; i < nplans; i++) {
    if (plans[i]->comm->trace != NULL)
      rcoll_trace_run_end(plans[i]->comm->trace, plans[i], r,
                          engine_device(plans[i]->comm));
    plans[i]->comm->active--;
  }
  return r;
}
