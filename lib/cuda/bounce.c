/* Small device calls as host calls on pinned copies (bounce.h says why). */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cuda/bounce.h"
#include "cuda/cuda_comm.h"
#include "cuda/unit.h"
#include "log.h"

static char *slot_in(const rcoll_cuda_bounce_t *b, int i) { return b->base + (size_t)i * 2 * b->each; }
static char *slot_out(const rcoll_cuda_bounce_t *b, int i) { return slot_in(b, i) + b->each; }

/* In the calling thread, before any stream of this call waits for us. */
static rcollResult_t bounce_alloc(rcoll_cuda_comm_t *cc) {
  rcoll_cuda_bounce_t *b = &cc->bounce;
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  size_t each = (cc->comm->cuda_bounce + 255) & ~(size_t)255;
  void *base = NULL;
  int r = a->host_alloc(&base, RCOLL_CUDA_BOUNCE_SLOTS * 2 * each,
                        RCOLL_CUDA_HOST_ALLOC_PORTABLE | RCOLL_CUDA_HOST_ALLOC_MAPPED);
  void *dev = NULL;
  if (r == 0)
    r = a->host_get_device_pointer(&dev, base, 0);
  for (int i = 0; r == 0 && i < RCOLL_CUDA_BOUNCE_SLOTS; i++)
    r = a->event_create_with_flags(&b->ev[i], RCOLL_CUDA_EVENT_DISABLE_TIMING);
  if (r == 0) {
    b->base = base;
    b->base_dev = dev;
    b->each = each;
    b->kernel = cc->comm->settings.cuda_bounce_kernel != 0;
    return rcollSuccess;
  }
  for (int i = 0; i < RCOLL_CUDA_BOUNCE_SLOTS; i++) /* nothing half made: the next call tries again */
    if (b->ev[i] != NULL)
      a->event_destroy(b->ev[i]);
  if (base != NULL)
    a->free_host(base);
  memset(b, 0, sizeof *b);
  return rcoll_error(rcollUnhandledCudaError, "rank %d: allocating %d pinned slots of 2 x %zu bytes "
                     "for small device calls (RCOLL_CUDA_BOUNCE) failed: %s", cc->comm->rank,
                     RCOLL_CUDA_BOUNCE_SLOTS, each, rcoll_cuda_strerror(r));
}

/* Waits until slot i's last copy ran (it may sit behind a call still
 * running on its stream). */
static rcollResult_t slot_wait(rcoll_cuda_comm_t *cc, int i) {
  rcoll_cuda_bounce_t *b = &cc->bounce;
  if (!b->recorded[i])
    return rcollSuccess;
  int64_t start = rcoll_now_us();
  for (int polls = 0;; polls++) {
    int r = rcoll_cuda_api()->event_query(b->ev[i]);
    if (r == 0)
      break;
    if (r != RCOLL_CUDA_ERROR_NOT_READY)
      return rcoll_error(rcollUnhandledCudaError, "rank %d: the stream of an earlier small device "
                         "call failed: %s", cc->comm->rank, rcoll_cuda_strerror(r));
    if (rcoll_now_us() - start > cc->comm->timeout_ms * 1000)
      return rcoll_error(rcollTimeout, "rank %d: the small device call %d calls before this one "
                         "(RCOLL_CUDA_BOUNCE) did not finish within %lld ms (RCOLL_TIMEOUT): is "
                         "a peer not calling, or its stream held up?", cc->comm->rank,
                         RCOLL_CUDA_BOUNCE_SLOTS, (long long)cc->comm->timeout_ms);
    struct timespec ts = {0, 20000};
    if (polls < 64)
      sched_yield();
    else
      nanosleep(&ts, NULL);
  }
  b->recorded[i] = 0;
  return rcollSuccess;
}

/* The slot's event goes after its last copy on `stream`. */
static void slot_record(rcoll_cuda_comm_t *cc, rcollStream_t stream) {
  rcoll_cuda_bounce_t *b = &cc->bounce;
  b->recorded[b->slot] = rcoll_cuda_api()->event_record(b->ev[b->slot], stream) == 0;
  b->pending = 0;
}

static rcollResult_t bounce_in(rcoll_cuda_comm_t *cc, rcoll_bounce_call_t *call, rcollStream_t stream) {
  rcoll_cuda_bounce_t *b = &cc->bounce;
  if (b->base == NULL)
    RCOLL_CHECK(bounce_alloc(cc));
  int i = (int)(b->next % RCOLL_CUDA_BOUNCE_SLOTS);
  RCOLL_CHECK(slot_wait(cc, i));
  b->next++;
  call->host_send = slot_in(b, i);
  call->host_recv = slot_out(b, i);
  b->send = call->send;
  b->send_bytes = call->send_bytes;
  if (call->send != NULL && !b->kernel) { /* else the kernel copies it (bounce_submit) */
    int r = rcoll_cuda_api()->memcpy_async(call->host_send, call->send, call->send_bytes,
                                           RCOLL_CUDA_MEMCPY_DEFAULT, stream);
    if (r != 0)
      return rcoll_error(rcollUnhandledCudaError, "rank %d: copying a small device call's %zu-byte "
                         "input to host memory failed: %s", cc->comm->rank, call->send_bytes,
                         rcoll_cuda_strerror(r));
  }
  b->pending = 1;
  b->slot = i;
  b->user_recv = call->recv;
  b->recv_bytes = call->recv_bytes;
  return rcollSuccess;
}

int rcoll_cuda_bounce_begin(struct rcollComm *c, rcoll_bounce_call_t *call, rcollStream_t stream,
                            int device, rcollResult_t *r) {
  if (call->bytes > c->cuda_bounce)
    return 0;
  rcoll_cuda_comm_t *cc = NULL;
  *r = rcoll_cuda_comm_get(c, device, &cc);
  if (*r != rcollSuccess)
    return 0;
  int saved = -1;
  *r = rcoll_cuda_device_enter(device, &saved) == 0
           ? bounce_in(cc, call, stream)
           : rcoll_error(rcollUnhandledCudaError, "rank %d: cannot select device %d", c->rank, device);
  rcoll_cuda_device_leave(saved);
  return *r == rcollSuccess;
}

void rcoll_cuda_bounce_cancel(struct rcollComm *c, rcollStream_t stream) {
  int saved = -1;
  rcoll_cuda_device_enter(c->cuda->device, &saved);
  slot_record(c->cuda, stream); /* its input copy may still be queued */
  rcoll_cuda_device_leave(saved);
}

/* The kernel's copies: the slot's ends as the device sees them; the flag,
 * seq and timeout are filled at launch (proxy.c). */
static void bounce_kernel_args(rcoll_cuda_comm_t *cc, rcoll_cuda_unit_t *u) {
  const rcoll_cuda_bounce_t *b = &cc->bounce;
  size_t in = (size_t)(slot_in(b, b->slot) - b->base), out = (size_t)(slot_out(b, b->slot) - b->base);
  u->bounce_kernel = 1;
  u->bk = (rcoll_bounce_kargs_t){.in = b->send, .in_host = b->base_dev + in, .in_bytes = b->send_bytes,
                                 .out_host = b->base_dev + out, .out = b->user_recv,
                                 .out_bytes = b->recv_bytes,
                                 .ready = (uint32_t *)(uintptr_t)(cc->bounce_ready_dev +
                                                                  (size_t)b->slot * sizeof(uint32_t))};
  u->ready = &cc->bounce_ready[b->slot];
}

rcollResult_t rcoll_cuda_bounce_submit(rcoll_cuda_comm_t *cc, rcollStream_t stream) {
  struct rcollComm *c = cc->comm;
  rcoll_cuda_bounce_t *b = &cc->bounce;
  rcollResult_t r = rcollSuccess;
  rcoll_plan_t *plans[1] = {&c->plan};
  rcoll_cuda_unit_t *u = rcoll_cuda_unit_create(plans, 1);
  if (u == NULL) {
    rcoll_plan_discard(&c->plan);
    r = rcoll_error(rcollSystemError, "rank %d: out of memory queueing a device call", c->rank);
  } else {
    u->host = 1;
    if (b->kernel)
      bounce_kernel_args(cc, u);
    rcoll_cuda_unit_add_stream(u, stream, cc->device);
    r = rcoll_cuda_unit_launch(u);
    rcoll_plan_reset(&c->plan, c);
  }
  int saved = -1;
  rcoll_cuda_device_enter(cc->device, &saved);
  if (r == rcollSuccess && b->user_recv != NULL && !b->kernel) {
    int e = rcoll_cuda_api()->memcpy_async(b->user_recv, slot_out(b, b->slot), b->recv_bytes,
                                           RCOLL_CUDA_MEMCPY_DEFAULT, stream);
    if (e != 0)
      r = rcoll_error(rcollUnhandledCudaError, "rank %d: copying a small device call's %zu-byte "
                      "result back to device memory failed: %s", c->rank, b->recv_bytes,
                      rcoll_cuda_strerror(e));
  }
  slot_record(cc, stream);
  /* On the legacy stream a call returns done: the unit is, its copy back too. */
  if (r == rcollSuccess && rcoll_cuda_stream_is_legacy(stream))
    r = slot_wait(cc, cc->bounce.slot);
  rcoll_cuda_device_leave(saved);
  cc->prof.bounced++;
  return r;
}

void rcoll_cuda_bounce_free(rcoll_cuda_comm_t *cc) {
  rcoll_cuda_bounce_t *b = &cc->bounce;
  int busy = 0;
  for (int i = 0; i < RCOLL_CUDA_BOUNCE_SLOTS; i++) {
    if (b->recorded[i] && slot_wait(cc, i) != rcollSuccess) {
      RCOLL_WARN("%s; its pinned memory is left allocated", rcoll_error_text());
      busy = 1;
    }
    if (b->ev[i] != NULL && !busy)
      rcoll_cuda_api()->event_destroy(b->ev[i]);
  }
  if (b->base != NULL && !busy) /* a copy still queued would write freed memory */
    rcoll_cuda_api()->free_host(b->base);
  memset(b, 0, sizeof *b);
}
