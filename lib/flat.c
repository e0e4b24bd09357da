/* The flat board (flat.h): one shared segment per communicator whose ranks
 * all share a machine, where tiny all-reduces meet. This file is the
 * protocol: posting, polling, sleeping and waiting, and the engine's side.
 * The layout is in flat_priv.h, creation in flat_open.c, the spread over
 * cores in flat_balance.c.
 *
 * Why no rank waits for its readers: rank r writes call k into the slot
 * that call m <= k - 2 used. A peer j that had not read it yet would still
 * be in call m, but before r started call k it finished call k - 1, and so
 * saw every peer's slot for k - 1 if k - 1 was a board call; a peer writes
 * that only after it finished m. When calls the engine ran come between,
 * r does not know: it waits (rarely, and briefly) for every peer's `done`,
 * the last board call it finished reading.
 *
 * The proof above and the sleeping flag's fence pairing (flat_post,
 * flat_sleep) span posting, polling, sleeping and waiting, which is why
 * those stay together in this one file. */
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "comm.h"
#include "flat_priv.h"
#include "flight_recorder.h"
#include "log.h"
#include "reduce.h"

#define FLAT_SLEEP_US 10000 /* most one futex sleep lasts: abort and the timeout are seen within it */
/* Where ranks outnumber cores a board wait yields on every pass for this
 * many times RCOLL_SPIN_US before it sleeps: a yielding rank stays in the
 * run queue and is back as soon as its peers have run, where a sleeper
 * needs their futex wake and the scheduler's. 4 processes on 2 cores,
 * 64 B, 2000 calls, 4 alternating rounds: 1.97-3.12 us with 1000 us of
 * spin, 2.02-5.26 with 50 (8 B alike; 8 processes 5.5-6.2 both ways). */
#define FLAT_SPIN_SHARED_X 20

static const char FLAT_NAME[RCOLL_FP_ALGO] = FLAT_ALGO_NAME; /* zero-padded, as fingerprints hold it */

/* What two ranks' calls must agree on besides the count. */
static uint32_t flat_desc(int kind, int dtype, int op, int device) {
  return (uint32_t)kind | (uint32_t)dtype << 8 | (uint32_t)(uint8_t)op << 16 | (uint32_t)!!device << 24;
}

size_t rcoll_flat_max(const struct rcollComm *c) { return c->flat != NULL ? c->flat->max : 0; }

int rcoll_flat_takes(struct rcollComm *c, const rcoll_coll_args_t *a, size_t bytes, rcoll_tune_choice_t *ch) {
  if (bytes > c->flat->max || (int)a->op >= (int)rcollNumOps ||
      (a->op == rcollAvg && (a->dtype == rcollFloat8e4m3 || a->dtype == rcollFloat8e5m2)))
    return 0;
  *ch = rcoll_tune_choose(c->plan.tuner, RCOLL_COLL_ALLREDUCE, bytes); /* remembered by size */
  return ch->desc == c->flat->algo;
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
