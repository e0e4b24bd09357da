/* An in-memory executor for plans (tests/test_plans.c, bench/rcoll_sched):
 * every rank's plan runs against real buffers, with each connection a FIFO
 * of messages, and the engine's rules reproduced: a step starts when its
 * dependencies are done; sends and receives are posted in the order planned
 * per connection; a receive-reduce holds one of nslots staging slots of its
 * connection from posting to completion; only the first RCOLL_SIM_WINDOW
 * unfinished steps of a plan are looked at (lib/engine.c's ENGINE_WINDOW).
 *
 * With zero buffering a send finishes only when the receiver takes it (a
 * rendezvous), which is the strictest transport a plan must survive: if no
 * rank can move while steps remain, the plans deadlock. Ranks are visited in
 * a shuffled order and steps are skipped at random, so that different runs
 * see different interleavings. */
#ifndef RCOLL_PLAN_SIM_H
#define RCOLL_PLAN_SIM_H

#include <stdint.h>

#include "plan.h"

#define RCOLL_SIM_WINDOW 512 /* as ENGINE_WINDOW in lib/engine.c */
#define RCOLL_SIM_MAX_RANKS 16
#define RCOLL_SIM_BOARD 64 /* board steps per rank a run may post */

struct rcoll_sim_msg;

typedef struct rcoll_sim {
  int n;
  int zero_buffer;
  int nslots;
  unsigned seed;
  rcoll_plan_t *plans[RCOLL_SIM_MAX_RANKS];
  /* [from][to]: messages sent and not yet received */
  struct rcoll_sim_msg *head[RCOLL_SIM_MAX_RANKS][RCOLL_SIM_MAX_RANKS];
  struct rcoll_sim_msg *tail[RCOLL_SIM_MAX_RANKS][RCOLL_SIM_MAX_RANKS];
  uint64_t send_posted[RCOLL_SIM_MAX_RANKS][RCOLL_SIM_MAX_RANKS];
  uint64_t recv_posted[RCOLL_SIM_MAX_RANKS][RCOLL_SIM_MAX_RANKS];
  uint64_t recv_done[RCOLL_SIM_MAX_RANKS][RCOLL_SIM_MAX_RANKS];
  int slots_used[RCOLL_SIM_MAX_RANKS][RCOLL_SIM_MAX_RANKS];
  /* The flat board (RCOLL_STEP_BOARD): each rank's board steps in the
   * order posted, with a copy of the vector it wrote; the k-th of every
   * rank meet, as calls of one number do on the real board. */
  struct {
    rcoll_step_t *step;
    void *vec;
  } board[RCOLL_SIM_MAX_RANKS][RCOLL_SIM_BOARD];
  int board_posted[RCOLL_SIM_MAX_RANKS], board_done[RCOLL_SIM_MAX_RANKS];
  char error[256];
} rcoll_sim_t;

/* Prepares s (large: keep it off the stack) to run n plans. */
void rcoll_sim_init(rcoll_sim_t *s, rcoll_plan_t *const *plans, int n, int zero_buffer, int nslots,
                    unsigned seed);
/* Runs the plans to completion, skipping skip_pct percent of the steps it
 * could move at each look. Returns 0, or -1 with s->error set (a size
 * mismatch, or a deadlock: no rank can move while steps remain). */
int rcoll_sim_run(rcoll_sim_t *s, unsigned skip_pct);

#endif
