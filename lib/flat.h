/* The flat board: tiny all-reduces between the ranks of one machine,
 * without plans, messages or the engine.
 *
 * When every peer of a communicator is reached over shared memory, its
 * ranks map one segment at creation. Each rank owns a control area (two
 * cache lines) and two slots there. An all-reduce of at most RCOLL_FLAT_MAX bytes copies the
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
 * Whether a call meets there is the tuner's choice: the board is the
 * all-reduce algorithm "flat" (algorithms/allreduce_flat.c), which
 * RCOLL_ALGO can force or exclude. Calls it takes outside a group run here
 * directly; in a group (or with a PreMulSum op) the same call is one plan
 * step (RCOLL_STEP_BOARD) on the same slots. There is no board under
 * RCOLL_TRACE (traces show plans) or RCOLL_FLAT_MAX=0, nor for device
 * buffers. Ranks agree at creation whether there is one, and its size. */
#ifndef RCOLL_FLAT_H
#define RCOLL_FLAT_H

#include <stdint.h>

#include "algo.h"
#include "call.h"
#include "plan.h"
#include "tuner.h"
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

/* How this rank's board calls waited, counted since creation and logged
 * at destroy (RCOLL_DEBUG=INFO, subsystem INIT). A pass is a round of a
 * wait that found a peer missing. Where ranks share cores, each pass
 * yields to a peer, and few calls need 8 or more (under 2 % with 4 ranks
 * on 2 cores); a rank whose calls mostly do spins alone on a core while
 * its peers queue on another (docs/execution.md, "More ranks than cores"). */
typedef struct rcoll_flat_stats {
  uint64_t calls;  /* board calls this rank ran outside the engine */
  uint64_t passes; /* rounds of their waits that found a peer missing */
  uint64_t long_waits; /* calls whose wait took FLAT_CLOCK_EVERY (8) passes or more */
  uint64_t sleeps; /* futex sleeps in those waits */
  uint64_t moves;  /* times rcoll_flat_balance moved this rank to a less crowded core */
} rcoll_flat_stats_t;
rcoll_flat_stats_t rcoll_flat_stats(const struct rcollComm *c);

/* Where the communicator's ranks outnumber the machine's cores (c->balance):
 * called where a call starts, publishes the core this rank runs on, and
 * every FLAT_BALANCE_EVERY calls moves it to a core with 2 or more ranks
 * fewer than its own when it is the one to go (home_core.h:
 * rcoll_home_core_rebalance). */
void rcoll_flat_balance(struct rcollComm *c);

/* The algorithm "flat" as the tuner returns it (tuner.h: desc). */
const rcoll_algorithm_t *rcoll_flat_algorithm(const struct rcollComm *c);
/* Whether an all-reduce with these arguments (checked, host buffers, not
 * in a group) runs on the board without a plan: the tuner chose the
 * board for its size (algorithms/allreduce_flat.c; *ch is its choice),
 * and its op needs no scaled copy (PreMulSum, fp8 avg: those are planned,
 * and still meet on the board). */
int rcoll_flat_takes(struct rcollComm *c, const rcoll_coll_args_t *a, size_t bytes, rcoll_tune_choice_t *ch);

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
/* RCOLL_TIMEOUT passed in a board step: the error, naming the peer it
 * waits for; `where` says which call (engine.c: step_where). */
rcollResult_t rcoll_flat_step_timeout(struct rcollComm *c, const rcoll_step_t *st, int64_t waited_ms,
                                      const char *where);

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
/* The engine (or connection setup) has waited long on plan p: fails when
 * a peer sits on the board in a call p numbers otherwise (the peers made
 * different calls), or, for p's own board steps, when a peer left, died or
 * made another call. */
rcollResult_t rcoll_flat_check(struct rcollComm *c, const rcoll_plan_t *p);
/* The same for each plan whose communicator has a board: what the engine
 * and connection setup call every RCOLL_FLAT_CHECK_MS of a long wait. */
rcollResult_t rcoll_flat_check_plans(rcoll_plan_t *const *plans, int nplans);

#endif
