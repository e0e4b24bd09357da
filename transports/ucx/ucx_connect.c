/* The connecting side: a non-blocking state machine per connection. Each call
 * advances the rendezvous socket as far as it goes without waiting (open,
 * connect in progress, hello sent, answer read) and, once the answer with the
 * peer's worker address is in, creates the UCP endpoint. The send comm is
 * returned once a greeting on the new endpoint completes: an empty
 * synchronous tagged send (ucp_tag_send_sync_nbx) that the accepting side
 * posted a receive for. It completes only when the peer acknowledged it,
 * which it does on its way back to us, so UCX's wire-up is finished in both
 * directions. Two things depend on that: a first small send then completes
 * without waiting for the peer to progress (one thread may drive both ends,
 * rcollCommInitAll), and no wire-up reply is left queued at the peer, which
 * UCX 1.13 aborts on (an assertion in its pending-queue purge) if the
 * connection then fails or its worker is destroyed. Progress lives in the
 * context, keyed by the handle's address and bytes, because the handle the
 * caller passes is read-only. */
#if RCOLL_HAVE_UCX

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "ucx_priv.h"

#define UCX_RETRY_MS 20 /* pause before connecting again after a refusal */

enum { PC_CLOSED = 0, PC_CONNECTING, PC_HELLO, PC_REPLY, PC_WIREUP };

typedef struct ucx_pconn {
  struct ucx_pconn *next;
  const void *key;
  ucx_handle_t handle;
  int fd;
  int state;
  ucx_hello_t hello;
  size_t sent;
  ucx_reply_t reply;
  size_t got;   /* bytes of reply header */
  char *waddr;  /* the peer's worker address, reply.addr_len bytes */
  size_t waddr_got;
  ucx_conn_t *conn; /* once the endpoint exists */
  int64_t deadline_ms, retry_ms;
} ucx_pconn_t;

/* The communicator's secret is presented; a context created without one
 * (secret 0, e.g. for a plugin adapter) presents the one the handle carries. */
static ucx_pconn_t *ucx_pconn_new(ucx_ctx_t *ctx, const void *key, const ucx_handle_t *h) {
  ucx_pconn_t *p = calloc(1, sizeof *p);
  if (p == NULL)
    return NULL;
  p->key = key;
  p->handle = *h;
  p->fd = -1;
  p->hello = (ucx_hello_t){.magic = UCX_MAGIC, .secret = ctx->secret ? ctx->secret : h->secret,
                           .host_id = ctx->host_id};
  p->deadline_ms = rcoll_now_ms() + ctx->timeout_ms;
  p->next = ctx->connects;
  ctx->connects = p;
  return p;
}

static void ucx_pconn_free(ucx_ctx_t *ctx, ucx_pconn_t *p, int close_fd) {
  ucx_pconn_t **pp = &ctx->connects;
  while (*pp != p)
    pp = &(*pp)->next;
  *pp = p->next;
  if (close_fd && p->fd >= 0)
    close(p->fd);
  if (p->conn != NULL)
    ucx_close_comm(p->conn);
  free(p->waddr);
  free(p);
}

void ucx_connects_free(ucx_ctx_t *ctx) {
  while (ctx->connects)
    ucx_pconn_free(ctx, ctx->connects, 1);
}

/* Failures a listener that is up (or about to be) can cause: try again. */
static int ucx_transient(int e) {
  return e == ECONNREFUSED || e == ETIMEDOUT || e == ENETUNREACH || e == EHOSTUNREACH || e == EAGAIN ||
         e == ECONNRESET || e == EINTR;
}

/* Closes the socket to open it again shortly; returns 0, or the errno of a
 * failure that retrying cannot cure. */
static int ucx_pconn_retry(ucx_pconn_t *p, int e, int64_t now) {
  close(p->fd);
  p->fd = -1;
  p->state = PC_CLOSED;
  p->retry_ms = now + UCX_RETRY_MS;
  return ucx_transient(e) ? 0 : e;
}

static int ucx_pconn_open(ucx_pconn_t *p, int64_t now) {
  const rcoll_sockaddr_t *a = &p->handle.addr;
  p->fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (p->fd < 0)
    return errno;
  rcoll_socket_set_nodelay(p->fd);
  if (connect(p->fd, &a->sa, rcoll_sockaddr_len(a)) == 0)
    p->state = PC_HELLO;
  else if (errno == EINPROGRESS)
    p->state = PC_CONNECTING;
  else
    return ucx_pconn_retry(p, errno, now);
  return 0;
}

static int ucx_pconn_check(ucx_pconn_t *p, int64_t now) {
  struct pollfd pfd = {.fd = p->fd, .events = POLLOUT};
  int err = 0;
  socklen_t len = sizeof err;
  if (poll(&pfd, 1, 0) <= 0)
    return 0;
  if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
    err = errno;
  if (err != 0)
    return ucx_pconn_retry(p, err, now);
  p->state = PC_HELLO;
  return 0;
}

static int ucx_pconn_hello(ucx_pconn_t *p, int64_t now) {
  while (p->sent < sizeof p->hello) {
    ssize_t k = send(p->fd, (char *)&p->hello + p->sent, sizeof p->hello - p->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : ucx_pconn_retry(p, errno, now);
    p->sent += (size_t)k;
  }
  p->state = PC_REPLY;
  return 0;
}

/* Reads into buf[*have..want). 1: complete, 0: not yet, -1: closed or failed. */
static int ucx_read_some(int fd, void *buf, size_t *have, size_t want) {
  while (*have < want) {
    ssize_t k = recv(fd, (char *)buf + *have, want - *have, MSG_DONTWAIT);
    if (k > 0) {
      *have += (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    return -1;
  }
  return 1;
}

/* The answer: header, then the worker address. Errors here are final: the
 * listener closes a connection whose hello it refuses. */
static int ucx_pconn_answer(ucx_pconn_t *p, rcollResult_t *err) {
  char abuf[UCX_ADDR_STR];
  int rc = ucx_read_some(p->fd, &p->reply, &p->got, sizeof p->reply);
  const char *why;
  if (rc == 1 && p->waddr == NULL) {
    if ((why = ucx_reply_parse(&p->reply, sizeof p->reply, &p->reply)) != NULL) {
      *err = rcoll_error_quiet(rcollRemoteError, "ucx: %s answered with a malformed handshake: %s",
                               ucx_addr_str(&p->handle.addr, abuf), why);
      return -1;
    }
    if ((p->waddr = malloc(p->reply.addr_len)) == NULL) {
      *err = rcoll_error_quiet(rcollSystemError, "ucx: out of memory for a worker address");
      return -1;
    }
  }
  if (rc == 1)
    rc = ucx_read_some(p->fd, p->waddr, &p->waddr_got, p->reply.addr_len);
  if (rc < 0)
    *err = rcoll_error_quiet(rcollRemoteError,
                             "ucx: %s closed the connection during the handshake (wrong secret, or not an "
                             "rcoll ucx listener)", ucx_addr_str(&p->handle.addr, abuf));
  if (rc == 1)
    p->state = PC_WIREUP;
  return rc;
}

/* The answer is in: the comm takes over the socket as its liveness line,
 * and the endpoint is created and greeted. */
static rcollResult_t ucx_pconn_start_ep(ucx_ctx_t *ctx, ucx_pconn_t *p) {
  char abuf[UCX_ADDR_STR];
  RCOLL_CHECK(ucx_conn_new(ctx, 1, p->fd, p->reply.conn_id, ucx_addr_str(&p->handle.addr, abuf), &p->conn));
  p->fd = -1;
  RCOLL_CHECK(ucx_conn_connect_ep(p->conn, p->waddr, p->reply.host_id == ctx->host_id));
  ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL};
  void *req = ucp_tag_send_sync_nbx(p->conn->ep, NULL, 0, ucx_tag_greeting(p->conn->conn_id),
                                    &param);
  if (UCS_PTR_IS_ERR(req))
    return rcoll_error_quiet(rcollRemoteError, "ucx: greeting %s failed: %s", p->conn->peer,
                             ucs_status_string(UCS_PTR_STATUS(req)));
  p->conn->greet_req = req;
  return rcollSuccess;
}

/* 1 once the greeting is acknowledged, 0 while not, -1 with *err set. */
static int ucx_pconn_wired(ucx_ctx_t *ctx, ucx_pconn_t *p, rcollResult_t *err) {
  if (p->conn == NULL && (*err = ucx_pconn_start_ep(ctx, p)) != rcollSuccess)
    return -1;
  ucx_conn_t *c = p->conn;
  if (c->greet_req == NULL)
    return 1;
  ucp_worker_progress(ctx->worker);
  ucs_status_t st = ucp_request_check_status(c->greet_req);
  if (st == UCS_INPROGRESS) {
    if (!ucx_conn_probe(c))
      return 0;
    *err = rcoll_error_quiet(rcollRemoteError, "ucx: %s went away while connecting", c->peer);
    return -1;
  }
  ucp_request_free(c->greet_req);
  c->greet_req = NULL;
  if (st == UCS_OK)
    return 1;
  *err = rcoll_error_quiet(rcollRemoteError, "ucx: connecting to %s failed: %s", c->peer, ucs_status_string(st));
  return -1;
}

/* One pass: 1 when the answer is in, 0 when not yet, -1 with *err set. */
static int ucx_pconn_step(ucx_ctx_t *ctx, ucx_pconn_t *p, rcollResult_t *err) {
  char abuf[UCX_ADDR_STR];
  int64_t now = rcoll_now_ms();
  int e = 0;
  if (p->state == PC_CLOSED && now >= p->retry_ms)
    e = ucx_pconn_open(p, now);
  if (e == 0 && p->state == PC_CONNECTING)
    e = ucx_pconn_check(p, now);
  if (e == 0 && p->state == PC_HELLO)
    e = ucx_pconn_hello(p, now);
  if (e != 0) {
    *err = rcoll_error_quiet(rcollRemoteError, "ucx: connect to %s failed: %s",
                             ucx_addr_str(&p->handle.addr, abuf), strerror(e));
    return -1;
  }
  if (p->state == PC_REPLY && ucx_pconn_answer(p, err) < 0)
    return -1;
  if (p->state == PC_WIREUP) {
    int rc = ucx_pconn_wired(ctx, p, err);
    if (rc != 0)
      return rc;
  }
  if (now <= p->deadline_ms)
    return 0;
  *err = rcoll_error_quiet(rcollTimeout, "ucx: connect to %s timed out after %lld s (%s)",
                           ucx_addr_str(&p->handle.addr, abuf), (long long)(ctx->timeout_ms / 1000),
                           p->state == PC_WIREUP  ? "the greeting was not acknowledged"
                           : p->state == PC_REPLY ? "no answer to the hello"
                                                  : "not connected");
  return -1;
}

const char *ucx_reply_parse(const void *wire, size_t len, ucx_reply_t *out) {
  ucx_reply_t r;
  if (len != sizeof r)
    return "an answer of the wrong size";
  memcpy(&r, wire, sizeof r);
  if (r.magic != UCX_MAGIC)
    return "not an rcoll ucx answer (bad magic)";
  if (r.addr_len == 0 || r.addr_len > UCX_WORKER_ADDR_MAX)
    return "a worker address of no or too many bytes";
  if (r.conn_id == 0 || r.conn_id > UCX_CONN_ID_MAX)
    return "a connection id out of range";
  *out = r;
  return NULL;
}

rcollResult_t ucx_handle_decode(const void *handle, ucx_handle_t *out) {
  ucx_handle_t h;
  char abuf[UCX_ADDR_STR];
  memcpy(&h, handle, sizeof h);
  if (h.magic != UCX_MAGIC)
    return rcoll_error(rcollInvalidArgument, "ucx: connect given a handle that is not a ucx handle");
  if (rcoll_sockaddr_len(&h.addr) == 0 || rcoll_sockaddr_port(&h.addr) <= 0)
    return rcoll_error(rcollInvalidArgument, "ucx: connect given a handle with no address to reach (%s)",
                       ucx_addr_str(&h.addr, abuf));
  *out = h;
  return rcollSuccess;
}

rcollResult_t ucx_connect(void *vctx, int dev, const void *handle, void **send_comm) {
  ucx_ctx_t *ctx = vctx;
  ucx_handle_t h;
  rcollResult_t err = rcollSuccess;
  *send_comm = NULL;
  if (dev != 0)
    return rcoll_error(rcollInvalidArgument, "ucx: connect on device %d, only device 0 exists", dev);
  RCOLL_CHECK(ucx_handle_decode(handle, &h));
  ucx_pconn_t *p = ctx->connects;
  while (p != NULL && (p->key != handle || memcmp(&p->handle, &h, sizeof h) != 0))
    p = p->next;
  if (p == NULL && (p = ucx_pconn_new(ctx, handle, &h)) == NULL)
    return rcoll_error(rcollSystemError, "ucx: out of memory for a connect");
  int rc = ucx_pconn_step(ctx, p, &err);
  if (rc < 0)
    ucx_pconn_free(ctx, p, 1);
  if (rc <= 0)
    return err;
  *send_comm = p->conn;
  p->conn = NULL; /* the caller's now */
  ucx_pconn_free(ctx, p, 1);
  return rcollSuccess;
}

#endif /* RCOLL_HAVE_UCX */
