/* Single-copy messages from rcollMemAlloc's shared host pool (pool.h).
 *
 * Between processes a single-copy receive reads the sender's buffer with
 * process_vm_readv, which pins and copies page by page in the kernel. When
 * the buffer lies in a shared pool block, the sender also puts a reference
 * to the block in the slot (its memory file's fd number in the sender, and
 * the block's number, size and the buffer's offset); the receiver takes a
 * duplicate of that fd (pidfd_getfd, which asks the same ptrace permission
 * as process_vm_readv), maps the block read-only and copies with memcpy, as
 * between threads. Up to SHM_POOL_MAPS mappings are kept per connection,
 * since training loops and benchmarks send from the same buffers; a block
 * the sender freed stays mapped (its memory held) until its entry is
 * reused or the connection closes. A receiver that cannot map falls back to
 * process_vm_readv for good, and says so once. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "shm_priv.h"

typedef struct shm_pool_map {
  uint64_t gen; /* 0: the entry is empty */
  int32_t fd;   /* the sender's fd number */
  size_t bytes;
  char *base;
  uint64_t used; /* for eviction: the connection's clock when last used */
} shm_pool_map_t;

struct shm_pool_maps {
  int pidfd;
  uint64_t clock;
  shm_pool_map_t map[SHM_POOL_MAPS];
};

int shm_pool_describe(const shm_conn_t *c, const void *buf, size_t size, int single, rcoll_pool_ref_t *ref) {
  if (c->copy != SHM_COPY_CMA || !c->pool_map || size < (single ? c->single_min : c->direct_min))
    return 0;
  return rcoll_pool_find(buf, size, ref);
}

/* A duplicate of the sender's fd `fd`, or -1 with errno set. */
static int shm_pool_dup_fd(shm_conn_t *c, int fd) {
  struct shm_pool_maps *m = c->pool;
  if (m->pidfd < 0 && (m->pidfd = (int)syscall(SYS_pidfd_open, c->peer_pid, 0)) < 0)
    return -1;
  return (int)syscall(SYS_pidfd_getfd, m->pidfd, fd, 0);
}

static void shm_pool_off(shm_conn_t *c, const char *what, int err) {
  RCOLL_INFO(RCOLL_SUB_NET, "shm: cannot map %s's pool memory (%s: %s); reading it with "
             "process_vm_readv instead", c->peer, what, strerror(err));
  c->pool_off = 1;
}

/* Maps the block ref names; NULL (and the entry left empty) when it cannot. */
static char *shm_pool_map_new(shm_conn_t *c, shm_pool_map_t *e, const rcoll_pool_ref_t *ref) {
  int fd = shm_pool_dup_fd(c, ref->fd);
  if (fd < 0) {
    shm_pool_off(c, "pidfd_getfd", errno);
    return NULL;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < ref->bytes) {
    /* Not the block it claims to be (the sender freed it and the number is
     * another file's now): mapping past its end would fault. */
    close(fd);
    shm_conn_fail(c, rcollRemoteError, "shm: %s sent a pool buffer of %llu bytes whose memory is gone",
                  c->peer, (unsigned long long)ref->bytes);
    return NULL;
  }
  void *p = mmap(NULL, ref->bytes, PROT_READ, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_pool_off(c, "mmap", err);
    return NULL;
  }
  *e = (shm_pool_map_t){.gen = ref->gen, .fd = ref->fd, .bytes = ref->bytes, .base = p};
  return p;
}

const char *shm_pool_map(shm_conn_t *c, const rcoll_pool_ref_t *ref, size_t size) {
  if (c->pool_off)
    return NULL;
  if (ref->offset > ref->bytes || size > ref->bytes - ref->offset) {
    shm_conn_fail(c, rcollInternalError, "shm: %s sent a pool buffer reference out of its block "
                  "(%zu bytes at %llu of %llu)", c->peer, size, (unsigned long long)ref->offset,
                  (unsigned long long)ref->bytes);
    return NULL;
  }
  if (c->pool == NULL) {
    if ((c->pool = calloc(1, sizeof *c->pool)) == NULL) {
      shm_pool_off(c, "calloc", ENOMEM);
      return NULL;
    }
    c->pool->pidfd = -1;
  }
  struct shm_pool_maps *m = c->pool;
  shm_pool_map_t *e = &m->map[0];
  for (int i = 0; i < SHM_POOL_MAPS; i++) {
    shm_pool_map_t *x = &m->map[i];
    if (x->gen == ref->gen && x->fd == ref->fd && x->bytes == ref->bytes) {
      x->used = ++m->clock;
      return x->base + ref->offset;
    }
    if (x->used < e->used) /* the least recently used, or an empty one */
      e = x;
  }
  if (e->base != NULL)
    munmap(e->base, e->bytes);
  *e = (shm_pool_map_t){0};
  char *base = shm_pool_map_new(c, e, ref);
  if (base == NULL)
    return NULL;
  e->used = ++m->clock;
  return base + ref->offset;
}

void shm_pool_close(shm_conn_t *c) {
  struct shm_pool_maps *m = c->pool;
  if (m == NULL)
    return;
  for (int i = 0; i < SHM_POOL_MAPS; i++)
    if (m->map[i].base != NULL)
      munmap(m->map[i].base, m->map[i].bytes);
  if (m->pidfd >= 0)
    close(m->pidfd);
  free(m);
  c->pool = NULL;
}
