/* A unit of device work: the plans of one call, or of every device call of a
 * group (which launch as one unit, as NCCL groups do), with the user streams
 * they are ordered on. A unit sits in the queue of each of its
 * communicators; the proxy of its first communicator (the owner) runs all its
 * plans in one engine loop once the other communicators' proxies have reached
 * it, so that a group over several communicators of one process (InitAll)
 * progresses together, and every queue keeps its order.
 *
 * This file is host-only bookkeeping: the CUDA calls it makes go through the
 * function table, which the unit tests replace with host fakes. */
#ifndef RCOLL_CUDA_UNIT_H
#define RCOLL_CUDA_UNIT_H

#include "call.h"
#include "cuda/bounce_kernel.h"
#include "cuda/cuda_comm.h"

typedef struct rcoll_cuda_node {
  struct rcoll_cuda_unit *unit;
  struct rcoll_cuda_node *next;
} rcoll_cuda_node_t;

typedef struct rcoll_cuda_fp_copy {
  rcoll_fp_slot_t mine, theirs;
} rcoll_cuda_fp_copy_t;

typedef struct rcoll_cuda_unit {
  int nplans;
  rcoll_plan_t *plans;        /* copies of the planned calls; their steps moved in */
  rcoll_plan_t **plan_ptrs;   /* &plans[i], as the engine takes them */
  rcoll_cuda_stepx_t **x;     /* per plan, one per step */
  /* Per plan, one per fingerprint step: the unit's own copies of what the
   * step sends and receives, since the comm's fingerprint slots go to the
   * next call as soon as this one is queued (call.h). */
  rcoll_cuda_fp_copy_t **fp;
  rcoll_cuda_node_t *nodes;   /* per plan: the unit's place in that comm's queue */
  rcoll_cuda_comm_t *owner;
  uint32_t seq;               /* the owner's flag value once the unit is done */
  int64_t queued_us;          /* when it was queued (the proxy's accounts) */
  rcollResult_t preset;       /* a failure at submit: the unit only releases its streams */
  int host;                   /* its plans run on pinned host copies (bounce.h) */
  /* ... and the stream runs the bounce kernel (bounce_kernel.h), not an
   * event and a wait: its parameter (seq, flag and timeout filled at
   * launch), and the slot's word it says the input is there in. */
  int bounce_kernel;
  rcoll_bounce_kargs_t bk;
  const _Atomic uint32_t *ready;
  int nstreams;
  rcoll_cuda_stream_t streams[RCOLL_CUDA_MAX_STREAMS];
  rcoll_cuda_event_t events[RCOLL_CUDA_MAX_STREAMS];
  int devices[RCOLL_CUDA_MAX_STREAMS];
  /* Under the proxies' lock (proxy.c). */
  int arrived; /* non-owner proxies that reached the unit */
  int done;
  int refs;    /* queues still holding the unit */
  rcollResult_t result;
} rcoll_cuda_unit_t;

/* Moves the steps of `plans` (comms with device state) into a new unit; the
 * plans are left empty, ready for rcoll_plan_reset. NULL when out of memory
 * (the plans are then untouched). */
rcoll_cuda_unit_t *rcoll_cuda_unit_create(rcoll_plan_t **plans, int nplans);
/* Adds a stream (once) that the unit is ordered on, with its device. */
rcollResult_t rcoll_cuda_unit_add_stream(rcoll_cuda_unit_t *u, rcoll_cuda_stream_t s, int device);
/* Records the streams' events, makes the streams wait for the owner's flag,
 * and queues the unit on every comm's proxy. Errors are returned after the
 * unit was still queued as release-only (streams never wait forever). */
rcollResult_t rcoll_cuda_unit_launch(rcoll_cuda_unit_t *u);
/* Frees a unit that was never launched; its steps go back to the plans. */
void rcoll_cuda_unit_discard(rcoll_cuda_unit_t *u);

/* Starts the comm's proxy thread; stops it (wakes and joins it within
 * timeout_ms; 0 when it did not stop, and the comm must then be leaked). */
rcollResult_t rcoll_cuda_proxy_start(rcoll_cuda_comm_t *cc);
int rcoll_cuda_proxy_stop(rcoll_cuda_comm_t *cc, int64_t timeout_ms);
/* Waits until the comm's queue is empty (up to timeout_ms). */
rcollResult_t rcoll_cuda_proxy_drain(rcoll_cuda_comm_t *cc, int64_t timeout_ms);

/* How a stream is held until a unit is done: the driver's stream wait on the
 * flag, or the wait kernel where that is missing or refused (cuda_comm.c). */
rcollResult_t rcoll_cuda_stream_hold(rcoll_cuda_comm_t *owner, rcoll_cuda_stream_t s, uint32_t seq);
/* The legacy default stream (NULL or cudaStreamLegacy), on which a call
 * returns only once it has finished (proxy.c says why). */
int rcoll_cuda_stream_is_legacy(rcoll_cuda_stream_t s);
/* Lets every stream waiting for seq (or earlier) go. */
void rcoll_cuda_stream_release(rcoll_cuda_comm_t *owner, uint32_t seq);

#endif
