/* Connection set-up: the queue-pair handshake over a small TCP socket (as
 * NCCL does), as non-blocking state machines driven by repeated connect and
 * accept calls.
 *
 *   connector                              acceptor
 *   create QPs (INIT), post credit recvs
 *   -- ib_qp_info (QPNs, PSNs, GID/LID) ->
 *                                          check secret; create QPs, post
 *                                          receives, move to RTR and RTS
 *   <- ib_qp_info (+ IB_QPI_NO_EAGER) ----
 *   move to RTR and RTS
 *   -- IB_READY ------------------------->
 *   send comm ready                        recv comm ready
 *
 * Both ends must be the same wire version: the magic that starts every
 * ib_qp_info (and the listen handle) says which; a mismatch drops the
 * connection. The acceptor's flags ask the connector (the sender) for no
 * eager messages when its receives may be device memory.
 *
 * The last word exists so that the acceptor's first credit cannot reach the
 * connector's queue pair before it is ready to receive. The socket stays open
 * with the connection: its closing tells either side that the peer went. */
#if RCOLL_HAVE_IBVERBS
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "ib_priv.h"
#include "log.h"

#define IB_RETRY_MS 20
#define IB_BACKLOG 1024

_Static_assert(sizeof(ib_handle_t) <= RCOLL_NET_HANDLE_BYTES, "ib handle too large");

/* Moves the rest of len bytes without blocking: 1 when all moved, 0 when
 * the socket would block, -1 on error or end of stream (errno 0). */
static int ib_xfer(int fd, void *buf, size_t len, size_t *off, int sending) {
  while (*off < len) {
    ssize_t k = sending ? send(fd, (char *)buf + *off, len - *off, MSG_DONTWAIT | MSG_NOSIGNAL)
                        : recv(fd, (char *)buf + *off, len - *off, MSG_DONTWAIT);
    if (k > 0) {
      *off += (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    if (k == 0)
      errno = 0;
    return -1;
  }
  *off = 0;
  return 1;
}

static const char *ib_xfer_why(void) { return errno ? strerror(errno) : "connection closed by the peer"; }

/* ---- listen and accept ---- */

enum { PA_RECV_INFO = 0, PA_SEND_INFO, PA_RECV_READY };

typedef struct ib_pacc {
  int fd;
  int state;
  size_t off;
  char addr[64];
  ib_qp_info_t rinfo, linfo;
  uint64_t ready;
  ib_comm_t *comm;
  int64_t since_ms;
} ib_pacc_t;

typedef struct ib_listener {
  int fd;
  ib_ctx_t *ctx;
  rcoll_sockaddr_t addr;
  ib_pacc_t *pend;
  int npend, cap;
} ib_listener_t;

rcollResult_t ib_listen(void *vctx, int dev, void *handle, void **listen_comm) {
  ib_ctx_t *ctx = vctx;
  char abuf[64];
  if (dev != 0)
    return rcoll_error_quiet(rcollInvalidArgument, "ib: listen on device %d, only device 0 exists", dev);
  ib_listener_t *l = calloc(1, sizeof *l);
  if (l == NULL)
    return rcoll_error_quiet(rcollSystemError, "ib: out of memory for a listener");
  l->addr = ctx->addr;
  l->fd = rcoll_socket_listen(&l->addr, IB_BACKLOG);
  if (l->fd < 0) {
    free(l);
    return rcollSystemError; /* sockutil recorded why */
  }
  l->ctx = ctx;
  ib_ctx_ref(ctx);
  ib_handle_t h = {.magic = IB_MAGIC, .secret = ctx->secret, .addr = l->addr};
  memset(handle, 0, RCOLL_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof h);
  RCOLL_INFO(RCOLL_SUB_NET, "ib: listening on %s (%s) for %s", rcoll_sockaddr_str(&l->addr, abuf, sizeof abuf),
             ctx->ifname, ctx->port.desc);
  *listen_comm = l;
  return rcollSuccess;
}

static void ib_pacc_drop(ib_listener_t *l, int i, const char *why) {
  ib_pacc_t *p = &l->pend[i];
  RCOLL_WARN("ib: dropping a connection from %s: %s", p->addr, why);
  if (p->comm != NULL)
    ib_comm_destroy(p->comm); /* owns and closes the fd */
  else
    close(p->fd);
  l->pend[i] = l->pend[--l->npend];
}

rcollResult_t ib_close_listen(void *listen_comm) {
  ib_listener_t *l = listen_comm;
  if (l == NULL)
    return rcollSuccess;
  while (l->npend > 0)
    ib_pacc_drop(l, 0, "the listener closed");
  close(l->fd);
  ib_ctx_unref(l->ctx);
  free(l->pend);
  free(l);
  return rcollSuccess;
}

static void ib_accept_new(ib_listener_t *l) {
  for (;;) {
    rcoll_sockaddr_t a;
    socklen_t len = sizeof a;
    int fd = accept4(l->fd, &a.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && errno == EINTR)
      continue;
    if (fd < 0)
      return; /* EAGAIN, or a transient failure the next call retries */
    if (l->npend == l->cap) {
      int cap = l->cap ? 2 * l->cap : 8;
      ib_pacc_t *p = realloc(l->pend, (size_t)cap * sizeof *p);
      if (p == NULL) {
        close(fd);
        return;
      }
      l->pend = p;
      l->cap = cap;
    }
    rcoll_socket_set_nodelay(fd);
    ib_pacc_t *p = &l->pend[l->npend++];
    memset(p, 0, sizeof *p);
    p->fd = fd;
    p->since_ms = rcoll_now_ms();
    rcoll_sockaddr_str(&a, p->addr, sizeof p->addr);
  }
}

const char *ib_qp_info_parse(const void *wire, size_t len, uint64_t secret, ib_qp_info_t *out) {
  ib_qp_info_t r;
  if (len != sizeof r)
    return "queue-pair information of the wrong size";
  memcpy(&r, wire, sizeof r);
  if (r.magic != IB_MAGIC)
    return "not an rcoll ib connection (bad magic or version)";
  if (r.secret != secret)
    return "wrong secret (a connection from another job?)";
  /* nqps indexes qpn[] and psn[]; an MTU outside verbs' enum would reach
   * ibv_modify_qp, which reports only EINVAL. */
  if (r.nqps < 1 || r.nqps > IB_MAX_QPS || r.mtu < IBV_MTU_256 || r.mtu > IBV_MTU_4096)
    return "malformed queue-pair information";
  r.desc[sizeof r.desc - 1] = '\0';
  *out = r;
  return NULL;
}

/* The connector's queue pairs arrived: make ours and connect them. */
static const char *ib_pacc_setup(ib_listener_t *l, ib_pacc_t *p) {
  ib_ctx_t *ctx = l->ctx;
  static _Thread_local char why[RCOLL_ERROR_TEXT_MAX];
  char peer[IB_STR];
  const char *bad = ib_qp_info_parse(&p->rinfo, sizeof p->rinfo, ctx->secret, &p->rinfo);
  if (bad != NULL)
    return bad;
  snprintf(peer, sizeof peer, "%s (%s)", p->addr, p->rinfo.desc);
  rcollResult_t r = ib_comm_create(ctx, 0, (int)p->rinfo.nqps, -1, peer, &p->comm);
  if (r == rcollSuccess) {
    p->comm->fd = p->fd; /* from here on the comm owns the socket */
    r = ib_post_recvs(p->comm);
  }
  if (r == rcollSuccess)
    r = ib_qp_connect(p->comm, &p->rinfo);
  if (r != rcollSuccess) {
    snprintf(why, sizeof why, "%s", rcoll_error_text());
    return why;
  }
  ib_qp_info_fill(p->comm, ctx->secret, &p->linfo);
  return NULL;
}

/* Advances one pending accept. Returns 1 when its comm is ready, 0 when not
 * yet, -1 when it was dropped. */
static int ib_pacc_step(ib_listener_t *l, int i, int64_t now) {
  ib_pacc_t *p = &l->pend[i];
  const char *why = NULL;
  int rc = 1;
  if (p->state == PA_RECV_INFO && (rc = ib_xfer(p->fd, &p->rinfo, sizeof p->rinfo, &p->off, 0)) == 1) {
    why = ib_pacc_setup(l, p);
    p->state = PA_SEND_INFO;
  }
  if (why == NULL && rc == 1 && p->state == PA_SEND_INFO &&
      (rc = ib_xfer(p->fd, &p->linfo, sizeof p->linfo, &p->off, 1)) == 1)
    p->state = PA_RECV_READY;
  if (why == NULL && rc == 1 && p->state == PA_RECV_READY &&
      (rc = ib_xfer(p->fd, &p->ready, sizeof p->ready, &p->off, 0)) == 1 && p->ready != IB_READY)
    why = "bad last handshake word";
  if (why == NULL && rc < 0)
    why = ib_xfer_why();
  if (why == NULL && rc == 0 && now - p->since_ms > l->ctx->timeout_ms)
    why = "handshake not finished within RCOLL_TIMEOUT";
  if (why != NULL) {
    ib_pacc_drop(l, i, why);
    return -1;
  }
  return rc == 1 && p->state == PA_RECV_READY;
}

rcollResult_t ib_accept(void *listen_comm, void **recv_comm) {
  ib_listener_t *l = listen_comm;
  *recv_comm = NULL;
  ib_accept_new(l);
  int64_t now = rcoll_now_ms();
  for (int i = 0; i < l->npend; i++) {
    int rc = ib_pacc_step(l, i, now);
    if (rc < 0) {
      i--;
      continue;
    }
    if (rc == 1) {
      ib_comm_t *c = l->pend[i].comm;
      RCOLL_INFO(RCOLL_SUB_NET, "ib: accepted %s on %s, %d queue pair(s)", c->peer, l->ctx->port.desc, c->nqps);
      l->pend[i] = l->pend[--l->npend];
      *recv_comm = c;
      return rcollSuccess;
    }
  }
  return rcollSuccess;
}

/* ---- connect ---- */

enum { PC_CLOSED = 0, PC_CONNECTING, PC_SEND_INFO, PC_RECV_INFO, PC_SEND_READY };

typedef struct ib_pconn {
  struct ib_pconn *next;
  const void *key;
  ib_handle_t handle;
  int fd;
  int state;
  size_t off;
  char addr[64];
  ib_qp_info_t linfo, rinfo;
  uint64_t ready;
  ib_comm_t *comm;
  int64_t deadline_ms, retry_ms;
} ib_pconn_t;

static void ib_pconn_free(ib_ctx_t *ctx, ib_pconn_t *p, int keep_comm) {
  ib_pconn_t **pp = &ctx->connects;
  while (*pp != p)
    pp = &(*pp)->next;
  *pp = p->next;
  if (!keep_comm) {
    if (p->fd >= 0)
      close(p->fd);
    if (p->comm != NULL)
      ib_comm_destroy(p->comm);
  }
  free(p);
}

void ib_connects_free(ib_ctx_t *ctx) {
  while (ctx->connects != NULL)
    ib_pconn_free(ctx, ctx->connects, 0);
}

static rcollResult_t ib_pconn_new(ib_ctx_t *ctx, const void *key, const ib_handle_t *h, ib_pconn_t **out) {
  ib_pconn_t *p = calloc(1, sizeof *p);
  if (p == NULL)
    return rcoll_error_quiet(rcollSystemError, "ib: out of memory for a connect");
  p->key = key;
  p->handle = *h;
  p->fd = -1;
  p->deadline_ms = rcoll_now_ms() + ctx->timeout_ms;
  rcoll_sockaddr_str(&h->addr, p->addr, sizeof p->addr);
  rcollResult_t r = ib_comm_create(ctx, 1, ctx->nqps, -1, p->addr, &p->comm);
  for (int i = 0; r == rcollSuccess && i < IB_NCREDIT; i++)
    r = ib_post_credit_recv(p->comm, i);
  if (r != rcollSuccess) {
    if (p->comm != NULL)
      ib_comm_destroy(p->comm);
    free(p);
    return r;
  }
  ib_qp_info_fill(p->comm, ctx->secret ? ctx->secret : h->secret, &p->linfo);
  p->next = ctx->connects;
  ctx->connects = p;
  *out = p;
  return rcollSuccess;
}

static int ib_transient(int e) {
  return e == ECONNREFUSED || e == ETIMEDOUT || e == ENETUNREACH || e == EHOSTUNREACH || e == EAGAIN ||
         e == ECONNRESET || e == EINTR;
}

/* Opens or checks the TCP connection: 1 when connected, 0 not yet, or
 * -1 with a failure retrying cannot cure (errno set). */
static int ib_pconn_tcp(ib_pconn_t *p, int64_t now) {
  if (p->state == PC_CLOSED) {
    if (now < p->retry_ms)
      return 0;
    const rcoll_sockaddr_t *a = &p->handle.addr;
    p->fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->fd < 0)
      return -1;
    rcoll_socket_set_nodelay(p->fd);
    p->state = connect(p->fd, &a->sa, rcoll_sockaddr_len(a)) == 0 ? PC_SEND_INFO : PC_CONNECTING;
    if (p->state == PC_CONNECTING && errno != EINPROGRESS)
      goto retry;
  }
  if (p->state == PC_CONNECTING) {
    struct pollfd pfd = {.fd = p->fd, .events = POLLOUT};
    int err = 0;
    socklen_t len = sizeof err;
    if (poll(&pfd, 1, 0) <= 0)
      return 0;
    if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
      err = errno;
    errno = err;
    if (err != 0)
      goto retry;
    p->state = PC_SEND_INFO;
  }
  return 1;
retry:
  if (!ib_transient(errno))
    return -1;
  close(p->fd);
  p->fd = -1;
  p->state = PC_CLOSED;
  p->retry_ms = now + IB_RETRY_MS;
  return 0;
}

/* One pass of the handshake: 1 when done, 0 not yet, -1 failed (*err set). */
static int ib_pconn_step(ib_ctx_t *ctx, ib_pconn_t *p, rcollResult_t *err) {
  int64_t now = rcoll_now_ms();
  int rc = ib_pconn_tcp(p, now);
  if (rc == 1 && p->state == PC_SEND_INFO && (rc = ib_xfer(p->fd, &p->linfo, sizeof p->linfo, &p->off, 1)) == 1)
    p->state = PC_RECV_INFO;
  if (rc == 1 && p->state == PC_RECV_INFO && (rc = ib_xfer(p->fd, &p->rinfo, sizeof p->rinfo, &p->off, 0)) == 1) {
    /* The listener answers with the secret of its handle: an impostor at
     * that address cannot make us connect queue pairs to it. */
    const char *bad = ib_qp_info_parse(&p->rinfo, sizeof p->rinfo, p->handle.secret, &p->rinfo);
    if (bad != NULL) {
      *err = rcoll_error_quiet(rcollRemoteError, "ib: %s answered the handshake with %s", p->addr, bad);
      return -1;
    }
    snprintf(p->comm->peer, sizeof p->comm->peer, "%s (%s)", p->addr, p->rinfo.desc);
    if (p->rinfo.flags & IB_QPI_NO_EAGER)
      p->comm->no_eager = 1;
    if ((*err = ib_qp_connect(p->comm, &p->rinfo)) != rcollSuccess)
      return -1;
    p->ready = IB_READY;
    p->state = PC_SEND_READY;
  }
  if (rc == 1 && p->state == PC_SEND_READY && (rc = ib_xfer(p->fd, &p->ready, sizeof p->ready, &p->off, 1)) == 1)
    return 1;
  if (rc < 0) {
    *err = rcoll_error_quiet(rcollRemoteError, "ib: connecting to %s failed: %s%s", p->addr, ib_xfer_why(),
                             p->state >= PC_RECV_INFO ? " (the peer dropped the handshake: see its log)" : "");
    return -1;
  }
  if (now > p->deadline_ms) {
    *err = rcoll_error_quiet(rcollTimeout, "ib: connecting to %s timed out after %lld ms", p->addr,
                             (long long)ctx->timeout_ms);
    return -1;
  }
  return 0;
}

rcollResult_t ib_handle_decode(const void *handle, ib_handle_t *out) {
  ib_handle_t h;
  memcpy(&h, handle, sizeof h);
  if (h.magic != IB_MAGIC)
    return rcoll_error_quiet(rcollInvalidArgument, "ib: connect given a handle that is not an ib handle of this "
                             "wire version");
  if (rcoll_sockaddr_len(&h.addr) == 0 || rcoll_sockaddr_port(&h.addr) <= 0)
    return rcoll_error_quiet(rcollInvalidArgument, "ib: connect given a handle with no address to reach "
                             "(family %d)", (int)h.addr.sa.sa_family);
  *out = h;
  return rcollSuccess;
}

rcollResult_t ib_connect(void *vctx, int dev, const void *handle, void **send_comm) {
  ib_ctx_t *ctx = vctx;
  ib_handle_t h;
  *send_comm = NULL;
  if (dev != 0)
    return rcoll_error_quiet(rcollInvalidArgument, "ib: connect on device %d, only device 0 exists", dev);
  RCOLL_CHECK(ib_handle_decode(handle, &h));
  pthread_mutex_lock(&ctx->lock);
  ib_pconn_t *p = ctx->connects;
  while (p != NULL && (p->key != handle || memcmp(&p->handle, &h, sizeof h) != 0))
    p = p->next;
  rcollResult_t r = p == NULL ? ib_pconn_new(ctx, handle, &h, &p) : rcollSuccess;
  int rc = r == rcollSuccess ? ib_pconn_step(ctx, p, &r) : -1;
  if (rc < 0 && p != NULL) {
    ib_pconn_free(ctx, p, 0);
  } else if (rc == 1) {
    ib_comm_t *c = p->comm;
    c->fd = p->fd;
    ib_pconn_free(ctx, p, 1);
    RCOLL_INFO(RCOLL_SUB_NET, "ib: connected to %s from %s, %d queue pair(s), eager sends %s", c->peer,
               ctx->port.desc, c->nqps,
               !c->no_eager                      ? "on"
               : ctx->eager_mode == IB_EAGER_OFF ? "off (RCOLL_IB_EAGER here)"
                                                 : "off (the receiver asked)");
    *send_comm = c;
  }
  pthread_mutex_unlock(&ctx->lock);
  return r;
}
#endif
