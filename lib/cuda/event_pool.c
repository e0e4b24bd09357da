/* Events a comm records on user streams, kept for reuse (cuda_comm.h).
 *
 * Why not create and destroy one per call: cuEventDestroy takes the driver's
 * context lock exclusively, and a user thread blocked in a synchronous copy
 * to pageable memory (cudaMemcpyAsync D2H into malloc'd memory, right after
 * our call on the same stream) holds that lock shared until its stream moves,
 * which needs the proxy. Seen on an H200 (driver 580.159, CUDA 13): the proxy
 * sat in cuEventDestroy, the user in cuMemcpyDtoHAsync, for ever. So the
 * proxy makes no CUDA call after a unit's work; events are created in the
 * calling thread and destroyed only when the comm goes. */
#include <stdlib.h>

#include "cuda/cuda_comm.h"

int rcoll_cuda_event_take(rcoll_cuda_comm_t *cc, int device, rcoll_cuda_event_t *out) {
  *out = NULL;
  pthread_mutex_lock(&cc->mu);
  for (int i = cc->nevents - 1; i >= 0; i--)
    if (cc->events[i].device == device) {
      *out = cc->events[i].event;
      cc->events[i] = cc->events[--cc->nevents];
      break;
    }
  pthread_mutex_unlock(&cc->mu);
  if (*out != NULL)
    return 0;
  return rcoll_cuda_api()->event_create_with_flags(out, RCOLL_CUDA_EVENT_DISABLE_TIMING);
}

void rcoll_cuda_event_give(rcoll_cuda_comm_t *cc, int device, rcoll_cuda_event_t e) {
  if (e == NULL)
    return;
  pthread_mutex_lock(&cc->mu);
  if (cc->nevents == cc->events_cap) {
    int cap = cc->events_cap ? 2 * cc->events_cap : 8;
    rcoll_cuda_pooled_event_t *p = realloc(cc->events, (size_t)cap * sizeof *p);
    if (p == NULL) { /* kept by nobody: a leak of one event, not a deadlock */
      pthread_mutex_unlock(&cc->mu);
      return;
    }
    cc->events = p;
    cc->events_cap = cap;
  }
  cc->events[cc->nevents++] = (rcoll_cuda_pooled_event_t){e, device};
  pthread_mutex_unlock(&cc->mu);
}

void rcoll_cuda_event_pool_free(rcoll_cuda_comm_t *cc) {
  for (int i = 0; i < cc->nevents; i++) {
    int saved = -1;
    if (rcoll_cuda_device_enter(cc->events[i].device, &saved) == 0)
      rcoll_cuda_api()->event_destroy(cc->events[i].event);
    rcoll_cuda_device_leave(saved);
  }
  free(cc->events);
  cc->events = NULL;
  cc->nevents = cc->events_cap = 0;
}
