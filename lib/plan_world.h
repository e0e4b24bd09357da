/* Worlds of fake communicators: n ranks in one process, with no network,
 * each with what planners read (rank, size, chunk, staging slots, scratch
 * ring, topology), so that every rank's real plan of a call can be built
 * and then run by the in-memory simulator (plan_sim.h), timed by the
 * replay (plan_replay.h) or printed (bench/rcoll_sched). The planners are
 * the algorithms' own: nothing here copies one. */
#ifndef RCOLL_PLAN_WORLD_H
#define RCOLL_PLAN_WORLD_H

#include <stddef.h>

#include "algo.h"
#include "plan_sim.h"
#include "rcoll.h"

#define RCOLL_WORLD_MAX_RANKS RCOLL_SIM_MAX_RANKS

typedef struct rcoll_world {
  int n;
  struct rcollComm *comms[RCOLL_WORLD_MAX_RANKS];
  rcoll_plan_t *plans[RCOLL_WORLD_MAX_RANKS]; /* &comms[r]->plan */
  /* The call as each rank planned it: args[r].sendbuff is its input and
   * args[r].recvbuff its result, in place or not. */
  rcoll_coll_args_t args[RCOLL_WORLD_MAX_RANKS];
  void *send[RCOLL_WORLD_MAX_RANKS], *recv[RCOLL_WORLD_MAX_RANKS]; /* the buffers allocated */
  size_t send_bytes, recv_bytes;                                    /* their sizes */
} rcoll_world_t;

/* n communicators (1..RCOLL_WORLD_MAX_RANKS), rank r on node node_of[r]
 * (NULL: all on one node); staging slots and scratch pieces of comm_chunk
 * bytes, nslots slots per connection; plans cut chunks of plan_chunk. */
rcollResult_t rcoll_world_init(rcoll_world_t *w, int n, const int *node_of, size_t comm_chunk,
                               size_t plan_chunk, int nslots);
void rcoll_world_free(rcoll_world_t *w);

/* A call to plan on every rank. */
typedef struct rcoll_world_call {
  const rcoll_algorithm_t *algo; /* its collective is the call's */
  size_t count;                  /* as in rcoll_coll_args_t */
  rcollDataType_t dtype;
  rcollRedOp_t op;
  int root;    /* broadcast and reduce */
  int inplace; /* ignored for send */
} rcoll_world_call_t;

/* Allocates every rank's buffers (zeroed, one element spare) and plans the
 * call on it, once per world (messages are numbered from the first). A send is planned with its family's receive: every rank sends
 * to the next and receives from the previous. Fails naming what is wrong
 * (a send without a receive, an allocation, a planner that failed). */
rcollResult_t rcoll_world_plan(rcoll_world_t *w, const rcoll_world_call_t *call);

/* Elements in each rank's send and receive buffers for a call of count. */
size_t rcoll_world_send_elems(int coll, size_t count, int n);
size_t rcoll_world_recv_elems(int coll, size_t count, int n);

/* What rank r's plan sends and receives (bytes) and reduces (elements). */
void rcoll_world_totals(const rcoll_world_t *w, int r, rcoll_traffic_t *out);
/* The same by the algorithm's formula (for send: the send's plus the
 * receive's); -1 when the algorithm declares none. */
int rcoll_world_formula(const rcoll_world_t *w, const rcoll_algorithm_t *algo, int r,
                        rcoll_traffic_t *out);

#endif
