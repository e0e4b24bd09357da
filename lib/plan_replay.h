/* Replays every rank's plan of one call as a schedule in time, under the
 * tuner's alpha-beta figures (tune_cost.h), so that a schedule's time can
 * be set next to the tuner's own closed-form prediction (bench/rcoll_sched).
 *
 * What it models: a step starts once its dependencies are done; sends on a
 * connection leave in plan order; each message costs its sender the
 * engine's per-message overhead (rcoll_cost_msg_us), one message after the
 * other on the rank's core; a direction of a connection carries one message
 * at a time at the link's bandwidth, and the message lands alpha later
 * (latencies of messages in flight overlap); messages leaving a node share
 * its inter-node bandwidth (they queue on one port per node); reductions and
 * copies run on the rank's core at RCOLL_TUNE_REDUCE_BW. Links are the
 * tuner's: rcoll_cost_link of the two ranks' placement.
 *
 * What it ignores: staging slots (senders never wait for the receiver: the
 * tuner's window term is absent), the receiving side's bandwidth (a rank
 * takes messages from several peers at full speed each), the engine's
 * window of steps, shared cores, and reductions done on arrival (shm).
 *
 * With no model it replays in unit steps instead: every step (but a join)
 * takes one column on its rank's lane, after everything it waits for; a
 * receive comes after its send. The columns are the schedule's steps in
 * dependency order, which bench/rcoll_sched draws. */
#ifndef RCOLL_PLAN_REPLAY_H
#define RCOLL_PLAN_REPLAY_H

#include "plan.h"
#include "plan_sim.h"
#include "tuner.h"

typedef struct rcoll_replay {
  int n;
  int base[RCOLL_SIM_MAX_RANKS + 1]; /* step i of rank r is number base[r] + i */
  double *start, *end;               /* per step: us (or columns, in unit steps) */
  double rank_end[RCOLL_SIM_MAX_RANKS];
  double total; /* when the last rank is done */
  char error[200];
} rcoll_replay_t;

/* Replays n plans (they must match: every send has its receive). model
 * NULL: unit steps. Returns 0, or -1 with rp->error saying why (plans that
 * do not match, or memory). rcoll_replay_free releases rp either way. */
int rcoll_replay_run(rcoll_replay_t *rp, rcoll_plan_t *const *plans, int n, const rcoll_tuner_t *model);
void rcoll_replay_free(rcoll_replay_t *rp);

/* Whether a step is a join (rcoll_plan_join): it moves nothing and takes
 * no time; drawings and tables show it as such. */
int rcoll_step_is_join(const rcoll_step_t *st);

#endif
