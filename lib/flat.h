/* The flat board: tiny all-reduces between the ranks of one machine,
 * without plans, messages or the engine.
 *
 * When every peer of a communicator is reached over shared memory, its
 * ranks map one segment at creation. Each rank owns a control line and two
 * slots there. An all-reduce of at most RCOLL_FLAT_MAX bytes copies the
 * rank's vector into its slot for this call (data, call number and
 * description in one cache line for up to 40 bytes), then reads every
 * other rank's slot once it carries the same call number, and sums them
 * all in rank order 0..n-1. So a call waits once, whatever the rank count
 * (recursive doubling waits log2 n times, the star twice), every rank
 * computes the same bits (the deterministic promise holds), and no rank
 * ever waits for a reader: slots alternate by call number, and a rank that
 * wrote call k has read every slot of calls before k. docs/execution.md
 * ("The flat board") has the measurements and the proofs of both claims.
 *
 * The board is off under RCOLL_ALGO (the user chose the algorithms),
 * RCOLL_TRACE (traces show plans) and RCOLL_FLAT_MAX=0, and for groups,
 * device buffers, PreMulSum ops and fp8 averages. Ranks agree at creation
 * whether it is on, and its size. */
#ifndef RCOLL_FLAT_H
#define RCOLL_FLAT_H

#include <stdint.h>

#include "algo.h"
#include "call.h"
#include "plan.h"
#include "rcoll.h"

struct rcollComm;
struct rcoll_flat;

/* Collective over the bootstrap, at creation: maps the board when every
 * rank can (c->flat stays NULL otherwise, which is not an error). */
rcollResult_t rcoll_flat_open(struct rcollComm *c);
/* Tells the peers this rank has left, and unmaps. */
void rcoll_flat_close(struct rcollComm *c);

/* Bytes of the largest all-reduce the board takes on this communicator; 0
 * when it has none. */
size_t rcoll_flat_max(const struct rcollComm *c);
/* Runs an all-reduce on the board (the caller checked the arguments and
 * rcoll_flat_max); numbers it and records it like any call. */
rcollResult_t rcoll_flat_allreduce(struct rcollComm *c, const rcoll_coll_args_t *a, rcollRedOp_t user_op);

/* Whether an all-reduce with these arguments (checked, host buffers) runs
 * on the board: the same answer on every rank that makes the same call,
 * in a group or not. */
static inline int rcoll_flat_takes(const struct rcollComm *c, const rcoll_coll_args_t *a, size_t bytes) {
  return bytes <= rcoll_flat_max(c) && (int)a->op < (int)rcollNumOps &&
         !(a->op == rcollAvg && (a->dtype == rcollFloat8e4m3 || a->dtype == rcollFloat8e5m2));
}

/* In a group the same call is one plan step (RCOLL_STEP_BOARD) that the
 * engine runs beside the group's other steps: post writes this rank's
 * vector (0 while the slot is still being read), test reduces once every
 * rank's is there. */
int rcoll_flat_step_post(struct rcollComm *c, const rcoll_step_t *st);
int rcoll_flat_step_test(struct rcollComm *c, const rcoll_step_t *st, rcollResult_t *err);
/* While the engine waits for connections, a group's board steps are posted
 * already: a peer that makes the same calls one by one may wait on the
 * board for one of them before it accepts those connections. */
void rcoll_flat_post_early(rcoll_plan_t *p);
/* For the engine's long waits: the peer the step waits for, and an error
 * when a peer has left, died or made another call. */
int rcoll_flat_step_waits_for(const struct rcollComm *c, const rcoll_step_t *st);
rcollResult_t rcoll_flat_step_stalled(struct rcollComm *c, const rcoll_step_t *st);

/* A wait that lasts RCOLL_FLAT_CHECK_AFTER_MS (the engine's, or connection
 * setup's) asks the board every RCOLL_FLAT_CHECK_MS whether a peer made
 * another call; a board wait looks for peers that left every
 * RCOLL_FLAT_CHECK_MS. */
#define RCOLL_FLAT_CHECK_AFTER_MS 100
#define RCOLL_FLAT_CHECK_MS 10

/* A collective that the engine runs was numbered: publishes it, so that a
 * peer waiting on the board for the same number learns at once that this
 * rank made another call. */
void rcoll_flat_note(struct rcollComm *c, const rcoll_fp_t *fp);
/* The engine has waited long: fails when a peer sits on the board in a call
 * this rank's plan numbers otherwise (the peers made different calls). */
rcollResult_t rcoll_flat_check(struct rcollComm *c);

#endif
