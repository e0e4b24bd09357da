/* Helper threads of a socket connection. Each owns a few data sockets and
 * moves the pieces queued on them, in FIFO order per socket, with
 * non-blocking I/O and poll: several sockets of one helper progress at once,
 * and poll's tick lets a helper notice a close even when the peer is silent.
 * An idle helper sleeps on its condition variable; the producer signals it
 * only when it is idle, so a busy connection costs no futex calls. */
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "error.h"
#include "hwtopo.h"
#include "socket_priv.h"

#define SOCKET_HELPER_STACK (256 * 1024)

void socket_helper_push(socket_conn_t *c, int sock, socket_req_t *req, char *buf, size_t len) {
  socket_dsock_t *s = &c->data[sock];
  socket_helper_t *h = &c->helpers[sock % c->nthreads];
  pthread_mutex_lock(&h->lock);
  s->q[s->tail % SOCKET_NREQS] = (socket_task_t){.req = req, .buf = buf, .len = len};
  s->tail++;
  h->queued++;
  if (h->idle)
    pthread_cond_signal(&h->cond);
  pthread_mutex_unlock(&h->lock);
}

/* Retires the head piece of s. The request's counter drops last: once it
 * reaches zero the calling thread may free and reuse the request. */
static void socket_helper_pop(socket_helper_t *h, socket_dsock_t *s, int ok) {
  socket_req_t *req = s->q[s->head % SOCKET_NREQS].req;
  pthread_mutex_lock(&h->lock);
  s->head++;
  h->queued--;
  pthread_mutex_unlock(&h->lock);
  s->done = 0;
  s->last_ms = 0;
  if (!ok)
    atomic_store(&req->failed, 1);
  if (atomic_fetch_sub_explicit(&req->pieces_left, 1, memory_order_release) == 1)
    socket_wake(h->conn);
}

/* After a failure no piece may touch user memory again: drop them all. */
static void socket_helper_abandon(socket_helper_t *h) {
  for (int i = 0; i < h->nsocks; i++) {
    socket_dsock_t *s = h->socks[i];
    for (;;) {
      pthread_mutex_lock(&h->lock);
      int empty = s->head == s->tail;
      pthread_mutex_unlock(&h->lock);
      if (empty)
        break;
      socket_helper_pop(h, s, 0);
    }
  }
}

static void socket_piece_fail(socket_helper_t *h, socket_dsock_t *s, int err) {
  socket_conn_t *c = h->conn;
  const socket_task_t *t = &s->q[s->head % SOCKET_NREQS];
  const char *dir = c->is_send ? "sending" : "receiving";
  if (atomic_load(&h->stop))
    return; /* our own close shut the socket: not a peer failure */
  if (err == 0)
    socket_conn_fail(c, rcollRemoteError, "socket: connection to %s closed by peer while %s %zu bytes",
                     c->peer, dir, t->req->size);
  else
    socket_conn_fail(c, rcollRemoteError, "socket: connection to %s failed while %s %zu bytes: %s",
                     c->peer, dir, t->req->size, strerror(err));
}

/* Moves what the socket takes now: 1 when the head piece is complete, 0 when
 * the socket would block, -1 when the connection failed. */
static int socket_piece_io(socket_helper_t *h, socket_dsock_t *s) {
  const socket_task_t *t = &s->q[s->head % SOCKET_NREQS];
  int is_send = h->conn->is_send;
  while (s->done < t->len) {
    ssize_t n = is_send ? send(s->fd, t->buf + s->done, t->len - s->done, MSG_DONTWAIT | MSG_NOSIGNAL)
                        : recv(s->fd, t->buf + s->done, t->len - s->done, MSG_DONTWAIT);
    if (n > 0) {
      s->done += (size_t)n;
      s->last_ms = 0;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    socket_piece_fail(h, s, n == 0 ? 0 : errno);
    return -1;
  }
  return 1;
}

/* Only the receiving side times out: its pieces were announced by a header,
 * so a healthy peer is already sending them. A sender may legitimately wait
 * for a receiver that has not posted yet; a dead receiver resets the socket. */
static int socket_piece_stalled(socket_helper_t *h, socket_dsock_t *s, int64_t now) {
  socket_conn_t *c = h->conn;
  if (c->is_send)
    return 0;
  if (s->last_ms == 0) {
    s->last_ms = now;
    return 0;
  }
  if (now - s->last_ms < c->timeout_ms)
    return 0;
  socket_conn_fail(c, rcollTimeout, "socket: no data from %s for %lld s while receiving %zu bytes",
                   c->peer, (long long)(c->timeout_ms / 1000), s->q[s->head % SOCKET_NREQS].req->size);
  return 1;
}

/* One round over the helper's sockets: move bytes where the socket allows,
 * then wait (bounded by the tick) only if nothing moved. */
static void socket_helper_step(socket_helper_t *h) {
  struct pollfd pfd[SOCKET_MAX_DATA];
  socket_dsock_t *ps[SOCKET_MAX_DATA];
  unsigned tails[SOCKET_MAX_DATA];
  int np = 0, moved = 0;
  pthread_mutex_lock(&h->lock);
  for (int i = 0; i < h->nsocks; i++)
    tails[i] = h->socks[i]->tail;
  pthread_mutex_unlock(&h->lock);
  for (int i = 0; i < h->nsocks; i++) {
    socket_dsock_t *s = h->socks[i];
    if (s->head == tails[i])
      continue;
    int r = socket_piece_io(h, s);
    if (r < 0)
      return;
    if (r > 0) {
      socket_helper_pop(h, s, 1);
      moved = 1;
      continue;
    }
    pfd[np] = (struct pollfd){.fd = s->fd, .events = h->conn->is_send ? POLLOUT : POLLIN};
    ps[np++] = s;
  }
  if (moved || np == 0)
    return;
  poll(pfd, (nfds_t)np, SOCKET_POLL_TICK_MS);
  int64_t now = rcoll_now_ms();
  for (int i = 0; i < np; i++)
    if (pfd[i].revents == 0 && socket_piece_stalled(h, ps[i], now))
      return;
}

static void *socket_helper_main(void *arg) {
  socket_helper_t *h = arg;
  pthread_mutex_lock(&h->lock);
  while (!atomic_load(&h->stop)) {
    if (h->queued == 0) {
      /* The timed wait only bounds the sleep; stop is signalled anyway. */
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      ts.tv_sec += 1;
      h->idle = 1;
      pthread_cond_timedwait(&h->cond, &h->lock, &ts);
      h->idle = 0;
      continue;
    }
    pthread_mutex_unlock(&h->lock);
    if (atomic_load(&h->conn->err))
      socket_helper_abandon(h);
    else
      socket_helper_step(h);
    pthread_mutex_lock(&h->lock);
  }
  pthread_mutex_unlock(&h->lock);
  return NULL;
}

static int socket_helper_init(socket_conn_t *c, socket_helper_t *h) {
  pthread_condattr_t ca;
  h->conn = c;
  if (pthread_mutex_init(&h->lock, NULL))
    return -1;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(&h->cond, &ca);
  pthread_condattr_destroy(&ca);
  if (rc) {
    pthread_mutex_destroy(&h->lock);
    return -1;
  }
  return 0;
}

/* Helpers block every signal: signals belong to the application's threads. */
static int socket_helper_spawn(socket_helper_t *h) {
  pthread_attr_t attr;
  sigset_t all, old;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, SOCKET_HELPER_STACK);
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&h->thread, &attr, socket_helper_main, h);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  return rc;
}

/* The interface the connection's sockets use: the one that holds their
 * local address. The connection does not record it, and the address is what
 * the kernel really chose. "" when no interface has it. */
static void socket_helper_ifname(int fd, char *name, size_t len) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  struct ifaddrs *ifs = NULL;
  name[0] = '\0';
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0 || getifaddrs(&ifs) != 0)
    return;
  for (struct ifaddrs *i = ifs; i != NULL && name[0] == '\0'; i = i->ifa_next) {
    if (i->ifa_addr == NULL || i->ifa_addr->sa_family != ss.ss_family)
      continue;
    const struct sockaddr_in *a4 = (const void *)i->ifa_addr, *b4 = (const void *)&ss;
    const struct sockaddr_in6 *a6 = (const void *)i->ifa_addr, *b6 = (const void *)&ss;
    int same = ss.ss_family == AF_INET ? a4->sin_addr.s_addr == b4->sin_addr.s_addr
               : ss.ss_family == AF_INET6 && memcmp(&a6->sin6_addr, &b6->sin6_addr, sizeof a6->sin6_addr) == 0;
    if (same)
      snprintf(name, len, "%s", i->ifa_name);
  }
  freeifaddrs(ifs);
}

/* Helpers move the bytes through the NIC: run them on the CPUs next to it. */
static void socket_helpers_pin(socket_conn_t *c) {
  char ifname[64], who[160];
  rcoll_hwtopo_locality_t loc;
  socket_helper_ifname(c->ctrl_fd, ifname, sizeof ifname);
  if (ifname[0] == '\0')
    snprintf(loc.where, sizeof loc.where, "no interface holds the connection's address");
  loc.valid = ifname[0] != '\0' && rcoll_hwtopo_locality_of_netdev(ifname, &loc);
  for (int t = 0; t < c->nthreads; t++) {
    snprintf(who, sizeof who, "socket: helper %d/%d of the %s connection with %s", t + 1, c->nthreads,
             c->is_send ? "send" : "receive", c->peer);
    rcoll_hwtopo_pin_thread(c->helpers[t].thread, &loc, who);
  }
}

/* Socket s belongs to helper s % nthreads, so consecutive pieces of one
 * message land on different threads. */
rcollResult_t socket_helpers_start(socket_conn_t *c) {
  for (int s = 0; s < c->ndata; s++) {
    socket_helper_t *h = &c->helpers[s % c->nthreads];
    h->socks[h->nsocks++] = &c->data[s];
  }
  for (int t = 0; t < c->nthreads; t++) {
    socket_helper_t *h = &c->helpers[t];
    if (socket_helper_init(c, h))
      goto fail;
    int rc = socket_helper_spawn(h);
    if (rc) {
      pthread_cond_destroy(&h->cond);
      pthread_mutex_destroy(&h->lock);
      socket_helpers_stop(c);
      return rcoll_error(rcollSystemError, "socket: cannot start helper thread: %s", strerror(rc));
    }
    h->started = 1;
  }
  socket_helpers_pin(c);
  return rcollSuccess;
fail:
  socket_helpers_stop(c);
  return rcoll_error(rcollSystemError, "socket: cannot initialize helper thread state");
}

/* Shutting the sockets down wakes a helper blocked in poll at once; the stop
 * flag then ends its loop. Joining is therefore bounded by one tick. */
void socket_helpers_stop(socket_conn_t *c) {
  for (int t = 0; t < c->nthreads; t++) {
    socket_helper_t *h = &c->helpers[t];
    if (!h->started)
      continue;
    pthread_mutex_lock(&h->lock);
    atomic_store(&h->stop, 1);
    pthread_cond_signal(&h->cond);
    pthread_mutex_unlock(&h->lock);
  }
  for (int s = 0; s < c->ndata; s++)
    if (c->data[s].fd >= 0)
      shutdown(c->data[s].fd, SHUT_RDWR);
  for (int t = 0; t < c->nthreads; t++) {
    socket_helper_t *h = &c->helpers[t];
    if (!h->started)
      continue;
    pthread_join(h->thread, NULL);
    pthread_cond_destroy(&h->cond);
    pthread_mutex_destroy(&h->lock);
    h->started = 0;
  }
}
