/* The accepting side: the rendezvous socket behind the listen handle, and the
 * non-blocking accept state machine. A connecting peer sends a hello with the
 * communicator's secret; a correct one is answered with a fresh connection id
 * and this worker's address, and once the answer is out the socket becomes
 * the new recv comm's liveness line. Hellos are read in the pending set every
 * listener shares (lib/hello_pending.h): wrong secrets, strangers and sockets
 * that say nothing within their own deadline are dropped there, without
 * delaying real peers, and reported in one rate-limited warning. */
#if RCOLL_HAVE_UCX

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "hello_pending.h"
#include "log.h"
#include "ucx_priv.h"

_Static_assert(sizeof(ucx_handle_t) <= RCOLL_NET_HANDLE_BYTES, "ucx handle too large");
_Static_assert(sizeof(ucx_hello_t) == 24, "hello layout is part of the wire format");
_Static_assert(sizeof(ucx_hello_t) <= RCOLL_PENDING_HELLO_MAX,
               "hellos are read by the pending set");
_Static_assert(sizeof(ucx_reply_t) == 24, "reply layout is part of the wire format");

/* Only peers whose hello checked out wait for their answer to go out; strays
 * never get this far, so this bounds real peers' handshakes in flight. */
#define UCX_MAX_PENDING 1024
#define UCX_BACKLOG 1024

typedef struct ucx_pacc { /* an accepted socket whose answer is going out */
  int fd;
  rcoll_sockaddr_t addr;
  int64_t since_ms;
  char *reply; /* header + worker address */
  size_t reply_len, sent;
  uint32_t conn_id;
} ucx_pacc_t;

typedef struct ucx_listener {
  ucx_ctx_t *ctx;
  int fd;
  rcoll_sockaddr_t addr;
  rcoll_pending_t hellos; /* accepted sockets whose hello is on its way */
  int npend;
  ucx_pacc_t pend[UCX_MAX_PENDING];
} ucx_listener_t;

static const char *ucx_hello_take(void *arg, int fd, const rcoll_sockaddr_t *addr,
                                  const void *hello);

/* A real peer sends its hello as soon as it is connected; a socket silent
 * for longer is a stray, dropped within this bound or the timeout if shorter. */
static int64_t ucx_first_msg_ms(int64_t timeout_ms) {
  return timeout_ms < RCOLL_PENDING_FIRST_MSG_MS ? timeout_ms : RCOLL_PENDING_FIRST_MSG_MS;
}

rcollResult_t ucx_listen(void *vctx, int dev, void *handle, void **listen_comm) {
  ucx_ctx_t *ctx = vctx;
  char abuf[UCX_ADDR_STR];
  if (dev != 0)
    return rcoll_error(rcollInvalidArgument, "ucx: listen on device %d, only device 0 exists", dev);
  ucx_listener_t *l = calloc(1, sizeof *l);
  if (l == NULL)
    return rcoll_error(rcollSystemError, "ucx: out of memory for a listener");
  l->ctx = ctx;
  l->addr = ctx->addr;
  l->fd = rcoll_socket_listen(&l->addr, UCX_BACKLOG);
  if (l->fd < 0) {
    free(l);
    return rcollSystemError; /* sockutil recorded why */
  }
  char who[96];
  snprintf(who, sizeof who, "ucx: rank %d's listener %s", ctx->rank, ucx_addr_str(&l->addr, abuf));
  rcollResult_t rc = rcoll_pending_init(&l->hellos, who, sizeof(ucx_hello_t), 0,
                                        ucx_first_msg_ms(ctx->timeout_ms), ucx_hello_take, l);
  if (rc != rcollSuccess) {
    close(l->fd);
    free(l);
    return rc;
  }
  ucx_handle_t h = {.magic = UCX_MAGIC, .secret = ctx->secret, .addr = l->addr};
  memset(handle, 0, RCOLL_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof h);
  RCOLL_INFO(RCOLL_SUB_NET, "ucx: rank %d listening on %s (%s)", ctx->rank, ucx_addr_str(&l->addr, abuf),
             ctx->ifname);
  *listen_comm = l;
  return rcollSuccess;
}

static void ucx_pacc_release(ucx_pacc_t *p, int close_fd) {
  if (close_fd)
    close(p->fd);
  free(p->reply);
}

rcollResult_t ucx_close_listen(void *listen_comm) {
  ucx_listener_t *l = listen_comm;
  if (l == NULL)
    return rcollSuccess;
  close(l->fd);
  rcoll_pending_free(&l->hellos);
  for (int i = 0; i < l->npend; i++)
    ucx_pacc_release(&l->pend[i], 1);
  free(l);
  return rcollSuccess;
}

static void ucx_pend_remove(ucx_listener_t *l, int i, int close_fd) {
  ucx_pacc_release(&l->pend[i], close_fd);
  l->pend[i] = l->pend[--l->npend];
}

static void ucx_pend_drop(ucx_listener_t *l, int i, const char *why) {
  char abuf[UCX_ADDR_STR], lbuf[UCX_ADDR_STR];
  RCOLL_WARN("ucx: dropping connection from %s on %s: %s", ucx_addr_str(&l->pend[i].addr, abuf),
             ucx_addr_str(&l->addr, lbuf), why);
  ucx_pend_remove(l, i, 1);
}

const char *ucx_hello_parse(const void *wire, size_t len, uint64_t secret, ucx_hello_t *out) {
  ucx_hello_t h;
  if (len != sizeof h)
    return "a hello of the wrong size";
  memcpy(&h, wire, sizeof h);
  if (h.magic != UCX_MAGIC)
    return "not an rcoll ucx connection (bad magic)";
  if (h.secret != secret)
    return "wrong secret (a connection from another job?)";
  *out = h;
  return NULL;
}

/* The hello checked out: the answer names the connection and carries this
 * worker's address. Returns the reason to drop it instead, or NULL. */
static const char *ucx_pend_answer(ucx_listener_t *l, ucx_pacc_t *p) {
  ucx_ctx_t *ctx = l->ctx;
  if (ctx->next_conn_id > UCX_CONN_ID_MAX)
    return "connection ids exhausted on this communicator";
  if (l->npend == UCX_MAX_PENDING)
    return "too many handshakes in flight";
  p->reply_len = sizeof(ucx_reply_t) + ctx->waddr_len;
  p->reply = malloc(p->reply_len);
  if (p->reply == NULL)
    return "out of memory";
  p->conn_id = ctx->next_conn_id++;
  ucx_reply_t r = {.magic = UCX_MAGIC, .host_id = ctx->host_id, .conn_id = p->conn_id,
                   .addr_len = (uint32_t)ctx->waddr_len};
  memcpy(p->reply, &r, sizeof r);
  memcpy(p->reply + sizeof r, ctx->waddr, ctx->waddr_len);
  return NULL;
}

/* The pending set's callback: a complete hello that checks out starts the
 * answer; anything else is dropped as a stray. */
static const char *ucx_hello_take(void *arg, int fd, const rcoll_sockaddr_t *addr,
                                  const void *hello) {
  ucx_listener_t *l = arg;
  ucx_hello_t h;
  ucx_pacc_t p = {.fd = fd, .addr = *addr, .since_ms = rcoll_now_ms()};
  const char *why = ucx_hello_parse(hello, sizeof h, l->ctx->secret, &h);
  if (why == NULL)
    why = ucx_pend_answer(l, &p);
  if (why == NULL)
    l->pend[l->npend++] = p;
  return why;
}

/* Writes the answer as far as the socket allows. Returns 1 when it is out,
 * 0 when not yet, -1 after a drop. */
static int ucx_pend_step(ucx_listener_t *l, int i, int64_t now) {
  ucx_pacc_t *p = &l->pend[i];
  ssize_t k;
  while (p->sent < p->reply_len) {
    k = send(p->fd, p->reply + p->sent, p->reply_len - p->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k > 0) {
      p->sent += (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && now - p->since_ms <= l->ctx->timeout_ms)
      return 0;
    ucx_pend_drop(l, i, k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? "answer not taken within the timeout"
                                                                          : "closed during the handshake");
    return -1;
  }
  return 1;
}

/* The receive for the connecting side's greeting (ucx_connect.c). Nobody
 * waits for it here: UCX acknowledges it when it matches, and close
 * releases the request. */
static rcollResult_t ucx_greet_recv(ucx_conn_t *c) {
  ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL};
  void *req = ucp_tag_recv_nbx(c->ctx->worker, NULL, 0, ucx_tag_greeting(c->conn_id), UINT64_MAX,
                               &param);
  if (UCS_PTR_IS_ERR(req))
    return rcoll_error(rcollSystemError, "ucx: posting the greeting receive failed: %s",
                       ucs_status_string(UCS_PTR_STATUS(req)));
  c->greet_req = req;
  return rcollSuccess;
}

rcollResult_t ucx_accept(void *listen_comm, void **recv_comm) {
  ucx_listener_t *l = listen_comm;
  char abuf[UCX_ADDR_STR];
  *recv_comm = NULL;
  /* Peers' endpoints finish their wire-up through this worker. */
  ucp_worker_progress(l->ctx->worker);
  RCOLL_CHECK(rcoll_pending_progress(&l->hellos, l->fd));
  int64_t now = rcoll_now_ms();
  for (int i = 0; i < l->npend;) {
    int rc = ucx_pend_step(l, i, now);
    if (rc < 0)
      continue; /* dropped: slot i holds another entry now */
    if (rc == 0) {
      i++;
      continue;
    }
    ucx_pacc_t *p = &l->pend[i];
    ucx_conn_t *c = NULL;
    rcollResult_t r = ucx_conn_new(l->ctx, 0, p->fd, p->conn_id, ucx_addr_str(&p->addr, abuf), &c);
    ucx_pend_remove(l, i, r != rcollSuccess); /* on success the comm owns the fd */
    if (r == rcollSuccess)
      r = ucx_greet_recv(c);
    if (r != rcollSuccess) {
      ucx_close_comm(c);
      return r;
    }
    RCOLL_INFO(RCOLL_SUB_NET, "ucx: rank %d accepted connection %u from %s", l->ctx->rank, c->conn_id, c->peer);
    *recv_comm = c;
    return rcollSuccess;
  }
  return rcollSuccess;
}

#endif /* RCOLL_HAVE_UCX */
