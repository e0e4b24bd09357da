/* Sleeping until a connection may progress. The engine calls socket_wait
 * after a pass in which nothing moved; it polls the control sockets and
 * lanes (a header or inline payload arriving, room to send queued headers,
 * the peer closing) and each connection's eventfd, which helper threads poke
 * when they finish a request's last piece while the calling thread sleeps.
 *
 * The handshake between a helper finishing and the caller going to sleep is
 * the classic store-then-load pair on both sides (completions, waiting), all
 * sequentially consistent: either the caller sees the new completion count
 * and does not sleep, or the helper sees `waiting` and writes the eventfd. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <unistd.h>

#include "socket_priv.h"

#define SOCKET_WAIT_MAX 64

void socket_wake(socket_conn_t *c) {
  atomic_fetch_add(&c->completions, 1);
  if (atomic_load(&c->waiting)) {
    uint64_t one = 1;
    ssize_t k = write(c->event_fd, &one, sizeof one);
    (void)k; /* a full counter already means "wake up" */
  }
}

/* The stream a send comm has bytes queued on (the oldest request's), or -1. */
static int socket_wants_out(const socket_conn_t *c) {
  if (!c->is_send || c->ring_head == c->ring_tail)
    return -1;
  return c->ring[c->ring_head % SOCKET_NREQS]->src;
}

/* Arms the connection; returns 1 when something already happened since the
 * last wait, so sleeping would be wrong. */
static int socket_arm(socket_conn_t *c) {
  atomic_store(&c->waiting, 1);
  unsigned now = atomic_load(&c->completions);
  if (now != c->completions_seen) {
    c->completions_seen = now;
    return 1;
  }
  return 0;
}

/* The eventfd is only a doorbell (completions is the truth), so it is read
 * only when poll saw it ring: an unread ring left by a helper that finished
 * after the poll makes the next poll return at once and is drained then.
 * Reading it on every wait cost one failing read per connection per sleep. */
static void socket_disarm(socket_conn_t *c, int rang) {
  atomic_store(&c->waiting, 0);
  uint64_t drain;
  if (rang)
    while (read(c->event_fd, &drain, sizeof drain) > 0) {
    }
  c->completions_seen = atomic_load(&c->completions);
}

rcollResult_t socket_wait(void *const *comms, int n, int64_t timeout_us) {
  struct pollfd pfd[3 * SOCKET_WAIT_MAX];
  int evidx[SOCKET_WAIT_MAX];
  int np = 0, ready = 0;
  if (n > SOCKET_WAIT_MAX)
    n = SOCKET_WAIT_MAX;
  for (int i = 0; i < n; i++) {
    socket_conn_t *c = comms[i];
    ready |= socket_arm(c);
    evidx[i] = np;
    pfd[np++] = (struct pollfd){.fd = c->event_fd, .events = POLLIN};
    int out = socket_wants_out(c);
    if (out >= 0)
      pfd[np++] = (struct pollfd){.fd = socket_stream_fd(c, out), .events = POLLOUT};
    if (!c->is_send && !c->ctrl_closed)
      pfd[np++] = (struct pollfd){.fd = c->ctrl_fd, .events = POLLIN};
    if (!c->is_send && c->lane_fd >= 0 && !c->lane_closed)
      pfd[np++] = (struct pollfd){.fd = c->lane_fd, .events = POLLIN};
  }
  if (!ready && timeout_us > 0) {
    int ms = (int)((timeout_us + 999) / 1000);
    while (poll(pfd, (nfds_t)np, ms) < 0 && errno == EINTR) {
    }
  }
  for (int i = 0; i < n; i++)
    socket_disarm(comms[i], pfd[evidx[i]].revents != 0);
  return rcollSuccess;
}
