/* Requests on a UCX connection: isend / irecv / test / iflush.
 *
 * Each message is one UCP tagged operation whose tag is the connection id,
 * the message's sequence number and the low bits of the sender's rcoll tag
 * (ucx_priv.h). A single receive is posted with a mask that ignores the
 * rcoll-tag bits: the k-th irecv of a connection can match only the k-th
 * isend of its peer, whatever else arrives at the worker, and its tag is not
 * checked. UCX accepts a receive posted larger than the message and reports
 * the length that came. Grouped receives are in ucx_group.c.
 *
 * No completion callbacks are used: test asks UCX for the request's status
 * after progressing the worker, so a request released at close can never
 * call back into freed memory. */
#if RCOLL_HAVE_UCX

#include <string.h>

#include "error.h"
#include "ucx_priv.h"

/* iflush has nothing to do (UCX completes a receive only once its data is
 * in place); it returns this token, which test reports done at once. A NULL
 * request would read as "out of slots". */
static const char ucx_flush_token;

ucx_req_t *ucx_req_alloc(ucx_conn_t *c, int kind, size_t posted) {
  if (c->nfree == 0)
    return NULL;
  ucx_req_t *r = &c->reqs[c->free_idx[--c->nfree]];
  r->kind = kind;
  r->done = 0;
  r->status = UCS_OK;
  r->ucp_req = NULL;
  r->posted = posted;
  memset(&r->info, 0, sizeof r->info);
  return r;
}

void ucx_req_free(ucx_conn_t *c, ucx_req_t *r) {
  r->kind = UCX_REQ_FREE;
  c->free_idx[c->nfree++] = (int)(r - c->reqs);
}

static ucp_tag_t ucx_next_tag(ucx_conn_t *c, int tag) { return ucx_tag_make(c->conn_id, c->seq++, tag); }

/* Hands UCX the registration when the buffer lies inside it; UCX checks
 * the handle against the buffer and would refuse a mismatch. */
void ucx_param_memh(ucp_request_param_t *p, const ucx_conn_t *c, const void *buf, size_t size, void *mh) {
  const ucx_mr_t *mr = mh;
  const char *b = buf;
  if (mr == NULL || mr->memh == NULL || mr->ctx != c->ctx || size == 0)
    return;
  if (b < mr->base || size > mr->len || (size_t)(b - mr->base) > mr->len - size)
    return;
  p->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
  p->memh = mr->memh;
}

/* Records what a ucp_tag_*_nbx call returned: a request, or an outcome. */
void ucx_req_started(ucx_req_t *r, ucs_status_ptr_t p) {
  if (p == NULL) {
    r->done = 1;
  } else if (UCS_PTR_IS_ERR(p)) {
    r->done = 1;
    r->status = UCS_PTR_STATUS(p);
  } else {
    r->ucp_req = p;
  }
}

/* A request finished with an error: the connection fails with a message
 * that says which way, how much and to whom. */
rcollResult_t ucx_req_failed(ucx_conn_t *c, ucx_req_t *r) {
  int send = r->kind == UCX_REQ_SEND;
  if (r->status == UCS_ERR_MESSAGE_TRUNCATED)
    ucx_conn_fail(c, rcollInvalidUsage, "ucx: message from %s larger than posted receive of %zu bytes", c->peer,
                  r->posted);
  else
    ucx_conn_fail(c, rcollRemoteError, "ucx: %s of %zu bytes %s %s failed: %s", send ? "send" : "receive",
                  r->posted, send ? "to" : "from", c->peer, ucs_status_string(r->status));
  return ucx_conn_error(c);
}

rcollResult_t ucx_isend(void *comm, const void *data, size_t size, int tag, void *mh, void **request) {
  ucx_conn_t *c = comm;
  *request = NULL;
  if (c->err == rcollSuccess && ucx_conn_probe(c))
    ucx_conn_fail(c, rcollRemoteError,
                  "ucx: connection to %s lost before a send of %zu bytes: the peer closed it or its process ended",
                  c->peer, size); /* a peer that closed takes no new message */
  if (c->err != rcollSuccess)
    return ucx_conn_error(c);
  ucx_req_t *r = ucx_req_alloc(c, UCX_REQ_SEND, size);
  if (r == NULL)
    return rcollSuccess;
  ucp_request_param_t param = {.op_attr_mask = 0};
  ucx_param_memh(&param, c, data, size, mh);
  ucx_req_started(r, ucp_tag_send_nbx(c->ep, data, size, ucx_next_tag(c, tag), &param));
  if (r->done && r->status != UCS_OK)
    return ucx_req_failed(c, r);
  *request = r;
  return rcollSuccess;
}

rcollResult_t ucx_irecv(void *comm, int n, void **data, const size_t *sizes, const int *tags, void **mh,
                        void **request) {
  ucx_conn_t *c = comm;
  *request = NULL;
  if (n < 1 || n > RCOLL_NET_MAX_RECVS)
    return rcoll_error(rcollInvalidArgument, "ucx: irecv of %d buffers (max_recvs is %d)", n, RCOLL_NET_MAX_RECVS);
  if (c->err != rcollSuccess)
    return ucx_conn_error(c);
  if (n > 1)
    return ucx_irecv_group(c, n, data, sizes, tags, mh, request);
  ucx_req_t *r = ucx_req_alloc(c, UCX_REQ_RECV, sizes[0]);
  if (r == NULL)
    return rcollSuccess;
  /* UCX 1.13 leaves recv_info unfilled when a receive completes at once
   * (the message was already waiting), so the length is always read from a
   * request; UCX may still have finished it by the time the call returns. */
  ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO | UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
                               .recv_info.tag_info = &r->info};
  ucx_param_memh(&param, c, data[0], sizes[0], mh ? mh[0] : NULL);
  ucx_req_started(r, ucp_tag_recv_nbx(c->ctx->worker, data[0], sizes[0], ucx_next_tag(c, 0), UCX_TAG_MATCH_MASK,
                                      &param));
  if (r->done && r->status != UCS_OK)
    return ucx_req_failed(c, r);
  *request = r;
  return rcollSuccess;
}

rcollResult_t ucx_iflush(void *comm, int n, void **data, const size_t *sizes, void **mh, void **request) {
  (void)comm, (void)n, (void)data, (void)sizes, (void)mh;
  *request = (void *)&ucx_flush_token;
  return rcollSuccess;
}

/* Progresses the worker and collects the request's outcome if it is in. */
void ucx_req_poll(ucx_req_t *r) {
  ucp_worker_progress(r->conn->ctx->worker);
  ucx_req_collect(r);
}

/* Collects the request's outcome if UCX has finished it. */
void ucx_req_collect(ucx_req_t *r) {
  ucs_status_t st = ucp_request_check_status(r->ucp_req);
  if (st == UCS_INPROGRESS)
    return;
  if (r->kind == UCX_REQ_RECV)
    ucp_tag_recv_request_test(r->ucp_req, &r->info);
  ucp_request_free(r->ucp_req);
  r->ucp_req = NULL;
  r->done = 1;
  r->status = st;
}

/* A request is still pending: 1 when its connection has failed. A request
 * whose peer is gone gets a grace period first: a receive for data that was
 * on its way when the liveness line closed, a send for UCX's word that it
 * is complete (a rendezvous send completes on the receiver's
 * acknowledgement, which the receiver may have sent just before it closed,
 * ucx_conn.c). The peer flushed its worker before closing the line
 * (ucx_close_comm), so what it owed this rank is here or on its way. */
int ucx_req_peer_failed(ucx_conn_t *c, size_t posted) {
  if (!ucx_conn_probe(c) && c->err == rcollSuccess)
    return 0;
  if (c->err == rcollSuccess) {
    int64_t grace = c->timeout_ms < UCX_LOST_GRACE_MS ? c->timeout_ms : UCX_LOST_GRACE_MS;
    if (rcoll_now_ms() - c->lost_ms < grace)
      return 0;
    ucx_conn_fail(c, rcollRemoteError,
                  "ucx: connection to %s lost while %s %zu bytes: the peer closed it or its process ended",
                  c->peer, c->is_send ? "sending" : "receiving", posted);
  }
  return 1;
}

/* Gives up on a pending request of a failed connection: UCX's request goes
 * to the context (a posted receive is cancelled first; a probed message's
 * receive cannot be), and the slot stays taken and failed until close, so
 * testing it again reports the same error. */
void ucx_req_abandon(ucx_conn_t *c, ucx_req_t *r) {
  if (r->ucp_req != NULL) {
    if (r->kind == UCX_REQ_RECV)
      ucp_request_cancel(c->ctx->worker, r->ucp_req);
    ucx_orphan(c->ctx, r->ucp_req);
    r->ucp_req = NULL;
  }
  r->done = 1;
  r->status = UCS_ERR_CANCELED;
}

rcollResult_t ucx_test(void *request, int *done, size_t *sizes) {
  *done = 0;
  if (request == &ucx_flush_token) {
    *done = 1;
    return rcollSuccess;
  }
  ucx_req_t *r = request;
  ucx_conn_t *c = r->conn;
  if (r->kind == UCX_REQ_FREE)
    return rcoll_error(rcollInvalidUsage, "ucx: test on a request that already completed");
  if (r->kind == UCX_REQ_GROUP)
    return ucx_test_group(r, done, sizes);
  if (!r->done)
    ucx_req_poll(r);
  if (!r->done) {
    if (!ucx_req_peer_failed(c, r->posted))
      return rcollSuccess;
    ucx_req_abandon(c, r);
    return ucx_conn_error(c);
  }
  if (r->status != UCS_OK)
    return r->status == UCS_ERR_CANCELED ? ucx_conn_error(c) : ucx_req_failed(c, r);
  if (sizes != NULL)
    sizes[0] = r->kind == UCX_REQ_RECV ? r->info.length : r->posted;
  *done = 1;
  ucx_req_free(c, r);
  return rcollSuccess;
}

/* At close: pending receives are cancelled and given a moment to settle, so
 * that UCX is done with the caller's buffers (a grouped receive's messages,
 * once probed, cannot be cancelled: they only settle); requests still
 * running are handed to the context (ucx_orphan). Returns how many had not
 * completed. */
int ucx_reqs_release(ucx_conn_t *c) {
  ucp_worker_h w = c->ctx->worker;
  int64_t deadline = rcoll_now_ms() + UCX_CLOSE_CLEAN_MS;
  int busy = 0;
  for (int i = 0; i < UCX_NREQS; i++)
    if (c->reqs[i].ucp_req != NULL && c->reqs[i].kind == UCX_REQ_RECV)
      ucp_request_cancel(w, c->reqs[i].ucp_req);
  for (int i = 0; i < UCX_NREQS; i++) {
    ucx_req_t *r = &c->reqs[i];
    if (r->ucp_req == NULL)
      continue;
    busy++;
    if (r->kind == UCX_REQ_RECV || r->kind == UCX_REQ_GROUP)
      ucx_progress_until(w, r->ucp_req, deadline);
    ucx_orphan(c->ctx, r->ucp_req);
    r->ucp_req = NULL;
  }
  return busy;
}

#endif /* RCOLL_HAVE_UCX */
