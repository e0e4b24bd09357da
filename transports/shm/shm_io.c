/* Requests on a shared-memory connection: isend / irecv / test / close.
 *
 * Everything runs on the calling thread, inside isend, irecv and test: no
 * helper thread, no lock, no system call on the data path except
 * process_vm_readv for single-copy messages between processes and a futex
 * wake when the other end announced that it sleeps.
 *
 * A message either travels through the ring (the sender copies it into as
 * many slots as it needs, the receiver copies it out as they fill), or, from
 * the sender's single-copy threshold up, as one slot that carries the address
 * of the sender's buffer: the receiver copies straight from there and frees
 * the slot, which completes the send. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "copy_out.h"
#include "error.h"
#include "shm_priv.h"

/* Receives of at least this many bytes into memory the caller did not
 * register are written with non-temporal stores (see shm_copy_out). */
#define SHM_STREAM_MIN (256 * 1024)

/* iflush has nothing to do on host memory; it returns this token, which test
 * reports done at once. A NULL request would read as "out of slots". */
static const char shm_flush_token;

void shm_conn_fail(shm_conn_t *c, rcollResult_t r, const char *fmt, ...) {
  va_list ap;
  if (c->err != rcollSuccess)
    return;
  va_start(ap, fmt);
  vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
  va_end(ap);
  c->err = (int)r;
}

static rcollResult_t shm_conn_error(const shm_conn_t *c) {
  return rcoll_error_quiet((rcollResult_t)c->err, "%s", c->errmsg);
}

static shm_req_t *shm_req_alloc(shm_conn_t *c, char *buf, size_t size) {
  if (c->nfree == 0)
    return NULL;
  shm_req_t *r = &c->reqs[c->free_idx[--c->nfree]];
  *r = (shm_req_t){.conn = c, .state = SHM_REQ_ACTIVE, .buf = buf, .size = size};
  c->queue[c->qtail++ % SHM_NREQS] = r;
  return r;
}

static void shm_req_free(shm_conn_t *c, shm_req_t *r) {
  r->state = SHM_REQ_FREE;
  c->free_idx[c->nfree++] = (int)(r - c->reqs);
}

/* ---- sending ---- */

static int shm_send_room(shm_conn_t *c) {
  if (c->pos - c->room < c->nslots)
    return 1;
  c->room = atomic_load_explicit(&c->seg->consumed, memory_order_acquire);
  shm_tsan_acquire(c);
  return c->pos - c->room < c->nslots;
}

static void shm_slot_publish(shm_conn_t *c, shm_slot_t *s, size_t size, size_t len, int kind) {
  if (kind != SHM_SLOT_SMALL) /* there the payload is where size would be */
    s->size = size;
  s->len = (uint32_t)len;
  s->kind = (uint32_t)kind;
  shm_tsan_release(c);
  atomic_store_explicit(&s->seq, c->pos + 1, memory_order_release);
  c->pos++;
}

/* Puts as much of r into the ring as there is room for; returns 1 once all
 * of it is there (or its address, for a single-copy send). */
static int shm_send_push(shm_conn_t *c, shm_req_t *r) {
  if (r->size >= (r->single ? c->single_min : c->direct_min)) {
    if (!shm_send_room(c))
      return 0;
    shm_slot_t *s = shm_slot_at(c, c->pos);
    s->addr = (uint64_t)(uintptr_t)r->buf;
    if (r->pooled)
      memcpy(shm_payload(s, SHM_SLOT_DIRECT), &r->pool, sizeof r->pool);
    shm_slot_publish(c, s, r->size, r->pooled ? sizeof r->pool : 0, SHM_SLOT_DIRECT);
    r->direct = 1;
    r->end = c->pos;
    return 1;
  }
  do {
    if (!shm_send_room(c))
      return 0;
    shm_slot_t *s = shm_slot_at(c, c->pos);
    size_t len = r->size - r->off < c->payload ? r->size - r->off : c->payload;
    int kind = r->off > 0 ? SHM_SLOT_CONT : r->size <= SHM_LINE - SHM_SMALL_AT ? SHM_SLOT_SMALL : SHM_SLOT_FIRST;
    memcpy(shm_payload(s, kind), r->buf + r->off, len);
    shm_slot_publish(c, s, r->size, len, kind);
    r->off += len;
  } while (r->off < r->size);
  r->state = SHM_REQ_DONE; /* the buffer may be reused: the data is in the ring */
  return 1;
}

static void shm_send_progress(shm_conn_t *c) {
  uint64_t before = c->pos;
  while (c->qhead != c->qtail && shm_send_push(c, c->queue[c->qhead % SHM_NREQS]))
    c->qhead++;
  if (c->pos != before)
    shm_wake(&c->seg->rx_word, &c->seg->rx_sleeping);
}

/* ---- receiving ---- */

/* The engine receives into two kinds of memory: its registered staging,
 * which it reduces from right away and must stay in cache, and the user's
 * buffer, which it does not read again during the call. A large copy into
 * the latter streams past the cache: in a 2-rank all-reduce that saves the
 * read of every destination line, ~10% at 16-128 MiB (measured 5.5 -> 5.9
 * GB/s out of place, 7.1 -> 8.4 in place at 128 MiB). */
static void shm_copy_out(const shm_req_t *r, char *dst, const char *src, size_t n) {
  if (r->stream)
    rcoll_copy_stream(dst, src, n); /* no read of each destination line first */
  else
    memcpy(dst, src, n);
}

static void shm_slot_release(shm_conn_t *c) {
  c->pos++;
  shm_tsan_release(c);
  atomic_store_explicit(&c->seg->consumed, c->pos, memory_order_release);
}

static int shm_recv_start(shm_conn_t *c, shm_req_t *r, const shm_slot_t *s) {
  if (s->kind != SHM_SLOT_FIRST && s->kind != SHM_SLOT_DIRECT && s->kind != SHM_SLOT_SMALL) {
    shm_conn_fail(c, rcollInternalError, "shm: stream from %s out of sync (slot kind %u at %llu)",
                  c->peer, s->kind, (unsigned long long)c->pos);
    return -1;
  }
  uint64_t size = s->kind == SHM_SLOT_SMALL ? s->len : s->size;
  if (size > r->size) {
    shm_conn_fail(c, rcollInvalidUsage, "shm: message of %llu bytes from %s larger than posted "
                  "receive of %zu", (unsigned long long)size, c->peer, r->size);
    return -1;
  }
  if (s->kind == SHM_SLOT_DIRECT && c->copy == SHM_COPY_NONE) {
    shm_conn_fail(c, rcollInternalError, "shm: %s sent an address, but this end cannot read it", c->peer);
    return -1;
  }
  r->size = (size_t)size;
  r->started = 1;
  r->direct = s->kind == SHM_SLOT_DIRECT;
  return 1;
}

/* Copies straight from the sender's buffer: with memcpy between threads
 * or from our mapping of the sender's pool block (shm_pool.c), else by the
 * kernel (process_vm_readv), which may stop short: go on from there. A
 * whole message is one copy, which streams from rcoll_copy_out's size (2
 * MiB) rather than shm_copy_out's (256 KiB, for a message that arrives in
 * slots): a 2-rank all-to-all of 1 MiB from pool buffers took 20.5 us
 * against 28.5 when its 512 KiB blocks were streamed. */
static int shm_recv_direct(shm_conn_t *c, shm_req_t *r, shm_slot_t *s) {
  const char *src = (const char *)(uintptr_t)s->addr;
  int copy = c->copy;
  if (copy == SHM_COPY_CMA && s->len == sizeof(rcoll_pool_ref_t)) {
    rcoll_pool_ref_t ref;
    memcpy(&ref, shm_payload(s, SHM_SLOT_DIRECT), sizeof ref);
    const char *mapped = shm_pool_map(c, &ref, r->size);
    if (c->err != rcollSuccess)
      return -1;
    if (mapped != NULL)
      src = mapped, copy = SHM_COPY_MEMCPY;
  }
  if (r->reduce && shm_recv_direct_reduce(c, r, src, copy) < 0)
    return -1;
  if (copy == SHM_COPY_MEMCPY && !r->reduce)
    rcoll_copy_out(r->buf, src, r->size);
  while (copy == SHM_COPY_CMA && r->off < r->size) {
    struct iovec local = {r->buf + r->off, r->size - r->off};
    struct iovec remote = {(void *)(src + r->off), r->size - r->off};
    ssize_t k = process_vm_readv(c->peer_pid, &local, 1, &remote, 1, 0);
    if (k <= 0 && errno != EINTR) {
      shm_conn_fail(c, rcollRemoteError, "shm: reading %zu bytes from %s failed: %s", r->size, c->peer,
                    errno == ESRCH ? "the process has exited" : strerror(errno));
      return -1;
    }
    r->off += k > 0 ? (size_t)k : 0;
  }
  r->off = r->size;
  shm_slot_release(c);
  r->state = SHM_REQ_DONE;
  return 1;
}

/* Moves what has arrived for r: 1 once r is complete, 0 when the ring has
 * nothing more for now, -1 on failure (recorded in the connection). */
static int shm_recv_pull(shm_conn_t *c, shm_req_t *r) {
  for (;;) {
    shm_slot_t *s = shm_slot_at(c, c->pos);
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != c->pos + 1)
      return 0;
    shm_tsan_acquire(c);
    if (!r->started && shm_recv_start(c, r, s) < 0)
      return -1;
    if (r->direct)
      return shm_recv_direct(c, r, s);
    size_t len = s->len;
    int kind = (int)s->kind;
    size_t room = kind == SHM_SLOT_SMALL ? SHM_LINE - SHM_SMALL_AT : c->payload;
    if ((r->off > 0 && kind != SHM_SLOT_CONT) || len > r->size - r->off || len > room) {
      shm_conn_fail(c, rcollInternalError, "shm: stream from %s out of sync (slot of %zu bytes at "
                    "offset %zu of %zu)", c->peer, len, r->off, r->size);
      return -1;
    }
    if (r->reduce)
      shm_reduce_piece(r, r->off, shm_payload(s, kind), len);
    else
      shm_copy_out(r, r->buf + r->off, shm_payload(s, kind), len);
    r->off += len;
    shm_slot_release(c);
    if (r->off == r->size) {
      r->state = SHM_REQ_DONE;
      return 1;
    }
  }
}

static void shm_recv_progress(shm_conn_t *c) {
  uint64_t before = c->pos;
  while (c->qhead != c->qtail && shm_recv_pull(c, c->queue[c->qhead % SHM_NREQS]) > 0)
    c->qhead++;
  if (c->pos != before)
    shm_wake(&c->seg->tx_word, &c->seg->tx_sleeping);
}

void shm_recv_kick(shm_conn_t *c) {
  shm_recv_progress(c);
}

static void shm_progress(shm_conn_t *c) {
  if (c->err != rcollSuccess)
    return;
  if (c->is_send)
    shm_send_progress(c);
  else
    shm_recv_progress(c);
}

/* ---- the ops ---- */

static rcollResult_t shm_send_post(void *comm, const void *data, size_t size, int single, void **request) {
  shm_conn_t *c = comm;
  *request = NULL;
  if (c->err != rcollSuccess)
    return shm_conn_error(c);
  shm_req_t *r = shm_req_alloc(c, (char *)data, size);
  if (r == NULL)
    return rcollSuccess;
  r->single = single;
  r->pooled = shm_pool_describe(c, data, size, single, &r->pool);
  shm_send_progress(c);
  *request = r;
  return rcollSuccess;
}

rcollResult_t shm_isend(void *comm, const void *data, size_t size, int tag, void *mh, void **request) {
  (void)tag, (void)mh;
  return shm_send_post(comm, data, size, 0, request);
}

/* One half of an exchange: single copy from single_min (net.h). */
rcollResult_t shm_isend_single(void *comm, const void *data, size_t size, int tag, void *mh, void **request) {
  (void)tag, (void)mh;
  return shm_send_post(comm, data, size, 1, request);
}

rcollResult_t shm_recv_post(shm_conn_t *c, void *buf, size_t size, shm_req_t **out) {
  *out = NULL;
  if (c->err != rcollSuccess)
    return shm_conn_error(c);
  *out = shm_req_alloc(c, buf, size);
  return rcollSuccess;
}

rcollResult_t shm_irecv(void *comm, int n, void **data, const size_t *sizes, const int *tags, void **mh,
                        void **request) {
  shm_conn_t *c = comm;
  (void)tags;
  *request = NULL;
  if (n != 1)
    return rcoll_error(rcollInvalidArgument, "shm: irecv takes exactly 1 buffer (max_recvs is 1), got %d", n);
  shm_req_t *r = NULL;
  RCOLL_CHECK(shm_recv_post(c, data[0], sizes[0], &r));
  if (r == NULL)
    return rcollSuccess;
  r->stream = (mh == NULL || mh[0] == NULL) && sizes[0] >= SHM_STREAM_MIN;
  shm_recv_progress(c);
  *request = r;
  return rcollSuccess;
}

rcollResult_t shm_iflush(void *comm, int n, void **data, const size_t *sizes, void **mh, void **request) {
  (void)comm, (void)n, (void)data, (void)sizes, (void)mh;
  *request = (void *)&shm_flush_token;
  return rcollSuccess;
}

/* A single-copy send is done once the receiver has released its slot. */
static void shm_send_check_direct(shm_conn_t *c, shm_req_t *r) {
  uint64_t consumed = atomic_load_explicit(&c->seg->consumed, memory_order_acquire);
  shm_tsan_acquire(c);
  c->seen = consumed;
  if (r->direct && consumed >= r->end)
    r->state = SHM_REQ_DONE;
}

/* A request that cannot finish yet: is the peer still there? Data it left
 * before going is still delivered. */
static void shm_test_idle(shm_conn_t *c, shm_req_t *r) {
  if (!shm_peer_check(c, 0))
    return;
  shm_progress(c);
  if (c->is_send)
    shm_send_check_direct(c, r);
  if (r->state != SHM_REQ_DONE)
    shm_conn_fail(c, rcollRemoteError, "shm: %s %s while %s %zu bytes", c->peer,
                  c->seg->closed[c->is_send] ? "closed the connection" : "has exited",
                  c->is_send ? "sending" : "receiving", r->size);
}

rcollResult_t shm_test(void *request, int *done, size_t *sizes) {
  *done = 0;
  if (request == &shm_flush_token) {
    *done = 1;
    return rcollSuccess;
  }
  shm_req_t *r = request;
  shm_conn_t *c = r->conn;
  if (r->state == SHM_REQ_FREE)
    return rcoll_error(rcollInvalidUsage, "shm: test on a request that already completed");
  if (r->state != SHM_REQ_DONE) {
    shm_progress(c);
    if (c->is_send && r->state != SHM_REQ_DONE)
      shm_send_check_direct(c, r);
    if (r->state != SHM_REQ_DONE && c->err == rcollSuccess)
      shm_test_idle(c, r);
  }
  if (r->state == SHM_REQ_DONE) {
    *done = 1;
    if (sizes)
      sizes[0] = r->size;
    shm_req_free(c, r);
    return rcollSuccess;
  }
  return c->err != rcollSuccess ? shm_conn_error(c) : rcollSuccess;
}

/* Tells the peer at once (and wakes it if it sleeps) rather than leaving it
 * to notice the socket closing. */
rcollResult_t shm_close_comm(void *comm) {
  shm_conn_t *c = comm;
  if (c == NULL)
    return rcollSuccess;
  atomic_store_explicit(&c->seg->closed[c->is_send ? 0 : 1], 1, memory_order_release);
  shm_wake(&c->seg->rx_word, &c->seg->rx_sleeping);
  shm_wake(&c->seg->tx_word, &c->seg->tx_sleeping);
  munmap(c->seg, c->seg_bytes);
  if (c->fd >= 0)
    close(c->fd);
  free(c->bounce);
  shm_pool_close(c);
  free(c);
  return rcollSuccess;
}
