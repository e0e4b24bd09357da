/* The core's one door to device (CUDA) buffers: a table of the calls that
 * lib/coll.c, lib/engine.c, lib/comm.c and lib/memtype.c make when buffers
 * may be device memory. lib/cuda/device_ops.c fills it.
 *
 * Why a table declared here, and not the core including lib/cuda headers:
 * lib/cuda is built on top of the core. It plans and validates through
 * comm.h, runs device plans with the ordinary engine, and reads the
 * communicator's connections and settings, so it must include core headers.
 * The core in turn must call device code at a few points (a device call is
 * queued for the proxy instead of run; the engine hands a device plan's steps
 * over; finalize and destroy wait for and free the device state). If the core
 * included lib/cuda's headers for those, each side would include the other
 * and neither could be read, built or replaced alone. So the dependency is
 * turned round at these points: the core says here what it needs, lib/cuda
 * provides it, and no file of the core includes anything under lib/cuda/
 * (tests/check_layers.sh fails the build's checks when one does).
 *
 * The one instance is found by the linker, not registered at run time: a
 * registration call would have to come from the core (the same dependency
 * again), and a constructor in lib/cuda would be left out by programs that
 * take the core from librcoll.a. For the same reason the table has no size
 * field: it is never loaded apart from the core that reads it.
 *
 * Every slot is safe on a machine without CUDA: with no device there are no
 * device buffers, so the queries answer "host" and the rest do nothing.
 * The slots that take a communicator answer as for host calls (0, nothing
 * to divert or wait for) while its `cuda` is NULL, which lib/cuda sets at
 * the comm's first device call; the engine relies on that to skip them on
 * the host path. */
#ifndef RCOLL_DEVICE_H
#define RCOLL_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "memtype.h"
#include "plan.h"
#include "rcoll.h"

struct rcollComm;

/* The buffers of a device call that may bounce through host memory
 * (bounce_begin). */
typedef struct rcoll_bounce_call {
  size_t bytes;            /* the call's largest buffer: the same on every rank */
  const void *send;        /* the input this rank reads, or NULL */
  size_t send_bytes;
  void *recv;              /* the output this rank writes, or NULL */
  size_t recv_bytes;
  void *host_send, *host_recv; /* set by bounce_begin: what to plan with */
} rcoll_bounce_call_t;

/* A send or receive on device buffers, for direct_p2p. */
typedef struct rcoll_p2p_op {
  void *buf;
  size_t bytes;
  int peer;
  int send;
  rcollStream_t stream;
} rcoll_p2p_op_t;

typedef struct rcoll_device_ops {
  /* ---- for lib/memtype.c ---- */

  /* Where ptr lives: RCOLL_MEM_HOST for host memory, pinned host memory and
   * pointers CUDA does not know; RCOLL_MEM_CUDA with the device for device
   * and managed memory. A device buffer that runs past the end of its
   * allocation is an error. */
  rcollResult_t (*mem_query)(const void *ptr, size_t bytes, rcoll_mem_info_t *out);
  /* 1 when comm has device calls in the calling thread's open group (a host
   * call may not join them). */
  int (*group_has_device)(const struct rcollComm *c);

  /* ---- for lib/coll.c ---- */

  /* After a call whose buffers are on `device` was validated and planned into
   * comm->plan: queues it on `stream` and returns (inside a group: keeps it
   * for rcollGroupEnd). On failure the plan is discarded. */
  rcollResult_t (*submit)(struct rcollComm *c, rcollStream_t stream, int device, const char *fn);
  /* Before planning a call (coll, as lib/algo.h) on device buffers (in a
   * group, at rcollGroupEnd: group.h): 1 when the device path runs it
   * without a plan (one kernel on `stream`, every rank of one node;
   * lib/cuda/direct.h), with *r its result; 0 when the call goes on to be
   * planned and submitted. */
  int (*direct)(struct rcollComm *c, int coll, const void *in, void *out, size_t count,
                rcollDataType_t t, rcollRedOp_t op, int root, rcollStream_t stream, int device,
                rcollResult_t *r);
  /* The same for a rank's sends and receives of one call or group (ops in
   * the order made; lib/cuda/direct.h): 1 when taken, with *r. */
  int (*direct_p2p)(struct rcollComm *c, const rcoll_p2p_op_t *ops, int nops, int device, rcollResult_t *r);
  /* Before planning a call on device buffers outside a group: 1 when it is
   * small enough to run as a host call (lib/cuda/bounce.h). Its input is
   * then being copied into b->host_send on `stream`; the caller plans with
   * b->host_send and b->host_recv and submits as usual, which copies
   * b->host_recv back to b->recv on the stream. *r is set when it failed. */
  int (*bounce_begin)(struct rcollComm *c, rcoll_bounce_call_t *b, rcollStream_t stream, int device,
                      rcollResult_t *r);
  /* A call bounce_begin took that will not be submitted (planning failed). */
  void (*bounce_cancel)(struct rcollComm *c, rcollStream_t stream);

  /* ---- for lib/engine.c ---- */

  /* rcollGroupEnd's plans: when they hold device calls, submits them as one
   * unit, sets *r and returns 1; returns 0 for host plans. */
  int (*group_divert)(rcoll_plan_t **plans, int nplans, rcollResult_t *r);
  /* Before host plans run: waits (up to the timeout) for device work queued
   * on their communicators, which uses the same connections. */
  rcollResult_t (*drain_plans)(rcoll_plan_t **plans, int nplans);
  /* 1 while the comm's proxy runs a device plan: the engine then hands each
   * step to step_post and step_test, and idles with idle. */
  int (*executing)(const struct rcollComm *c);
  int (*step_post)(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err);
  int (*step_test)(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err);
  void (*idle)(int64_t idle_us, int64_t spin_us);

  /* ---- for lib/memalloc.c and lib/comm.c ---- */

  /* rcollMemAlloc: bytes of device memory on the calling thread's current
   * CUDA device (cudaMalloc). Leaves *ptr NULL, and succeeds, when this
   * machine has no CUDA device: the caller then hands out host memory. */
  rcollResult_t (*mem_alloc)(void **ptr, size_t bytes);
  /* rcollMemFree of a pointer mem_alloc returned. */
  rcollResult_t (*mem_free)(void *ptr);
  /* The calling thread's current CUDA device (cudaGetDevice), or -1 when this
   * machine has no CUDA device. */
  int (*current_device)(void);
  /* Makes `device` the calling thread's current device (cudaSetDevice);
   * rcollSuccess without doing anything when there is no CUDA device. */
  rcollResult_t (*set_device)(int device);

  /* ---- for lib/comm.c ---- */

  /* The device the comm's device state is bound to (its first device call),
   * or -1 while it has moved host buffers only. */
  int (*comm_device)(const struct rcollComm *c);
  /* Waits for queued device work (finalize); returns the first failure. */
  rcollResult_t (*comm_drain)(struct rcollComm *c);
  /* Stops the proxy (after draining, unless the comm was aborted: then every
   * held stream is released at once) and frees the device resources. */
  void (*comm_destroy)(struct rcollComm *c);
} rcoll_device_ops_t;

/* The device path this library is built with (lib/cuda/device_ops.c). */
extern const rcoll_device_ops_t rcoll_device_ops;

#endif
