/* The accepting side: listen, and the non-blocking accept state machine.
 * Every socket of a connection opens with a hello naming the connection (a
 * random id), the socket's index and the communicator's secret. The listen
 * comm keeps half-read hellos (in the pending set every listener shares, so
 * strays cannot delay real peers) and half-gathered connections between
 * calls, and drops sockets that present a wrong secret or never finish. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "hello_pending.h"
#include "log.h"
#include "socket_priv.h"

_Static_assert(sizeof(socket_handle_t) <= RCOLL_NET_HANDLE_BYTES, "socket handle too large");
_Static_assert(sizeof(socket_hello_t) == 48, "hello layout is part of the wire format");
_Static_assert(sizeof(socket_hello_t) <= RCOLL_PENDING_HELLO_MAX,
               "hellos are read by the pending set");
_Static_assert(sizeof(socket_msg_hdr_t) == 16, "header layout is part of the wire format");

/* ---- listen ---- */

typedef struct socket_group { /* sockets of one connection gathered so far */
  socket_hello_t first;
  int have;
  int fds[SOCKET_MAX_SOCKS];
  rcoll_sockaddr_t addr;
  int64_t since_ms;
} socket_group_t;

/* Every peer opens 1 + nthreads x nsocks sockets at once; SYNs beyond the
 * backlog are retried by the kernel after a second. */
#define SOCKET_BACKLOG 1024

typedef struct socket_listener {
  int fd;
  rcoll_sockaddr_t addr;
  uint64_t secret;
  int64_t timeout_ms;
  rcoll_pending_t pend; /* accepted sockets whose hello is on its way */
  socket_group_t *groups;
  int ngroups, gcap;
} socket_listener_t;

static const char *socket_hello_take(void *arg, int fd, const rcoll_sockaddr_t *addr,
                                     const void *hello);

/* A real peer sends its hello as soon as it is connected; a socket silent
 * for longer is a stray, dropped within this bound or the timeout if shorter. */
static int64_t socket_first_msg_ms(int64_t timeout_ms) {
  return timeout_ms < RCOLL_PENDING_FIRST_MSG_MS ? timeout_ms : RCOLL_PENDING_FIRST_MSG_MS;
}

rcollResult_t socket_listen(void *vctx, int dev, void *handle, void **listen_comm) {
  socket_ctx_t *ctx = vctx;
  char abuf[SOCKET_ADDR_STR];
  if (dev != 0)
    return rcoll_error(rcollInvalidArgument, "socket: listen on device %d, only device 0 exists", dev);
  socket_listener_t *l = calloc(1, sizeof *l);
  if (l == NULL)
    return rcoll_error(rcollSystemError, "socket: out of memory for a listener");
  l->addr = ctx->addr;
  l->secret = ctx->secret;
  l->timeout_ms = ctx->timeout_ms;
  l->fd = rcoll_socket_listen(&l->addr, SOCKET_BACKLOG);
  if (l->fd < 0) {
    free(l);
    return rcollSystemError; /* sockutil recorded why */
  }
  char who[96];
  snprintf(who, sizeof who, "socket: listener %s", socket_addr_str(&l->addr, abuf));
  rcollResult_t rc = rcoll_pending_init(&l->pend, who, sizeof(socket_hello_t), 0,
                                        socket_first_msg_ms(l->timeout_ms), socket_hello_take, l);
  if (rc != rcollSuccess) {
    close(l->fd);
    free(l);
    return rc;
  }
  /* Accepted sockets inherit the buffer sizes, and the window scale they
   * imply is fixed by the handshake, so they are set on the listener. */
  rcoll_socket_set_bufsize(l->fd, SOCKET_BUF_BYTES);
  socket_handle_t h = {.magic = SOCKET_MAGIC, .secret = ctx->secret, .addr = l->addr};
  memset(handle, 0, RCOLL_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof h);
  RCOLL_INFO(RCOLL_SUB_NET, "socket: listening on %s (%s)", socket_addr_str(&l->addr, abuf), ctx->ifname);
  *listen_comm = l;
  return rcollSuccess;
}

static void socket_group_close(socket_group_t *g) {
  for (int i = 0; i < SOCKET_MAX_SOCKS; i++)
    if (g->fds[i] >= 0)
      close(g->fds[i]);
}

rcollResult_t socket_close_listen(void *listen_comm) {
  socket_listener_t *l = listen_comm;
  if (l == NULL)
    return rcollSuccess;
  close(l->fd);
  rcoll_pending_free(&l->pend);
  for (int i = 0; i < l->ngroups; i++)
    socket_group_close(&l->groups[i]);
  free(l->groups);
  free(l);
  return rcollSuccess;
}

/* ---- accept ---- */

const char *socket_hello_parse(const void *wire, size_t len, uint64_t secret, socket_hello_t *out) {
  socket_hello_t h;
  if (len != sizeof h)
    return "a hello of the wrong size";
  memcpy(&h, wire, sizeof h);
  if (h.magic != SOCKET_MAGIC)
    return "not an rcoll socket connection (bad magic)";
  if (h.secret != secret)
    return "wrong secret (a connection from another job?)";
  /* index < nsocks_total <= SOCKET_MAX_SOCKS keeps it inside a group's fds;
   * inline_max within RCOLL_SOCKET_INLINE's range, which the sender read. */
  if (h.nthreads < 1 || h.nthreads > SOCKET_MAX_THREADS || h.nsocks_per < 1 ||
      h.nthreads * h.nsocks_per > SOCKET_MAX_DATA || h.nsocks_total != 1 + h.nthreads * h.nsocks_per ||
      h.index >= h.nsocks_total || h.inline_max > INT32_MAX)
    return "malformed hello";
  *out = h;
  return NULL;
}

static socket_group_t *socket_group_find(socket_listener_t *l, const socket_hello_t *h) {
  for (int i = 0; i < l->ngroups; i++)
    if (l->groups[i].first.conn_id == h->conn_id)
      return &l->groups[i];
  if (l->ngroups == l->gcap) {
    int cap = l->gcap ? 2 * l->gcap : 8;
    socket_group_t *g = realloc(l->groups, (size_t)cap * sizeof *g);
    if (g == NULL)
      return NULL;
    l->groups = g;
    l->gcap = cap;
  }
  socket_group_t *g = &l->groups[l->ngroups++];
  memset(g, 0, sizeof *g);
  memset(g->fds, -1, sizeof g->fds);
  g->first = *h;
  g->since_ms = rcoll_now_ms();
  return g;
}

/* Files a socket whose hello is valid under its connection. Returns the
 * reason when it must be dropped instead. */
static const char *socket_group_add(socket_listener_t *l, int fd, const rcoll_sockaddr_t *addr,
                                    const socket_hello_t *h) {
  socket_group_t *g = socket_group_find(l, h);
  if (g == NULL)
    return "out of memory";
  const socket_hello_t *f = &g->first;
  if (h->nsocks_total != f->nsocks_total || h->nthreads != f->nthreads || h->inline_max != f->inline_max)
    return "hello disagrees with the other sockets of its connection";
  if (g->fds[h->index] >= 0)
    return "duplicate socket index";
  g->fds[h->index] = fd;
  if (h->index == 0)
    g->addr = *addr;
  g->have++;
  return NULL;
}

/* The pending set's callback: files a socket whose hello checks out under
 * its connection, or says why it is dropped. */
static const char *socket_hello_take(void *arg, int fd, const rcoll_sockaddr_t *addr,
                                     const void *hello) {
  socket_listener_t *l = arg;
  socket_hello_t h;
  const char *why = socket_hello_parse(hello, sizeof h, l->secret, &h);
  return why != NULL ? why : socket_group_add(l, fd, addr, &h);
}

static void socket_group_remove(socket_listener_t *l, int i) { l->groups[i] = l->groups[--l->ngroups]; }

/* Returns a complete group's recv comm, dropping groups that went stale. */
static rcollResult_t socket_groups_harvest(socket_listener_t *l, int64_t now, void **recv_comm) {
  char abuf[SOCKET_ADDR_STR];
  for (int i = 0; i < l->ngroups; i++) {
    socket_group_t *g = &l->groups[i];
    if (g->have < g->first.nsocks_total) {
      if (now - g->since_ms > l->timeout_ms) {
        RCOLL_WARN("socket: dropping connection %016llx: %d of %d sockets arrived within the timeout",
                   (unsigned long long)g->first.conn_id, g->have, g->first.nsocks_total);
        socket_group_close(g);
        socket_group_remove(l, i--);
      }
      continue;
    }
    socket_conn_t *c;
    socket_addr_str(&g->addr, abuf);
    rcollResult_t rc = socket_conn_create(0, g->fds, &g->first, l->timeout_ms, abuf, &c);
    if (rc != rcollSuccess) {
      socket_group_close(g);
      socket_group_remove(l, i);
      return rc;
    }
    socket_log_conn("accepted", g->fds[0], abuf, &g->first);
    socket_group_remove(l, i);
    *recv_comm = c;
    return rcollSuccess;
  }
  return rcollSuccess;
}

rcollResult_t socket_accept(void *listen_comm, void **recv_comm) {
  socket_listener_t *l = listen_comm;
  *recv_comm = NULL;
  RCOLL_CHECK(rcoll_pending_progress(&l->pend, l->fd));
  return socket_groups_harvest(l, rcoll_now_ms(), recv_comm);
}
