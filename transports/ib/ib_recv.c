/* The receive side of a verbs connection: irecv (match an eager message
 * that came first, or post a credit), eager messages landing, and the
 * immediates of rendezvous writes. */
#if RCOLL_HAVE_IBVERBS
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "ib_priv.h"
#include "log.h"

/* The posted receive for message `seq` (compared on the bits the
 * immediate carries when `bits` is IB_IMM_SEQ), or NULL. */
static ib_req_t *ib_recv_find(ib_comm_t *c, uint32_t seq, uint32_t bits) {
  ib_req_t *r = c->by_seq[seq % IB_NREQS];
  return r != NULL && r->kind == IB_REQ_RECV && (r->seq & bits) == (seq & bits) ? r : NULL;
}

void ib_land_free(ib_comm_t *c, int land) {
  if (ib_post_land(c, land) != rcollSuccess)
    ib_comm_fail(c, rcollSystemError, "%s", rcoll_error_text());
}

/* An eager message meets its receive: copy it out, free the landing buffer
 * (the sender learns so with the next credit). In a grouped receive the
 * message's tag picks the buffer (dst), r keeps the message's state. */
void ib_eager_deliver(ib_comm_t *c, ib_req_t *r, int land) {
  const ib_eager_hdr_t *h = (const ib_eager_hdr_t *)ib_block_land(c, land);
  ib_req_t *dst = r;
  if (r->group != NULL) {
    int b = ib_group_eager_buf(c, r, h->tag);
    if (b < 0)
      return;
    dst = r->group->members[b];
  }
  if (dst->device) { /* the CPU must not write device memory: never copy */
    ib_comm_fail(c, rcollInvalidUsage,
                 "ib: %s sent message %u (%u bytes) eagerly, through host memory, to a receive into device "
                 "memory, which the CPU cannot copy into; this side %s (a peer of another rcoll build?)",
                 c->peer, h->seq, h->size,
                 c->no_eager ? "had asked it for no eager messages" : "allows them (RCOLL_IB_EAGER=1)");
    return;
  }
  if (h->size > dst->size)
    r->toobig = 1;
  else if (h->size > 0)
    memcpy(dst->buf, (const char *)(h + 1), h->size);
  r->got = h->size;
  r->eager = 1;
  r->pending = 0;
  ib_land_free(c, land);
  c->eager_returned++;
}

void ib_data_in(ib_comm_t *c, const struct ibv_wc *wc) {
  uint32_t imm = ntohl(wc->imm_data);
  ib_req_t *r = ib_recv_find(c, imm & IB_IMM_SEQ, IB_IMM_SEQ);
  if (r == NULL || !(wc->wc_flags & IBV_WC_WITH_IMM) || r->eager) {
    ib_comm_fail(c, rcollInternalError, "ib: data from %s for message %u, which no receive expects", c->peer,
                 imm & IB_IMM_SEQ);
    return;
  }
  if (r->group != NULL && ib_group_data_buf(c, r, imm) != 0)
    return;
  if (imm & IB_IMM_TOOBIG)
    r->toobig = 1;
  r->got += wc->byte_len;
  if (imm & IB_IMM_LAST)
    r->pending--;
}

void ib_land_in(ib_comm_t *c, int land, const struct ibv_wc *wc) {
  if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) { /* took a landing buffer without using it */
    ib_data_in(c, wc);
    ib_land_free(c, land);
    return;
  }
  const ib_eager_hdr_t *h = (const ib_eager_hdr_t *)ib_block_land(c, land);
  if (wc->byte_len == sizeof *h && (h->flags & IB_EAGER_BADTAG)) {
    ib_req_t *g = ib_recv_find(c, h->seq, ~0u);
    char list[RCOLL_NET_MAX_RECVS * 13] = "?";
    if (g != NULL && g->group != NULL)
      ib_group_tags_str(g->group->tags, g->group->n, list, sizeof list);
    ib_comm_fail(c, rcollInvalidUsage, "ib: message %u with tag %d from %s matches no buffer left of the grouped "
                 "receive of %d buffers (tags %s)", h->seq, h->tag, c->peer, g && g->group ? g->group->n : 0, list);
    return;
  }
  if (wc->byte_len < sizeof *h || h->size > IB_EAGER_BYTES || wc->byte_len != sizeof *h + h->size) {
    ib_comm_fail(c, rcollInternalError, "ib: malformed eager message (%u bytes) from %s", wc->byte_len, c->peer);
    return;
  }
  ib_req_t *r = ib_recv_find(c, h->seq, ~0u);
  RCOLL_TRACE(RCOLL_SUB_NET, "ib: eager %u of %u bytes from %s %s", h->seq, h->size, c->peer,
              r != NULL && !r->eager ? "matched" : "waits for its receive");
  if (r != NULL && !r->eager) {
    ib_eager_deliver(c, r, land);
    return;
  }
  if (c->unexp_tail - c->unexp_head == IB_NLAND) {
    ib_comm_fail(c, rcollInternalError, "ib: %s sent more eager messages than it had credits for", c->peer);
    return;
  }
  c->unexp[c->unexp_tail++ % IB_NLAND] = (ib_unexp_t){.seq = h->seq, .land = land};
}

/* One credit for the n buffers of bufs (messages bufs[0]->seq onward);
 * tags matter only for n > 1. */
int ib_post_credit(ib_comm_t *c, ib_req_t *const *bufs, int n, const int *tags) {
  int slot = (int)(c->credit_next++ % IB_NCREDIT);
  ib_credit_t *cr = ib_block_credit(c, slot);
  cr->seq = bufs[0]->seq;
  cr->eager_returned = c->eager_returned;
  cr->n = (uint32_t)n;
  cr->pad = 0;
  for (int i = 0; i < n; i++)
    cr->b[i] = (ib_credit_buf_t){
        .addr = bufs[i]->addr, .size = bufs[i]->size, .rkey = bufs[i]->rkey, .tag = n > 1 ? tags[i] : 0};
  if (ib_post_block_send(c, IB_WR_ID(IB_WR_CREDIT, slot), cr, (uint32_t)IB_CREDIT_BYTES(n), "a credit") < 0)
    return -1;
  c->credit_busy[slot] = 1;
  return 0;
}

/* The receive's message may already be here: eager messages that came
 * before their receive wait in arrival order, which is message order. */
static void ib_recv_match(ib_comm_t *c, ib_req_t *r) {
  if (c->unexp_head != c->unexp_tail && c->unexp[c->unexp_head % IB_NLAND].seq == r->seq)
    ib_eager_deliver(c, r, c->unexp[c->unexp_head++ % IB_NLAND].land);
  else
    ib_progress(c);
}

/* With one buffer tags are not matched: messages pair in order (rcoll's
 * engine sends tag 0; NCCL relies on the order too). With several, each of
 * the next n messages picks its buffer by tag (ib_group.c). */
rcollResult_t ib_irecv(void *comm, int n, void **data, const size_t *sizes, const int *tags, void **mh,
                       void **request) {
  ib_comm_t *c = comm;
  *request = NULL;
  if (n < 1 || n > RCOLL_NET_MAX_RECVS)
    return rcoll_error_quiet(rcollInvalidArgument, "ib: irecv of %d buffers (max_recvs is %d)", n,
                             RCOLL_NET_MAX_RECVS);
  if (c->err != rcollSuccess)
    return ib_comm_error(c);
  /* A receive may need a credit buffer: wait for the oldest to be free. */
  unsigned cs = c->credit_next % IB_NCREDIT;
  if (c->credit_busy[cs])
    ib_progress(c);
  if (c->credit_busy[cs])
    return c->err != rcollSuccess ? ib_comm_error(c) : rcollSuccess;
  if (n > 1)
    return ib_irecv_group(c, n, data, sizes, tags, mh, request);
  ib_req_t *r = ib_req_alloc(c, IB_REQ_RECV, data[0], sizes[0]);
  if (r == NULL) {
    RCOLL_TRACE(RCOLL_SUB_NET, "ib: irecv %u from %s: no slot", c->seq, c->peer);
    return rcollSuccess;
  }
  r->pending = ib_split(c, r->size) ? c->nqps : 1;
  r->device = ib_mr_is_device(mh ? mh[0] : NULL);
  ib_recv_match(c, r);
  if (c->err != rcollSuccess) { /* its message came eagerly into device memory */
    ib_req_free(c, r);
    return ib_comm_error(c);
  }
  RCOLL_TRACE(RCOLL_SUB_NET, "ib: irecv %u of %zu bytes from %s: %s (%u eager returned)", r->seq, r->size, c->peer,
              r->eager ? "eager message already here" : "credit", c->eager_returned);
  if (!r->eager) {
    rcollResult_t rc = ib_req_mem(c, r, mh ? mh[0] : NULL, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (rc != rcollSuccess) {
      ib_req_free(c, r);
      c->seq--;
      return rc;
    }
    if (ib_post_credit(c, &r, 1, NULL) != 0)
      return ib_comm_error(c);
  }
  *request = r;
  return rcollSuccess;
}
#endif
