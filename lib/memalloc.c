/* rcollMemAlloc and rcollMemFree. On a machine with a CUDA device the memory
 * is device memory on the calling thread's current device, as NCCL's
 * ncclMemAlloc gives (lib/cuda/mem_alloc.c). Without one it is host memory
 * from a small process-wide pool: whole pages from mmap, so every buffer is
 * page-aligned and owns its pages (nothing else shares them, which is what
 * registering it with a NIC, madvise or a fork-safe registration wants). A
 * freed buffer is kept, up to POOL_CACHE_BYTES in all, and handed out again
 * for a request of the same page count: training loops allocate the same
 * sizes over and over, and fresh pages cost a fault each. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device.h"
#include "error.h"
#include "memtype.h"

#define POOL_CACHE_BYTES ((size_t)256 << 20)

typedef struct pool_block {
  void *ptr;
  size_t bytes; /* whole pages */
  struct pool_block *next;
} pool_block_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_block_t *pool_live;  /* handed out */
static pool_block_t *pool_free;  /* kept for reuse */
static size_t pool_free_bytes;

static size_t round_to_pages(size_t size) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return size > SIZE_MAX - page ? 0 : (size + page - 1) / page * page;
}

/* Unlinks and returns the block of *list for which match(b, key) holds. */
static pool_block_t *take(pool_block_t **list, int (*match)(const pool_block_t *, const void *), const void *key) {
  for (pool_block_t **p = list; *p != NULL; p = &(*p)->next)
    if (match(*p, key)) {
      pool_block_t *b = *p;
      *p = b->next;
      return b;
    }
  return NULL;
}

static int same_size(const pool_block_t *b, const void *key) { return b->bytes == *(const size_t *)key; }
static int same_ptr(const pool_block_t *b, const void *key) { return b->ptr == key; }

static rcollResult_t host_alloc(void **ptr, size_t size) {
  size_t bytes = round_to_pages(size);
  if (bytes == 0)
    return rcoll_error(rcollInvalidArgument, "rcollMemAlloc: size %zu is too large", size);
  pthread_mutex_lock(&pool_lock);
  pool_block_t *b = take(&pool_free, same_size, &bytes);
  if (b != NULL)
    pool_free_bytes -= b->bytes;
  pthread_mutex_unlock(&pool_lock);
  if (b == NULL) {
    b = malloc(sizeof *b);
    void *p = b == NULL ? MAP_FAILED : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      free(b);
      return rcoll_error(rcollSystemError, "rcollMemAlloc: out of host memory for %zu bytes", size);
    }
    *b = (pool_block_t){p, bytes, NULL};
  }
  pthread_mutex_lock(&pool_lock);
  b->next = pool_live;
  pool_live = b;
  pthread_mutex_unlock(&pool_lock);
  *ptr = b->ptr;
  return rcollSuccess;
}

/* 1 when ptr was a live pool block (now freed or kept), 0 when it is not ours. */
static int host_free(void *ptr) {
  pthread_mutex_lock(&pool_lock);
  pool_block_t *b = take(&pool_live, same_ptr, ptr);
  int keep = b != NULL && pool_free_bytes + b->bytes <= POOL_CACHE_BYTES;
  if (keep) {
    b->next = pool_free;
    pool_free = b;
    pool_free_bytes += b->bytes;
  }
  pthread_mutex_unlock(&pool_lock);
  if (b != NULL && !keep) {
    munmap(b->ptr, b->bytes);
    free(b);
  }
  return b != NULL;
}

RCOLL_API rcollResult_t rcollMemAlloc(void **ptr, size_t size) {
  if (ptr == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollMemAlloc: ptr is NULL");
  *ptr = NULL;
  if (size == 0) /* as cudaMalloc: nothing to allocate, and *ptr is NULL */
    return rcollSuccess;
  RCOLL_CHECK(rcoll_device_ops.mem_alloc(ptr, size));
  if (*ptr != NULL)
    return rcollSuccess;
  return host_alloc(ptr, size);
}

RCOLL_API rcollResult_t rcollMemFree(void *ptr) {
  if (ptr == NULL)
    return rcollSuccess;
  if (host_free(ptr))
    return rcollSuccess;
  rcoll_mem_info_t mi;
  if (rcoll_mem_query(ptr, 0, &mi) == rcollSuccess && mi.type == RCOLL_MEM_CUDA)
    return rcoll_device_ops.mem_free(ptr);
  return rcoll_error(rcollInvalidArgument, "rcollMemFree: %p was not allocated by rcollMemAlloc (or is "
                     "freed already)", ptr);
}
