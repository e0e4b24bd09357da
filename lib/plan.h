/* A plan is what an algorithm produces: a list of steps over connections to
 * peers, with dependencies. Algorithms describe *what* moves; the engine
 * (engine.c) executes the steps.
 *
 * Rules the engine relies on:
 * - Steps that use the same connection (same peer and direction) are posted in
 *   the order they were added; messages match in that order on both sides.
 * - A step starts only after the steps it depends on are done.
 * - RECV_REDUCE receives into a staging slot of the receiving connection,
 *   then computes dst = src (op) staged. The number of slots bounds how many
 *   such receives one connection has in flight. A transport with
 *   irecv_reduce (shm) reduces on arrival instead, with no slot.
 * - A step marked RCOLL_STEP_FINISH applies rcoll_reduce_finish (avg: divide
 *   by nranks) to its result; used on the last reduction of each element. */
#ifndef RCOLL_PLAN_H
#define RCOLL_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "rcoll.h"

struct rcoll_topo;  /* topo.h */
struct rcoll_tuner; /* tuner.h */

typedef enum rcoll_step_kind {
  RCOLL_STEP_SEND = 0,        /* send bytes at src to peer */
  RCOLL_STEP_RECV,            /* receive bytes from peer into dst */
  RCOLL_STEP_RECV_REDUCE,     /* receive count elements, dst = src (op) received */
  RCOLL_STEP_COPY,            /* local copy of bytes from src to dst */
  RCOLL_STEP_NKINDS
} rcoll_step_kind_t;

/* RCOLL_STEP_FP: a call's fingerprint message (call.h), sent or received
 * ahead of the call's data on that connection. RCOLL_STEP_INLINE: a small
 * first message of a call that travels inside its fingerprint message
 * (fingerprint.c); RCOLL_STEP_MAYBE_INLINE: a small first receive that may
 * (the sender decides: its first send must depend on nothing).
 * RCOLL_STEP_SINGLE_COPY: a send of an exchange, whose peer sends to us at
 * the same time, so both ends are busy copying: the transport should let the
 * receiver copy it straight from src where it can (isend_single in net.h)
 * rather than copy it at both ends. RCOLL_STEP_COPY_OUT: a copy into memory
 * the call does not read again (the user's receive buffer), which a large
 * copy writes past the cache (copy_out.h). */
enum rcoll_step_flags {
  RCOLL_STEP_FINISH = 1,
  RCOLL_STEP_FP = 2,
  RCOLL_STEP_INLINE = 4,
  RCOLL_STEP_MAYBE_INLINE = 8,
  RCOLL_STEP_SINGLE_COPY = 16,
  RCOLL_STEP_COPY_OUT = 32,
  RCOLL_STEP_BOARD = 64, /* a COPY that is a whole all-reduce on the flat board (flat.h); seq: its call */
};

enum rcoll_step_state { RCOLL_STEP_PENDING = 0, RCOLL_STEP_POSTED, RCOLL_STEP_DONE };

#define RCOLL_NO_DEP (-1)

typedef struct rcoll_step {
  uint8_t kind;
  uint8_t state;
  uint8_t flags;
  uint8_t dtype; /* rcollDataType_t, for RECV_REDUCE */
  uint8_t op;    /* rcollRedOp_t, for RECV_REDUCE */
  int peer;
  int dep[2];    /* indices of earlier steps of the same plan, or RCOLL_NO_DEP */
  void *dst;
  const void *src;
  size_t bytes;  /* bytes moved (RECV_REDUCE: count * type size) */
  uint64_t seq;  /* position among this connection's messages (engine checks) */
  /* Engine bookkeeping. */
  void *request;
  int slot;
  /* A receive that may complete only once this earlier step is done (the
   * call's fingerprint from the same peer, which must be checked before its
   * data is used), or RCOLL_NO_DEP. Unlike dep, it does not delay posting. */
  int gate;
} rcoll_step_t;

typedef struct rcoll_plan {
  struct rcollComm *comm;
  rcoll_step_t *steps;
  int nsteps;
  int cap;
  int head;     /* first step not yet done (engine) */
  int failed;   /* an allocation failed while planning */
  size_t chunk_bytes; /* pipeline chunk chosen for this plan */
  size_t p2p_part_bytes; /* a point-to-point message's largest part, 0: whole (sendrecv.c) */
  int scratch_pieces; /* pieces in the communicator's scratch ring */
  const char *algo;   /* name of the last algorithm planned, for logs */
  double predicted_us; /* the tuner's time for the calls planned since the reset (rcollGroupSimulateEnd) */
  int connected;      /* a kept plan (plan_cache.h) whose connections were made when it first ran */
  void *tmp;          /* planner scratch (rcoll_plan_tmp), kept across calls */
  size_t tmp_bytes;
  /* The communicator's nodes and local ranks, for topology-aware algorithms
   * (which see this rather than the whole communicator). */
  const struct rcoll_topo *topo;
  /* The tuner's per-communicator state (tuner.c), made when the
   * communicator is created (comm.c) and freed with the plan. */
  struct rcoll_tuner *tuner;
} rcoll_plan_t;

void rcoll_plan_reset(rcoll_plan_t *p, struct rcollComm *comm);
void rcoll_plan_free(rcoll_plan_t *p);

/* Each returns the index of the new step (for use as a dependency), or
 * RCOLL_NO_DEP after an allocation failure (the plan is then marked failed
 * and the engine refuses to run it). Dependencies may be RCOLL_NO_DEP. */
int rcoll_plan_send(rcoll_plan_t *p, int peer, const void *src, size_t bytes, int dep0, int dep1);
int rcoll_plan_recv(rcoll_plan_t *p, int peer, void *dst, size_t bytes, int dep0, int dep1);
/* A send marked RCOLL_STEP_SINGLE_COPY: one half of an exchange. */
int rcoll_plan_send_single(rcoll_plan_t *p, int peer, const void *src, size_t bytes, int dep0, int dep1);
int rcoll_plan_recv_reduce(rcoll_plan_t *p, int peer, void *dst, const void *src, size_t count,
                           rcollDataType_t t, rcollRedOp_t op, int flags, int dep0, int dep1);
int rcoll_plan_copy(rcoll_plan_t *p, void *dst, const void *src, size_t bytes, int dep0, int dep1);
/* A whole all-reduce on the communicator's flat board (lib/flat.h): a COPY
 * step marked RCOLL_STEP_BOARD, after this plan's previous board step (a
 * rank's board calls end in order). The engine numbers it with its call. */
int rcoll_plan_board(rcoll_plan_t *p, void *dst, const void *src, size_t count, rcollDataType_t t,
                     rcollRedOp_t op);
/* A copy marked RCOLL_STEP_COPY_OUT: nothing in the call reads dst again. */
int rcoll_plan_copy_out(rcoll_plan_t *p, void *dst, const void *src, size_t bytes, int dep0, int dep1);
/* A local reduction finish (avg divide) on dst, after dep. Implemented as a
 * COPY of zero bytes carrying RCOLL_STEP_FINISH. */
int rcoll_plan_finish(rcoll_plan_t *p, void *dst, size_t count, rcollDataType_t t, rcollRedOp_t op,
                      int dep0);

/* A step that does nothing but wait for dep0 and dep1: a join, for an
 * algorithm whose next phase depends on more than two earlier steps. */
int rcoll_plan_join(rcoll_plan_t *p, int dep0, int dep1);

/* Scratch for intermediate results that have no home in the user's buffers
 * (reduce-scatter and reduce pass partial sums along a ring or chain). The
 * communicator owns a ring of chunk-sized scratch pieces; a piece is handed
 * out again only after the step that last read it is done, so a plan that
 * takes a piece must make its writer depend on *dep (RCOLL_NO_DEP when the
 * piece is free) and then name the step that reads it with set_reader. The
 * reuse dependency always points to an earlier message, which keeps the
 * schedule deadlock-free even on transports without buffering. */
void *rcoll_plan_scratch_get(rcoll_plan_t *p, int *dep);
void rcoll_plan_scratch_set_reader(rcoll_plan_t *p, const void *piece, int step);

/* Zeroed planner bookkeeping (per-chunk step indices and the like) of at
 * least `bytes`, owned by the plan and valid until the next call; NULL after
 * an allocation failure (the plan is then marked failed). */
void *rcoll_plan_tmp(rcoll_plan_t *p, size_t bytes);

/* Opens a gap of n steps at index `at` (later steps move up by n, and every
 * dependency, gate and scratch reader that points at a moved step follows
 * it); the gap's steps are zeroed with no dependencies. The core puts a
 * call's fingerprint messages there (call.h). Returns 0, or -1 after an
 * allocation failure (the plan is then marked failed). */
int rcoll_plan_insert(rcoll_plan_t *p, int at, int n);

/* Undoes the connection sequence numbers a plan reserved without running it
 * (a group that failed validation), then resets it. */
void rcoll_plan_discard(rcoll_plan_t *p);

/* Splits [0, total) into ranges of at most `chunk` bytes aligned to the
 * element size; used by every pipelined algorithm. Returns the number of
 * chunks (0 when total is 0). */
size_t rcoll_chunk_count(size_t total, size_t chunk);

/* Writes a human-readable listing of the plan (for teaching and debugging). */
void rcoll_plan_print(const rcoll_plan_t *p, void *file /* FILE* */);

#endif
