/* Sleeping until a verbs connection may progress. The engine calls ib_wait
 * after a pass in which nothing moved. Each connection's completion queue
 * is armed (ibv_req_notify_cq) and then drained once more, so that a
 * completion arriving between the engine's last pass and the arming is not
 * slept through; then the thread sleeps in ppoll on the completion channels,
 * the handshake sockets (the peer closing them) and the device's async
 * event fd. Under Soft-RoCE this matters doubly: a spinning rank takes the
 * CPU from the kernel threads that move its own packets. */
#if RCOLL_HAVE_IBVERBS
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include "ib_priv.h"

#define IB_WAIT_MAX 64

/* Arms the completion queue; returns 1 when completions were already there. */
static int ib_arm(ib_comm_t *c) {
  if (!c->armed) {
    if (ibv_req_notify_cq(c->cq, 0) != 0)
      return 1; /* cannot sleep safely: let the engine poll */
    c->armed = 1;
  }
  return ib_progress(c) > 0 || c->err != 0;
}

static void ib_consume_event(ib_comm_t *c) {
  struct ibv_cq *cq;
  void *cq_ctx;
  while (ibv_get_cq_event(c->chan, &cq, &cq_ctx) == 0) {
    ibv_ack_cq_events(cq, 1);
    c->armed = 0;
  }
}

/* The peer never writes to the handshake socket after the handshake, so
 * readable means closed (EOF or reset). */
static void ib_check_socket(ib_comm_t *c) {
  char b;
  ssize_t k = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    c->peer_gone = 1;
    c->gone_us = rcoll_now_us();
  }
}

rcollResult_t ib_wait(void *const *comms, int n, int64_t timeout_us) {
  struct pollfd pfd[2 * IB_WAIT_MAX + 1];
  int chan_at[IB_WAIT_MAX], sock_at[IB_WAIT_MAX];
  int np = 0, ready = 0;
  if (n > IB_WAIT_MAX)
    n = IB_WAIT_MAX;
  for (int i = 0; i < n; i++) {
    ib_comm_t *c = comms[i];
    ready |= ib_arm(c);
    chan_at[i] = np;
    pfd[np++] = (struct pollfd){.fd = c->chan->fd, .events = POLLIN};
    sock_at[i] = -1;
    if (!c->peer_gone) {
      sock_at[i] = np;
      pfd[np++] = (struct pollfd){.fd = c->fd, .events = POLLIN};
    }
  }
  if (n > 0)
    pfd[np++] = (struct pollfd){.fd = ((ib_comm_t *)comms[0])->ctx->verbs->async_fd, .events = POLLIN};
  if (!ready && timeout_us > 0) {
    struct timespec ts = {.tv_sec = timeout_us / 1000000, .tv_nsec = (timeout_us % 1000000) * 1000};
    while (ppoll(pfd, (nfds_t)np, &ts, NULL) < 0 && errno == EINTR) {
    }
  }
  for (int i = 0; i < n; i++) {
    ib_comm_t *c = comms[i];
    if (pfd[chan_at[i]].revents)
      ib_consume_event(c);
    if (sock_at[i] >= 0 && pfd[sock_at[i]].revents)
      ib_check_socket(c);
  }
  if (n > 0 && (pfd[np - 1].revents & POLLIN))
    ib_dev_async(((ib_comm_t *)comms[0])->ctx);
  return rcollSuccess;
}
#endif
