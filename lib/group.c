/* Group calls (group.h). The state is per thread, as in NCCL. */
#include "group.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

#include "call.h"
#include "device.h"
#include "log.h"

static _Thread_local int group_depth;
static _Thread_local rcollResult_t group_error;
static _Thread_local struct rcollComm **group_comms;
static _Thread_local rcoll_plan_t **group_plans;
static _Thread_local int group_n, group_cap;
static _Thread_local rcoll_held_t *group_held;
static _Thread_local int held_n, held_cap;

/* The lists grow once per thread and are kept across groups; a key
 * destructor frees them when the thread exits. */
static pthread_key_t group_key;
static pthread_once_t group_key_once = PTHREAD_ONCE_INIT;

static void group_thread_exit(void *unused) {
  (void)unused;
  free(group_comms);
  free(group_plans);
  free(group_held);
  group_comms = NULL;
  group_plans = NULL;
  group_held = NULL;
  group_cap = group_n = 0;
  held_cap = held_n = 0;
}

static void group_key_create(void) { pthread_key_create(&group_key, group_thread_exit); }

static void group_key_arm(void) {
  pthread_once(&group_key_once, group_key_create);
  pthread_setspecific(group_key, &group_cap); /* any non-NULL value arms the destructor */
}

int rcoll_group_active(void) { return group_depth > 0; }

void rcoll_group_fail(rcollResult_t r) {
  if (group_error == rcollSuccess)
    group_error = r;
}

rcollResult_t rcoll_group_add(struct rcollComm *comm) {
  if (comm->in_group)
    return rcollSuccess;
  if (group_n == group_cap) {
    group_key_arm();
    int cap = group_cap ? 2 * group_cap : 16;
    struct rcollComm **c = realloc(group_comms, (size_t)cap * sizeof *c);
    if (c != NULL)
      group_comms = c;
    rcoll_plan_t **p = realloc(group_plans, (size_t)cap * sizeof *p);
    if (p != NULL)
      group_plans = p;
    if (c == NULL || p == NULL)
      return rcoll_error(rcollSystemError, "group: out of memory");
    group_cap = cap;
  }
  comm->in_group = 1;
  group_comms[group_n++] = comm;
  return rcollSuccess;
}

rcollResult_t rcoll_group_hold(const rcoll_held_t *h) {
  if (held_n == held_cap) {
    group_key_arm();
    int cap = held_cap ? 2 * held_cap : 16;
    rcoll_held_t *p = realloc(group_held, (size_t)cap * sizeof *p);
    if (p == NULL)
      return rcoll_error(rcollSystemError, "group: out of memory");
    group_held = p;
    held_cap = cap;
  }
  group_held[held_n++] = *h;
  return rcollSuccess;
}

/* The held calls, in the order they were made. A direct kernel only when
 * they are all on one communicator: each may wait on the host for its
 * peers (the direct path's set-up, an in-place call's meeting, the last
 * kernel of another stream), and a thread holding calls for two
 * communicators (two ranks of one rcollCommInitAll, say) could wait there
 * for a peer that waits for this thread's other communicator. Those calls
 * are planned, as all of a group's calls were before. */
static rcollResult_t group_release(int planned_only) {
  int one = 1;
  for (int i = 1; i < held_n; i++)
    one &= group_held[i].comm == group_held[0].comm;
  /* A group that mixes host and device calls is refused at its end
   * (lib/cuda/submit.c), before anything runs: no kernel before that. */
  for (int i = 0; i < group_n; i++)
    one &= rcoll_device_ops.group_has_device(group_comms[i]);
  rcollResult_t r = rcollSuccess;
  if (!one || planned_only) {
    for (int i = 0; i < held_n && r == rcollSuccess; i++)
      r = rcoll_coll_release(&group_held[i], 0);
    held_n = 0;
    return r;
  }
  /* Each collective a kernel, in the order made; then the sends and
   * receives, all in one kernel (a group's may wait for each other). The
   * list keeps the collectives' places: the sends move to its end. */
  int np = 0;
  for (int i = 0; i < held_n && r == rcollSuccess; i++) {
    if (group_held[i].p2p)
      group_held[np++] = group_held[i]; /* np <= i: nothing not yet read is overwritten */
    else
      r = rcoll_coll_release(&group_held[i], 1);
  }
  if (r == rcollSuccess && np > 0)
    r = rcoll_coll_release_p2p(group_held, np);
  held_n = 0;
  return r;
}

RCOLL_API rcollResult_t rcollGroupStart(void) {
  if (group_depth == 0)
    group_error = rcollSuccess;
  group_depth++;
  return rcollSuccess;
}

static void group_clear(void) {
  for (int i = 0; i < group_n; i++)
    group_comms[i]->in_group = 0;
  group_n = 0;
  held_n = 0;
  group_error = rcollSuccess;
}

/* Ends the group as rcollGroupEnd would, but runs nothing: every plan is
 * discarded. The estimate is the tuner's: each communicator's calls run one
 * after another, so their predicted times add up (coll.c keeps the sum in
 * its plan); different communicators of the group run at once, so the group
 * takes as long as its slowest communicator. A send or receive is priced as
 * one message (algorithms/sendrecv.c), and several on one communicator add
 * up like its other calls, although a real group overlaps them. */
RCOLL_API rcollResult_t rcollGroupSimulateEnd(rcollSimInfo_t *simInfo) {
  static const char fn[] = "rcollGroupSimulateEnd";
  if (simInfo == NULL)
    return rcoll_error(rcollInvalidArgument, "%s: simInfo is NULL", fn);
  if (simInfo->magic != RCOLL_SIM_INFO_MAGIC || simInfo->size < offsetof(rcollSimInfo_t, estimatedTime) +
                                                                    sizeof simInfo->estimatedTime)
    return rcoll_error(rcollInvalidArgument, "%s: simInfo was not set up with RCOLL_SIM_INFO_INITIALIZER", fn);
  if (group_depth == 0)
    return rcoll_error(rcollInvalidUsage, "%s: no matching rcollGroupStart", fn);
  if (group_depth > 1)
    return rcoll_error(rcollInvalidUsage, "%s: only the outermost group can be simulated (%d groups are "
                       "open)", fn, group_depth);
  /* Held calls are planned for their estimate (the proxy's, not a kernel's). */
  rcollResult_t r = group_error == rcollSuccess ? group_release(1) : group_error;
  group_depth = 0;
  double worst = 0;
  for (int i = 0; i < group_n; i++) {
    rcoll_plan_t *p = &group_comms[i]->plan;
    if (p->predicted_us > worst)
      worst = p->predicted_us;
    rcoll_calls_discard(group_comms[i]); /* nothing ran: the numbers go to the next calls */
    rcoll_plan_discard(p);
  }
  group_clear();
  if (r == rcollSuccess)
    simInfo->estimatedTime = (float)worst;
  return r;
}

RCOLL_API rcollResult_t rcollGroupEnd(void) {
  if (group_depth == 0)
    return rcoll_error(rcollInvalidUsage, "rcollGroupEnd: no matching rcollGroupStart");
  if (group_depth > 1) {
    group_depth--;
    return rcollSuccess;
  }
  /* Held calls run or are planned while the group is still open. */
  rcollResult_t r = group_error == rcollSuccess ? group_release(0) : group_error;
  group_depth = 0;
  if (r != rcollSuccess) {
    /* A call in the group was refused: run none of them, as NCCL does. */
    for (int i = 0; i < group_n; i++) {
      rcoll_calls_discard(group_comms[i]); /* their numbers go to the next calls */
      rcoll_plan_discard(&group_comms[i]->plan);
    }
    group_clear();
    return r;
  }
  for (int i = 0; i < group_n; i++)
    group_plans[i] = &group_comms[i]->plan;
  if (group_n > 0)
    r = rcoll_engine_run(group_plans, group_n);
  for (int i = 0; i < group_n; i++)
    rcoll_plan_reset(&group_comms[i]->plan, group_comms[i]);
  group_clear();
  return r;
}
