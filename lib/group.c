/* Group calls (group.h). The state is per thread, as in NCCL. */
#include "group.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

#include "call.h"
#include "log.h"

static _Thread_local int group_depth;
static _Thread_local rcollResult_t group_error;
static _Thread_local struct rcollComm **group_comms;
static _Thread_local rcoll_plan_t **group_plans;
static _Thread_local int group_n, group_cap;

/* The lists grow once per thread and are kept across groups; a key
 * destructor frees them when the thread exits. */
static pthread_key_t group_key;
static pthread_once_t group_key_once = PTHREAD_ONCE_INIT;

static void group_thread_exit(void *unused) {
  (void)unused;
  free(group_comms);
  free(group_plans);
  group_comms = NULL;
  group_plans = NULL;
  group_cap = group_n = 0;
}

static void group_key_create(void) { pthread_key_create(&group_key, group_thread_exit); }

int rcoll_group_active(void) { return group_depth > 0; }

void rcoll_group_fail(rcollResult_t r) {
  if (group_error == rcollSuccess)
    group_error = r;
}

rcollResult_t rcoll_group_add(struct rcollComm *comm) {
  if (comm->in_group)
    return rcollSuccess;
  if (group_n == group_cap) {
    pthread_once(&group_key_once, group_key_create);
    pthread_setspecific(group_key, &group_cap); /* any non-NULL value arms the destructor */
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
  group_depth = 0;
  rcollResult_t r = group_error;
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
  if (--group_depth > 0)
    return rcollSuccess;
  rcollResult_t r = group_error;
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
