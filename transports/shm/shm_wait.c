/* Sleeping until a connection may progress, waking the other end, and
 * noticing that it has gone.
 *
 * Each direction of a connection has a futex word for each end in its
 * segment (rx_word: the receiver sleeps on it; tx_word: the sender). A waiter
 * raises its `sleeping` flag, reads the word, looks once more for work, and
 * sleeps in futex_waitv on the words of every connection it waits for, so one
 * sleep covers all of them. A producer that has published slots (or freed
 * them) checks the flag after a full fence and, when it is up, takes it down,
 * bumps the word and wakes. The fence pairs with the waiter's sequentially
 * consistent store of the flag: either the waiter sees the new work and does
 * not sleep, or the producer sees the flag and wakes it. A producer pays for
 * a system call only when the other end really sleeps.
 *
 * A peer that exits never wakes anybody: the waits are bounded (the engine
 * passes at most a few milliseconds) and afterwards every connection checks,
 * at most every SHM_CHECK_MS, whether its unix socket reads end-of-file or
 * the peer's pid has gone. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "shm_priv.h"

#define SHM_WAIT_MAX 64
#define SHM_FALLBACK_NAP_US 200 /* kernels without futex_waitv: one word, short naps */

void shm_wake(_Atomic uint32_t *word, _Atomic uint32_t *sleeping) {
  atomic_thread_fence(memory_order_seq_cst);
  if (!atomic_load_explicit(sleeping, memory_order_relaxed))
    return;
  if (!atomic_exchange_explicit(sleeping, 0, memory_order_relaxed))
    return; /* someone else woke it already */
  atomic_fetch_add_explicit(word, 1, memory_order_release);
  syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static _Atomic uint32_t *shm_my_word(shm_conn_t *c) {
  return c->is_send ? &c->seg->tx_word : &c->seg->rx_word;
}

static _Atomic uint32_t *shm_my_flag(shm_conn_t *c) {
  return c->is_send ? &c->seg->tx_sleeping : &c->seg->rx_sleeping;
}

/* Whether a test on this connection might now make progress. */
int shm_conn_ready(shm_conn_t *c) {
  if (c->err != rcollSuccess || c->gone)
    return 1;
  if (atomic_load_explicit(&c->seg->closed[c->is_send ? 1 : 0], memory_order_acquire))
    return 1;
  if (c->is_send) {
    uint64_t consumed = atomic_load_explicit(&c->seg->consumed, memory_order_acquire);
    return consumed != c->seen || (c->qhead != c->qtail && c->pos - consumed < c->nslots);
  }
  return c->qhead != c->qtail &&
         atomic_load_explicit(&shm_slot_at(c, c->pos)->seq, memory_order_acquire) == c->pos + 1;
}

/* Returns 1 once the peer has closed its end or exited (sticky). Closing is
 * a flag in the segment, read every time; an exit shows as end-of-file on
 * the unix socket, read at most every SHM_CHECK_MS, and without `force` only
 * on every 32nd call so that a busy test loop does not read the clock. */
int shm_peer_check(shm_conn_t *c, int force) {
  if (c->gone)
    return 1;
  if (atomic_load_explicit(&c->seg->closed[c->is_send ? 1 : 0], memory_order_acquire))
    return c->gone = 1;
  if (!force && (++c->idle & 31) != 0)
    return 0;
  int64_t now = rcoll_now_ms();
  if (now - c->check_ms < SHM_CHECK_MS || c->fd < 0)
    return 0;
  c->check_ms = now;
  char b;
  ssize_t k = recv(c->fd, &b, 1, MSG_DONTWAIT | MSG_PEEK);
  if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
    c->gone = 1;
  /* A child forked by the peer keeps the socket open after the peer died. */
  if (c->peer_pid > 0 && c->peer_pid != getpid() && kill(c->peer_pid, 0) != 0 && errno == ESRCH)
    c->gone = 1;
  return c->gone;
}

static void shm_sleep(struct futex_waitv *w, int n, int64_t timeout_us) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t ns = ts.tv_nsec + timeout_us * 1000;
  ts.tv_sec += ns / 1000000000;
  ts.tv_nsec = ns % 1000000000;
  if (syscall(SYS_futex_waitv, w, (unsigned)n, 0, &ts, CLOCK_MONOTONIC) >= 0 || errno != ENOSYS)
    return;
  /* Before Linux 5.16: sleep on the first word only, briefly. */
  int64_t nap = timeout_us < SHM_FALLBACK_NAP_US || n == 1 ? timeout_us : SHM_FALLBACK_NAP_US;
  struct timespec rel = {.tv_sec = nap / 1000000, .tv_nsec = (nap % 1000000) * 1000};
  syscall(SYS_futex, (void *)(uintptr_t)w[0].uaddr, FUTEX_WAIT, (uint32_t)w[0].val, &rel, NULL, 0);
}

rcollResult_t shm_wait(void *const *comms, int n, int64_t timeout_us) {
  struct futex_waitv w[SHM_WAIT_MAX];
  int ready = 0;
  if (n > SHM_WAIT_MAX)
    n = SHM_WAIT_MAX;
  for (int i = 0; i < n; i++) {
    shm_conn_t *c = comms[i];
    atomic_store(shm_my_flag(c), 1);
    w[i] = (struct futex_waitv){.val = atomic_load(shm_my_word(c)),
                                .uaddr = (uint64_t)(uintptr_t)shm_my_word(c),
                                .flags = FUTEX_32};
  }
  for (int i = 0; i < n && !ready; i++)
    ready = shm_conn_ready(comms[i]);
  if (!ready && timeout_us > 0)
    shm_sleep(w, n, timeout_us);
  for (int i = 0; i < n; i++) {
    atomic_store_explicit(shm_my_flag(comms[i]), 0, memory_order_relaxed);
    shm_peer_check(comms[i], 1);
  }
  return rcollSuccess;
}
