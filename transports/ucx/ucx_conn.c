/* Comms of the UCX transport: creation, the sender's UCP endpoint (with the
 * transports it ended up on in the log), failure detection and closing.
 *
 * A peer is found gone in two ways: the endpoint's error handler (endpoints
 * with peer failure handling, see ucx_priv.h) and the liveness line, the
 * rendezvous socket that stays open without traffic until either side closes
 * the connection or its process ends. The line is looked at by test (at most
 * every UCX_PROBE_US while a request is pending) and polled by wait. */
#if RCOLL_HAVE_UCX

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "ucx_priv.h"

rcollResult_t ucx_conn_new(ucx_ctx_t *ctx, int is_send, int fd, uint32_t conn_id, const char *peer,
                           ucx_conn_t **out) {
  ucx_conn_t *c = calloc(1, sizeof *c);
  if (c == NULL)
    return rcoll_error(rcollSystemError, "ucx: out of memory for a connection");
  c->ctx = ctx;
  c->is_send = is_send;
  c->fd = fd;
  c->conn_id = conn_id;
  c->timeout_ms = ctx->timeout_ms;
  snprintf(c->peer, sizeof c->peer, "%s", peer);
  for (int i = 0; i < UCX_NREQS; i++) {
    c->reqs[i].conn = c;
    c->free_idx[i] = UCX_NREQS - 1 - i;
  }
  c->nfree = UCX_NREQS;
  *out = c;
  return rcollSuccess;
}

void ucx_conn_fail(ucx_conn_t *c, rcollResult_t r, const char *fmt, ...) {
  va_list ap;
  if (c->err != rcollSuccess)
    return; /* the first failure is the one reported */
  va_start(ap, fmt);
  vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
  va_end(ap);
  c->err = r;
}

rcollResult_t ucx_conn_error(const ucx_conn_t *c) { return rcoll_error_quiet(c->err, "%s", c->errmsg); }

/* The liveness line closed: the peer closed this connection or its process
 * ended. Neither a send nor a receive fails yet: a peer that finished its
 * part closes as soon as it is done, and what it did last (the data of its
 * last send, or UCX's acknowledgement that completes this rank's rendezvous
 * send) may be processed here after the line's end of file. ucx_io.c gives
 * pending requests a grace period. */
static void ucx_conn_lost(ucx_conn_t *c) {
  if (c->lost_ms == 0)
    c->lost_ms = rcoll_now_ms();
}

/* UCX calls this from ucp_worker_progress when an endpoint with peer failure
 * handling fails; its pending sends complete with an error of their own, and
 * nothing more can arrive through it: new sends fail at once. */
static void ucx_ep_failed(void *arg, ucp_ep_h ep, ucs_status_t status) {
  ucx_conn_t *c = arg;
  (void)ep;
  c->ep_status = status;
  ucx_conn_lost(c);
  ucx_conn_fail(c, rcollRemoteError, "ucx: connection to %s lost: %s", c->peer, ucs_status_string(status));
}

/* Returns 1 when the peer is gone. The line carries no data after the
 * handshake, so anything readable is an end of file or an error. Looks at
 * most every UCX_PROBE_US: it is a system call. */
int ucx_conn_probe(ucx_conn_t *c) {
  if (c->lost_ms != 0)
    return 1;
  int64_t now = rcoll_now_us();
  if (now < c->next_probe_us)
    return 0;
  c->next_probe_us = now + UCX_PROBE_US;
  char b;
  ssize_t k = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return 0;
  ucx_conn_lost(c); /* an end of file, a reset, or bytes no peer of ours sends */
  return 1;
}

/* One line naming the transports of the endpoint's lanes, e.g.
 * "posix/memory.0,cma/memory.0", parsed from ucp_ep_print_info. */
void ucx_lanes_summary(ucp_ep_h ep, char *out, size_t outlen) {
  char *text = NULL, *line, *save = NULL;
  size_t len = 0, used = 0;
  out[0] = '\0';
  FILE *f = open_memstream(&text, &len);
  if (f == NULL)
    return;
  ucp_ep_print_info(ep, f);
  fclose(f);
  for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
    char *p = strstr(line, "lane[");
    if (p == NULL || (p = strstr(p, "]:")) == NULL)
      continue;
    p += 2 + strspn(p + 2, " ");
    char *colon = strchr(p, ':'), *end = p + strcspn(p, " ");
    if (colon != NULL && colon < end)
      p = colon + 1;
    int n = (int)(end - p);
    if (n <= 0 || memchr(p, '/', (size_t)n) == NULL)
      continue; /* e.g. a connection-manager lane */
    int k = snprintf(out + used, outlen - used, "%s%.*s", used ? "," : "", n, p);
    if (k < 0 || (size_t)k >= outlen - used)
      break;
    used += (size_t)k;
  }
  free(text);
}

static void ucx_log_ep(const ucx_conn_t *c) {
  char lanes[256];
  if (!rcoll_log_enabled(RCOLL_LOG_INFO, RCOLL_SUB_NET))
    return;
  ucx_lanes_summary(c->ep, lanes, sizeof lanes);
  RCOLL_INFO(RCOLL_SUB_NET, "ucx: rank %d connected to %s (connection %u) over %s; peer failure %s",
             c->ctx->rank, c->peer, c->conn_id, lanes[0] ? lanes : "(lanes unknown)",
             c->peer_mode ? "handled by UCX" : "seen on the liveness line");
}

static ucs_status_t ucx_ep_create(ucx_conn_t *c, const void *waddr, int peer_mode) {
  ucp_ep_params_t params = {
      .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
      .address = waddr,
      .err_mode = peer_mode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE,
  };
  if (peer_mode) {
    params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.err_handler = (ucp_err_handler_t){.cb = ucx_ep_failed, .arg = c};
  }
  c->peer_mode = peer_mode;
  return ucp_ep_create(c->ctx->worker, &params, &c->ep);
}

/* Peer failure handling, unless the peer is local and UCX may use shared
 * memory (ucx_priv.h). When the transports that reach a peer cannot handle
 * its failure, the liveness line must do. */
rcollResult_t ucx_conn_connect_ep(ucx_conn_t *c, const void *waddr, int local) {
  int peer_mode = !local || !c->ctx->has_shm || c->ctx->force_peer_mode;
  ucs_status_t st = ucx_ep_create(c, waddr, peer_mode);
  if (st == UCS_ERR_UNREACHABLE && peer_mode) {
    RCOLL_INFO(RCOLL_SUB_NET, "ucx: no transport to %s handles peer failure; connecting without", c->peer);
    st = ucx_ep_create(c, waddr, 0);
  }
  if (st != UCS_OK) {
    const char *tls = getenv("UCX_TLS");
    c->ep = NULL;
    return rcoll_error_quiet(rcollRemoteError, "ucx: no UCX transport reaches %s: %s (UCX_TLS=%s)", c->peer,
                             ucs_status_string(st), tls ? tls : "default");
  }
  ucx_log_ep(c);
  return rcollSuccess;
}

/* Progresses the worker until req completes or the deadline passes. */
ucs_status_t ucx_progress_until(ucp_worker_h w, void *req, int64_t deadline_ms) {
  ucs_status_t st = UCS_INPROGRESS;
  for (unsigned spin = 0; (st = ucp_request_check_status(req)) == UCS_INPROGRESS; spin++) {
    if (rcoll_now_ms() > deadline_ms)
      break;
    if (ucp_worker_progress(w) == 0 && spin > 64)
      usleep(100);
  }
  return st;
}

ucs_status_t ucx_worker_flush(ucp_worker_h w, int64_t deadline_ms) {
  ucp_request_param_t param = {.op_attr_mask = 0};
  void *req = ucp_worker_flush_nbx(w, &param);
  if (!UCS_PTR_IS_PTR(req))
    return UCS_PTR_STATUS(req);
  ucs_status_t st = ucx_progress_until(w, req, deadline_ms);
  ucp_request_free(req);
  return st;
}

/* Before a clean close lets the peer see the liveness line close: whatever
 * this rank still owes its peers (UCX's acknowledgement of a rendezvous
 * send it received, which completes the peer's send; data of its own sends
 * that completed locally) is sent first. The worker is flushed, not the
 * endpoint: acknowledgements leave on UCX's endpoint towards the sender, not
 * on ours. As NCCL and UCC finalize: the close does not return before its
 * own sends are out, bounded by UCX_CLOSE_FLUSH_MS; a flush that runs out
 * of time (a peer dead but not seen so, with shared memory) is not tried
 * again by the context's later closes, so that a destroy stays short. */
static void ucx_close_flush(ucx_conn_t *c) {
  ucx_ctx_t *ctx = c->ctx;
  if (ctx->flush_stuck)
    return;
  int64_t t0 = rcoll_now_ms();
  ucs_status_t st = ucx_worker_flush(ctx->worker, t0 + UCX_CLOSE_FLUSH_MS);
  if (st == UCS_OK)
    return;
  ctx->flush_stuck = 1;
  RCOLL_INFO(RCOLL_SUB_NET, "ucx: rank %d: closing the connection to %s: flush %s after %lld ms; closing anyway",
             ctx->rank, c->peer, st == UCS_INPROGRESS ? "not done" : ucs_status_string(st),
             (long long)(rcoll_now_ms() - t0));
}

/* After a clean close the endpoint is flushed, so that sends that completed
 * locally leave the process, with a short wait. An endpoint to a peer that
 * is gone, or closed with transfers in flight, is released at once when it
 * has peer failure handling (UCX allows the forced close only in that mode).
 * Returns 0 when the endpoint did not close in time: it then stays with the
 * worker, which releases it when it is destroyed. */
static int ucx_ep_close(ucx_conn_t *c, int gone, int unclean) {
  ucp_worker_h w = c->ctx->worker;
  int force = (gone || unclean) && c->peer_mode;
  ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
  void *req = ucp_ep_close_nbx(c->ep, &p);
  if (!UCS_PTR_IS_PTR(req))
    return 1;
  int wait_ms = unclean ? UCX_CLOSE_UNCLEAN_MS : UCX_CLOSE_CLEAN_MS;
  ucs_status_t st = ucx_progress_until(w, req, rcoll_now_ms() + wait_ms);
  ucp_request_free(req);
  if (st != UCS_INPROGRESS)
    return 1;
  RCOLL_INFO(RCOLL_SUB_NET, "ucx: endpoint to %s did not close within %d ms; leaving it to the worker", c->peer,
             wait_ms);
  return 0;
}

/* Unclean: requests were still running, or the connection failed for
 * another reason than its peer going away (which is how every connection
 * ends when the peer closes first). Only then must the worker's destruction
 * wait for UCX to settle (ucx.c). An endpoint that merely did not finish its
 * flush leaves nothing queued that UCX could trip over.
 * A comm whose endpoint is still open may yet see its error handler called,
 * so it is kept (as a zombie) until the worker is gone. */
rcollResult_t ucx_close_comm(void *comm) {
  ucx_conn_t *c = comm;
  if (c == NULL)
    return rcollSuccess;
  int busy = ucx_reqs_release(c);
  int gone = c->lost_ms != 0 || c->err != rcollSuccess;
  int unclean = busy > 0 || (c->err != rcollSuccess && c->lost_ms == 0);
  if (c->greet_req != NULL) {
    if (!c->is_send)
      ucp_request_cancel(c->ctx->worker, c->greet_req);
    ucx_orphan(c->ctx, c->greet_req);
  }
  int closed = c->ep == NULL || ucx_ep_close(c, gone, unclean);
  if (unclean)
    c->ctx->unclean = 1;
  else if (!gone)
    ucx_close_flush(c);
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
  if (closed) {
    free(c);
  } else {
    c->next_zombie = c->ctx->zombies;
    c->ctx->zombies = c;
  }
  return rcollSuccess;
}

void ucx_zombies_free(ucx_ctx_t *ctx) {
  while (ctx->zombies != NULL) {
    ucx_conn_t *c = ctx->zombies;
    ctx->zombies = c->next_zombie;
    free(c);
  }
}

#endif /* RCOLL_HAVE_UCX */
