/* The device path of a communicator: what the core calls when buffers are
 * CUDA device memory, through the device ops table (lib/device.h, filled in
 * device_ops.c), and the state behind it. docs/gpu.md explains the design;
 * in short:
 *
 * - A call with device buffers is validated and planned in the calling thread
 *   exactly like a host call. The plan is then handed over: the call records
 *   an event on the user's stream, makes the stream wait for a flag, queues
 *   the plan for the communicator's proxy thread and returns.
 * - The proxy waits for the event (work queued before the call is done), runs
 *   the plan with the ordinary engine, whose per-step work for device plans
 *   comes here (dev_step.c), then writes the flag, which lets the stream go.
 * - Every function below is safe in a build or on a machine without CUDA:
 *   with no device there are no device buffers, so none of it runs. */
#ifndef RCOLL_CUDA_COMM_H
#define RCOLL_CUDA_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "comm.h"
#include "cuda/bounce.h"
#include "cuda/cuda_api.h"
#include "cuda/direct.h"
#include "cuda/ipc.h"
#include "memtype.h"

#define RCOLL_CUDA_MAX_STREAMS 16 /* distinct streams in one group */

/* How this rank moves device data to and from one peer (per connection,
 * decided once, logged once). */
enum rcoll_cuda_mode {
  RCOLL_CUDA_MODE_NONE = 0, /* not decided yet */
  RCOLL_CUDA_MODE_STAGE,    /* through pinned host slots (socket, shm, ucx, ib without GDR) */
  RCOLL_CUDA_MODE_GDR,      /* the transport reads and writes device memory itself */
  RCOLL_CUDA_MODE_IPC,      /* same node: CUDA IPC ring in the sender's device memory */
  RCOLL_CUDA_MODE_LOCAL,    /* a step's only: a local copy on the proxy stream (dev_step.c) */
};

/* Local copies of device plans in flight at once, each ending in an event. */
#define RCOLL_CUDA_COPY_EVENTS 4

enum rcoll_cuda_wait_mode { RCOLL_CUDA_WAIT_MEMOP = 0, RCOLL_CUDA_WAIT_KERNEL };

#define RCOLL_CUDA_MAX_RETIRED 16

typedef struct rcoll_cuda_retired {
  char *buf;
  void *mh;
} rcoll_cuda_retired_t;

/* Pinned host slots of one direction of one peer (STAGE and GDR modes).
 * Each slot has an event, recorded on the proxy stream after the copy into
 * or out of it: the proxy polls it instead of synchronizing the stream, so
 * it keeps the network busy while the GPU copies (stage.c). */
typedef struct rcoll_cuda_slots {
  char *base;             /* nslots x chunk_bytes, cudaHostAlloc(mapped) */
  void *mh;               /* the transport's registration of base */
  unsigned next;
  uint8_t busy[RCOLL_MAX_SLOTS];
  rcoll_cuda_event_t ev[RCOLL_MAX_SLOTS];
  char *big;              /* for messages larger than a slot (point-to-point) */
  size_t big_bytes;
  void *big_mh;
  int big_busy;
  rcoll_cuda_event_t big_ev;
  /* Sends (STAGE): the connection's number of the next message whose copy
   * into a slot may be queued. Copies run ahead of the wire, in order, so
   * the next one queues behind the last instead of waiting for the proxy
   * to see it end and send it (stage.c). */
  uint64_t copy_turn;
  /* Sends: one past the number of the last data message (not a host
   * fingerprint) taken into a unit, as units take plans in call order:
   * each step's copy_after (proxy.c). */
  uint64_t data_taken;
  rcoll_cuda_retired_t retired[RCOLL_CUDA_MAX_RETIRED]; /* outgrown big buffers */
  int nretired;
} rcoll_cuda_slots_t;

typedef struct rcoll_cuda_peer {
  int mode;
  rcoll_cuda_slots_t send, recv;
  rcoll_ipc_tx_t tx; /* IPC: our ring towards this peer */
  rcoll_ipc_rx_t rx; /* IPC: the peer's ring, mapped here */
} rcoll_cuda_peer_t;

/* Per-step state of a device plan, beside the plan's own steps. */
typedef struct rcoll_cuda_stepx {
  int mode;        /* the peer's mode when the step was posted */
  int slot;        /* staging slot, -1 none, -2 the big buffer; LOCAL: its copy_ev */
  char *buf;       /* ... its memory when taken (a big buffer may be replaced later) */
  int staged;      /* STAGE: the copy into (send) or out of (receive) the slot is
                      1 queued, 2 done */
  uint32_t part;   /* IPC: parts of the message issued on the proxy stream */
  uint64_t first;  /* IPC: the connection's number for its first part (ipc.h) */
  uint64_t copy_after; /* STAGE sends: one past the number of the data message
                          before this one on the connection; its copy queues first */
  void *mh;        /* GDR: registration of the user buffer for this step */
} rcoll_cuda_stepx_t;

struct rcoll_cuda_unit; /* proxy.c */

typedef struct rcoll_cuda_pooled_event {
  rcoll_cuda_event_t event;
  int device;
} rcoll_cuda_pooled_event_t;

typedef struct rcoll_cuda_comm {
  struct rcollComm *comm;
  int device;
  int wait_mode;        /* enum rcoll_cuda_wait_mode */
  int gdr_level;        /* RCOLL_NET_GDR_LEVEL: 0 never ... 5 always when the transport can */
  int p2p_disable;      /* RCOLL_P2P_DISABLE: no CUDA IPC */
  rcoll_cuda_stream_t stream; /* the proxy's own (non-blocking) stream */
  /* ... and a second one for the copies of staged sends into host slots
   * alone: a GPU has a copy engine each way, and on one stream a send's
   * copy down waited behind the copies up of the receives queued before
   * it. Ordering between the two is the host's: a step is posted once the
   * steps it depends on have run (their events fired), whichever stream. */
  rcoll_cuda_stream_t down;
  /* Mapped pinned words: flag is the seq of the last unit this comm owned
   * that finished; wait_timed_out is set by the wait kernel. */
  _Atomic uint32_t *flag;
  rcoll_cu_deviceptr_t flag_dev, timed_out_dev;
  /* The direct all-reduce (direct.h), and the mapped words its kernels
   * report a wait that gave up in (the peer, the phase, both calls). */
  rcoll_cuda_direct_t direct;
  uint32_t *direct_failed;
  uint64_t *direct_sigs;
  rcoll_cu_deviceptr_t direct_failed_dev, direct_sigs_dev;
  rcoll_cuda_bounce_t bounce; /* small calls through pinned host memory (bounce.h) */
  _Atomic uint32_t *bounce_ready; /* mapped, per bounce slot: the bounce kernel's seq (bounce_kernel.h) */
  rcoll_cu_deviceptr_t bounce_ready_dev;
  uint32_t next_seq;    /* last seq given to a unit owned by this comm */
  char *dev_scratch;    /* device twin of comm->scratch (nscratch x chunk_bytes) */
  rcoll_cuda_peer_t *peers;
  /* Local copies (dev_step.c): events made in the calling thread at the
   * first plan that copies, polled by the proxy instead of a stream sync. */
  rcoll_cuda_event_t copy_ev[RCOLL_CUDA_COPY_EVENTS];
  uint8_t copy_busy[RCOLL_CUDA_COPY_EVENTS];
  /* The proxy thread and its queue (proxy.c). */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct rcoll_cuda_node *head, *tail;
  int queued;
  int stop;
  int thread_started;
  pthread_t thread;
  _Atomic int executing;          /* the proxy runs one of our plans now */
  struct rcoll_cuda_unit *run_unit; /* ... this one */
  rcoll_step_t *spare_steps;      /* a steps array kept for the next call */
  int spare_cap;
  rcoll_cuda_pooled_event_t *events; /* recorded by finished units, for reuse */
  int nevents, events_cap;
  /* Where the proxy's time went, logged when the comm goes (RCOLL_DEBUG=INFO,
   * subsystem P2P); written by the proxy thread only, but bounced (calls
   * bounce.c ran as host plans) by the calling thread. The GPU runs showed
   * the one-GPU path far below the copy bandwidth: this says why. */
  struct rcoll_cuda_prof {
    int64_t units, syncs, local_copies, staged_copies, ipc_parts_sent, ipc_parts_recv, bounced;
    int64_t queue_us, event_wait_us, run_us, sync_us;
    /* The proxy's CUDA calls while it runs steps (stage.c): work issued
     * (copies, kernels, event records) and event queries, how many found
     * the work done. On a GPU each is a driver call of microseconds; the
     * parts of a large call are many, so these can be the call's time. */
    int64_t issued, issue_ns, queries, queries_ran, query_ns;
  } prof;
  /* Device calls of an open group (kept until rcollGroupEnd). */
  int group_pending;
  int ngroup_streams;
  rcoll_cuda_stream_t group_streams[RCOLL_CUDA_MAX_STREAMS];
} rcoll_cuda_comm_t;

/* ---- the device ops (lib/device.h says what each does) ---- */

rcollResult_t rcoll_cuda_mem_query(const void *ptr, size_t bytes, rcoll_mem_info_t *out);
/* mem_alloc.c: rcollMemAlloc/rcollMemFree's device memory and the current device. */
rcollResult_t rcoll_cuda_mem_alloc(void **ptr, size_t bytes);
rcollResult_t rcoll_cuda_mem_free(void *ptr);
int rcoll_cuda_current_device(void);
rcollResult_t rcoll_cuda_set_device(int device);
int rcoll_cuda_group_has_device(const struct rcollComm *c);
rcollResult_t rcoll_cuda_submit(struct rcollComm *c, rcollStream_t stream, int device,
                                const char *fn);
int rcoll_cuda_group_divert(rcoll_plan_t **plans, int nplans, rcollResult_t *r);
rcollResult_t rcoll_cuda_drain_plans(rcoll_plan_t **plans, int nplans);
int rcoll_cuda_executing(const struct rcollComm *c);
int rcoll_cuda_step_post(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err);
int rcoll_cuda_step_test(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err);
void rcoll_cuda_idle(int64_t idle_us, int64_t spin_us);
rcollResult_t rcoll_cuda_comm_drain(struct rcollComm *c);
void rcoll_cuda_comm_destroy(struct rcollComm *c);

/* ---- inside lib/cuda ---- */

/* The comm's device state, made on its first device call (in the calling
 * thread, before any stream waits on us: allocations that might synchronize
 * the device must never happen while a stream waits for the proxy). */
rcollResult_t rcoll_cuda_comm_get(struct rcollComm *c, int device, rcoll_cuda_comm_t **out);
/* A zeroed control block of `bytes` (at most 128) in pinned mapped memory
 * that is never freed (ctrl_pool.c says why); returns a CUDA error code. */
int rcoll_cuda_ctrl_alloc(void **out, size_t bytes);
/* Decides each peer's mode and allocates what a plan's steps will need. */
rcollResult_t rcoll_cuda_plan_prepare(rcoll_cuda_comm_t *cc, rcoll_plan_t *p);
/* The step extension of a plan of the unit being run. */
rcoll_cuda_stepx_t *rcoll_cuda_stepx(const rcoll_plan_t *p, const rcoll_step_t *st);
/* Makes `device` current in the calling thread; restores the old one. */
int rcoll_cuda_device_enter(int device, int *saved);
void rcoll_cuda_device_leave(int saved);
/* 1 when a wait kernel gave up on this comm's flag (a collective outlasted
 * 4 x RCOLL_TIMEOUT, so later work on that stream may have run too early). */
int rcoll_cuda_wait_timed_out(const rcoll_cuda_comm_t *cc);
/* An event of `device` for a unit (the pool's, else a new one: call in the
 * user's thread) and its return when the unit is done (no CUDA call: safe in
 * the proxy while user streams wait). event_pool.c says why. */
int rcoll_cuda_event_take(rcoll_cuda_comm_t *cc, int device, rcoll_cuda_event_t *out);
void rcoll_cuda_event_give(rcoll_cuda_comm_t *cc, int device, rcoll_cuda_event_t e);
void rcoll_cuda_event_pool_free(rcoll_cuda_comm_t *cc);
/* Waits for the work queued on the proxy stream. */
rcollResult_t rcoll_cuda_sync(rcoll_cuda_comm_t *cc, const char *what);

#endif
