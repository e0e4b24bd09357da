/* Small device calls through pinned host memory (RCOLL_CUDA_BOUNCE).
 *
 * On the proxy path every step of a device plan is GPU work the proxy waits
 * for: a staged send is a copy to the host and an event, a receive-reduce a
 * kernel and an event, an IPC part a copy and a stream synchronization. For
 * a few bytes those round trips are the whole cost of the call, several per
 * step. A call whose largest buffer is at most RCOLL_CUDA_BOUNCE bytes
 * (64 KiB by default) therefore runs as a host call instead:
 *
 *   caller:  copy the input, device to pinned host, on the user's stream;
 *            record the unit's event, make the stream wait for the flag;
 *            copy the output back, pinned host to device, on the stream
 *   proxy:   wait for the event (the input is in host memory then), run the
 *            ordinary host plan on the pinned copies, write the flag
 *
 * Two copies queued by the caller, no kernel, and no CUDA call by the proxy
 * while it runs the plan. Over the network the bytes are the same as
 * staging moves; on one node the host transports (shm) carry them instead
 * of the IPC ring. The plan is made as for a device call (the same
 * algorithm choice and reduction semantics, the fingerprint says "device
 * buffers"): only its buffers and who runs its steps differ.
 *
 * A host plan and a device plan send different messages, so every rank must
 * decide alike: by the call's largest buffer, which matching calls share,
 * and by rank 0's RCOLL_CUDA_BOUNCE, which the ranks exchanged at init.
 * Calls in a group stay device plans (a group is one unit, bounced or not).
 *
 * The pinned memory is a ring of RCOLL_CUDA_BOUNCE_SLOTS slots of twice the
 * limit (input, output), allocated at the first bounced call; a slot is
 * reused once the event recorded after its copy back has fired, which the
 * caller waits for (up to RCOLL_TIMEOUT) when every slot is in flight.
 *
 * With RCOLL_CUDA_BOUNCE_KERNEL=1 the caller queues one small kernel instead
 * of the two copies, the event and the wait (bounce_kernel.h); the proxy
 * polls the slot's word in host memory for the input, not the event. */
#ifndef RCOLL_CUDA_BOUNCE_H
#define RCOLL_CUDA_BOUNCE_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_api.h"
#include "device.h"

#define RCOLL_CUDA_BOUNCE_SLOTS 16

struct rcoll_cuda_comm;

typedef struct rcoll_cuda_bounce {
  char *base;   /* SLOTS x 2 x each bytes, cudaHostAlloc */
  char *base_dev; /* ... as the device sees it (the bounce kernel's pointers) */
  int kernel;   /* RCOLL_CUDA_BOUNCE_KERNEL: the copies and the wait are one kernel */
  size_t each;  /* the agreed limit, rounded up to 256 bytes */
  rcoll_cuda_event_t ev[RCOLL_CUDA_BOUNCE_SLOTS]; /* after the slot's last copy on a stream */
  uint8_t recorded[RCOLL_CUDA_BOUNCE_SLOTS];
  unsigned next;
  /* The call between bounce_begin and its submit (or cancel). */
  int pending;
  int slot;
  const void *send; /* the user's buffers (the bounce kernel copies them) */
  size_t send_bytes;
  void *user_recv;
  size_t recv_bytes;
} rcoll_cuda_bounce_t;

/* The device ops (device.h). */
int rcoll_cuda_bounce_begin(struct rcollComm *c, rcoll_bounce_call_t *b, rcollStream_t stream,
                            int device, rcollResult_t *r);
void rcoll_cuda_bounce_cancel(struct rcollComm *c, rcollStream_t stream);
/* rcoll_cuda_submit's part for a call bounce_begin took: queues the plan as
 * a host unit, then the copy back. */
rcollResult_t rcoll_cuda_bounce_submit(struct rcoll_cuda_comm *cc, rcollStream_t stream);
/* With the comm: waits (up to its timeout) for copies still queued on user
 * streams, then frees the slots. Call with the device current. */
void rcoll_cuda_bounce_free(struct rcoll_cuda_comm *cc);

#endif
