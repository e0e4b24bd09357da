/* Requests on a verbs connection, the side-independent part: request slots,
 * where a request's data lives, work completions, progress, test and close.
 * The protocols are described in ib_priv.h; the send side is in ib_send.c,
 * the receive side in ib_recv.c, iflush in ib_flush.c. Every call is driven
 * by the calling thread; nothing here blocks. */
#if RCOLL_HAVE_IBVERBS
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "ib_priv.h"
#include "log.h"

#define IB_POLL_BATCH 16
#define IB_PEER_GONE_GRACE_US 100000 /* completions may trail the peer's socket closing */

void ib_comm_fail(ib_comm_t *c, rcollResult_t r, const char *fmt, ...) {
  va_list ap;
  if (c->err != rcollSuccess)
    return;
  va_start(ap, fmt);
  vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
  va_end(ap);
  c->err = r;
}

rcollResult_t ib_comm_error(ib_comm_t *c) { return rcoll_error_quiet((rcollResult_t)c->err, "%s", c->errmsg); }

/* NULL when out of slots, or while message seq - IB_NREQS is unfinished
 * (requests may finish out of order: a small eager one before a large one). */
ib_req_t *ib_req_alloc(ib_comm_t *c, int kind, void *buf, size_t size) {
  if (c->nfree == 0 || c->by_seq[c->seq % IB_NREQS] != NULL)
    return NULL;
  if (c->nfree == IB_NREQS)
    c->quiet_since_us = 0; /* idle until now: not a quiet spell */
  ib_req_t *r = &c->reqs[c->free_idx[--c->nfree]];
  *r = (ib_req_t){.comm = c, .kind = kind, .seq = c->seq++, .buf = buf, .size = size};
  c->by_seq[r->seq % IB_NREQS] = r;
  return r;
}

/* Also undoes an allocation whose posting failed (the last one made). */
void ib_req_free(ib_comm_t *c, ib_req_t *r) {
  if (r->mr != NULL)
    ib_mr_put(c->ctx, r->mr);
  r->mr = NULL;
  r->kind = IB_REQ_FREE;
  c->by_seq[r->seq % IB_NREQS] = NULL;
  c->free_idx[c->nfree++] = ib_slot(c, r);
}

/* Where the data of a rendezvous request moves from or to: the caller's
 * registration, the slot's bounce buffer for small unregistered buffers, or
 * a registration held for the request's life. */
rcollResult_t ib_req_mem(ib_comm_t *c, ib_req_t *r, ib_mr_t *mh, int access) {
  if (mh != NULL) {
    if ((uintptr_t)r->buf < mh->beg || (uintptr_t)r->buf + r->size > mh->end)
      return rcoll_error_quiet(rcollInvalidArgument, "ib: buffer %p+%zu lies outside its registration", r->buf,
                               r->size);
    r->addr = (uintptr_t)r->buf;
    r->lkey = mh->mr->lkey;
    r->rkey = mh->mr->rkey;
    return rcollSuccess;
  }
  if (r->size <= IB_BOUNCE_BYTES) {
    r->bounce = 1;
    r->addr = (uintptr_t)(ib_block_slot(c, ib_slot(c, r)) + IB_HDR);
    r->lkey = c->block_mr->lkey;
    r->rkey = c->block_mr->rkey;
    return rcollSuccess;
  }
  RCOLL_CHECK(ib_mr_get(c->ctx, r->buf, r->size, access, RCOLL_MEM_HOST, &r->mr));
  r->addr = (uintptr_t)r->buf;
  r->lkey = r->mr->mr->lkey;
  r->rkey = r->mr->mr->rkey;
  return rcollSuccess;
}

/* ---- completions ---- */

static const char *ib_wc_hint(enum ibv_wc_status s) {
  switch (s) {
  case IBV_WC_RETRY_EXC_ERR:
    return "; the peer stopped acknowledging: it died, its port went down, or there is no path between "
           "the two GIDs (check RCOLL_IB_GID_INDEX on both sides)";
  case IBV_WC_RNR_RETRY_EXC_ERR: return "; the peer had no receive posted";
  case IBV_WC_REM_ACCESS_ERR:
    return "; the peer refused the RDMA write (its buffer was released: it aborted, or a bad key or range)";
  case IBV_WC_WR_FLUSH_ERR: return "; the queue pair had already failed";
  case IBV_WC_LOC_QP_OP_ERR: return "; the local port may have gone down";
  default: return "";
  }
}

/* ib_priv.h says what; only receives that wait for data count. */
void ib_recvs_str(const ib_comm_t *c, char *out, size_t len) {
  size_t n = 0;
  out[0] = '\0';
  for (int i = 0; i < IB_NREQS && n + 1 < len; i++) {
    const ib_req_t *r = &c->reqs[i];
    if (r->kind != IB_REQ_RECV || r->eager || r->pending == 0)
      continue;
    int w = snprintf(out + n, len - n, "%s message %u into %#llx+%zu rkey 0x%x", n ? "," : "; receives posted:",
                     r->seq, (unsigned long long)r->addr, r->size, r->rkey);
    n = w < 0 ? len : n + (size_t)w;
  }
}

static void ib_wc_fail(ib_comm_t *c, const struct ibv_wc *wc) {
  static const char *what[] = {"?",           "an RDMA write to", "an eager send to", "a credit to",
                               "a credit from", "data from",      "data from",        "?",
                               "an empty RDMA write (a kick, after no completion for RCOLL_IB_KICK_MS) to"};
  int k = IB_WR_KIND(wc->wr_id);
  if (k == IB_WR_FLUSH) {
    ib_flush_wc_fail(c, wc);
    return;
  }
  /* Where a write went, on both sides, for an access error: was the
   * credit the sender used that of a receive still posted here? */
  char kicked[160] = "", write[160] = "", posted[200] = "";
  if (k == IB_WR_DATA) {
    const ib_req_t *r = &c->reqs[IB_WR_IDX(wc->wr_id)];
    snprintf(write, sizeof write, " (message %u of %zu bytes into the peer's %#llx+%llu, rkey 0x%x)", r->seq,
             r->size, (unsigned long long)r->dest.addr, (unsigned long long)r->dest.size, r->dest.rkey);
  } else if (k == IB_WR_DATA_RECV || k == IB_WR_LAND) {
    ib_recvs_str(c, posted, sizeof posted);
  }
  if (c->kicks > 0) /* the send queue had stopped (ib_stall.c) */
    snprintf(kicked, sizeof kicked, "; right after %d kick(s) of a send queue that had stopped for %lld ms",
             c->kicks, (long long)((c->kicked_us - c->quiet_since_us) / 1000));
  ib_comm_fail(c, rcollRemoteError,
               "ib: %s %s%s failed: work completion status '%s' (%d, vendor error 0x%x, QPN 0x%x)%s%s%s "
               "[RCOLL_IB_TIMEOUT=%d RCOLL_IB_RETRY_CNT=%d]",
               what[k >= 1 && k <= 8 ? k : 0], c->peer, write, ibv_wc_status_str(wc->status), (int)wc->status,
               wc->vendor_err, wc->qp_num, ib_wc_hint(wc->status), kicked, posted, c->ctx->timeout,
               c->ctx->retry_cnt);
}

static void ib_repost_data_recv(ib_comm_t *c, const struct ibv_wc *wc) {
  int q = IB_WR_IDX(wc->wr_id);
  struct ibv_recv_wr wr = {.wr_id = wc->wr_id}, *bad;
  int e = q > 0 && q < c->nqps ? ibv_post_recv(c->qps[q], &wr, &bad) : EINVAL;
  if (e != 0)
    ib_comm_fail(c, rcollSystemError, "ib: reposting a receive for %s failed: %s", c->peer, strerror(e));
}

/* Returns 1 when the completion moved a message (a kick's does not). */
static int ib_wc_handle(ib_comm_t *c, const struct ibv_wc *wc) {
  if (wc->status != IBV_WC_SUCCESS) {
    ib_wc_fail(c, wc);
    return 1;
  }
  int idx = IB_WR_IDX(wc->wr_id);
  switch (IB_WR_KIND(wc->wr_id)) {
  case IB_WR_DATA:
  case IB_WR_EAGER: c->reqs[idx].pending--; break;
  case IB_WR_CREDIT: c->credit_busy[idx] = 0; break;
  case IB_WR_CREDIT_RECV: ib_credit_in(c, idx); break;
  case IB_WR_LAND: ib_land_in(c, idx, wc); break;
  case IB_WR_DATA_RECV:
    ib_data_in(c, wc);
    ib_repost_data_recv(c, wc);
    break;
  case IB_WR_FLUSH: ib_flush_in(c, idx); break;
  case IB_WR_KICK: ib_kick_in(c, idx); return 0;
  default:
    ib_comm_fail(c, rcollInternalError, "ib: completion with unknown id %llx", (unsigned long long)wc->wr_id);
  }
  return 1;
}

/* Failures seen from outside the completion queue: the device, the port,
 * the peer closing its handshake socket with messages still pending, or a
 * connection that stopped moving (ib_stall.c). */
static void ib_check_health(ib_comm_t *c, int64_t now, int moved) {
  ib_ctx_t *ctx = c->ctx;
  if (now >= ctx->async_next_us)
    ib_dev_async(ctx);
  if (atomic_load(&ctx->fatal))
    ib_comm_fail(c, rcollRemoteError, "%s", ctx->fatal_msg);
  if (c->peer_gone && c->nfree < IB_NREQS && now - c->gone_us > IB_PEER_GONE_GRACE_US)
    ib_comm_fail(c, rcollRemoteError, "ib: %s closed the connection with %d message(s) pending (it exited "
                 "or aborted)", c->peer, IB_NREQS - c->nfree);
  if (c->err == rcollSuccess)
    ib_stall_check(c, now, moved);
}

/* Handles every completion queued, then posts sends that became ready.
 * Returns the number of completions handled. */
int ib_progress(ib_comm_t *c) {
  struct ibv_wc wc[IB_POLL_BATCH];
  int total = 0, moved = 0, k;
  if (c->err != rcollSuccess)
    return 0;
  do {
    k = ibv_poll_cq(c->cq, IB_POLL_BATCH, wc);
    if (k < 0) {
      ib_comm_fail(c, rcollSystemError, "ib: polling the completion queue for %s failed", c->peer);
      return total;
    }
    for (int i = 0; i < k; i++)
      moved += ib_wc_handle(c, &wc[i]);
    total += k;
  } while (k == IB_POLL_BATCH);
  if (c->is_send)
    ib_send_ready(c);
  ib_check_health(c, rcoll_now_us(), moved);
  return total;
}

/* ---- the ops ---- */

static int ib_req_finished(const ib_req_t *r) {
  return r->kind == IB_REQ_SEND ? r->posted && r->pending == 0 : r->pending == 0;
}

/* A finished request: the size check, the bounce copy, the size report. */
static rcollResult_t ib_req_complete(ib_comm_t *c, ib_req_t *r, size_t *sizes) {
  if (r->badtag) {
    const ib_credit_t *cr = &c->credits[r->seq % IB_NREQS];
    int tags[RCOLL_NET_MAX_RECVS];
    char list[RCOLL_NET_MAX_RECVS * 13];
    for (uint32_t i = 0; i < cr->n && i < RCOLL_NET_MAX_RECVS; i++)
      tags[i] = cr->b[i].tag;
    ib_group_tags_str(tags, (int)cr->n, list, sizeof list);
    ib_comm_fail(c, rcollInvalidUsage, "ib: message %u with tag %d to %s matches no buffer left of the grouped "
                 "receive of %u buffers posted there (tags %s)", r->seq, r->tag, c->peer, cr->n, list);
    ib_req_free(c, r);
    return ib_comm_error(c);
  }
  if (r->toobig || r->got > r->size) {
    if (r->kind == IB_REQ_SEND)
      ib_comm_fail(c, rcollInvalidUsage, "ib: a message of %zu bytes to %s is larger than the receive of %zu "
                   "bytes posted there", r->size, c->peer, r->got);
    else
      ib_comm_fail(c, rcollInvalidUsage, "ib: %s sent a message larger than the receive of %zu bytes posted "
                   "here", c->peer, r->size);
    ib_req_free(c, r);
    return ib_comm_error(c);
  }
  if (r->kind == IB_REQ_RECV && r->bounce && !r->eager && r->got > 0)
    memcpy(r->buf, ib_block_slot(c, ib_slot(c, r)) + IB_HDR, r->got);
  if (sizes != NULL)
    sizes[0] = r->kind == IB_REQ_RECV ? r->got : r->size;
  ib_req_free(c, r);
  return rcollSuccess;
}

rcollResult_t ib_test(void *request, int *done, size_t *sizes) {
  *done = 0;
  if (request == &ib_flush_token) {
    *done = 1;
    return rcollSuccess;
  }
  ib_req_t *r = request;
  ib_comm_t *c = r->comm;
  if (r->kind == IB_REQ_FLUSH)
    return ib_flush_test(r, done);
  if (r->kind == IB_REQ_FREE)
    return rcoll_error_quiet(rcollInvalidUsage, "ib: test on a request that already completed");
  if (r->group != NULL)
    return ib_group_test(r, done, sizes);
  if (!ib_req_finished(r))
    ib_progress(c);
  if (ib_req_finished(r)) {
    RCOLL_CHECK(ib_req_complete(c, r, sizes));
    *done = 1;
    return rcollSuccess;
  }
  return c->err != rcollSuccess ? ib_comm_error(c) : rcollSuccess;
}

rcollResult_t ib_close_comm(void *comm) {
  if (comm != NULL)
    ib_comm_destroy(comm);
  return rcollSuccess;
}
#endif
