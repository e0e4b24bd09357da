/* The connecting side: a non-blocking state machine per connection. Each call
 * advances every socket as far as it goes without waiting (open, connect in
 * progress, hello sent) and returns the send comm once all are done. The
 * progress lives in the context, keyed by the handle's address and bytes,
 * because the handle the caller passes is read-only. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "socket_priv.h"

#define SOCKET_RETRY_MS 20 /* pause before connecting again after a refusal */

enum { PC_CLOSED = 0, PC_CONNECTING, PC_HELLO, PC_DONE };

typedef struct socket_pconn {
  struct socket_pconn *next;
  const void *key;
  socket_handle_t handle;
  socket_hello_t hello; /* index filled per socket */
  int nsocks;
  int fds[SOCKET_MAX_SOCKS];
  uint8_t state[SOCKET_MAX_SOCKS];
  uint8_t sent[SOCKET_MAX_SOCKS];
  int64_t deadline_ms, retry_ms;
  int sndbuf_ctrl, sndbuf_data; /* SO_SNDBUF of the sockets it opens; 0: autotuned */
  char congestion[SOCKET_CC_MAX]; /* the context's, for each socket opened */
} socket_pconn_t;

static uint64_t socket_random64(void) {
  uint64_t v;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
    return v;
  /* No entropy yet (early boot): time and pid still tell connections apart. */
  return (uint64_t)rcoll_now_us() * 0x9e3779b97f4a7c15ull ^ ((uint64_t)getpid() << 32);
}

/* The communicator's secret is presented; a context created without one
 * (secret 0, e.g. for a plugin adapter) presents the one the handle carries. */
static socket_pconn_t *socket_pconn_new(socket_ctx_t *ctx, const void *key, const socket_handle_t *h) {
  socket_pconn_t *p = calloc(1, sizeof *p);
  if (p == NULL)
    return NULL;
  p->key = key;
  p->handle = *h;
  p->nsocks = 1 + ctx->nthreads * ctx->nsocks_per;
  memset(p->fds, -1, sizeof p->fds);
  p->hello = (socket_hello_t){
      .magic = SOCKET_MAGIC,
      .secret = ctx->secret ? ctx->secret : h->secret,
      .conn_id = socket_random64(),
      .inline_max = ctx->inline_max,
      .lane_max = (uint32_t)ctx->lane_max,
      .nsocks_total = (uint16_t)p->nsocks,
      .nthreads = (uint16_t)ctx->nthreads,
      .nsocks_per = (uint16_t)ctx->nsocks_per,
  };
  p->deadline_ms = rcoll_now_ms() + ctx->timeout_ms;
  memcpy(p->congestion, ctx->congestion, sizeof p->congestion);
  p->sndbuf_data = ctx->sndbuf;
  p->sndbuf_ctrl = ctx->sndbuf == 0 ? 0 : (int)(ctx->inline_max > SOCKET_CTRL_SNDBUF_MIN ? ctx->inline_max : SOCKET_CTRL_SNDBUF_MIN);
  p->next = ctx->connects;
  ctx->connects = p;
  return p;
}

static void socket_pconn_free(socket_ctx_t *ctx, socket_pconn_t *p, int close_fds) {
  socket_pconn_t **pp = &ctx->connects;
  while (*pp != p)
    pp = &(*pp)->next;
  *pp = p->next;
  for (int i = 0; close_fds && i < p->nsocks; i++)
    if (p->fds[i] >= 0)
      close(p->fds[i]);
  free(p);
}

void socket_connects_free(socket_ctx_t *ctx) {
  while (ctx->connects)
    socket_pconn_free(ctx, ctx->connects, 1);
}

/* Failures a listener that is up (or about to be) can cause: try again. */
static int socket_transient(int e) {
  return e == ECONNREFUSED || e == ETIMEDOUT || e == ENETUNREACH || e == EHOSTUNREACH || e == EAGAIN ||
         e == ECONNRESET || e == EPIPE || e == EINTR;
}

/* Returns 0, or the errno of a failure that retrying cannot cure. */
static int socket_pconn_retry(socket_pconn_t *p, int i, int e, int64_t now) {
  close(p->fds[i]);
  p->fds[i] = -1;
  p->state[i] = PC_CLOSED;
  p->sent[i] = 0;
  p->retry_ms = now + SOCKET_RETRY_MS;
  return socket_transient(e) ? 0 : e;
}

static int socket_pconn_open(socket_pconn_t *p, int i, int64_t now) {
  const rcoll_sockaddr_t *a = &p->handle.addr;
  int fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return errno;
  p->fds[i] = fd;
  rcoll_socket_set_nodelay(fd);
  /* The connecting side sends the data; the acceptor's sockets only ack. */
  int e = socket_set_congestion(fd, p->congestion);
  if (e != 0)
    return e;
  /* This side only sends: its receive buffer does not matter (the
   * acceptor's is set on the listener). */
  socket_set_sndbuf(fd, i == 0 ? p->sndbuf_ctrl : p->sndbuf_data);
  if (connect(fd, &a->sa, rcoll_sockaddr_len(a)) == 0)
    p->state[i] = PC_HELLO;
  else if (errno == EINPROGRESS)
    p->state[i] = PC_CONNECTING;
  else
    return socket_pconn_retry(p, i, errno, now);
  return 0;
}

static int socket_pconn_check(socket_pconn_t *p, int i, int64_t now) {
  struct pollfd pfd = {.fd = p->fds[i], .events = POLLOUT};
  int err = 0;
  socklen_t len = sizeof err;
  if (poll(&pfd, 1, 0) <= 0)
    return 0;
  if (getsockopt(p->fds[i], SOL_SOCKET, SO_ERROR, &err, &len) < 0)
    err = errno;
  if (err != 0)
    return socket_pconn_retry(p, i, err, now);
  p->state[i] = PC_HELLO;
  return 0;
}

static int socket_pconn_hello(socket_pconn_t *p, int i, int64_t now) {
  socket_hello_t h = p->hello;
  h.index = (uint16_t)i;
  ssize_t k = send(p->fds[i], (char *)&h + p->sent[i], sizeof h - p->sent[i], MSG_DONTWAIT | MSG_NOSIGNAL);
  if (k < 0)
    return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : socket_pconn_retry(p, i, errno, now);
  p->sent[i] = (uint8_t)(p->sent[i] + k);
  if (p->sent[i] == sizeof h)
    p->state[i] = PC_DONE;
  return 0;
}

/* Moves socket i as far as it goes now; returns a fatal errno or 0. */
static int socket_pconn_advance(socket_pconn_t *p, int i, int64_t now) {
  int e = 0;
  if (p->state[i] == PC_CLOSED && now >= p->retry_ms)
    e = socket_pconn_open(p, i, now);
  if (e == 0 && p->state[i] == PC_CONNECTING)
    e = socket_pconn_check(p, i, now);
  if (e == 0 && p->state[i] == PC_HELLO)
    e = socket_pconn_hello(p, i, now);
  return e;
}

/* One pass over the sockets: 1 when all are connected and greeted, 0 when
 * not yet, or an error result. */
static int socket_pconn_step(socket_pconn_t *p, int64_t timeout_ms, rcollResult_t *err) {
  char abuf[SOCKET_ADDR_STR];
  int64_t now = rcoll_now_ms();
  int ndone = 0;
  for (int i = 0; i < p->nsocks; i++) {
    int e = socket_pconn_advance(p, i, now);
    if (e != 0) {
      *err = rcoll_error_quiet(rcollRemoteError, "socket: connect to %s failed: %s",
                               socket_addr_str(&p->handle.addr, abuf), strerror(e));
      return -1;
    }
    ndone += p->state[i] == PC_DONE;
  }
  if (ndone == p->nsocks)
    return 1;
  if (now <= p->deadline_ms)
    return 0;
  *err = rcoll_error_quiet(rcollTimeout, "socket: connect to %s timed out after %lld s (%d of %d sockets ready)",
                           socket_addr_str(&p->handle.addr, abuf), (long long)(timeout_ms / 1000), ndone,
                           p->nsocks);
  return -1;
}

static rcollResult_t socket_connect_locked(socket_ctx_t *ctx, const void *handle, void **send_comm) {
  socket_handle_t h;
  char abuf[SOCKET_ADDR_STR];
  rcollResult_t err = rcollSuccess;
  memcpy(&h, handle, sizeof h);
  socket_pconn_t *p = ctx->connects;
  while (p != NULL && (p->key != handle || memcmp(&p->handle, &h, sizeof h) != 0))
    p = p->next;
  if (p == NULL && (p = socket_pconn_new(ctx, handle, &h)) == NULL)
    return rcoll_error(rcollSystemError, "socket: out of memory for a connect");
  int rc = socket_pconn_step(p, ctx->timeout_ms, &err);
  if (rc < 0)
    socket_pconn_free(ctx, p, 1);
  if (rc <= 0)
    return err;
  socket_conn_t *c;
  socket_hello_t hello = p->hello;
  socket_addr_str(&h.addr, abuf);
  err = socket_conn_create(1, p->fds, &hello, ctx->timeout_ms, abuf, &c);
  socket_pconn_free(ctx, p, err != rcollSuccess);
  if (err != rcollSuccess)
    return err;
  socket_log_conn("connected", c->ctrl_fd, abuf, &hello);
  *send_comm = c;
  return rcollSuccess;
}

rcollResult_t socket_handle_decode(const void *handle, socket_handle_t *out) {
  socket_handle_t h;
  char abuf[SOCKET_ADDR_STR];
  memcpy(&h, handle, sizeof h);
  if (h.magic != SOCKET_MAGIC)
    return rcoll_error(rcollInvalidArgument, "socket: connect given a handle that is not a socket handle");
  /* A listener always has a port: port 0 or another family is corruption. */
  if (rcoll_sockaddr_len(&h.addr) == 0 || rcoll_sockaddr_port(&h.addr) <= 0)
    return rcoll_error(rcollInvalidArgument, "socket: connect given a handle with no address to reach (%s)",
                       socket_addr_str(&h.addr, abuf));
  *out = h;
  return rcollSuccess;
}

rcollResult_t socket_connect(void *vctx, int dev, const void *handle, void **send_comm) {
  socket_ctx_t *ctx = vctx;
  socket_handle_t h;
  *send_comm = NULL;
  if (dev != 0)
    return rcoll_error(rcollInvalidArgument, "socket: connect on device %d, only device 0 exists", dev);
  RCOLL_CHECK(socket_handle_decode(handle, &h));
  pthread_mutex_lock(&ctx->lock);
  rcollResult_t r = socket_connect_locked(ctx, handle, send_comm);
  pthread_mutex_unlock(&ctx->lock);
  return r;
}
