/* Memory registration: a cache of registrations keyed by address range, and
 * the hooks for CUDA device memory.
 *
 * A registration covers whole pages and is shared by every request whose
 * buffer lies inside it; it lives while anyone holds a reference: reg_mr
 * (until dereg_mr), or a request that found its buffer unregistered (until
 * it completes). Registrations of unregistered buffers are deliberately not
 * kept past their request: the transport cannot see the buffer being freed,
 * and a registration outliving its memory would pin pages the allocator has
 * handed to someone else (the classic silent-corruption bug of registration
 * caches without memory hooks). Users who reuse buffers register them.
 *
 * Device memory: dma-buf (ibv_reg_dmabuf_mr over a file descriptor from
 * cuMemGetHandleForAddressRange) where the kernel, provider and CUDA driver
 * support it; else nvidia-peermem, which lets ibv_reg_mr take a device
 * pointer. The CUDA driver is loaded with dlopen so that the library never
 * needs it. */
#if RCOLL_HAVE_IBVERBS
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "ib_priv.h"
#include "log.h"

void ib_mr_cache_init(ib_mr_cache_t *c) {
  memset(c, 0, sizeof *c);
  pthread_mutex_init(&c->lock, NULL);
}

void ib_mr_cache_fini(ib_mr_cache_t *c) {
  for (int i = 0; i < c->n; i++) {
    ibv_dereg_mr(c->v[i]->mr);
    free(c->v[i]);
  }
  free(c->v);
  pthread_mutex_destroy(&c->lock);
  memset(c, 0, sizeof *c);
}

/* An entry covering [beg, end) with at least `access`, or NULL. Entries are
 * sorted by start; only those starting at or below beg can cover. */
static ib_mr_t *ib_mr_find(ib_mr_cache_t *c, uintptr_t beg, uintptr_t end, int access, int mem_type) {
  int lo = 0, hi = c->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (c->v[mid]->beg <= beg)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (int i = lo - 1; i >= 0; i--) {
    ib_mr_t *m = c->v[i];
    if (m->end >= end && (m->access & access) == access && m->mem_type == mem_type)
      return m;
  }
  return NULL;
}

static int ib_mr_insert(ib_mr_cache_t *c, ib_mr_t *m) {
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 16;
    ib_mr_t **v = realloc(c->v, (size_t)cap * sizeof *v);
    if (v == NULL)
      return -1;
    c->v = v;
    c->cap = cap;
  }
  int i = c->n;
  while (i > 0 && c->v[i - 1]->beg > m->beg) {
    c->v[i] = c->v[i - 1];
    i--;
  }
  c->v[i] = m;
  c->n++;
  return 0;
}

static void ib_mr_remove(ib_mr_cache_t *c, ib_mr_t *m) {
  for (int i = 0; i < c->n; i++)
    if (c->v[i] == m) {
      memmove(&c->v[i], &c->v[i + 1], (size_t)(c->n - i - 1) * sizeof c->v[0]);
      c->n--;
      return;
    }
}

/* ---- device memory ---- */

typedef int (*ib_cu_handle_fn)(int *fd, unsigned long long ptr, size_t size, int type,
                               unsigned long long flags);
#define IB_CU_DMABUF_FD 1 /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */

static ib_cu_handle_fn ib_cu_fn;

static void ib_cu_load(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib != NULL)
    *(void **)&ib_cu_fn = dlsym(lib, "cuMemGetHandleForAddressRange");
}

/* The CUDA driver's dma-buf export, or NULL without a driver. */
static ib_cu_handle_fn ib_cu_handle(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, ib_cu_load);
  return ib_cu_fn;
}

static int ib_peermem_loaded(void) {
  return access("/sys/kernel/mm/memory_peers/nv_mem/version", F_OK) == 0 ||
         access("/sys/module/nvidia_peermem", F_OK) == 0 || access("/sys/module/nv_peer_mem", F_OK) == 0;
}

int ib_gdr_probe(ib_ctx_t *ctx, char *why, size_t len) {
  /* A registration with fd -1 fails with EOPNOTSUPP/EPROTONOSUPPORT where the
   * kernel or provider lacks dma-buf, and with EBADF-like errors where only
   * the fd is wrong: the standard probe. */
  struct ibv_mr *mr = ibv_reg_dmabuf_mr(ctx->pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
  int dmabuf = mr == NULL && errno != EOPNOTSUPP && errno != EPROTONOSUPPORT && errno != ENOSYS;
  if (mr != NULL)
    ibv_dereg_mr(mr);
  int cuda = ib_cu_handle() != NULL;
  if (dmabuf && cuda) {
    snprintf(why, len, "dma-buf (ibv_reg_dmabuf_mr with cuMemGetHandleForAddressRange)");
    return IB_GDR_DMABUF;
  }
  if (ib_peermem_loaded()) {
    snprintf(why, len, "nvidia-peermem (ibv_reg_mr on device pointers)");
    return IB_GDR_PEERMEM;
  }
  snprintf(why, len, "none: dma-buf %s, CUDA driver %s, nvidia-peermem not loaded",
           dmabuf ? "supported" : "not supported by kernel/provider",
           cuda ? "has cuMemGetHandleForAddressRange" : "not found");
  return IB_GDR_NONE;
}

static struct ibv_mr *ib_reg_cuda(ib_ctx_t *ctx, uintptr_t beg, size_t len, int access) {
  if (ctx->gdr == IB_GDR_PEERMEM)
    return ibv_reg_mr(ctx->pd, (void *)beg, len, access);
  if (ctx->gdr != IB_GDR_DMABUF) {
    errno = EOPNOTSUPP;
    return NULL;
  }
  int fd = -1;
  if (ib_cu_handle()(&fd, beg, len, IB_CU_DMABUF_FD, 0) != 0 || fd < 0) {
    errno = EINVAL;
    return NULL;
  }
  struct ibv_mr *mr = ibv_reg_dmabuf_mr(ctx->pd, 0, len, beg, fd, access);
  int e = errno;
  close(fd); /* the registration keeps its own reference to the dma-buf */
  errno = e;
  return mr;
}

/* ---- the cache ---- */

static struct ibv_mr *ib_reg(ib_ctx_t *ctx, uintptr_t beg, size_t len, int access, int mem_type) {
  if (mem_type == RCOLL_MEM_CUDA)
    return ib_reg_cuda(ctx, beg, len, access);
  return ibv_reg_mr(ctx->pd, (void *)beg, len, access);
}

rcollResult_t ib_mr_get(ib_ctx_t *ctx, const void *addr, size_t len, int access, int mem_type,
                        ib_mr_t **out) {
  static long page;
  if (page == 0)
    page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
  uintptr_t beg = (uintptr_t)addr & ~(uintptr_t)(page - 1);
  uintptr_t end = ((uintptr_t)addr + (len ? len : 1) + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
  ib_mr_cache_t *c = &ctx->cache;
  pthread_mutex_lock(&c->lock);
  ib_mr_t *m = ib_mr_find(c, beg, end, access, mem_type);
  if (m != NULL) {
    m->refs++;
    pthread_mutex_unlock(&c->lock);
    *out = m;
    return rcollSuccess;
  }
  m = calloc(1, sizeof *m);
  int64_t t0 = rcoll_now_us();
  struct ibv_mr *mr = m ? ib_reg(ctx, beg, end - beg, access, mem_type) : NULL;
  RCOLL_TRACE(RCOLL_SUB_NET, "ib: registered %zu bytes at %p in %lld us", (size_t)(end - beg), (void *)beg,
              (long long)(rcoll_now_us() - t0));
  int e = m ? errno : ENOMEM;
  if (m != NULL)
    *m = (ib_mr_t){.beg = beg, .end = end, .mr = mr, .access = access, .refs = 1, .mem_type = mem_type};
  if (mr == NULL || ib_mr_insert(c, m) != 0) {
    pthread_mutex_unlock(&c->lock);
    if (mr != NULL) {
      ibv_dereg_mr(mr);
      e = ENOMEM;
    }
    free(m);
    return rcoll_error_quiet(rcollSystemError, "ib: cannot register %zu bytes of %s memory at %p on %s: %s%s",
                             len, mem_type == RCOLL_MEM_CUDA ? "device" : "host", addr, ctx->port.desc,
                             strerror(e), e == ENOMEM ? " (check ulimit -l, the locked-memory limit)" : "");
  }
  pthread_mutex_unlock(&c->lock);
  *out = m;
  return rcollSuccess;
}

void ib_mr_put(ib_ctx_t *ctx, ib_mr_t *m) {
  ib_mr_cache_t *c = &ctx->cache;
  pthread_mutex_lock(&c->lock);
  if (--m->refs == 0) {
    ib_mr_remove(c, m);
    ibv_dereg_mr(m->mr);
    free(m);
  }
  pthread_mutex_unlock(&c->lock);
}
#endif
