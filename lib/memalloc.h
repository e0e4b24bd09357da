/* The host side of rcollMemAlloc as other parts of the library see it:
 * which pool block a buffer lies in, so that a transport can let a peer
 * process map that block instead of reading the buffer through the kernel
 * (transports/shm/shm_pool.c). */
#ifndef RCOLL_MEMALLOC_H
#define RCOLL_MEMALLOC_H

#include <stddef.h>
#include <stdint.h>

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
