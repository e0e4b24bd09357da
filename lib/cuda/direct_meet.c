/* The host meeting of in-place direct all-reduces (direct_meet.h). */
#include "cuda/direct_meet.h"

#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "comm.h"
#include "cuda/cuda_comm.h"
#include "log.h"
#include "pidns.h"

#define POST_BYTES 256

/* One rank's post, in the shared file. The writer fills it, then stores
 * `offered` (release); readers load `offered` (acquire), then read it. */
typedef struct direct_post {
  _Atomic uint64_t offered; /* the meeting whose offer this is */
  _Atomic uint64_t mapped;  /* the meeting whose mapped_ok this is */
  uint64_t sig;             /* the call (RCOLL_DIRECT_SIG) */
  int32_t ok, mapped_ok;    /* could hand over its buffers; mapped every peer's */
  int64_t pid;
  uint64_t ns_key;          /* with pid: a peer in our own process uses the addresses */
  uint64_t addr[2], off[2]; /* input, output: address, offset in the allocation */
  rcoll_cuda_ipc_handle_t h[2];
} direct_post_t;
_Static_assert(sizeof(direct_post_t) <= POST_BYTES, "a post fits its line");

typedef struct direct_import {
  rcoll_cuda_ipc_handle_t h;
  char *base; /* NULL: free */
  uint64_t used;
} direct_import_t;

struct rcoll_direct_meet {
  char *map;
  size_t bytes;
  uint64_t seq, tick;
  direct_import_t imp[RCOLL_DIRECT_MAX_RANKS][DIRECT_IMPORTS];
};

static size_t meet_bytes(int nranks) { return (size_t)nranks * POST_BYTES; }

static direct_post_t *post_of(rcoll_direct_meet_t *m, int q) {
  return (direct_post_t *)(void *)(m->map + (size_t)q * POST_BYTES);
}

int rcoll_direct_meet_make(const struct rcollComm *c, char *path, size_t cap) {
  static _Atomic unsigned made;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  /* Named as the shm transport names its segments, so that its sweep
   * removes the file of a rank 0 that died before unlinking it. */
  struct stat ns;
  snprintf(path, cap, "%s/rcoll-shm-%d-%u-%u-%016llx", c->settings.shm_dir, (int)getpid(),
           stat("/proc/self/ns/pid", &ns) == 0 ? (unsigned)ns.st_ino : 0u, atomic_fetch_add(&made, 1),
           (unsigned long long)(ts.tv_nsec ^ ts.tv_sec << 30 ^ (uintptr_t)c ^ 0xd1ecu));
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  int ok = fd >= 0 && ftruncate(fd, (off_t)meet_bytes(c->nranks)) == 0;
  if (fd >= 0)
    close(fd);
  if (!ok) {
    RCOLL_INFO(RCOLL_SUB_INIT, "rank 0: direct all-reduce: cannot make %s; no in-place calls", path);
    if (fd >= 0)
      unlink(path);
  }
  return ok;
}

rcoll_direct_meet_t *rcoll_direct_meet_open(const struct rcollComm *c, const char *path) {
  rcoll_direct_meet_t *m = calloc(1, sizeof *m);
  int fd = m == NULL ? -1 : open(path, O_RDWR | O_CLOEXEC);
  void *map = MAP_FAILED;
  if (fd >= 0) {
    map = mmap(NULL, meet_bytes(c->nranks), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
  }
  if (map == MAP_FAILED) {
    RCOLL_INFO(RCOLL_SUB_INIT, "rank %d: direct all-reduce: cannot map %s; no in-place calls",
               c->rank, path);
    free(m);
    return NULL;
  }
  m->map = map;
  m->bytes = meet_bytes(c->nranks);
  return m;
}

void rcoll_direct_meet_close(rcoll_direct_meet_t *m) {
  if (m == NULL)
    return;
  for (int q = 0; q < RCOLL_DIRECT_MAX_RANKS; q++)
    for (int i = 0; i < DIRECT_IMPORTS; i++)
      if (m->imp[q][i].base != NULL)
        rcoll_cuda_api()->ipc_close_mem_handle(m->imp[q][i].base);
  munmap(m->map, m->bytes);
  free(m);
}

/* Our buffer's allocation: its IPC handle and our offset in it. */
static int describe(const void *p, rcoll_cuda_ipc_handle_t *h, uint64_t *off) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  rcoll_cu_deviceptr_t base = 0;
  size_t size = 0;
  if (a->cu_mem_get_address_range == NULL ||
      a->cu_mem_get_address_range(&base, &size, (rcoll_cu_deviceptr_t)(uintptr_t)p) != 0)
    return 0;
  *off = (uint64_t)((uintptr_t)p - (uintptr_t)base);
  /* Memory from cudaMallocAsync pools or cuMemCreate has no such handle. */
  return a->ipc_get_mem_handle(h, (void *)(uintptr_t)base) == 0;
}

char *rcoll_direct_meet_import(rcoll_cuda_comm_t *cc, int q, const rcoll_cuda_ipc_handle_t *h) {
  rcoll_direct_meet_t *m = cc->direct.meet;
  direct_import_t *imp = m->imp[q], *slot = &imp[0];
  for (int i = 0; i < DIRECT_IMPORTS; i++) {
    if (imp[i].base != NULL && memcmp(&imp[i].h, h, sizeof *h) == 0) {
      imp[i].used = ++m->tick;
      return imp[i].base;
    }
    if (imp[i].base == NULL || (slot->base != NULL && imp[i].used < slot->used))
      slot = &imp[i];
  }
  if (slot->base != NULL) { /* our last kernel may still read it */
    if (rcoll_direct_wait_last(cc, "to close a peer's buffer") != rcollSuccess)
      return NULL;
    rcoll_cuda_api()->ipc_close_mem_handle(slot->base);
    slot->base = NULL;
  }
  void *p = NULL;
  int r = rcoll_cuda_api()->ipc_open_mem_handle(&p, *h, RCOLL_CUDA_IPC_LAZY_PEER_ACCESS);
  if (r != 0) {
    RCOLL_INFO(RCOLL_SUB_P2P, "rank %d: cudaIpcOpenMemHandle of rank %d's buffer failed: %s; this "
               "call goes through the regions or the proxy", cc->comm->rank, q, rcoll_cuda_strerror(r));
    return NULL;
  }
  *slot = (direct_import_t){.h = *h, .base = p, .used = ++m->tick};
  return p;
}

/* Waits until every peer's post says `seq` in the field at `field` (offset
 * of offered or mapped). The meeting is on the host and may wait for a peer
 * that has not made the call yet: spin a little, then nap. The call is
 * compared in the offers only: once a peer saw every "mapped" it may post
 * its next call's offer while we still wait here. */
static rcollResult_t meet_wait(rcoll_cuda_comm_t *cc, size_t field, uint64_t seq, uint64_t sig) {
  struct rcollComm *c = cc->comm;
  rcoll_direct_meet_t *m = cc->direct.meet;
  int64_t t0 = rcoll_now_ms();
  for (int q = 0; q < c->nranks; q++) {
    direct_post_t *p = post_of(m, q);
    _Atomic uint64_t *f = (_Atomic uint64_t *)(void *)((char *)p + field);
    for (unsigned polls = 0; atomic_load_explicit(f, memory_order_acquire) != seq; polls++) {
      if (rcoll_now_ms() - t0 > c->timeout_ms)
        return rcoll_error(rcollTimeout, "rank %d: rank %d did not come to this %s within "
                           "RCOLL_TIMEOUT (%lld s): direct device calls of RCOLL_CUDA_DIRECT_INPLACE "
                           "bytes or more meet on the host to read each other's buffers", c->rank, q,
                           rcoll_direct_call_name(sig), (long long)(c->timeout_ms / 1000));
      if (polls < 1000) {
        sched_yield();
      } else {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
      }
    }
    if (field == offsetof(direct_post_t, offered) && p->sig != sig)
      return rcoll_direct_mismatch(c, (unsigned)q, sig, p->sig);
  }
  return rcollSuccess;
}

int rcoll_direct_meet(rcoll_cuda_comm_t *cc, const void *in, void *out, uint64_t sig,
                      rcoll_direct_args_t *a, rcollResult_t *r) {
  struct rcollComm *c = cc->comm;
  rcoll_direct_meet_t *m = cc->direct.meet;
  uint64_t seq = ++m->seq;
  direct_post_t *me = post_of(m, c->rank);
  const void *bufs[2] = {in, out};
  me->sig = sig;
  me->ok = in != NULL; /* NULL: this rank cannot run the call in place */
  me->pid = getpid();
  me->ns_key = rcoll_pid_ns_key();
  for (int k = 0; k < 2 && me->ok; k++) {
    me->addr[k] = (uint64_t)(uintptr_t)bufs[k];
    if (k == 1 && in == out) { /* in place: one buffer, described once */
      me->h[1] = me->h[0];
      me->off[1] = me->off[0];
    } else {
      me->ok = me->ok && describe(bufs[k], &me->h[k], &me->off[k]);
    }
  }
  atomic_store_explicit(&me->offered, seq, memory_order_release);
  if ((*r = meet_wait(cc, offsetof(direct_post_t, offered), seq, sig)) != rcollSuccess)
    return 0;
  /* Every rank read the same offers. The second round is made even when one
   * refused: it is what tells a rank that the others have read its offer,
   * before it may post the next. */
  int mapped = 1;
  for (int q = 0; q < c->nranks; q++)
    mapped = mapped && post_of(m, q)->ok;
  for (int q = 0; q < c->nranks && mapped; q++) {
    const direct_post_t *p = post_of(m, q);
    char *at[2] = {NULL, NULL};
    for (int k = 0; k < 2 && mapped; k++) {
      if (q == c->rank || (p->pid == me->pid && p->ns_key == me->ns_key && p->ns_key != 0))
        at[k] = (char *)(uintptr_t)p->addr[k];
      else if ((at[k] = rcoll_direct_meet_import(cc, q, &p->h[k])) != NULL)
        at[k] += p->off[k];
      mapped = at[k] != NULL;
    }
    a->ins[q] = at[0];
    a->outs[q] = at[1];
  }
  me->mapped_ok = mapped;
  atomic_store_explicit(&me->mapped, seq, memory_order_release);
  if ((*r = meet_wait(cc, offsetof(direct_post_t, mapped), seq, sig)) != rcollSuccess)
    return 0;
  for (int q = 0; q < c->nranks; q++)
    mapped = mapped && post_of(m, q)->mapped_ok;
  return mapped;
}
