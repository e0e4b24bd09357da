/* rcollMemAlloc's host memory pool (pool.c), and which pool block a buffer
 * lies in, so that a transport can let a peer process map that block
 * instead of reading the buffer through the kernel
 * (transports/shm/shm_pool.c). */
#ifndef RCOLL_POOL_H
#define RCOLL_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "rcoll.h"

/* Page-aligned host memory of at least size bytes (size > 0); an error
 * naming the size when there is none. */
rcollResult_t rcoll_pool_alloc(void **ptr, size_t size);
/* 1 when ptr was a live pool block (now freed or kept for reuse), 0 when
 * it is not one. */
int rcoll_pool_free(void *ptr);

/* A range inside a shared pool block: the block's memory file (an fd of
 * this process), a number that no other block of this process had, the
 * block's size and where the range starts in it. */
typedef struct rcoll_pool_ref {
  int32_t fd;
  uint32_t pad;
  uint64_t gen;
  uint64_t bytes;
  uint64_t offset;
} rcoll_pool_ref_t;

/* 1 and *ref filled when [ptr, ptr + bytes) lies inside one live shared
 * block of rcollMemAlloc's host pool; 0 otherwise (other memory, a small
 * block, a freed one). */
int rcoll_pool_find(const void *ptr, size_t bytes, rcoll_pool_ref_t *ref);

#endif
