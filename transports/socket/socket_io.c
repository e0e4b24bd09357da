/* Requests on a socket connection: isend / irecv / test / iflush / close.
 *
 * The control socket is driven only by the calling thread, with non-blocking
 * calls made inside isend, irecv and test: an inline message costs one
 * sendmsg on the sender and usually one recv on the receiver, with no lock,
 * no allocation and no thread handoff. Large payloads are handed to the
 * helper threads (socket_helper.c) as soon as their size is known: at isend
 * on the sender, when the header arrives on the receiver. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "socket_priv.h"

/* iflush has nothing to do on host memory; it returns this token, which test
 * reports done at once. A NULL request would read as "out of slots". */
static const char socket_flush_token;

void socket_conn_fail(socket_conn_t *c, rcollResult_t r, const char *fmt, ...) {
  va_list ap;
  if (atomic_flag_test_and_set(&c->err_claimed))
    return;
  va_start(ap, fmt);
  vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
  va_end(ap);
  atomic_store(&c->err, (int)r);
  socket_wake(c);
  /* Wake every helper and tell the peer at once, rather than letting each
   * party find out through its own timeout. */
  shutdown(c->ctrl_fd, SHUT_RDWR);
  for (int s = 0; s < c->ndata; s++)
    shutdown(c->data[s].fd, SHUT_RDWR);
}

static rcollResult_t socket_conn_error(socket_conn_t *c) {
  return rcoll_error_quiet((rcollResult_t)atomic_load(&c->err), "%s", c->errmsg);
}

static socket_req_t *socket_req_alloc(socket_conn_t *c, int kind) {
  if (c->nfree == 0)
    return NULL;
  socket_req_t *r = &c->reqs[c->free_idx[--c->nfree]];
  r->kind = kind;
  r->ctrl_done = 0;
  r->ctrl_off = 0;
  r->size = 0;
  r->group = NULL;
  atomic_store_explicit(&r->pieces_left, 0, memory_order_relaxed);
  atomic_store_explicit(&r->failed, 0, memory_order_relaxed);
  c->ring[c->ring_tail++ % SOCKET_NREQS] = r;
  return r;
}

static void socket_req_free(socket_conn_t *c, socket_req_t *r) {
  r->kind = SOCKET_REQ_FREE;
  c->free_idx[c->nfree++] = (int)(r - c->reqs);
}

static size_t socket_div_up(size_t a, size_t b) { return (a + b - 1) / b; }

/* Cuts a large message into contiguous pieces, one per data socket, none
 * smaller than SOCKET_MIN_PIECE; both ends derive the same cut from the size.
 * The first socket rotates so that mid-size messages spread over all. */
static void socket_dispatch(socket_conn_t *c, socket_req_t *r) {
  size_t np = r->size / SOCKET_MIN_PIECE;
  if (np < 1)
    np = 1;
  if (np > (size_t)c->ndata)
    np = (size_t)c->ndata;
  size_t per = socket_div_up(socket_div_up(r->size, np), SOCKET_PIECE_ALIGN) * SOCKET_PIECE_ALIGN;
  np = socket_div_up(r->size, per);
  atomic_store_explicit(&r->pieces_left, (int)np, memory_order_relaxed);
  for (size_t i = 0; i < np; i++) {
    size_t off = i * per;
    size_t len = r->size - off < per ? r->size - off : per;
    socket_helper_push(c, (int)((c->next_sock + i) % (size_t)c->ndata), r, r->buf + off, len);
  }
  c->next_sock = (unsigned)((c->next_sock + np) % (size_t)c->ndata);
}

static size_t socket_inline_bytes(const socket_conn_t *c, const socket_req_t *r) {
  return r->size <= c->inline_max ? r->size : 0;
}

/* Sends headers (and inline payloads) of queued sends, in order, until the
 * socket is full. Returns -1 once the connection has failed. */
static int socket_ctrl_send(socket_conn_t *c) {
  while (c->ring_head != c->ring_tail) {
    socket_req_t *r = c->ring[c->ring_head % SOCKET_NREQS];
    size_t hl = sizeof r->hdr, total = hl + socket_inline_bytes(c, r);
    struct iovec iov[2];
    int n = 0;
    if (r->ctrl_off < hl)
      iov[n++] = (struct iovec){(char *)&r->hdr + r->ctrl_off, hl - r->ctrl_off};
    size_t poff = r->ctrl_off > hl ? r->ctrl_off - hl : 0;
    if (total > hl)
      iov[n++] = (struct iovec){r->buf + poff, total - hl - poff};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t k = sendmsg(socket_stream_fd(c, r->src), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return 0;
      socket_conn_fail(c, rcollRemoteError, "socket: connection to %s failed while sending %zu bytes%s: %s",
                       c->peer, r->size, r->src == SOCKET_LANE ? " back over its own connection" : "",
                       strerror(errno));
      return -1;
    }
    r->ctrl_off += (size_t)k;
    if (r->ctrl_off < total)
      return 0;
    r->ctrl_done = 1;
    c->ring_head++;
  }
  return 0;
}

/* A control socket carries data one way only, so the kernel answers a
 * small message the reader drains with an ACK segment of its own, sent
 * inside that recv, on the critical path: nstat counted 2 segments out per
 * 8-byte all-reduce, and over veth and a bridge the ACK cost about 1 us of
 * its 5.4. In "pingpong" mode (TCP_QUICKACK set to 0) the kernel ACKs only
 * every second small segment read (and full-sized ones at once, as always):
 * 4.4-4.9 us. The kernel leaves that mode when a delayed ACK's timer fires
 * (tens of milliseconds after a read left one pending), so a read sets it
 * again when the last setting is a millisecond old: one setsockopt per
 * millisecond at most, and after a pause the first read re-arms it. */
static void socket_delay_acks(socket_conn_t *c, int src) {
#ifdef TCP_QUICKACK
  int64_t now = rcoll_now_us();
  if (now - c->in[src].acks_delayed_us < 1000)
    return;
  int off = 0;
  (void)setsockopt(socket_stream_fd(c, src), IPPROTO_TCP, TCP_QUICKACK, &off, sizeof off);
  c->in[src].acks_delayed_us = now;
#else
  (void)c, (void)src;
#endif
}

/* 1 once stream src has ended (socket_stage_fill). */
static int socket_stream_ended(const socket_conn_t *c, int src) {
  return src == SOCKET_LANE ? c->lane_closed : c->ctrl_closed;
}

/* Reads ahead on stream src until `need` bytes are staged: 1 when they
 * are, 0 when the socket is empty, -1 once the connection failed. The end
 * of one stream while the other is open is no failure: the peer closes both
 * with its comms, and its last messages may still be on the other (TCP
 * delivers a socket's data before its end, so nothing is lost, but the two
 * sockets' ends arrive in either order). socket_hdr_take fails once both
 * have ended. */
static int socket_stage_fill(socket_conn_t *c, int src, size_t need, const char *what) {
  socket_stream_t *in = &c->in[src];
  while (in->end - in->beg < need) {
    if (socket_stream_ended(c, src))
      return 0;
    if (in->beg > 0) {
      memmove(in->stage, in->stage + in->beg, in->end - in->beg);
      in->end -= in->beg;
      in->beg = 0;
    }
    ssize_t k = recv(socket_stream_fd(c, src), in->stage + in->end, sizeof in->stage - in->end, MSG_DONTWAIT);
    if (k > 0) {
      socket_delay_acks(c, src);
      in->end += (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    if (k == 0 && src == SOCKET_LANE) {
      c->lane_closed = 1;
      return 0;
    }
    if (k == 0 && c->lane_fd >= 0 && !c->lane_closed) {
      c->ctrl_closed = 1;
      return 0;
    }
    const char *lane = src == SOCKET_LANE ? " (on our connection to it, which it sends back over)" : "";
    if (k == 0)
      socket_conn_fail(c, rcollRemoteError, "socket: connection to %s closed by peer while %s%s", c->peer,
                       what, lane);
    else
      socket_conn_fail(c, rcollRemoteError, "socket: connection to %s failed while %s%s: %s", c->peer,
                       what, lane, strerror(errno));
    return -1;
  }
  return 1;
}

/* A message of a grouped receive goes to the first unfilled buffer posted
 * with its tag. Any other tag is the peer breaking NCCL's protocol: the
 * connection fails, since no later message could be matched with confidence. */
static int socket_group_place(socket_conn_t *c, socket_req_t *r) {
  socket_rgroup_t *g = r->group;
  int seen = 0;
  for (int i = 0; i < g->n; i++) {
    if (g->tags[i] != r->hdr.tag)
      continue;
    seen = 1;
    if (g->filled & (1u << i))
      continue;
    g->filled |= 1u << i;
    r->slot = i;
    r->buf = g->bufs[i];
    r->posted = g->caps[i];
    return 0;
  }
  char list[RCOLL_NET_MAX_RECVS * 13] = "";
  for (int i = 0, len = 0; i < g->n; i++)
    len += snprintf(list + len, sizeof list - (size_t)len, "%s%d", i ? "," : "", g->tags[i]);
  socket_conn_fail(c, rcollInvalidUsage,
                   "socket: message with tag %d from %s %s of the grouped receive of %d buffers (tags %s)",
                   (int)r->hdr.tag, c->peer, seen ? "matches only already filled buffers" : "matches no buffer",
                   g->n, list);
  return -1;
}

/* The header of the oldest posted receive arrived (socket_hdr_take): hand
 * a large payload to the helpers. */
static int socket_hdr_accept(socket_conn_t *c, socket_req_t *r) {
  c->seq++;
  if (r->group != NULL && socket_group_place(c, r) < 0)
    return -1;
  if (r->hdr.size > r->posted) {
    socket_conn_fail(c, rcollInvalidUsage,
                     "socket: message of %llu bytes from %s larger than posted receive of %zu",
                     (unsigned long long)r->hdr.size, c->peer, r->posted);
    return -1;
  }
  r->size = (size_t)r->hdr.size;
  if (r->size > c->inline_max)
    socket_dispatch(c, r);
  return 1;
}

/* Inline payload: first what was read ahead, then straight into the user
 * buffer with the exact length, so nothing of the next message is taken. */
static int socket_inline_recv(socket_conn_t *c, socket_req_t *r) {
  socket_stream_t *in = &c->in[r->src];
  size_t hl = sizeof r->hdr, total = hl + socket_inline_bytes(c, r);
  size_t staged = in->end - in->beg;
  if (staged > 0 && r->ctrl_off < total) {
    size_t k = total - r->ctrl_off < staged ? total - r->ctrl_off : staged;
    memcpy(r->buf + (r->ctrl_off - hl), in->stage + in->beg, k);
    in->beg += k;
    r->ctrl_off += k;
  }
  while (r->ctrl_off < total) {
    ssize_t k = recv(socket_stream_fd(c, r->src), r->buf + (r->ctrl_off - hl), total - r->ctrl_off, MSG_DONTWAIT);
    if (k > 0) {
      r->ctrl_off += (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    socket_conn_fail(c, rcollRemoteError, "socket: connection to %s %s while receiving %zu bytes%s%s",
                     c->peer, k == 0 ? "closed by peer" : "failed", r->size, k == 0 ? "" : ": ",
                     k == 0 ? "" : strerror(errno));
    return -1;
  }
  return 1;
}

/* Takes the header numbered c->seq into r from whichever stream has it at
 * its head: 1 when taken, 0 when it has not arrived, -1 once the connection
 * failed. Each stream is in order, so a head numbered below c->seq, or one
 * above it with no other stream to come from, means the streams are out of
 * sync. Without a lane this is one read of the control socket.
 *
 * With one, the receiver knows the sender's rule (socket_isend) and
 * threshold (its hello), so it reads first where the message should be:
 * - after a large message, on the control socket;
 * - after a small one, on the lane if the message is small too, which the
 *   posted size tells only when it is small (it is a bound: a fingerprint's
 *   receive takes 4 KiB, its message 40 bytes); otherwise where the last
 *   message after a small one was (a run of equal calls repeats itself);
 * - until the sender is seen to have a lane, on the control socket.
 * The other stream is read too, when the first holds a later message, and
 * on every SOCKET_LANE_EVERY-th pass that found nothing where the guess may
 * miss, else every SOCKET_LANE_CHECK-th, as a safety net. Reading it more
 * often costs: the lower rank's lane is the socket its own large messages
 * leave by (32 KiB all-reduces took 1 us longer when it was read on every
 * 8th pass). */
static int socket_hdr_take(socket_conn_t *c, socket_req_t *r) {
  int nsrc = c->lane_fd >= 0 ? 2 : 1, ahead = 0, first = SOCKET_CTRL;
  unsigned every = SOCKET_LANE_CHECK;
  if (nsrc == 2 && c->prev_small) {
    if (!c->peer_lane)
      every = SOCKET_LANE_EVERY;
    else if (r->posted <= c->lane_max)
      first = SOCKET_LANE;
    else
      first = c->after_small, every = SOCKET_LANE_EVERY;
  }
  for (int k = 0; k < nsrc; k++) {
    int src = k == 0 ? first : !first;
    if (k == 1 && !ahead && !socket_stream_ended(c, first) && ++c->lane_polls % every != 0)
      return 0;
    socket_stream_t *in = &c->in[src];
    int rc = socket_stage_fill(c, src, sizeof r->hdr, "waiting for a message header");
    if (rc < 0)
      return -1;
    if (rc == 0)
      continue;
    socket_msg_hdr_t h;
    memcpy(&h, in->stage + in->beg, sizeof h);
    int32_t d = (int32_t)(h.seq - c->seq);
    if (d == 0) {
      r->hdr = h;
      r->src = src;
      if (c->prev_small)
        c->after_small = src;
      c->prev_small = h.size <= c->lane_max;
      c->peer_lane |= src == SOCKET_LANE;
      in->beg += sizeof h;
      r->ctrl_off = sizeof h;
      return socket_hdr_accept(c, r);
    }
    if (d < 0 || nsrc == 1 || ahead) {
      socket_conn_fail(c, rcollInternalError, "socket: stream from %s out of sync (message %u, expected %u)",
                       c->peer, h.seq, c->seq);
      return -1;
    }
    ahead = 1;
  }
  if (c->ctrl_closed && c->lane_closed) {
    socket_conn_fail(c, rcollRemoteError, "socket: connection to %s closed by peer while waiting for a "
                     "message header (on both its sockets)", c->peer);
    return -1;
  }
  return 0;
}

/* Matches headers to posted receives in order until none has arrived. */
static int socket_ctrl_recv(socket_conn_t *c) {
  while (c->ring_head != c->ring_tail) {
    socket_req_t *r = c->ring[c->ring_head % SOCKET_NREQS];
    int rc;
    if (r->ctrl_off == 0 && (rc = socket_hdr_take(c, r)) <= 0)
      return rc;
    rc = socket_inline_recv(c, r);
    if (rc <= 0)
      return rc;
    r->ctrl_done = 1;
    c->ring_head++;
  }
  return 0;
}

static void socket_ctrl_progress(socket_conn_t *c) {
  if (c->ring_head == c->ring_tail || atomic_load_explicit(&c->err, memory_order_relaxed))
    return;
  if (c->is_send)
    socket_ctrl_send(c);
  else
    socket_ctrl_recv(c);
}

rcollResult_t socket_isend(void *comm, const void *data, size_t size, int tag, void *mh, void **request) {
  socket_conn_t *c = comm;
  (void)mh;
  *request = NULL;
  if (atomic_load_explicit(&c->err, memory_order_acquire))
    return socket_conn_error(c);
  socket_req_t *r = socket_req_alloc(c, SOCKET_REQ_SEND);
  if (r == NULL)
    return rcollSuccess;
  r->buf = (char *)data;
  r->posted = r->size = size;
  r->hdr = (socket_msg_hdr_t){.size = size, .tag = tag, .seq = c->seq++};
  /* A small message takes the lane only after a small one: a call's
   * fingerprint (40 bytes) and its large data on different sockets made 32
   * KiB all-reduces take 17-50 us instead of 17 (two namespaces), and the
   * receiver guesses the stream from the size of the message before. */
  int small = size <= c->lane_max;
  r->src = c->lane_fd >= 0 && small && c->prev_small ? SOCKET_LANE : SOCKET_CTRL;
  c->prev_small = small;
  if (size > c->inline_max)
    socket_dispatch(c, r);
  socket_ctrl_progress(c);
  *request = r;
  return rcollSuccess;
}

/* Takes n slots at once (or none: the caller retries, as for one), so the
 * group's messages are consecutive in the ring like any others. */
static rcollResult_t socket_irecv_group(socket_conn_t *c, int n, void **data, const size_t *sizes,
                                        const int *tags, void **request) {
  if (tags == NULL)
    return rcoll_error(rcollInvalidArgument, "socket: grouped irecv of %d buffers without tags", n);
  if (c->nfree < n)
    return rcollSuccess;
  socket_req_t *first = socket_req_alloc(c, SOCKET_REQ_RECV);
  socket_rgroup_t *g = &c->rgroups[first - c->reqs];
  g->n = n;
  g->filled = 0;
  for (int i = 0; i < n; i++) {
    socket_req_t *r = i == 0 ? first : socket_req_alloc(c, SOCKET_REQ_RECV);
    r->group = g;
    r->buf = NULL; /* chosen by the tag of the message that comes */
    r->posted = 0;
    g->members[i] = r;
    g->bufs[i] = data[i];
    g->caps[i] = sizes[i];
    g->tags[i] = tags[i];
  }
  /* As socket_irecv: the first test reads. */
  *request = first;
  return rcollSuccess;
}

/* With one buffer tags are not checked: messages match in order, and there
 * is nothing for a tag to choose between (rcoll's engine sends tag 0; NCCL
 * relies on the order too). With several, each message picks its buffer by
 * tag. */
rcollResult_t socket_irecv(void *comm, int n, void **data, const size_t *sizes, const int *tags,
                           void **mh, void **request) {
  socket_conn_t *c = comm;
  (void)mh;
  *request = NULL;
  if (n < 1 || n > RCOLL_NET_MAX_RECVS)
    return rcoll_error(rcollInvalidArgument, "socket: irecv of %d buffers (max_recvs is %d)", n,
                       RCOLL_NET_MAX_RECVS);
  if (atomic_load_explicit(&c->err, memory_order_acquire))
    return socket_conn_error(c);
  if (n > 1)
    return socket_irecv_group(c, n, data, sizes, tags, request);
  socket_req_t *r = socket_req_alloc(c, SOCKET_REQ_RECV);
  if (r == NULL)
    return rcollSuccess;
  r->buf = data[0];
  r->posted = sizes[0];
  /* No read here: callers (rcoll's engine, NCCL) test a receive right after
   * posting it, and that test reads; reading in both made two recv calls
   * back to back, the first one mostly EAGAIN (measured: 1.8 recv per 8-byte
   * exchange, 1.0 without it). */
  *request = r;
  return rcollSuccess;
}

rcollResult_t socket_iflush(void *comm, int n, void **data, const size_t *sizes, void **mh, void **request) {
  (void)comm, (void)n, (void)data, (void)sizes, (void)mh;
  *request = (void *)&socket_flush_token;
  return rcollSuccess;
}

/* As socket_test, over all messages of a group: done when every one is,
 * with each size reported at the index of the buffer it landed in. Headers
 * are matched in ring order, so the last member's control part finishes last. */
static rcollResult_t socket_test_group(socket_req_t *first, int *done, size_t *sizes) {
  socket_conn_t *c = first->conn;
  socket_rgroup_t *g = first->group;
  if (!g->members[g->n - 1]->ctrl_done)
    socket_ctrl_progress(c);
  int ok = 1;
  for (int i = 0; i < g->n; i++) {
    socket_req_t *m = g->members[i];
    if (atomic_load_explicit(&m->pieces_left, memory_order_acquire) != 0)
      return rcollSuccess;
    ok = ok && m->ctrl_done && !atomic_load_explicit(&m->failed, memory_order_relaxed);
  }
  if (ok) {
    *done = 1;
    for (int i = 0; i < g->n; i++) {
      if (sizes)
        sizes[g->members[i]->slot] = g->members[i]->size;
      socket_req_free(c, g->members[i]);
    }
    return rcollSuccess;
  }
  if (atomic_load_explicit(&c->err, memory_order_acquire))
    return socket_conn_error(c);
  return rcollSuccess;
}

/* A request is reported (done or failed) only when no helper holds a piece
 * of it any more, so the caller may reuse its buffer as soon as test returns. */
rcollResult_t socket_test(void *request, int *done, size_t *sizes) {
  *done = 0;
  if (request == &socket_flush_token) {
    *done = 1;
    return rcollSuccess;
  }
  socket_req_t *r = request;
  socket_conn_t *c = r->conn;
  if (r->kind == SOCKET_REQ_FREE)
    return rcoll_error(rcollInvalidUsage, "socket: test on a request that already completed");
  if (r->group != NULL)
    return socket_test_group(r, done, sizes);
  /* A request whose control part is done waits on helpers only: no syscall. */
  if (!r->ctrl_done)
    socket_ctrl_progress(c);
  if (atomic_load_explicit(&r->pieces_left, memory_order_acquire) != 0)
    return rcollSuccess;
  if (r->ctrl_done && !atomic_load_explicit(&r->failed, memory_order_relaxed)) {
    *done = 1;
    if (sizes)
      sizes[0] = r->size;
    socket_req_free(c, r);
    return rcollSuccess;
  }
  if (atomic_load_explicit(&c->err, memory_order_acquire))
    return socket_conn_error(c);
  return rcollSuccess;
}

rcollResult_t socket_conn_create(int is_send, const int *fds, const socket_hello_t *hello,
                                 int64_t timeout_ms, const char *peer, socket_conn_t **out) {
  socket_conn_t *c = calloc(1, sizeof *c);
  if (c == NULL)
    return rcoll_error(rcollSystemError, "socket: out of memory for a connection");
  c->is_send = is_send;
  c->ctrl_fd = fds[0];
  c->lane_fd = -1;
  c->nthreads = hello->nthreads;
  c->ndata = hello->nthreads * hello->nsocks_per;
  c->inline_max = (size_t)hello->inline_max;
  c->lane_max = hello->lane_max < c->inline_max ? hello->lane_max : c->inline_max;
  c->timeout_ms = timeout_ms;
  snprintf(c->peer, sizeof c->peer, "%s", peer);
  atomic_flag_clear(&c->err_claimed);
  for (int i = 0; i < SOCKET_NREQS; i++) {
    c->reqs[i].conn = c;
    c->free_idx[i] = SOCKET_NREQS - 1 - i;
  }
  c->nfree = SOCKET_NREQS;
  c->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (c->event_fd < 0) {
    free(c);
    return rcoll_error(rcollSystemError, "socket: eventfd failed: %s", strerror(errno));
  }
  c->data = calloc((size_t)c->ndata, sizeof *c->data);
  c->helpers = calloc((size_t)c->nthreads, sizeof *c->helpers);
  if (c->data == NULL || c->helpers == NULL) {
    close(c->event_fd);
    free(c->data);
    free(c->helpers);
    free(c);
    return rcoll_error(rcollSystemError, "socket: out of memory for a connection");
  }
  for (int s = 0; s < c->ndata; s++)
    c->data[s].fd = fds[1 + s];
  rcollResult_t rc = socket_helpers_start(c);
  if (rc != rcollSuccess) {
    close(c->event_fd);
    free(c->data);
    free(c->helpers);
    free(c);
    return rc;
  }
  *out = c;
  return rcollSuccess;
}

void socket_conn_destroy(socket_conn_t *c) {
  socket_helpers_stop(c);
  for (int s = 0; s < c->ndata; s++)
    close(c->data[s].fd);
  close(c->ctrl_fd);
  /* A send comm's lane is a descriptor of the socket its recv comm reads,
   * which closing this one leaves open: end our direction of it, so the
   * reader learns now that nothing more comes (socket_hdr_take). */
  if (c->lane_fd >= 0 && c->is_send)
    shutdown(c->lane_fd, SHUT_WR);
  if (c->lane_fd >= 0)
    close(c->lane_fd);
  close(c->event_fd);
  free(c->data);
  free(c->helpers);
  free(c);
}

rcollResult_t socket_close_comm(void *comm) {
  if (comm != NULL)
    socket_conn_destroy(comm);
  return rcollSuccess;
}
