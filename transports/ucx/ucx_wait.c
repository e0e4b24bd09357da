/* Sleeping until a connection may progress. The engine calls ucx_wait after
 * a pass in which nothing moved. Each worker involved is progressed until it
 * has nothing to do and then armed (ucp_worker_arm); if UCX says events are
 * already pending, there is no sleep. Otherwise the thread polls the
 * workers' event fds and the liveness lines of the comms (a peer's exit
 * shows there) for at most timeout_us. A worker without an event fd, or one
 * that cannot be armed, makes the wait a short nap instead. */
#if RCOLL_HAVE_UCX

#include <errno.h>
#include <poll.h>
#include <time.h>

#include "ucx_priv.h"

#define UCX_WAIT_MAX 64
#define UCX_NAP_US 200

enum { UCX_ARMED, UCX_READY, UCX_NAP };

/* UCX_READY when the worker had work or events pending (no sleep then),
 * UCX_ARMED when its event fd will signal the next event, UCX_NAP when it
 * cannot be armed (no event fd, or arming failed): a short sleep then. */
static int ucx_worker_arm_state(ucx_ctx_t *ctx) {
  if (ctx->efd < 0)
    return UCX_NAP;
  if (ucp_worker_progress(ctx->worker) != 0)
    return UCX_READY;
  ucs_status_t st = ucp_worker_arm(ctx->worker);
  return st == UCS_OK ? UCX_ARMED : st == UCS_ERR_BUSY ? UCX_READY : UCX_NAP;
}

static void ucx_nap(int64_t us) {
  struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)us * 1000};
  nanosleep(&ts, NULL);
}

rcollResult_t ucx_wait(void *const *comms, int n, int64_t timeout_us) {
  struct pollfd pfd[2 * UCX_WAIT_MAX];
  ucx_ctx_t *ctxs[UCX_WAIT_MAX];
  int np = 0, nctx = 0, ready = 0, nap = 0;
  if (n > UCX_WAIT_MAX)
    n = UCX_WAIT_MAX;
  for (int i = 0; i < n && !ready; i++) {
    ucx_conn_t *c = comms[i];
    int seen = 0;
    for (int j = 0; j < nctx && !seen; j++)
      seen = ctxs[j] == c->ctx;
    if (!seen) {
      ctxs[nctx++] = c->ctx;
      int state = ucx_worker_arm_state(c->ctx);
      ready |= state == UCX_READY;
      nap |= state == UCX_NAP;
      if (state == UCX_ARMED)
        pfd[np++] = (struct pollfd){.fd = c->ctx->efd, .events = POLLIN};
    }
    /* A line already found closed would wake every poll: leave it out. */
    if (c->lost_ms == 0 && c->fd >= 0)
      pfd[np++] = (struct pollfd){.fd = c->fd, .events = POLLIN};
  }
  if (ready || timeout_us <= 0)
    return rcollSuccess;
  if (nap) {
    ucx_nap(timeout_us < UCX_NAP_US ? timeout_us : UCX_NAP_US);
    return rcollSuccess;
  }
  int ms = (int)((timeout_us + 999) / 1000);
  while (poll(pfd, (nfds_t)np, ms) < 0 && errno == EINTR) {
  }
  return rcollSuccess;
}

#endif /* RCOLL_HAVE_UCX */
