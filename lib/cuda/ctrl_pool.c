/* The communicators' control blocks (cuda_comm.c's cuda_ctrl_t: the flag
 * user streams wait on, the bounce kernel's words, the direct kernel's
 * failure words), carved from pinned mapped memory that is never freed.
 *
 * Why never: a user stream may still hold a wait on a communicator's flag
 * when the communicator is destroyed. The proxy wrote the flag, but the
 * stream has not reached its wait yet: it runs the user's own work first,
 * or waits on another communicator's call (a group over two of them, a
 * split communicator destroyed while the parent's calls are queued). Freed
 * there, the block leaves that wait reading freed memory: on the CUDA fake
 * the stream hung (test_cuda_mix's split runs, once the split communicator
 * was destroyed before the streams were synchronized); on a GPU it would be
 * safe only as long as cudaFreeHost happens to wait for the whole device.
 * A retired block keeps its last values, so every late wait still passes;
 * and a block is never handed out twice, since a new communicator's flag
 * starts from 0 below an old wait's value. The cost: one block (128 bytes)
 * of pinned memory per communicator that made a device call, for the
 * process's life. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_api.h"
#include "cuda/cuda_comm.h"

#define CTRL_BLOCK 128   /* a multiple of every control block's alignment (64) */
#define CTRL_PER_CHUNK 64 /* blocks per cudaHostAlloc: 8 KiB */

static pthread_mutex_t ctrl_mu = PTHREAD_MUTEX_INITIALIZER;
static char **ctrl_chunks; /* every chunk, kept reachable: none is ever freed */
static int ctrl_nchunks, ctrl_cap, ctrl_used = CTRL_PER_CHUNK;

int rcoll_cuda_ctrl_alloc(void **out, size_t bytes) {
  *out = NULL;
  if (bytes > CTRL_BLOCK)
    return 1; /* cudaErrorInvalidValue: cuda_comm.c's block outgrew CTRL_BLOCK */
  pthread_mutex_lock(&ctrl_mu);
  int r = 0;
  if (ctrl_used == CTRL_PER_CHUNK) {
    void *chunk = NULL;
    if (ctrl_nchunks == ctrl_cap) {
      int cap = ctrl_cap ? 2 * ctrl_cap : 16;
      char **v = realloc(ctrl_chunks, (size_t)cap * sizeof *v);
      r = v == NULL ? 2 : 0; /* cudaErrorMemoryAllocation */
      if (v != NULL) {
        ctrl_chunks = v;
        ctrl_cap = cap;
      }
    }
    if (r == 0)
      r = rcoll_cuda_api()->host_alloc(&chunk, (size_t)CTRL_BLOCK * CTRL_PER_CHUNK,
                                       RCOLL_CUDA_HOST_ALLOC_MAPPED | RCOLL_CUDA_HOST_ALLOC_PORTABLE);
    if (r == 0) {
      memset(chunk, 0, (size_t)CTRL_BLOCK * CTRL_PER_CHUNK);
      ctrl_chunks[ctrl_nchunks++] = chunk;
      ctrl_used = 0;
    }
  }
  if (r == 0)
    *out = ctrl_chunks[ctrl_nchunks - 1] + (size_t)CTRL_BLOCK * ctrl_used++;
  pthread_mutex_unlock(&ctrl_mu);
  return r;
}
