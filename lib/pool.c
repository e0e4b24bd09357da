/* rcollMemAlloc's host memory (lib/memalloc.c): a small process-wide pool
 * of whole pages from mmap, so every buffer is page-aligned and owns its
 * pages (nothing else shares them, which is what registering it with a NIC,
 * madvise or a fork-safe registration wants). A freed buffer is kept, up to
 * POOL_CACHE_BYTES in all, and handed out again for a request of the same
 * page count: training loops allocate the same sizes over and over, and
 * fresh pages cost a fault each.
 *
 * A block of POOL_SHARE_MIN bytes or more is a memory file (memfd) mapped
 * shared, so that a peer process on this machine can map it too and copy
 * from it as from its own memory (transports/shm/shm_pool.c): NCCL's
 * ncclMemAlloc gives memory its peers can map for the same reason. Between
 * processes the alternative, process_vm_readv, pins and copies page by page
 * in the kernel and measured 4-7x slower here than a memcpy from a mapping
 * (512 KiB 37 -> 7 us, 8 MiB 1106 -> 245 us, best of 200). Such a block is
 * not inherited by a forked child (MADV_DONTFORK, as registered RDMA
 * memory): shared pages would let the child's writes reach the parent,
 * where private ones were copied on write. Smaller blocks stay anonymous,
 * so that many small buffers do not each hold a file descriptor. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "error.h"
#include "pool.h"

#define POOL_CACHE_BYTES ((size_t)256 << 20)
#define POOL_SHARE_MIN ((size_t)64 << 10) /* RCOLL_SHM_POOL_MAP's default */

typedef struct pool_block {
  void *ptr;
  size_t bytes; /* whole pages */
  int fd;       /* the memory file behind a shared block, else -1 */
  uint64_t gen; /* tells apart blocks that had the same fd number */
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

/* Fresh pages: shared ones behind a memory file from POOL_SHARE_MIN bytes,
 * anonymous private ones below that or when no memory file can be had. */
static void *pages_map(size_t bytes, int *fd) {
  *fd = -1;
  if (bytes >= POOL_SHARE_MIN) {
    int f = memfd_create("rcoll-pool", MFD_CLOEXEC);
    void *p = f < 0 || ftruncate(f, (off_t)bytes) != 0 ? MAP_FAILED
              : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (p != MAP_FAILED && madvise(p, bytes, MADV_DONTFORK) == 0) {
      *fd = f;
      return p;
    }
    if (p != MAP_FAILED)
      munmap(p, bytes);
    if (f >= 0)
      close(f);
  }
  return mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

rcollResult_t rcoll_pool_alloc(void **ptr, size_t size) {
  size_t bytes = round_to_pages(size);
  if (bytes == 0)
    return rcoll_error(rcollInvalidArgument, "rcollMemAlloc: size %zu is too large", size);
  pthread_mutex_lock(&pool_lock);
  pool_block_t *b = take(&pool_free, same_size, &bytes);
  if (b != NULL)
    pool_free_bytes -= b->bytes;
  pthread_mutex_unlock(&pool_lock);
  if (b == NULL) {
    static _Atomic uint64_t blocks_made;
    int fd = -1;
    b = malloc(sizeof *b);
    void *p = b == NULL ? MAP_FAILED : pages_map(bytes, &fd);
    if (p == MAP_FAILED) {
      free(b);
      return rcoll_error(rcollSystemError, "rcollMemAlloc: out of host memory for %zu bytes", size);
    }
    *b = (pool_block_t){p, bytes, fd, ++blocks_made, NULL};
  }
  pthread_mutex_lock(&pool_lock);
  b->next = pool_live;
  pool_live = b;
  pthread_mutex_unlock(&pool_lock);
  *ptr = b->ptr;
  return rcollSuccess;
}

int rcoll_pool_free(void *ptr) {
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
    if (b->fd >= 0)
      close(b->fd);
    free(b);
  }
  return b != NULL;
}

int rcoll_pool_find(const void *ptr, size_t bytes, rcoll_pool_ref_t *ref) {
  uintptr_t p = (uintptr_t)ptr;
  int found = 0;
  pthread_mutex_lock(&pool_lock);
  for (const pool_block_t *b = pool_live; b != NULL && !found; b = b->next) {
    uintptr_t start = (uintptr_t)b->ptr;
    if (b->fd >= 0 && p >= start && p - start <= b->bytes && bytes <= b->bytes - (p - start)) {
      *ref = (rcoll_pool_ref_t){.fd = b->fd, .gen = b->gen, .bytes = b->bytes, .offset = p - start};
      found = 1;
    }
  }
  pthread_mutex_unlock(&pool_lock);
  return found;
}
