/* The connecting side: a non-blocking state machine per connection. The
 * first call creates and touches the segment, connects to the listener's
 * unix socket and sends the request; later calls look for the answer. The
 * progress lives in the context, keyed by the handle's address and bytes,
 * because the handle the caller passes is read-only. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "log.h"
#include "shm_priv.h"

#define SHM_RETRY_MS 5 /* pause before connecting again when the backlog is full */

typedef struct shm_pconn {
  struct shm_pconn *next;
  const void *key;
  shm_handle_t handle;
  int fd;   /* -1 until connected and the request is sent */
  char seg_name[SHM_NAME_MAX];
  shm_conn_t *conn; /* owns the mapped segment */
  int64_t deadline_ms, retry_ms;
} shm_pconn_t;

static void shm_pconn_free(shm_ctx_t *ctx, shm_pconn_t *p, int destroy) {
  shm_pconn_t **pp = &ctx->connects;
  while (*pp != p)
    pp = &(*pp)->next;
  *pp = p->next;
  if (destroy) {
    shm_seg_unlink(ctx->dir, p->seg_name);
    if (p->fd >= 0)
      close(p->fd);
    if (p->conn != NULL) {
      munmap(p->conn->seg, p->conn->seg_bytes);
      free(p->conn);
    }
  }
  free(p);
}

void shm_connects_free(shm_ctx_t *ctx) {
  while (ctx->connects)
    shm_pconn_free(ctx, ctx->connects, 1);
}

/* The segment is made at once; the probe word lets the acceptor find out
 * whether it can read this process's memory (it lives in the connection, so
 * it stays valid for as long as the acceptor may look). */
static rcollResult_t shm_pconn_new(shm_ctx_t *ctx, const void *key, const shm_handle_t *h,
                                   shm_pconn_t **out) {
  shm_pconn_t *p = calloc(1, sizeof *p);
  shm_seg_t *seg = NULL;
  if (p == NULL)
    return rcoll_error_quiet(rcollSystemError, "shm: out of memory for a connection");
  rcollResult_t r = shm_seg_create(ctx, p->seg_name, &seg);
  if (r != rcollSuccess) {
    free(p);
    return r;
  }
  p->conn = shm_conn_new(1, seg, seg->bytes, -1, h->pid);
  if (p->conn == NULL) {
    shm_seg_unlink(ctx->dir, p->seg_name);
    munmap(seg, seg->bytes);
    free(p);
    return rcoll_error_quiet(rcollSystemError, "shm: out of memory for a connection");
  }
  p->conn->probe = shm_random64() | 1;
  seg->probe_addr = (uint64_t)(uintptr_t)&p->conn->probe;
  seg->probe_value = p->conn->probe;
  p->key = key;
  p->handle = *h;
  p->fd = -1;
  p->deadline_ms = rcoll_now_ms() + ctx->timeout_ms;
  p->next = ctx->connects;
  ctx->connects = p;
  *out = p;
  return rcollSuccess;
}

static shm_pconn_t *shm_pconn_find(shm_ctx_t *ctx, const void *key, const shm_handle_t *h) {
  for (shm_pconn_t *p = ctx->connects; p != NULL; p = p->next)
    if (p->key == key && memcmp(&p->handle, h, sizeof *h) == 0)
      return p;
  return NULL;
}

/* Connects and sends the request. Returns 0 (sent, or try again later) or
 * the errno of a failure that retrying cannot cure. */
static int shm_pconn_send(shm_ctx_t *ctx, shm_pconn_t *p, int64_t now) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  size_t len = strnlen(p->handle.sock, sizeof p->handle.sock);
  if (len > sizeof a.sun_path - 2)
    return EINVAL;
  memcpy(a.sun_path + 1, p->handle.sock, len);
  if (now < p->retry_ms)
    return 0;
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return errno;
  if (connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)) != 0) {
    int e = errno;
    close(fd);
    p->retry_ms = now + SHM_RETRY_MS;
    /* A full backlog clears as the listener accepts; a missing listener
     * is another network namespace or a peer that has gone. */
    return e == EAGAIN || e == EINTR ? 0 : e;
  }
  shm_conn_req_t req = {.magic = SHM_MAGIC, .secret = ctx->secret ? ctx->secret : p->handle.secret,
                        .pid = (int32_t)getpid()};
  snprintf(req.seg, sizeof req.seg, "%s", p->seg_name);
  if (send(fd, &req, sizeof req, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof req) {
    int e = errno;
    close(fd);
    return e ? e : EIO;
  }
  p->fd = fd;
  return 0;
}

/* Looks for the answer: 1 when accepted, 0 when none yet, -1 on refusal
 * (the error is recorded). */
static int shm_pconn_answer(shm_ctx_t *ctx, shm_pconn_t *p, rcollResult_t *err) {
  shm_conn_ack_t ack;
  ssize_t k = recv(p->fd, &ack, sizeof ack, MSG_DONTWAIT);
  if (k < 0 && (errno == EAGAIN || errno == EINTR))
    return 0;
  if (k != (ssize_t)sizeof ack || ack.magic != SHM_MAGIC) {
    *err = rcoll_error_quiet(rcollRemoteError, "shm: pid %d refused the connection (wrong secret, or it is "
                      "closing)", (int)p->handle.pid);
    return -1;
  }
  if (ack.status != 0) {
    *err = rcoll_error_quiet(rcollSystemError, "shm: pid %d could not map the ring in %s: %s",
                      (int)p->handle.pid, ctx->dir, strerror(ack.status));
    return -1;
  }
  return 1;
}

/* The acceptor has mapped the segment and said how it reads our memory. */
static shm_conn_t *shm_pconn_finish(shm_ctx_t *ctx, shm_pconn_t *p) {
  shm_conn_t *c = p->conn;
  shm_seg_unlink(ctx->dir, p->seg_name);
  c->fd = p->fd;
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0) {
    c->peer_pid = cred.pid;
    snprintf(c->peer, sizeof c->peer, "pid %d", (int)cred.pid);
  }
  c->copy = (int)c->seg->copy;
  c->direct_min = c->copy == SHM_COPY_CMA      ? ctx->cma_min
                  : c->copy == SHM_COPY_MEMCPY ? ctx->memcpy_min
                                               : SIZE_MAX;
  c->single_min = c->copy == SHM_COPY_NONE ? SIZE_MAX : ctx->exchange_min;
  c->single_min = c->single_min < c->direct_min ? c->single_min : c->direct_min;
  c->pool_map = ctx->pool_map;
  p->conn = NULL;
  p->fd = -1;
  p->seg_name[0] = '\0';
  shm_pconn_free(ctx, p, 0);
  shm_conn_log(c, ctx->rank);
  return c;
}

rcollResult_t shm_handle_decode(const void *handle, shm_handle_t *out) {
  shm_handle_t h;
  memcpy(&h, handle, sizeof h);
  if (h.magic != SHM_MAGIC)
    return rcoll_error_quiet(rcollInvalidArgument, "shm: connect given a handle that is not a shm handle");
  /* Checked before a segment is made for it: the listener's socket name
   * (terminated, non-empty, short enough for sun_path) and its pid. */
  size_t len = strnlen(h.sock, sizeof h.sock);
  if (len == 0 || len == sizeof h.sock || len > sizeof(((struct sockaddr_un *)0)->sun_path) - 2 || h.pid <= 0)
    return rcoll_error_quiet(rcollInvalidArgument, "shm: connect given a corrupt shm handle (socket name of "
                             "%zu bytes, pid %d)", len, (int)h.pid);
  *out = h;
  return rcollSuccess;
}

static rcollResult_t shm_connect_step(shm_ctx_t *ctx, const void *handle, void **send_comm) {
  shm_handle_t h;
  RCOLL_CHECK(shm_handle_decode(handle, &h));
  shm_pconn_t *p = shm_pconn_find(ctx, handle, &h);
  if (p == NULL)
    RCOLL_CHECK(shm_pconn_new(ctx, handle, &h, &p));
  int64_t now = rcoll_now_ms();
  int e = p->fd < 0 ? shm_pconn_send(ctx, p, now) : 0;
  if (e != 0) {
    char why[200];
    shm_pconn_free(ctx, p, 1);
    shm_unreachable_why(&h, e, why, sizeof why);
    return rcoll_error_quiet(rcollSystemError, "shm: %s", why);
  }
  rcollResult_t r = rcollSuccess;
  int got = p->fd >= 0 ? shm_pconn_answer(ctx, p, &r) : 0;
  if (got > 0) {
    *send_comm = shm_pconn_finish(ctx, p);
    return rcollSuccess;
  }
  if (got == 0 && now > p->deadline_ms)
    r = rcoll_error_quiet(rcollTimeout, "shm: pid %d did not accept within %lld ms", (int)h.pid,
                          (long long)ctx->timeout_ms);
  if (r != rcollSuccess)
    shm_pconn_free(ctx, p, 1);
  return r;
}

rcollResult_t shm_connect(void *vctx, int dev, const void *handle, void **send_comm) {
  shm_ctx_t *ctx = vctx;
  *send_comm = NULL;
  if (dev != 0)
    return rcoll_error_quiet(rcollInvalidArgument, "shm: connect to device %d, only device 0 exists", dev);
  pthread_mutex_lock(&ctx->lock);
  rcollResult_t r = shm_connect_step(ctx, handle, send_comm);
  pthread_mutex_unlock(&ctx->lock);
  return r;
}
