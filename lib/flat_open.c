/* The flat board's creation and end (flat.h: rcoll_flat_open, _close):
 * rank 0 makes the segment, every rank maps it, and all agree in two
 * rounds over the bootstrap whether there is a board and its size. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "flat_priv.h"
#include "log.h"
#include "pidns.h"

static size_t flat_round(size_t n) { return (n + FLAT_LINE - 1) / FLAT_LINE * FLAT_LINE; }

typedef struct flat_offer {
  int32_t ok;       /* this rank can use a board */
  int32_t max;      /* its RCOLL_FLAT_MAX */
  char path[RCOLL_SETTING_STR_MAX + 48]; /* rank 0: the file it made */
} flat_offer_t;

/* Whether this rank may use a board: every peer over shared memory, and no
 * setting that wants the plans. */
static int flat_wanted(const struct rcollComm *c) {
  if (c->settings.flat_max <= 0 || c->nranks < 2 || c->settings.trace[0] != '\0')
    return 0;
  for (int p = 0; p < c->nranks; p++) {
    const rcoll_transport_ops_t *ops = rcoll_peer_net(c, p);
    if (p != c->rank && (ops == NULL || strcmp(ops->name, "shm") != 0))
      return 0;
  }
  return 1;
}

static size_t flat_bytes(int nranks, size_t max, size_t *slot_bytes, size_t *stride) {
  *slot_bytes = flat_round(FLAT_SLOT_HDR + max);
  *stride = FLAT_CTL + 2 * *slot_bytes;
  return (size_t)nranks * *stride;
}

static void *flat_map(const char *path, size_t bytes, int create) {
  int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0600);
  if (fd < 0)
    return NULL;
  void *m = MAP_FAILED;
  if (!create || ftruncate(fd, (off_t)bytes) == 0)
    m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return m == MAP_FAILED ? NULL : m;
}

rcollResult_t rcoll_flat_open(struct rcollComm *c) {
  static _Atomic unsigned made;
  if (c->nranks < 2)
    return rcollSuccess;
  flat_offer_t *all = calloc((size_t)c->nranks, sizeof *all);
  if (all == NULL)
    return rcoll_error(rcollSystemError, "rank %d: out of memory opening the flat board", c->rank);
  flat_offer_t *me = &all[c->rank];
  me->ok = flat_wanted(c);
  me->max = (int32_t)c->settings.flat_max;
  size_t slot_bytes, stride, bytes = flat_bytes(c->nranks, (size_t)me->max, &slot_bytes, &stride);
  void *mine = NULL;
  char made_path[sizeof me->path] = "";
  if (c->rank == 0 && me->ok) {
    /* Named as the shm transport names its segments (pid, pid namespace,
     * number, random), so that its sweep removes the file of a rank 0 that
     * died before it could unlink it. */
    struct stat ns;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(me->path, sizeof me->path, "%s/rcoll-shm-%d-%u-%u-%016llx", c->settings.shm_dir, (int)getpid(),
             stat("/proc/self/ns/pid", &ns) == 0 ? (unsigned)ns.st_ino : 0u, atomic_fetch_add(&made, 1),
             (unsigned long long)(ts.tv_nsec ^ ts.tv_sec << 30 ^ (uintptr_t)c));
    snprintf(made_path, sizeof made_path, "%s", me->path);
    if ((mine = flat_map(me->path, bytes, 1)) == NULL) {
      me->ok = 0;
      RCOLL_INFO(RCOLL_SUB_INIT, "flat board: cannot make %s: %s", me->path, strerror(errno));
    }
  }
  rcollResult_t r = rcoll_bootstrap_allgather(c->bootstrap, all, sizeof *all);
  int ok = r == rcollSuccess;
  size_t max = SIZE_MAX;
  for (int i = 0; i < c->nranks && ok; i++) {
    ok = all[i].ok;
    max = (size_t)all[i].max < max ? (size_t)all[i].max : max;
  }
  all[0].path[sizeof all[0].path - 1] = '\0';
  if (ok && c->rank != 0 && (mine = flat_map(all[0].path, bytes = flat_bytes(c->nranks, (size_t)all[0].max,
                                                                          &slot_bytes, &stride), 0)) == NULL)
    RCOLL_INFO(RCOLL_SUB_INIT, "flat board: cannot map %s: %s", all[0].path, strerror(errno));
  /* The agreed size lays the board out inside the file rank 0 made. */
  struct rcoll_flat *f = ok && mine != NULL ? calloc(1, sizeof *f) : NULL;
  uint64_t *known = f != NULL ? calloc((size_t)c->nranks, sizeof *known) : NULL;
  int *cpus = known != NULL ? calloc((size_t)c->nranks, sizeof *cpus) : NULL;
  if (cpus != NULL) {
    *f = (struct rcoll_flat){.base = mine, .map_bytes = bytes, .max = max, .known_done = known,
                             .cpus = cpus, .ns_key = rcoll_pid_ns_key()};
    for (int i = 0; rcoll_algorithms[i] != NULL; i++)
      if (rcoll_algorithms[i]->coll == RCOLL_COLL_ALLREDUCE && strcmp(rcoll_algorithms[i]->name, FLAT_ALGO_NAME) == 0)
        f->algo = rcoll_algorithms[i];
    flat_bytes(c->nranks, max, &f->slot_bytes, &f->stride);
    flat_ctl_t *ctl = flat_ctl(f, c->rank);
    ctl->pid = (int32_t)getpid();
    ctl->ns_key = f->ns_key;
  }
  memset(all, 0, (size_t)c->nranks * sizeof *all);
  all[c->rank].ok = cpus != NULL;
  if (r == rcollSuccess && ok) /* the second round: every rank mapped it */
    r = rcoll_bootstrap_allgather(c->bootstrap, all, sizeof *all);
  for (int i = 0; i < c->nranks && ok; i++)
    ok = all[i].ok;
  if (made_path[0] != '\0') /* rank 0: mapped everywhere, or given up: no file is left */
    unlink(made_path);
  if (ok && r == rcollSuccess) {
    c->flat = f;
    RCOLL_INFO(RCOLL_SUB_INIT, "flat board: all-reduces up to %zu B meet in shared memory", max);
  } else {
    free(cpus);
    free(known);
    free(f);
    if (mine != NULL)
      munmap(mine, bytes);
  }
  free(all);
  return r;
}

void rcoll_flat_close(struct rcollComm *c) {
  struct rcoll_flat *f = c->flat;
  if (f == NULL)
    return;
  atomic_store_explicit(&flat_ctl(f, c->rank)->closed, 1, memory_order_release);
  if (f->stats.calls > 0)
    RCOLL_INFO(RCOLL_SUB_INIT, "rank %d: flat board: %llu calls, %.2f passes a call, %.1f%% of calls "
               "waited %d passes or more, %llu sleeps, %llu moves to a less crowded core", c->rank,
               (unsigned long long)f->stats.calls, (double)f->stats.passes / (double)f->stats.calls,
               100.0 * (double)f->stats.long_waits / (double)f->stats.calls, FLAT_CLOCK_EVERY,
               (unsigned long long)f->stats.sleeps, (unsigned long long)f->stats.moves);
  munmap(f->base, f->map_bytes);
  free(f->known_done);
  free(f->cpus);
  free(f);
  c->flat = NULL;
}
