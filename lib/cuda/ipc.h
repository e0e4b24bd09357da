/* Device data between ranks of one node through CUDA IPC.
 *
 * Each connection (sender -> receiver) gets a ring of nslots slots of
 * chunk_bytes in the sender's device memory, exported once with
 * cudaIpcGetMemHandle, and a control page of POSIX shared memory. A message
 * is cut into parts of at most a slot: the sender copies a part into the next
 * slot (device to device) and publishes `filled`; the receiver copies it out
 * (or reduces straight from the slot, which the kernel reads through the IPC
 * mapping) and publishes `consumed`, which frees the slot. Nothing travels
 * over the transport but one hello per connection (the ring's handle and the
 * control page's name), sent the first time a device plan uses it.
 *
 * Why a ring owned by the comm rather than the user's buffers: mapping each
 * user buffer in every peer would keep freed allocations alive in the peers
 * and cost an open per new buffer; the ring is mapped once and its memory is
 * bounded. Ranks sharing one GPU (several processes, or threads) work the
 * same way; within one process the ring's pointer is used directly, because
 * a process cannot open its own IPC handle. */
#ifndef RCOLL_CUDA_IPC_H
#define RCOLL_CUDA_IPC_H

#include <stdatomic.h>
#include <stdint.h>

#include "comm.h"
#include "cuda/cuda_api.h"

/* "rcollip2": the hello carries ns_key since version 2; a version-1 hello
 * (magic "rcollipc", no key) is refused as not a hello. */
#define RCOLL_IPC_MAGIC 0x3270696c6c6f6372ull
#define RCOLL_IPC_PATH_MAX 320

/* The control page, shared by the two processes of a connection. */
typedef struct rcoll_ipc_ctrl {
  _Alignas(64) _Atomic uint64_t filled;   /* parts the sender has written */
  _Alignas(64) _Atomic uint64_t consumed; /* parts the receiver is done with */
  _Alignas(64) uint64_t part_bytes[RCOLL_MAX_SLOTS];
  uint64_t msg_bytes[RCOLL_MAX_SLOTS];    /* size of the message a part belongs to */
} rcoll_ipc_ctrl_t;

typedef struct rcoll_ipc_hello {
  uint64_t magic;
  int64_t pid;
  uint64_t ns_key; /* rcoll_pid_ns_key() of the sender (lib/pidns.h): whose pid numbers `pid` is in */
  int32_t device;
  int32_t nslots;
  uint64_t slot_bytes;
  uint64_t ring_addr; /* used as is by a receiver in the same process */
  rcoll_cuda_ipc_handle_t handle;
  char path[RCOLL_IPC_PATH_MAX];
} rcoll_ipc_hello_t;

/* A hello as received (got bytes): NULL when its magic, ring shape and the
 * control page's path (terminated, a file name of rcoll's pattern) check
 * out, else what is wrong. */
const char *rcoll_ipc_hello_check(const rcoll_ipc_hello_t *h, size_t got);

/* 1 when the hello comes from this very process, whose ring pointer is then
 * used as is (a process cannot open its own IPC handle); 0 when the ring
 * must be opened through its handle. A pid alone does not say it: a peer in
 * another pid namespace (another container on this machine) or on another
 * boot (RCOLL_HOSTID can make two machines one node) may have our pid
 * number. Same process only when the pid and its namespace key are ours,
 * and the key is known (not 0). */
int rcoll_ipc_same_process(const rcoll_ipc_hello_t *h);

enum rcoll_ipc_state { RCOLL_IPC_NONE = 0, RCOLL_IPC_HELLO, RCOLL_IPC_READY };

/* Parts of one direction of a connection between being issued on the
 * proxy stream and being published (filled, or consumed), numbered from the
 * connection's first. Each part ends in its own event, so a part is
 * published as soon as its copy (or reduction) has run, and the peer works
 * on it while the next ones still copy: with one event per batch the two
 * sides took turns (the sender filled the ring, then the receiver emptied
 * it). One stream runs them, so the events fire in order. A message lets
 * the connection's next one start once all its parts are issued, not
 * published (ipc.c): the next message's copies queue behind its own, and
 * the GPU does not wait for the proxy to notice each end. */
typedef struct rcoll_ipc_flight {
  uint64_t next_part; /* parts published */
  uint32_t inflight;  /* parts after those, issued; part next_part + i ends in ev[(next_part + i) % nev] */
  uint32_t nev;
  rcoll_cuda_event_t ev[RCOLL_MAX_SLOTS]; /* made in the calling thread (event_pool.c says why) */
} rcoll_ipc_flight_t;

typedef struct rcoll_ipc_tx {
  int state;
  char *ring;
  rcoll_ipc_ctrl_t *ctrl;
  void *req;
  rcoll_ipc_flight_t f; /* parts copied into the ring; nev = the ring's slots */
  rcoll_ipc_hello_t hello;
} rcoll_ipc_tx_t;

typedef struct rcoll_ipc_rx {
  int state;
  int opened; /* ring came from cudaIpcOpenMemHandle */
  char *ring;
  rcoll_ipc_ctrl_t *ctrl;
  void *req;
  rcoll_ipc_flight_t f; /* parts copied out or reduced; nev = our RCOLL_NSLOTS */
  rcoll_ipc_hello_t hello;
} rcoll_ipc_rx_t;

struct rcoll_cuda_comm;

/* The ring and control page towards `peer`, and the events of both
 * directions (in the calling thread, with the comm's device current). */
rcollResult_t rcoll_ipc_tx_alloc(struct rcoll_cuda_comm *cc, int peer);
rcollResult_t rcoll_ipc_rx_alloc(struct rcoll_cuda_comm *cc, int peer);
/* Waits (up to timeout_ms) until the receiver has read every part sent. */
void rcoll_ipc_tx_drain(rcoll_ipc_tx_t *tx, int64_t timeout_ms);
void rcoll_ipc_tx_free(rcoll_ipc_tx_t *tx);
void rcoll_ipc_rx_free(rcoll_ipc_rx_t *rx);

/* Executors for steps whose peer is reached through IPC (dev_step.c). */
int rcoll_ipc_post(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err);
int rcoll_ipc_test(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err);

#endif
