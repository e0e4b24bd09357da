/* A call that repeats the previous one reuses its plan.
 *
 * Trainers and benchmarks call the same small collective again and again
 * (a loss scalar, a norm, a flag), and for a few bytes the planning costs
 * more than the exchange: choosing the algorithm, planning, adding the
 * fingerprint messages (fingerprint.c) and checking the connections took
 * about 2,500 of the 4,200 instructions of an 8-byte all-reduce on 2 ranks.
 * So after planning a call outside a group, the communicator keeps a copy
 * of its steps; a next call with the same collective, buffers, count, type,
 * op and root restores that copy instead.
 *
 * What differs from one such call to the next is only what numbers it: the
 * collective's number in its fingerprint, and each step's position among
 * its connection's messages, which moves by the number of messages the call
 * has on that connection (no other call ran on the communicator in between:
 * any other call plans afresh and drops the copy). The fingerprints stay in
 * the slots they were planned in (call.c), which nothing else takes while
 * the copy is kept. Validation of the arguments, the flight recorder and the
 * trace see every call as before. */
#ifndef RCOLL_PLAN_CACHE_H
#define RCOLL_PLAN_CACHE_H

#include "algo.h"
#include "rcoll.h"

struct rcollComm;

/* Whether the call (validated, not in a group, host buffers) repeats the
 * kept plan; when it does, the plan now holds that call, numbered, with
 * its call record and flight-recorder entry, ready for the engine. */
int rcoll_plan_cache_hit(struct rcollComm *c, rcoll_coll_kind_t kind, const rcoll_coll_args_t *a);
/* A call is being planned afresh: the kept plan is no longer valid (its
 * fingerprint slots are about to be reused). */
void rcoll_plan_cache_drop(struct rcollComm *c);
/* Keeps the plan of the call just planned and recorded (call.h) when it is
 * one that can repeat: a collective with a built-in op, alone in the plan. */
void rcoll_plan_cache_save(struct rcollComm *c, rcoll_coll_kind_t kind, const rcoll_coll_args_t *a,
                           rcollRedOp_t user_op);
void rcoll_plan_cache_free(struct rcollComm *c);

#endif
