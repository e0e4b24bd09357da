/* Units of device work and the proxy threads that run them (unit.h).
 *
 * Locks: units_mu orders launches (a unit is appended to all its queues
 * before any later launch touches them, so no two queues can disagree on
 * order) and guards every unit's arrived/done/refs; each comm's mu guards its
 * queue. units_mu is taken before a comm's mu, never after. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cuda/module.h"
#include "cuda/unit.h"
#include "home_core.h"
#include "hwtopo.h"
#include "log.h"

static pthread_mutex_t units_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t units_cv = PTHREAD_COND_INITIALIZER;

/* Deadlines are on CLOCK_MONOTONIC, with the waits that take a clock
 * (pthread_cond_clockwait, pthread_clockjoin_np): a step of the wall clock
 * (CI's once moved 12 s mid-run) must not stretch a bounded wait. */
static struct timespec deadline_in(int64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

/* ---- units ---- */

/* keep (NULL: none) may take a plan's steps for its next call. Only the
 * comm of the proxy that frees the unit: a group's unit spans several
 * communicators, and whichever proxy drops the last reference may do so
 * after the user destroyed the others (their streams were released), so
 * their plans' comm pointers must not be followed here. */
static void unit_free(rcoll_cuda_unit_t *u, rcoll_cuda_comm_t *keep) {
  for (int i = 0; u->plans != NULL && i < u->nplans; i++) {
    rcoll_plan_t *p = &u->plans[i];
    if (keep != NULL && p->comm == keep->comm) {
      pthread_mutex_lock(&keep->mu);
      if (keep->spare_steps == NULL) { /* the next call plans into it: no allocation */
        keep->spare_steps = p->steps;
        keep->spare_cap = p->cap;
        p->steps = NULL;
      }
      pthread_mutex_unlock(&keep->mu);
    }
    free(p->steps);
    free(u->x[i]);
    free(u->fp[i]);
  }
  free(u->plans);
  free(u->plan_ptrs);
  free(u->x);
  free(u->fp);
  free(u->nodes);
  free(u);
}

static int plan_fp_steps(const rcoll_plan_t *p) {
  int n = 0;
  for (int k = 0; k < p->nsteps; k++)
    n += (p->steps[k].flags & RCOLL_STEP_FP) != 0;
  return n;
}

static rcoll_cuda_unit_t *unit_alloc(rcoll_plan_t **plans, int n) {
  rcoll_cuda_unit_t *u = calloc(1, sizeof *u);
  if (u == NULL)
    return NULL;
  u->plans = calloc((size_t)n, sizeof *u->plans);
  u->plan_ptrs = calloc((size_t)n, sizeof *u->plan_ptrs);
  u->x = calloc((size_t)n, sizeof *u->x);
  u->fp = calloc((size_t)n, sizeof *u->fp);
  u->nodes = calloc((size_t)n, sizeof *u->nodes);
  int ok = u->plans && u->plan_ptrs && u->x && u->fp && u->nodes;
  for (int i = 0; ok && i < n; i++) {
    int nfp = plan_fp_steps(plans[i]);
    ok = (u->x[i] = calloc((size_t)(plans[i]->nsteps > 0 ? plans[i]->nsteps : 1),
                           sizeof **u->x)) != NULL &&
         (nfp == 0 || (u->fp[i] = calloc((size_t)nfp, sizeof **u->fp)) != NULL);
  }
  if (!ok) {
    for (int i = 0; u->x && i < n; i++)
      free(u->x[i]);
    for (int i = 0; u->fp && i < n; i++)
      free(u->fp[i]);
    free(u->plans);
    free(u->plan_ptrs);
    free(u->x);
    free(u->fp);
    free(u->nodes);
    free(u);
    return NULL;
  }
  return u;
}

/* The unit takes the plan's steps; the plan gets the comm's spare array (or
 * none, and allocates on its next call) and is left with no steps. */
static void unit_take_plan(rcoll_cuda_unit_t *u, int i, rcoll_plan_t *p) {
  rcoll_cuda_comm_t *cc = p->comm->cuda;
  u->plans[i] = *p;
  u->plans[i].tuner = NULL; /* planner state stays with the comm's plan */
  u->plans[i].tmp = NULL;
  u->plans[i].tmp_bytes = 0;
  u->plan_ptrs[i] = &u->plans[i];
  u->nodes[i].unit = u;
  for (int k = 0, f = 0; k < p->nsteps; k++) {
    rcoll_step_t *st = &u->plans[i].steps[k];
    u->x[i][k].slot = -1;
    if (st->kind == RCOLL_STEP_SEND && !(st->flags & RCOLL_STEP_FP)) {
      uint64_t *taken = &cc->peers[st->peer].send.data_taken;
      u->x[i][k].copy_after = *taken;
      *taken = st->seq + 1;
    }
    if (!(st->flags & RCOLL_STEP_FP))
      continue;
    /* A device call's fingerprints carry no inline data (fingerprint.c):
     * the copies keep inline_step -1. */
    rcoll_cuda_fp_copy_t *fc = &u->fp[i][f++];
    fc->mine.fp = *(const rcoll_fp_t *)st->src;
    fc->mine.inline_step = fc->theirs.inline_step = -1;
    st->src = &fc->mine.fp;
    if (st->kind != RCOLL_STEP_SEND)
      st->dst = &fc->theirs;
  }
  pthread_mutex_lock(&cc->mu);
  p->steps = cc->spare_steps;
  p->cap = cc->spare_cap;
  cc->spare_steps = NULL;
  cc->spare_cap = 0;
  pthread_mutex_unlock(&cc->mu);
  p->nsteps = 0;
}

rcoll_cuda_unit_t *rcoll_cuda_unit_create(rcoll_plan_t **plans, int nplans) {
  rcoll_cuda_unit_t *u = unit_alloc(plans, nplans);
  if (u == NULL)
    return NULL;
  for (int i = 0; i < nplans; i++)
    unit_take_plan(u, i, plans[i]);
  u->nplans = nplans;
  u->owner = plans[0]->comm->cuda;
  u->refs = nplans;
  return u;
}

rcollResult_t rcoll_cuda_unit_add_stream(rcoll_cuda_unit_t *u, rcoll_cuda_stream_t s, int device) {
  for (int i = 0; i < u->nstreams; i++)
    if (u->streams[i] == s && u->devices[i] == device)
      return rcollSuccess;
  if (u->nstreams == RCOLL_CUDA_MAX_STREAMS)
    return rcoll_error(rcollInvalidUsage, "rcollGroupEnd: device calls of one group use more than "
                       "%d distinct streams", RCOLL_CUDA_MAX_STREAMS);
  u->streams[u->nstreams] = s;
  u->devices[u->nstreams++] = device;
  return rcollSuccess;
}

/* Undoes the connection order the plans reserved: they will not run. */
static void unit_unplan(rcoll_cuda_unit_t *u) {
  for (int i = 0; i < u->nplans; i++)
    rcoll_plan_discard(&u->plans[i]);
}

void rcoll_cuda_unit_discard(rcoll_cuda_unit_t *u) {
  unit_unplan(u);
  unit_free(u, NULL);
}

/* Records an event on every stream: the proxy starts once all have fired.
 * A bounce kernel says it in host memory instead (unit_hold launches it). */
static rcollResult_t unit_record(rcoll_cuda_unit_t *u) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  for (int i = 0; i < u->nstreams && !u->bounce_kernel; i++) {
    int saved = -1;
    int r = rcoll_cuda_device_enter(u->devices[i], &saved);
    if (r == 0)
      r = rcoll_cuda_event_take(u->owner, u->devices[i], &u->events[i]);
    if (r == 0)
      r = a->event_record(u->events[i], u->streams[i]);
    rcoll_cuda_device_leave(saved);
    if (r != 0)
      return rcoll_error(rcollUnhandledCudaError, "cudaEventRecord on stream %p (device %d) failed: "
                         "%s (is it a valid stream of that device?)", u->streams[i], u->devices[i],
                         rcoll_cuda_strerror(r));
  }
  return rcollSuccess;
}

/* The stream waits for the owner's flag: the driver's wait or the wait
 * kernel (rcoll_cuda_stream_hold), or the bounce kernel, which waits too. */
static rcollResult_t unit_hold_stream(rcoll_cuda_unit_t *u, int i) {
  if (!u->bounce_kernel)
    return rcoll_cuda_stream_hold(u->owner, u->streams[i], u->seq);
  /* As the wait kernel's: a backstop against a dead proxy, not a deadline. */
  int64_t ms = 4 * u->owner->comm->timeout_ms;
  u->bk.seq = u->seq;
  u->bk.flag = (const uint32_t *)(uintptr_t)u->owner->flag_dev;
  u->bk.timed_out = (uint32_t *)(uintptr_t)u->owner->timed_out_dev;
  u->bk.timeout_ns = (uint64_t)(ms < 60000 ? 60000 : ms) * 1000000u;
  return rcoll_cuda_launch_bounce(&u->bk, u->streams[i]);
}

static rcollResult_t unit_hold(rcoll_cuda_unit_t *u) {
  for (int i = 0; i < u->nstreams; i++) {
    int saved = -1;
    rcollResult_t r = rcoll_cuda_device_enter(u->devices[i], &saved) == 0
                          ? unit_hold_stream(u, i)
                          : rcoll_error(rcollUnhandledCudaError, "cannot select device %d",
                                        u->devices[i]);
    rcoll_cuda_device_leave(saved);
    RCOLL_CHECK(r);
  }
  return rcollSuccess;
}

/* The legacy default stream (NULL, or cudaStreamLegacy): a synchronous
 * copy on it holds the driver's lock exclusively until the stream moves, so
 * if the caller issued one behind our hold, the proxy could make no CUDA
 * call at all (seen on an H200: the proxy's cuMemcpyAsync waited on the lock
 * that the user's cuMemcpyDtoHAsync held). A call on it therefore returns
 * only once it has finished, as a blocking call may; a created stream (or
 * cudaStreamPerThread) keeps calls asynchronous. */
int rcoll_cuda_stream_is_legacy(rcoll_cuda_stream_t s) {
  return s == NULL || s == (rcoll_cuda_stream_t)(uintptr_t)1;
}

/* Waits until the comms of a unit on the legacy stream have run it. */
static rcollResult_t unit_wait_legacy(rcoll_cuda_comm_t **ccs, int n) {
  for (int i = 0; i < n; i++) {
    struct rcollComm *c = ccs[i]->comm;
    int64_t ms = 4 * c->timeout_ms; /* the proxy's own waits time out first */
    if (rcoll_cuda_proxy_drain(ccs[i], ms < 60000 ? 60000 : ms) != rcollSuccess)
      return rcoll_error(rcollTimeout, "rank %d: a device call on the legacy default stream did "
                         "not finish within %lld ms", c->rank, (long long)(ms < 60000 ? 60000 : ms));
    if (c->async_error != rcollSuccess)
      return rcoll_error(c->async_error, "rank %d: %s", c->rank, c->last_error);
  }
  return rcollSuccess;
}

rcollResult_t rcoll_cuda_unit_launch(rcoll_cuda_unit_t *u) {
  int legacy = 0;
  for (int i = 0; i < u->nstreams; i++)
    legacy |= rcoll_cuda_stream_is_legacy(u->streams[i]);
  rcoll_cuda_comm_t *ccs[16], **wait = NULL;
  int nwait = legacy ? u->nplans : 0;
  if (legacy)
    wait = nwait <= 16 ? ccs : calloc((size_t)nwait, sizeof *wait);
  for (int i = 0; wait != NULL && i < nwait; i++)
    wait[i] = u->plans[i].comm->cuda;
  pthread_mutex_lock(&units_mu);
  u->seq = ++u->owner->next_seq;
  rcollResult_t r = unit_record(u);
  if (r == rcollSuccess)
    r = unit_hold(u);
  if (r != rcollSuccess) {
    /* Some streams may already wait for seq: the unit still goes through
     * the queue, in order, but only to release them. */
    u->preset = r;
    unit_unplan(u);
  }
  u->queued_us = rcoll_now_us();
  for (int i = 0; i < u->nplans; i++) {
    rcoll_cuda_comm_t *cc = u->plans[i].comm->cuda;
    pthread_mutex_lock(&cc->mu);
    if (cc->tail != NULL)
      cc->tail->next = &u->nodes[i];
    else
      cc->head = &u->nodes[i];
    cc->tail = &u->nodes[i];
    cc->queued++;
    pthread_cond_broadcast(&cc->cv);
    pthread_mutex_unlock(&cc->mu);
  }
  pthread_mutex_unlock(&units_mu);
  /* u may be gone now: the proxy frees it when done. */
  if (legacy && wait == NULL && r == rcollSuccess)
    r = rcoll_error(rcollSystemError, "out of memory waiting for a call on the legacy stream");
  if (wait != NULL) {
    rcollResult_t w = unit_wait_legacy(wait, nwait);
    if (r == rcollSuccess)
      r = w;
    if (wait != ccs)
      free(wait);
  }
  return r;
}

/* ---- running a unit ---- */

/* 0 once stream i reached the unit: its event fired, or its bounce kernel
 * wrote the unit's seq into the slot's word; else a CUDA error. */
static int unit_reached(const rcoll_cuda_unit_t *u, int i) {
  if (!u->bounce_kernel)
    return rcoll_cuda_api()->event_query(u->events[i]);
  uint32_t seen = atomic_load_explicit(u->ready, memory_order_acquire);
  return (int32_t)(seen - u->seq) >= 0 ? 0 : RCOLL_CUDA_ERROR_NOT_READY;
}

static rcollResult_t unit_events(rcoll_cuda_unit_t *u) {
  struct rcollComm *c = u->owner->comm;
  int64_t start = rcoll_now_us();
  for (int i = 0; i < u->nstreams; i++) {
    for (int polls = 0;; polls++) {
      int r = unit_reached(u, i);
      if (r == 0)
        break;
      if (r != RCOLL_CUDA_ERROR_NOT_READY)
        return rcoll_error(rcollUnhandledCudaError, "rank %d: the stream of a device call failed "
                           "before it: %s", c->rank, rcoll_cuda_strerror(r));
      if (c->aborted)
        return rcoll_error(rcollInvalidUsage, "rank %d: communicator aborted", c->rank);
      if (rcoll_now_us() - start > c->timeout_ms * 1000)
        return rcoll_error(rcollTimeout, "rank %d: the work queued on the stream before a device "
                           "call did not finish within %lld ms (RCOLL_TIMEOUT)", c->rank,
                           (long long)c->timeout_ms);
      /* Yield for 200 us at least (a bounce kernel's word costs a load, not
       * a CUDA call: 64 polls can pass in microseconds), then nap. */
      struct timespec ts = {0, 50000};
      if (polls < 64 || rcoll_now_us() - start < 200)
        sched_yield();
      else
        nanosleep(&ts, NULL);
    }
  }
  return rcollSuccess;
}

static void unit_fail(rcoll_cuda_unit_t *u, rcollResult_t r) {
  for (int i = 0; i < u->nplans; i++) {
    struct rcollComm *c = u->plans[i].comm;
    snprintf(c->last_error, sizeof c->last_error, "%s", rcoll_error_text());
    rcoll_comm_set_error(c, r);
  }
}

static int unit_comms_failed(const rcoll_cuda_unit_t *u) {
  for (int i = 0; i < u->nplans; i++)
    if (u->plans[i].comm->async_error != rcollSuccess)
      return 1;
  return 0;
}

static void unit_set_executing(rcoll_cuda_unit_t *u, int on) {
  for (int i = 0; i < u->nplans; i++) {
    rcoll_cuda_comm_t *cc = u->plans[i].comm->cuda;
    cc->run_unit = on ? u : NULL;
    atomic_store_explicit(&cc->executing, on, memory_order_release);
  }
}

/* Returns 0 when the owner's comm was aborted while waiting. */
static int unit_wait_arrivals(rcoll_cuda_unit_t *u) {
  pthread_mutex_lock(&units_mu);
  while (u->arrived < u->nplans - 1 && !u->owner->comm->aborted) {
    struct timespec ts = deadline_in(100);
    pthread_cond_clockwait(&units_cv, &units_mu, CLOCK_MONOTONIC, &ts);
  }
  int all = u->arrived == u->nplans - 1;
  pthread_mutex_unlock(&units_mu);
  return all;
}

/* The owner's part: wait for the other proxies and for the streams, run the
 * plans, release the streams whatever happened, then wake the others. */
static void unit_run(rcoll_cuda_unit_t *u) {
  rcollResult_t r = u->preset;
  if (!unit_wait_arrivals(u) && r == rcollSuccess) {
    r = rcoll_error(rcollInvalidUsage, "rank %d: communicator aborted", u->owner->comm->rank);
    unit_fail(u, r);
  }
  if (r == rcollSuccess && !unit_comms_failed(u)) {
    unit_set_executing(u, !u->host); /* a bounced call's steps are the host engine's */
    int64_t t0 = rcoll_now_us();
    u->owner->prof.queue_us += t0 - u->queued_us;
    r = unit_events(u);
    int64_t t1 = rcoll_now_us();
    if (r == rcollSuccess)
      r = rcoll_engine_run_now(u->plan_ptrs, u->nplans); /* records its own failures */
    else
      unit_fail(u, r);
    unit_set_executing(u, 0);
    u->owner->prof.units++;
    u->owner->prof.event_wait_us += t1 - t0;
    u->owner->prof.run_us += rcoll_now_us() - t1;
  }
  /* Release first, and no CUDA call after the work: a user thread may sit in
   * a synchronous copy behind our hold, with the driver's lock (event_pool.c). */
  rcoll_cuda_stream_release(u->owner, u->seq);
  for (int i = 0; i < u->nstreams; i++)
    rcoll_cuda_event_give(u->owner, u->devices[i], u->events[i]);
  pthread_mutex_lock(&units_mu);
  u->result = r;
  u->done = 1;
  pthread_cond_broadcast(&units_cv);
  pthread_mutex_unlock(&units_mu);
}

/* A non-owner's part: say we are here, then wait until the owner is done. */
static void unit_park(rcoll_cuda_unit_t *u) {
  pthread_mutex_lock(&units_mu);
  u->arrived++;
  pthread_cond_broadcast(&units_cv);
  while (!u->done) {
    struct timespec ts = deadline_in(100);
    pthread_cond_clockwait(&units_cv, &units_mu, CLOCK_MONOTONIC, &ts);
  }
  pthread_mutex_unlock(&units_mu);
}

static void unit_unref(rcoll_cuda_unit_t *u, rcoll_cuda_comm_t *cc) {
  pthread_mutex_lock(&units_mu);
  int last = --u->refs == 0;
  pthread_mutex_unlock(&units_mu);
  if (last)
    unit_free(u, cc);
}

/* ---- the proxy thread ---- */

static rcoll_cuda_node_t *proxy_next(rcoll_cuda_comm_t *cc) {
  pthread_mutex_lock(&cc->mu);
  while (cc->head == NULL && !cc->stop) {
    struct timespec ts = deadline_in(100);
    pthread_cond_clockwait(&cc->cv, &cc->mu, CLOCK_MONOTONIC, &ts);
  }
  rcoll_cuda_node_t *n = cc->head;
  pthread_mutex_unlock(&cc->mu);
  return n;
}

static void proxy_pop(rcoll_cuda_comm_t *cc, rcoll_cuda_node_t *n) {
  pthread_mutex_lock(&cc->mu);
  cc->head = n->next;
  if (cc->head == NULL)
    cc->tail = NULL;
  cc->queued--;
  pthread_cond_broadcast(&cc->cv);
  pthread_mutex_unlock(&cc->mu);
}

static void *proxy_main(void *arg) {
  rcoll_cuda_comm_t *cc = arg;
  rcoll_log_set_rank(cc->comm->rank);
  /* The host plans it runs (bounced calls, bounce.h) wait in the transport,
   * after which the engine moves a thread to its rank's home core
   * (home_core.h): the core of the rank's user thread, which meanwhile
   * spins in cudaStreamSynchronize. A bounced 8-byte all-reduce of two
   * ranks on one H200 as two hosts over sockets took 3370 us so, 44 us
   * since (docs/gpu.md). */
  rcoll_home_core_thread = RCOLL_HOME_CORE_NEVER;
  /* Runtime calls of this thread (copies, kernels) go to the comm's device. */
  rcoll_cuda_api()->set_device(cc->device);
  for (rcoll_cuda_node_t *n; (n = proxy_next(cc)) != NULL;) {
    rcoll_cuda_unit_t *u = n->unit;
    if (u->owner == cc)
      unit_run(u);
    else
      unit_park(u);
    proxy_pop(cc, n);
    unit_unref(u, cc);
  }
  return NULL;
}

/* The proxy launches and copies for one GPU: run it on the CPUs next to
 * that GPU's PCI slot. The bus id comes from the runtime (an optional entry
 * of the table: without it the thread keeps the CPUs it inherited). */
static void proxy_pin(rcoll_cuda_comm_t *cc) {
  const rcoll_cuda_api_t *api = rcoll_cuda_api();
  rcoll_hwtopo_locality_t loc = {.valid = 0, .numa = -1};
  char busid[32], who[96];
  if (api != NULL && api->device_get_pci_bus_id != NULL &&
      api->device_get_pci_bus_id(busid, (int)sizeof busid, cc->device) == 0)
    rcoll_hwtopo_locality_of_pci(busid, &loc);
  else
    snprintf(loc.where, sizeof loc.where, "the CUDA runtime gives no PCI bus id for device %d",
             cc->device);
  snprintf(who, sizeof who, "rank %d: CUDA proxy thread of device %d", cc->comm->rank, cc->device);
  rcoll_hwtopo_pin_thread(cc->thread, &loc, who);
}

rcollResult_t rcoll_cuda_proxy_start(rcoll_cuda_comm_t *cc) {
  int e = pthread_create(&cc->thread, NULL, proxy_main, cc);
  if (e != 0)
    return rcoll_error(rcollSystemError, "rank %d: cannot start the CUDA proxy thread: %s",
                       cc->comm->rank, strerror(e));
  cc->thread_started = 1;
  proxy_pin(cc);
  return rcollSuccess;
}

int rcoll_cuda_proxy_stop(rcoll_cuda_comm_t *cc, int64_t timeout_ms) {
  if (!cc->thread_started)
    return 1;
  pthread_mutex_lock(&cc->mu);
  cc->stop = 1;
  pthread_cond_broadcast(&cc->cv);
  pthread_mutex_unlock(&cc->mu);
  struct timespec ts = deadline_in(timeout_ms);
  if (pthread_clockjoin_np(cc->thread, NULL, CLOCK_MONOTONIC, &ts) != 0)
    return 0;
  cc->thread_started = 0;
  return 1;
}

rcollResult_t rcoll_cuda_proxy_drain(rcoll_cuda_comm_t *cc, int64_t timeout_ms) {
  struct timespec ts = deadline_in(timeout_ms);
  int e = 0;
  pthread_mutex_lock(&cc->mu);
  while (cc->queued > 0 && e != ETIMEDOUT)
    e = pthread_cond_clockwait(&cc->cv, &cc->mu, CLOCK_MONOTONIC, &ts);
  int left = cc->queued;
  pthread_mutex_unlock(&cc->mu);
  if (left > 0)
    return rcoll_error(rcollTimeout, "rank %d: %d device calls still queued after %lld ms",
                       cc->comm->rank, left, (long long)timeout_ms);
  return rcollSuccess;
}
