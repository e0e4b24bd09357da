/* Handing device calls to the proxy: a single call at once, the calls of a
 * group at rcollGroupEnd as one unit (cuda_comm.h). */
#include <stdlib.h>

#include "cuda/cuda_comm.h"
#include "cuda/unit.h"
#include "group.h"
#include "log.h"

int rcoll_cuda_group_has_device(const struct rcollComm *c) {
  return c->cuda != NULL && c->in_group && c->cuda->group_pending;
}

static rcollResult_t group_keep(struct rcollComm *c, rcoll_cuda_comm_t *cc, rcollStream_t stream,
                                const char *fn) {
  if (!c->in_group) {
    /* First call of this comm in the group: forget what a failed group left. */
    cc->group_pending = 0;
    cc->ngroup_streams = 0;
  } else if (!cc->group_pending) {
    return rcoll_error(rcollInvalidUsage, "%s: this group already has calls on host buffers for this "
                       "communicator; a group holds host calls or device calls, not both", fn);
  }
  int known = 0;
  for (int i = 0; i < cc->ngroup_streams; i++)
    known |= cc->group_streams[i] == stream;
  if (!known && cc->ngroup_streams == RCOLL_CUDA_MAX_STREAMS)
    return rcoll_error(rcollInvalidUsage, "%s: more than %d distinct streams in one group", fn,
                       RCOLL_CUDA_MAX_STREAMS);
  if (!known)
    cc->group_streams[cc->ngroup_streams++] = stream;
  cc->group_pending = 1;
  return rcoll_group_add(c);
}

static rcollResult_t submit_one(struct rcollComm *c, rcoll_cuda_comm_t *cc, rcollStream_t stream) {
  rcollResult_t r = rcoll_cuda_plan_prepare(cc, &c->plan);
  rcoll_plan_t *plans[1] = {&c->plan};
  rcoll_cuda_unit_t *u = r == rcollSuccess ? rcoll_cuda_unit_create(plans, 1) : NULL;
  if (u == NULL) {
    rcoll_plan_discard(&c->plan); /* it will not run: give back its place in each connection */
    return r != rcollSuccess ? r : rcoll_error(rcollSystemError, "rank %d: out of memory queueing "
                                               "a device call", c->rank);
  }
  rcoll_cuda_unit_add_stream(u, stream, cc->device);
  r = rcoll_cuda_unit_launch(u); /* queued even when it fails: see unit.h */
  rcoll_plan_reset(&c->plan, c);
  return r;
}

rcollResult_t rcoll_cuda_submit(struct rcollComm *c, rcollStream_t stream, int device,
                                const char *fn) {
  rcoll_cuda_comm_t *cc = NULL;
  rcollResult_t r = rcoll_cuda_comm_get(c, device, &cc);
  if (r == rcollSuccess && rcoll_cuda_wait_timed_out(cc)) {
    r = rcoll_error(rcollUnhandledCudaError, "%s: a stream gave up waiting for an earlier device "
                    "call after 4 x RCOLL_TIMEOUT; its results may have been read too early", fn);
    rcoll_comm_set_error(c, r);
  }
  if (cc != NULL && cc->bounce.pending) { /* never in a group (bounce.h) */
    if (r == rcollSuccess)
      return rcoll_cuda_bounce_submit(cc, stream);
    rcoll_plan_discard(&c->plan);
    rcoll_cuda_bounce_cancel(c, stream);
    return r;
  }
  if (r == rcollSuccess && rcoll_group_active()) {
    r = group_keep(c, cc, stream, fn);
    if (r != rcollSuccess)
      rcoll_group_fail(r);
    return r;
  }
  if (r == rcollSuccess)
    return submit_one(c, cc, stream);
  if (rcoll_group_active())
    rcoll_group_fail(r);
  else
    rcoll_plan_discard(&c->plan);
  return r;
}

/* ---- rcollGroupEnd ---- */

static rcollResult_t group_unit(rcoll_plan_t **dev, int ndev) {
  for (int i = 0; i < ndev; i++)
    RCOLL_CHECK(rcoll_cuda_plan_prepare(dev[i]->comm->cuda, dev[i]));
  rcoll_cuda_unit_t *u = rcoll_cuda_unit_create(dev, ndev);
  if (u == NULL)
    return rcoll_error(rcollSystemError, "rcollGroupEnd: out of memory queueing device calls");
  for (int i = 0; i < ndev; i++) {
    rcoll_cuda_comm_t *cc = u->plans[i].comm->cuda;
    for (int s = 0; s < cc->ngroup_streams; s++) {
      rcollResult_t r = rcoll_cuda_unit_add_stream(u, cc->group_streams[s], cc->device);
      if (r != rcollSuccess) {
        rcoll_cuda_unit_discard(u);
        return r;
      }
    }
  }
  return rcoll_cuda_unit_launch(u);
}

int rcoll_cuda_group_divert(rcoll_plan_t **plans, int nplans, rcollResult_t *r) {
  int ndev = 0, nhost = 0;
  for (int i = 0; i < nplans; i++) {
    if (rcoll_cuda_group_has_device(plans[i]->comm))
      ndev++;
    else if (plans[i]->nsteps > 0)
      nhost++;
  }
  if (ndev == 0)
    return 0;
  /* A communicator whose calls all ran as direct kernels at rcollGroupEnd
   * has nothing for the proxy (a unit would cost its round trip). */
  for (int i = 0; i < nplans && nhost == 0; i++)
    if (rcoll_cuda_group_has_device(plans[i]->comm) && plans[i]->nsteps == 0) {
      plans[i]->comm->cuda->group_pending = 0;
      ndev--;
    }
  *r = rcollSuccess;
  if (ndev == 0)
    return 1;
  rcoll_plan_t **dev = calloc((size_t)ndev, sizeof *dev);
  *r = dev == NULL ? rcoll_error(rcollSystemError, "rcollGroupEnd: out of memory")
       : nhost > 0 ? rcoll_error(rcollInvalidUsage, "rcollGroupEnd: the group mixes calls on device "
                                 "buffers with calls on host buffers; run them in separate groups")
                   : rcollSuccess;
  for (int i = 0, k = 0; i < nplans; i++)
    if (rcoll_cuda_group_has_device(plans[i]->comm)) {
      plans[i]->comm->cuda->group_pending = 0;
      if (dev != NULL)
        dev[k++] = plans[i];
    }
  if (*r == rcollSuccess)
    *r = group_unit(dev, ndev);
  if (*r != rcollSuccess) /* nothing runs: undo what was planned (launch failures did already) */
    for (int i = 0; i < nplans; i++)
      rcoll_plan_discard(plans[i]);
  free(dev);
  return 1;
}

rcollResult_t rcoll_cuda_drain_plans(rcoll_plan_t **plans, int nplans) {
  for (int i = 0; i < nplans; i++)
    if (plans[i]->comm->cuda != NULL)
      RCOLL_CHECK(rcoll_cuda_proxy_drain(plans[i]->comm->cuda, plans[i]->comm->timeout_ms));
  return rcollSuccess;
}
