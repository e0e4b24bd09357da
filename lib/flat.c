/* The flat board (flat.h): one shared segment per communicator whose ranks
 * all share a machine, where tiny all-reduces meet.
 *
 * Layout: a rank's area is its control area (FLAT_CTL), then its two slots
 * (call k uses slot k & 1). A slot's first line holds the call number, the
 * owner's sleeping flag, the call's description, its count and the first
 * 40 bytes of its vector; larger vectors continue in the lines after it.
 *
 * Why no rank waits for its readers: rank r writes call k into the slot
 * that call m <= k - 2 used. A peer j that had not read it yet would still
 * be in call m, but before r started call k it finished call k - 1, and so
 * saw every peer's slot for k - 1 if k - 1 was a board call; a peer writes
 * that only after it finished m. When calls the engine ran come between,
 * r does not know: it waits (rarely, and briefly) for every peer's `done`,
 * the last board call it finished reading.
 *
 * One file of about 650 lines, on purpose for now: the two proofs above and
 * the sleeping flag's fence pairing (flat_post, flat_sleep) span posting,
 * polling, sleeping and waiting, and read best beside each other. Creation
 * (rcoll_flat_open/close) and the spread over cores (rcoll_flat_balance,
 * whose decision already lives in home_core.c) are the parts to move out,
 * behind a private header for the control area's layout, which both read;
 * that split is the next change to this file, kept out of session 18's
 * last minutes so as not to land a refactoring without its own CI run. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "comm.h"
#include "flat.h"
#include "flight_recorder.h"
#include "home_core.h"
#include "log.h"
#include "pidns.h"
#include "reduce.h"

#define FLAT_LINE 64
#define FLAT_SLEEP_US 10000 /* most one futex sleep lasts: abort and the timeout are seen within it */
#define FLAT_CLOCK_EVERY 8  /* passes between readings of the clock, as the engine's spin */
/* Where ranks outnumber cores a board wait yields on every pass for this
 * many times RCOLL_SPIN_US before it sleeps: a yielding rank stays in the
 * run queue and is back as soon as its peers have run, where a sleeper
 * needs their futex wake and the scheduler's. 4 processes on 2 cores,
 * 64 B, 2000 calls, 4 alternating rounds: 1.97-3.12 us with 1000 us of
 * spin, 2.02-5.26 with 50 (8 B alike; 8 processes 5.5-6.2 both ways). */
#define FLAT_SPIN_SHARED_X 20
/* Calls between two looks at every rank's core (rcoll_flat_balance): n
 * lines read from other cores and a system call, a few ns a call here. */
#define FLAT_BALANCE_EVERY 64

/* A rank's control area; only its owner writes it, except `word`. */
typedef struct flat_ctl {
  _Atomic uint64_t done;      /* board calls up to this number are read: their slots are free */
  _Atomic uint64_t cur_seq;   /* the collective it last entered; 0 while cur_* change */
  _Atomic uint64_t cur_count;
  _Atomic uint32_t cur_desc;  /* flat_desc() of that call, FLAT_ON_BOARD if it runs here */
  _Atomic uint32_t word;      /* futex word: a peer that finds the owner asleep bumps it */
  _Atomic uint32_t closed;    /* the owner destroyed or aborted its communicator */
  _Atomic int32_t cur_root;   /* that call's root, RCOLL_FP_NONE without one */
  int32_t pid;
  _Atomic int32_t cpu;        /* the core its last call started on, plus one; 0: none yet */
  uint64_t ns_key;            /* pidns.h: the pid means something here only if this is ours */
  _Atomic uint64_t cur_algo[RCOLL_FP_ALGO / 8 + 1]; /* that call's algorithm's name (rcoll_fp_t.algo) */
} flat_ctl_t;
#define FLAT_CTL 128 /* two lines */
_Static_assert(sizeof(flat_ctl_t) <= FLAT_CTL, "a control area is two cache lines");

typedef struct flat_slot {
  _Atomic uint64_t seq;       /* the call whose vector this holds; stored last */
  _Atomic uint32_t sleeping;  /* the owner sleeps on its `word` waiting in this call */
  uint32_t desc;
  uint64_t count;
  unsigned char data[];       /* 40 bytes in this line, the rest after it */
} flat_slot_t;
#define FLAT_SLOT_HDR 24
_Static_assert(offsetof(flat_slot_t, data) == FLAT_SLOT_HDR, "the slot header is 24 bytes");

#define FLAT_ON_BOARD (1u << 31)
static const char FLAT_NAME[RCOLL_FP_ALGO] = "flat"; /* as fingerprints name the algorithm */

struct rcoll_flat {
  unsigned char *base;
  size_t map_bytes, max, slot_bytes, stride;
  uint64_t ns_key;
  uint64_t *known_done; /* per peer: a `done` it is known to have reached */
  int *cpus;            /* per rank: its core, as rcoll_flat_balance last read it */
  uint64_t balance_tick;
  const rcoll_algorithm_t *algo; /* algorithms/allreduce_flat.c, as the tuner returns it */
  rcoll_fp_t fp;        /* the running board call's fingerprint (call.h) */
  rcoll_flat_stats_t stats;
};

/* What two ranks' calls must agree on besides the count. */
static uint32_t flat_desc(int kind, int dtype, int op, int device) {
  return (uint32_t)kind | (uint32_t)dtype << 8 | (uint32_t)(uint8_t)op << 16 | (uint32_t)!!device << 24;
}

static flat_ctl_t *flat_ctl(const struct rcoll_flat *f, int rank) {
  return (flat_ctl_t *)(f->base + (size_t)rank * f->stride);
}

static flat_slot_t *flat_slot(const struct rcoll_flat *f, int rank, uint64_t seq) {
  return (flat_slot_t *)(f->base + (size_t)rank * f->stride + FLAT_CTL + (seq & 1) * f->slot_bytes);
}

static size_t flat_round(size_t n) { return (n + FLAT_LINE - 1) / FLAT_LINE * FLAT_LINE; }

size_t rcoll_flat_max(const struct rcollComm *c) { return c->flat != NULL ? c->flat->max : 0; }

int rcoll_flat_takes(struct rcollComm *c, const rcoll_coll_args_t *a, size_t bytes, rcoll_tune_choice_t *ch) {
  if (bytes > c->flat->max || (int)a->op >= (int)rcollNumOps ||
      (a->op == rcollAvg && (a->dtype == rcollFloat8e4m3 || a->dtype == rcollFloat8e5m2)))
    return 0;
  *ch = rcoll_tune_choose(c->plan.tuner, RCOLL_COLL_ALLREDUCE, bytes); /* remembered by size */
  return ch->desc == c->flat->algo;
}

/* ---- creation -------------------------------------------------------- */

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
      if (rcoll_algorithms[i]->coll == RCOLL_COLL_ALLREDUCE && strcmp(rcoll_algorithms[i]->name, FLAT_NAME) == 0)
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

/* ---- the protocol ---------------------------------------------------- */

/* Publishes the collective this rank is in. A seqlock: readers
 * (flat_peer_state) take the fields only between two equal non-zero
 * readings of cur_seq. */
static void flat_publish(struct rcollComm *c, uint64_t seq, uint32_t desc, uint64_t count, int32_t root,
                         const char algo[RCOLL_FP_ALGO]) {
  flat_ctl_t *ctl = flat_ctl(c->flat, c->rank);
  uint64_t name[RCOLL_FP_ALGO / 8 + 1] = {0};
  memcpy(name, algo, RCOLL_FP_ALGO);
  atomic_store_explicit(&ctl->cur_seq, 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&ctl->cur_count, count, memory_order_relaxed);
  atomic_store_explicit(&ctl->cur_desc, desc, memory_order_relaxed);
  atomic_store_explicit(&ctl->cur_root, root, memory_order_relaxed);
  for (size_t i = 0; i < sizeof name / sizeof name[0]; i++)
    atomic_store_explicit(&ctl->cur_algo[i], name[i], memory_order_relaxed);
  atomic_store_explicit(&ctl->cur_seq, seq, memory_order_release);
}

void rcoll_flat_note(struct rcollComm *c, const rcoll_fp_t *fp) {
  uint32_t board = memcmp(fp->algo, FLAT_NAME, sizeof FLAT_NAME) == 0 ? FLAT_ON_BOARD : 0; /* a group's */
  flat_publish(c, fp->seq, flat_desc(fp->kind, fp->dtype, fp->op, fp->magic == RCOLL_FP_MAGIC_DEVICE) | board,
               fp->count, fp->root, fp->algo);
}

/* A call given by number, description and count, as a fingerprint. */
static rcoll_fp_t flat_fp(uint64_t seq, uint32_t desc, uint64_t count, int32_t root) {
  rcoll_fp_t fp;
  memset(&fp, 0, sizeof fp);
  fp.seq = seq;
  fp.count = count;
  fp.kind = (uint8_t)(desc & 0xff);
  fp.dtype = (uint8_t)(desc >> 8 & 0xff);
  fp.op = (int8_t)(desc >> 16 & 0xff);
  fp.root = root;
  fp.magic = desc >> 24 & 1 ? RCOLL_FP_MAGIC_DEVICE : RCOLL_FP_MAGIC;
  if (desc & FLAT_ON_BOARD)
    memcpy(fp.algo, FLAT_NAME, sizeof FLAT_NAME);
  return fp;
}

/* A peer's published call, as a fingerprint; 0 when none or it is changing. */
static int flat_peer_state(const struct rcoll_flat *f, int peer, rcoll_fp_t *fp, int *on_board) {
  flat_ctl_t *ctl = flat_ctl(f, peer);
  uint64_t s1 = atomic_load_explicit(&ctl->cur_seq, memory_order_acquire);
  uint64_t count = atomic_load_explicit(&ctl->cur_count, memory_order_relaxed);
  uint32_t desc = atomic_load_explicit(&ctl->cur_desc, memory_order_relaxed);
  int32_t root = atomic_load_explicit(&ctl->cur_root, memory_order_relaxed);
  uint64_t name[RCOLL_FP_ALGO / 8 + 1];
  for (size_t i = 0; i < sizeof name / sizeof name[0]; i++)
    name[i] = atomic_load_explicit(&ctl->cur_algo[i], memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  if (s1 == 0 || s1 != atomic_load_explicit(&ctl->cur_seq, memory_order_relaxed))
    return 0;
  *fp = flat_fp(s1, desc, count, root);
  memcpy(fp->algo, name, RCOLL_FP_ALGO);
  *on_board = (desc & FLAT_ON_BOARD) != 0;
  return 1;
}

/* Writes this rank's vector for call seq; 0 while a peer may still read the
 * slot's previous call (see the top of the file). */
static int flat_post(struct rcollComm *c, uint64_t seq, uint32_t desc, uint64_t count, const void *src,
                     size_t bytes) {
  struct rcoll_flat *f = c->flat;
  flat_slot_t *s = flat_slot(f, c->rank, seq);
  uint64_t prev = atomic_load_explicit(&s->seq, memory_order_relaxed);
  for (int j = 0; j < c->nranks; j++) {
    if (j == c->rank || f->known_done[j] >= prev)
      continue;
    f->known_done[j] = atomic_load_explicit(&flat_ctl(f, j)->done, memory_order_acquire);
    if (f->known_done[j] < prev)
      return 0;
  }
  s->desc = desc;
  s->count = count;
  memcpy(s->data, src, bytes);
  atomic_store_explicit(&s->seq, seq, memory_order_release);
  /* Pairs with a sleeper's store of its flag (flat_sleep): either it sees
   * this slot, or this rank sees its flag when it reads its slot. */
  atomic_thread_fence(memory_order_seq_cst);
  return 1;
}

static void flat_wake(const struct rcoll_flat *f, int peer, flat_slot_t *s) {
  if (!atomic_load_explicit(&s->sleeping, memory_order_relaxed) ||
      !atomic_exchange_explicit(&s->sleeping, 0, memory_order_relaxed))
    return;
  _Atomic uint32_t *word = &flat_ctl(f, peer)->word;
  atomic_fetch_add_explicit(word, 1, memory_order_release);
  syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Peers whose slot for call seq has arrived are checked against ours and
 * woken if they sleep; returns how many have not arrived (-1: a peer made
 * another call, *err says which). */
static int flat_poll(struct rcollComm *c, uint64_t seq, uint32_t desc, uint64_t count, rcollResult_t *err) {
  struct rcoll_flat *f = c->flat;
  int missing = 0;
  for (int j = 0; j < c->nranks; j++) {
    if (j == c->rank)
      continue;
    flat_slot_t *s = flat_slot(f, j, seq);
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != seq) {
      missing++;
      continue;
    }
    if (s->desc != desc || s->count != count) {
      rcoll_fp_t mine = flat_fp(seq, desc | FLAT_ON_BOARD, count, RCOLL_FP_NONE);
      rcoll_fp_t theirs = flat_fp(seq, s->desc | FLAT_ON_BOARD, s->count, RCOLL_FP_NONE);
      *err = rcoll_fp_mismatch(c, &mine, &theirs, j);
      return -1;
    }
    flat_wake(f, j, s);
    if (f->known_done[j] < seq - 1) /* it finished every call before this one */
      f->known_done[j] = seq - 1;
  }
  return missing;
}

/* dst = every rank's vector, summed (or min, max ...) in rank order. */
static void flat_reduce(struct rcollComm *c, uint64_t seq, void *dst, size_t count, rcollDataType_t t,
                        rcollRedOp_t op) {
  struct rcoll_flat *f = c->flat;
  rcoll_reduce(dst, flat_slot(f, 0, seq)->data, flat_slot(f, 1, seq)->data, count, t, op);
  for (int j = 2; j < c->nranks; j++)
    rcoll_reduce(dst, dst, flat_slot(f, j, seq)->data, count, t, op);
  rcoll_reduce_finish(dst, count, t, op, c->nranks);
  atomic_store_explicit(&flat_ctl(f, c->rank)->done, seq, memory_order_release);
}

/* The first peer that has not written call seq. */
static int flat_first_missing(const struct rcollComm *c, uint64_t seq) {
  for (int j = 0; j < c->nranks; j++)
    if (j != c->rank && atomic_load_explicit(&flat_slot(c->flat, j, seq)->seq, memory_order_acquire) != seq)
      return j;
  return c->rank;
}

/* Every RCOLL_FLAT_CHECK_MS of a long wait in call seq: a peer that closed its
 * communicator, exited, or published another call of this number. (A
 * higher number proves nothing: a peer in a group publishes its calls as
 * it numbers them, before it runs the first.) */
static rcollResult_t flat_peers_ok(struct rcollComm *c, uint64_t seq, uint32_t desc, uint64_t count) {
  struct rcoll_flat *f = c->flat;
  for (int j = 0; j < c->nranks; j++) {
    if (j == c->rank || atomic_load_explicit(&flat_slot(f, j, seq)->seq, memory_order_acquire) == seq)
      continue;
    char name[128], where[320];
    flat_ctl_t *ctl = flat_ctl(f, j);
    if (atomic_load_explicit(&ctl->closed, memory_order_acquire))
      return rcoll_error(rcollRemoteError, "rank %d: %s destroyed or aborted its communicator while this "
                         "rank waits for it on the flat board%s (it made fewer calls, or failed)", c->rank,
                         rcoll_comm_peer_name(c, j, name, sizeof name), rcoll_calls_where(c, where, sizeof where));
    if (ctl->ns_key == f->ns_key && f->ns_key != 0 && ctl->pid > 0 && ctl->pid != getpid() &&
        kill(ctl->pid, 0) != 0 && errno == ESRCH)
      return rcoll_error(rcollRemoteError, "rank %d: %s (pid %d) has exited while this rank waits for it "
                         "on the flat board%s", c->rank, rcoll_comm_peer_name(c, j, name, sizeof name),
                         (int)ctl->pid, rcoll_calls_where(c, where, sizeof where));
    rcoll_fp_t theirs, mine = flat_fp(seq, desc | FLAT_ON_BOARD, count, RCOLL_FP_NONE);
    int board = 0;
    if (flat_peer_state(f, j, &theirs, &board) && theirs.seq == seq && !board)
      return rcoll_fp_mismatch(c, &mine, &theirs, j);
  }
  return rcollSuccess;
}

/* Sleeps until a peer that writes call seq may have woken us (or at most
 * FLAT_SLEEP_US). The flag is in our own slot, which every peer reads when
 * it finds our vector there. */
static void flat_sleep(struct rcollComm *c, uint64_t seq, uint32_t desc, uint64_t count) {
  struct rcoll_flat *f = c->flat;
  flat_slot_t *s = flat_slot(f, c->rank, seq);
  _Atomic uint32_t *word = &flat_ctl(f, c->rank)->word;
  uint32_t w = atomic_load(word);
  atomic_store(&s->sleeping, 1);
  atomic_thread_fence(memory_order_seq_cst); /* pairs with flat_post's: see there */
  rcollResult_t ignored = rcollSuccess;
  if (flat_poll(c, seq, desc, count, &ignored) > 0) {
    struct timespec ts = {0, FLAT_SLEEP_US * 1000};
    syscall(SYS_futex, word, FUTEX_WAIT, w, &ts, NULL, 0);
  }
  atomic_store_explicit(&s->sleeping, 0, memory_order_relaxed);
}

/* RCOLL_TIMEOUT passed in board call seq: names the first peer missing. */
static rcollResult_t flat_timeout(struct rcollComm *c, uint64_t seq, int64_t waited_ms, const char *where) {
  char name[128];
  rcoll_comm_peer_name(c, flat_first_missing(c, seq), name, sizeof name);
  return rcoll_error(rcollTimeout, "rank %d: no progress for %lld ms waiting for %s on the flat board%s "
                     "(RCOLL_TIMEOUT=%lld s); that rank has not started this call (it died, hangs elsewhere "
                     "or made fewer calls)", c->rank, (long long)waited_ms, name, where,
                     (long long)c->settings.timeout);
}

/* Waits for every peer's vector: spins (yielding as the engine does, see
 * comm_spin_policy), then sleeps; gives up on abort, a peer that left or
 * differs, and RCOLL_TIMEOUT without progress. */
static rcollResult_t flat_wait(struct rcollComm *c, uint64_t seq, uint32_t desc, uint64_t count,
                               const void *src, size_t bytes) {
  int64_t spin_us = c->spin_yield == RCOLL_YIELD_EVERY_PASS ? FLAT_SPIN_SHARED_X * c->spin_us : c->spin_us;
  int posted = 0, last_missing = c->nranks;
  unsigned passes = 0;
  int64_t since = 0, checked = 0;
  for (;;) {
    rcollResult_t err = rcollSuccess;
    if (!posted)
      posted = flat_post(c, seq, desc, count, src, bytes);
    int missing = posted ? flat_poll(c, seq, desc, count, &err) : last_missing;
    if (missing < 0)
      return err;
    if (posted && missing == 0) {
      c->flat->stats.passes += passes;
      c->flat->stats.long_waits += passes >= FLAT_CLOCK_EVERY;
      return rcollSuccess;
    }
    if (c->aborted || c->revoked)
      return rcoll_error(rcollInvalidUsage, "rank %d: communicator %s during collective #%llu", c->rank,
                         c->aborted ? "aborted" : "revoked (rcollCommRevoke or rcollCommShrink)",
                         (unsigned long long)seq);
    if (missing < last_missing)
      last_missing = missing, since = 0;
    if (++passes % FLAT_CLOCK_EVERY != 0) { /* the clock costs more than a pass */
      if (c->spin_yield == RCOLL_YIELD_EVERY_PASS)
        sched_yield();
      continue;
    }
    int64_t now = rcoll_now_us();
    if (since == 0)
      since = checked = now;
    if (now - checked >= RCOLL_FLAT_CHECK_MS * 1000) {
      checked = now;
      if ((err = flat_peers_ok(c, seq, desc, count)) != rcollSuccess)
        return err;
    }
    if (now - since > c->timeout_ms * 1000) {
      char where[320];
      rcoll_calls_where(c, where, sizeof where);
      if (!posted)
        return rcoll_error(rcollTimeout, "rank %d: no progress for %lld ms%s: the peers have not read "
                           "this rank's previous board call (RCOLL_TIMEOUT=%lld s)", c->rank,
                           (long long)(now - since) / 1000, where, (long long)c->settings.timeout);
      return flat_timeout(c, seq, (now - since) / 1000, where);
    }
    if (now - since < spin_us || !posted) {
      if (c->spin_yield != RCOLL_YIELD_NEVER || now - since >= spin_us)
        sched_yield();
      continue;
    }
    c->flat->stats.sleeps++;
    flat_sleep(c, seq, desc, count);
  }
}

rcollResult_t rcoll_flat_allreduce(struct rcollComm *c, const rcoll_coll_args_t *a, rcollRedOp_t user_op) {
  size_t bytes = a->count * rcoll_type_size(a->dtype);
  const rcoll_fp_t *fp = rcoll_call_board(c, RCOLL_COLL_ALLREDUCE, a, user_op, &c->flat->fp);
  if (fp == NULL)
    return rcoll_error(rcollSystemError, "rank %d: out of memory recording a call", c->rank);
  c->active++;
  c->flat->stats.calls++;
  if (c->balance)
    rcoll_flat_balance(c);
  uint32_t desc = flat_desc(RCOLL_COLL_ALLREDUCE, a->dtype, a->op, 0);
  flat_publish(c, fp->seq, desc | FLAT_ON_BOARD, a->count, RCOLL_FP_NONE, FLAT_NAME);
  if (c->fr != NULL)
    rcoll_fr_run_begin(c, rcoll_now_coarse_us());
  rcollResult_t r = flat_wait(c, fp->seq, desc, a->count, a->sendbuff, bytes);
  if (r == rcollSuccess)
    flat_reduce(c, fp->seq, a->recvbuff, a->count, a->dtype, a->op);
  if (c->fr != NULL)
    rcoll_fr_run_end(c, r);
  if (r != rcollSuccess) {
    snprintf(c->last_error, sizeof c->last_error, "%s", rcoll_error_text());
    if (rcoll_comm_set_error(c, r) && c->fr != NULL)
      rcoll_fr_dump(c, r == rcollTimeout ? "timeout" : "error");
  }
  rcoll_calls_reset(c);
  c->plan.algo = NULL;
  c->active--;
  return r;
}

/* ---- where ranks outnumber cores --------------------------------------- */

void rcoll_flat_balance(struct rcollComm *c) {
  struct rcoll_flat *f = c->flat;
  flat_ctl_t *ctl = flat_ctl(f, c->rank);
  int cpu = sched_getcpu(); /* glibc's rseq area: no system call */
  if (cpu >= 0 && atomic_load_explicit(&ctl->cpu, memory_order_relaxed) != cpu + 1)
    atomic_store_explicit(&ctl->cpu, cpu + 1, memory_order_relaxed);
  cpu_set_t mask;
  if (cpu < 0 || ++f->balance_tick % FLAT_BALANCE_EVERY != 0 || sched_getaffinity(0, sizeof mask, &mask) != 0)
    return;
  for (int j = 0; j < c->nranks; j++)
    f->cpus[j] = (int)atomic_load_explicit(&flat_ctl(f, j)->cpu, memory_order_relaxed) - 1;
  int to = rcoll_home_core_rebalance(f->cpus, c->nranks, c->rank, &mask);
  if (to >= 0 && (cpu = rcoll_home_core_go(to, c->home_cores)) >= 0) {
    atomic_store_explicit(&ctl->cpu, cpu + 1, memory_order_relaxed);
    f->stats.moves++;
  }
}

/* ---- the engine's side ----------------------------------------------- */

int rcoll_flat_step_post(struct rcollComm *c, const rcoll_step_t *st) {
  uint32_t desc = flat_desc(RCOLL_COLL_ALLREDUCE, st->dtype, st->op, 0);
  size_t count = st->bytes / rcoll_type_size((rcollDataType_t)st->dtype);
  flat_publish(c, st->seq, desc | FLAT_ON_BOARD, count, RCOLL_FP_NONE, FLAT_NAME);
  return flat_post(c, st->seq, desc, count, st->src, st->bytes);
}

int rcoll_flat_step_test(struct rcollComm *c, const rcoll_step_t *st, rcollResult_t *err) {
  rcollDataType_t t = (rcollDataType_t)st->dtype;
  size_t count = st->bytes / rcoll_type_size(t);
  uint32_t desc = flat_desc(RCOLL_COLL_ALLREDUCE, t, st->op, 0);
  int missing = flat_poll(c, st->seq, desc, count, err);
  if (missing != 0)
    return 0;
  flat_reduce(c, st->seq, st->dst, count, t, (rcollRedOp_t)st->op);
  return 1;
}

void rcoll_flat_post_early(rcoll_plan_t *p) {
  for (int i = p->head; i < p->nsteps; i++) {
    rcoll_step_t *st = &p->steps[i];
    int after = st->dep[0]; /* the group's previous board step (coll.c) */
    if ((st->flags & RCOLL_STEP_BOARD) && st->state == RCOLL_STEP_PENDING &&
        (after == RCOLL_NO_DEP || p->steps[after].state == RCOLL_STEP_DONE) && rcoll_flat_step_post(p->comm, st))
      st->state = RCOLL_STEP_POSTED;
  }
}

/* A peer that sits on the board in call mine->seq, which this rank runs
 * otherwise. */
static rcollResult_t flat_check_call(struct rcollComm *c, const rcoll_fp_t *mine) {
  if (rcoll_coll_is_p2p(mine->kind) || memcmp(mine->algo, FLAT_NAME, sizeof FLAT_NAME) == 0)
    return rcollSuccess;
  for (int j = 0; j < c->nranks; j++) {
    rcoll_fp_t theirs;
    int board = 0;
    if (j != c->rank && flat_peer_state(c->flat, j, &theirs, &board) && board && theirs.seq == mine->seq)
      return rcoll_fp_mismatch(c, mine, &theirs, j);
  }
  return rcollSuccess;
}

rcollResult_t rcoll_flat_check(struct rcollComm *c, const rcoll_plan_t *p) {
  const void *last = NULL;
  for (int i = 0; i < p->nsteps; i++) { /* from the first: a fingerprint sent is a step done */
    const rcoll_step_t *st = &p->steps[i];
    rcollResult_t r = rcollSuccess;
    /* A call's fingerprint sends (fingerprint.c) carry its fingerprint
     * first; device plans, which keep no call records, have them too. */
    if ((st->flags & RCOLL_STEP_FP) && st->kind == RCOLL_STEP_SEND && st->src != last)
      r = flat_check_call(c, (const rcoll_fp_t *)(last = st->src));
    else if ((st->flags & RCOLL_STEP_BOARD) && st->state == RCOLL_STEP_POSTED)
      r = flat_peers_ok(c, st->seq, flat_desc(RCOLL_COLL_ALLREDUCE, st->dtype, st->op, 0),
                        st->bytes / rcoll_type_size((rcollDataType_t)st->dtype));
    if (r != rcollSuccess)
      return r;
  }
  return rcollSuccess;
}

rcollResult_t rcoll_flat_check_plans(rcoll_plan_t *const *plans, int nplans) {
  for (int i = 0; i < nplans; i++) {
    rcollResult_t r = plans[i]->comm->flat != NULL ? rcoll_flat_check(plans[i]->comm, plans[i]) : rcollSuccess;
    if (r != rcollSuccess)
      return r;
  }
  return rcollSuccess;
}

rcollResult_t rcoll_flat_step_timeout(struct rcollComm *c, const rcoll_step_t *st, int64_t waited_ms,
                                      const char *where) {
  return flat_timeout(c, st->seq, waited_ms, where);
}

const rcoll_algorithm_t *rcoll_flat_algorithm(const struct rcollComm *c) { return c->flat->algo; }

rcoll_flat_stats_t rcoll_flat_stats(const struct rcollComm *c) {
  return c->flat != NULL ? c->flat->stats : (rcoll_flat_stats_t){0};
}
