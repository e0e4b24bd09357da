/* The send side of a verbs connection: isend, the eager SEND, the
 * rendezvous writes once a credit arrived, and taking credits in. */
#if RCOLL_HAVE_IBVERBS
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "ib_priv.h"
#include "log.h"

/* Header and payload are contiguous in the slot: one SGE. */
static int ib_post_eager(ib_comm_t *c, ib_req_t *r) {
  char *payload = ib_block_slot(c, ib_slot(c, r)) + IB_HDR;
  ib_eager_hdr_t *h = (ib_eager_hdr_t *)(payload - sizeof *h);
  *h = (ib_eager_hdr_t){.seq = r->seq, .size = (uint32_t)r->size, .tag = r->tag};
  if (ib_post_block_send(c, IB_WR_ID(IB_WR_EAGER, ib_slot(c, r)), h, (uint32_t)(sizeof *h + r->size),
                         "an eager send") < 0)
    return -1;
  r->pending = 1;
  r->posted = 1;
  c->eager_sent++;
  return 0;
}

/* Writes `len` bytes at offset `off` of the message on one QP, in up to
 * IB_WRS_PER_QP writes; each carries an immediate (the receiver adds up the
 * bytes), the last one flagged LAST. */
static int ib_post_piece(ib_comm_t *c, int q, ib_req_t *r, size_t off, size_t len, const ib_credit_buf_t *cr,
                         uint32_t flags) {
  struct ibv_sge sge[IB_WRS_PER_QP];
  struct ibv_send_wr wr[IB_WRS_PER_QP], *bad;
  size_t max = c->max_wr_bytes;
  int nw = len == 0 ? 1 : (int)((len + max - 1) / max);
  if (nw > IB_WRS_PER_QP) {
    ib_comm_fail(c, rcollInvalidUsage, "ib: a message of %zu bytes to %s is too large for %d queue pair(s)",
                 r->size, c->peer, c->nqps);
    return -1;
  }
  for (int w = 0; w < nw; w++) {
    size_t o = off + (size_t)w * max, l = len - (size_t)w * max < max ? len - (size_t)w * max : max;
    uint32_t imm = (r->seq & IB_IMM_SEQ) | flags | (w + 1 == nw ? IB_IMM_LAST : 0);
    sge[w] = (struct ibv_sge){.addr = r->addr + o, .length = (uint32_t)l, .lkey = r->lkey};
    wr[w] = (struct ibv_send_wr){
        .wr_id = IB_WR_ID(IB_WR_DATA, ib_slot(c, r)),
        .next = w + 1 < nw ? &wr[w + 1] : NULL,
        .sg_list = l ? &sge[w] : NULL,
        .num_sge = l ? 1 : 0,
        .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
        .send_flags = IBV_SEND_SIGNALED,
        .imm_data = htonl(imm),
        .wr.rdma = {.remote_addr = cr->addr + o, .rkey = cr->rkey},
    };
  }
  int e = ibv_post_send(c->qps[q], wr, &bad);
  if (e != 0) {
    ib_comm_fail(c, rcollSystemError, "ib: posting an RDMA write to %s failed: %s", c->peer, strerror(e));
    return -1;
  }
  r->pending += nw;
  return 0;
}

/* Posts a rendezvous send whose credit arrived, into buffer cr (flags
 * name it for a grouped receive). One larger than that buffer writes nothing
 * and says so in the immediate. */
static int ib_post_rndv(ib_comm_t *c, ib_req_t *r, const ib_credit_buf_t *cr, uint32_t flags) {
  int split = ib_split(c, cr->size);
  int nq = split ? c->nqps : 1, q0 = split ? 0 : (int)(r->seq % (uint32_t)c->nqps);
  size_t size = r->size;
  if (size > cr->size) {
    r->toobig = 1;
    r->got = (size_t)cr->size; /* for the message */
    size = 0;
  }
  r->dest = *cr;
  size_t per = (size + (size_t)nq - 1) / (size_t)nq;
  per = (per + 4095) & ~(size_t)4095;
  for (int k = 0; k < nq; k++) {
    size_t off = (size_t)k * per;
    size_t len = off >= size ? 0 : size - off < per ? size - off : per;
    if (ib_post_piece(c, q0 + k, r, off < size ? off : 0, len, cr, flags | (r->toobig ? IB_IMM_TOOBIG : 0)) != 0)
      return -1;
  }
  r->posted = 1;
  return 0;
}

/* A message whose tag matches no buffer left in its grouped receive: a
 * header-only SEND in place of its data tells the receiver (which fails the
 * connection naming the tag); this side fails once it completed. The
 * receiver keeps a landing buffer for it: it would have taken one for the
 * message's write anyway. */
static int ib_post_badtag(ib_comm_t *c, ib_req_t *r) {
  ib_eager_hdr_t *h = (ib_eager_hdr_t *)ib_block_slot(c, ib_slot(c, r));
  *h = (ib_eager_hdr_t){.seq = r->seq, .size = (uint32_t)r->size, .tag = r->tag, .flags = IB_EAGER_BADTAG};
  if (ib_post_block_send(c, IB_WR_ID(IB_WR_EAGER, ib_slot(c, r)), h, sizeof *h, "a send") < 0)
    return -1;
  r->badtag = 1;
  r->pending = 1;
  r->posted = 1;
  return 0;
}

/* A message with a grouped credit takes the first buffer of its tag that
 * no earlier rendezvous message of the group took (eager ones take theirs
 * from the end: ib_priv.h). */
static int ib_post_grouped(ib_comm_t *c, ib_req_t *r, int k) {
  const ib_credit_t *cr = &c->credits[k];
  uint8_t *used = &c->group_used[(r->seq - c->credit_off[k]) % IB_NREQS];
  for (uint32_t i = 0; i < cr->n; i++)
    if (cr->b[i].tag == r->tag && !(*used & (1u << i))) {
      *used |= (uint8_t)(1u << i);
      return ib_post_rndv(c, r, &cr->b[i], i << IB_IMM_BUF_SHIFT);
    }
  return ib_post_badtag(c, r);
}

/* Posts what can go, in message order: a send whose credit is here as
 * rendezvous, a small one without its credit eagerly while eager credits
 * last; the rest keep waiting. */
void ib_send_ready(ib_comm_t *c) {
  int kept = 0;
  for (int i = 0; i < c->nunposted; i++) {
    ib_req_t *r = c->unposted[i];
    int k = (int)(r->seq % IB_NREQS), rc = 1;
    if (c->err != rcollSuccess)
      rc = 1; /* keep it: the failed comm reports through test */
    else if (c->credit_valid[k] && c->credits[k].seq == r->seq)
      rc = c->credits[k].n > 1 ? ib_post_grouped(c, r, k) : ib_post_rndv(c, r, &c->credits[k].b[0], 0);
    else if (r->eager && (int32_t)(c->eager_sent - c->eager_ret) < IB_NEAGER)
      rc = ib_post_eager(c, r);
    if (rc != 0)
      c->unposted[kept++] = r;
  }
  c->nunposted = kept;
}

/* A grouped credit is copied to the slot of each message it covers, so that
 * every send finds its own by message number. */
void ib_credit_in(ib_comm_t *c, int slot) {
  ib_credit_t cr;
  memcpy(&cr, ib_block_credit(c, slot), sizeof cr);
  RCOLL_TRACE(RCOLL_SUB_NET, "ib: credit %u (%u buffer(s), first %llu bytes, %u eager returned) from %s", cr.seq,
              cr.n, (unsigned long long)cr.b[0].size, cr.eager_returned, c->peer);
  if (cr.n < 1 || cr.n > RCOLL_NET_MAX_RECVS) {
    ib_comm_fail(c, rcollInternalError, "ib: a credit for %u buffers from %s (at most %d)", cr.n, c->peer,
                 RCOLL_NET_MAX_RECVS);
    return;
  }
  c->group_used[cr.seq % IB_NREQS] = 0;
  for (uint32_t j = 0; j < cr.n; j++) {
    int k = (int)((cr.seq + j) % IB_NREQS);
    c->credits[k] = cr;
    c->credits[k].seq = cr.seq + j;
    c->credit_off[k] = (uint8_t)j;
    c->credit_valid[k] = 1;
  }
  if ((int32_t)(cr.eager_returned - c->eager_ret) > 0)
    c->eager_ret = cr.eager_returned;
  if (ib_post_credit_recv(c, slot) != rcollSuccess)
    ib_comm_fail(c, rcollSystemError, "%s", rcoll_error_text());
}

rcollResult_t ib_eager_mode_parse(const char *text, int *mode) {
  if (text == NULL || *text == '\0' || strcasecmp(text, "auto") == 0)
    *mode = IB_EAGER_AUTO;
  else if (strcmp(text, "0") == 0 || strcasecmp(text, "off") == 0)
    *mode = IB_EAGER_OFF;
  else if (strcmp(text, "1") == 0 || strcasecmp(text, "on") == 0)
    *mode = IB_EAGER_ON;
  else
    return rcoll_error_quiet(rcollInvalidArgument,
                             "ib: RCOLL_IB_EAGER=\"%s\" is not one of auto (eager unless this side can register "
                             "device memory), 0/off (never), 1/on (always)", text);
  return rcollSuccess;
}

/* A receiver that may be handed device memory cannot take eager messages
 * (they are copied out by the CPU), and it cannot know in advance which
 * receives will be: under auto, any context that can register device memory
 * refuses them all. */
int ib_eager_refused(const ib_ctx_t *ctx) {
  return ctx->eager_mode == IB_EAGER_OFF || (ctx->eager_mode == IB_EAGER_AUTO && ctx->gdr != IB_GDR_NONE);
}

rcollResult_t ib_isend(void *comm, const void *data, size_t size, int tag, void *mh, void **request) {
  ib_comm_t *c = comm;
  *request = NULL;
  if (c->err != rcollSuccess)
    return ib_comm_error(c);
  ib_req_t *r = ib_req_alloc(c, IB_REQ_SEND, (void *)data, size);
  RCOLL_TRACE(RCOLL_SUB_NET, "ib: isend %u of %zu bytes to %s%s (eager %u sent, %u returned)", c->seq - (r != NULL),
              size, c->peer, r == NULL ? ": no slot" : "", c->eager_sent, c->eager_ret);
  if (r == NULL)
    return rcollSuccess;
  /* Eager candidates always use the bounce slot, which the eager SEND
   * needs (header and payload in one piece). Device memory is never copied
   * by the CPU, whatever its size: it waits for its credit and is written
   * from its registration. */
  r->tag = tag;
  r->device = ib_mr_is_device(mh);
  r->eager = size <= IB_EAGER_BYTES && !c->no_eager && !r->device;
  rcollResult_t rc = ib_req_mem(c, r, r->eager ? NULL : mh, 0);
  if (rc != rcollSuccess) {
    ib_req_free(c, r);
    c->seq--;
    return rc;
  }
  if (r->bounce && size > 0) /* host memory only: ib_req_mem took mh for device memory */
    memcpy(ib_block_slot(c, ib_slot(c, r)) + IB_HDR, data, size);
  c->unposted[c->nunposted++] = r;
  ib_progress(c);
  *request = r;
  return rcollSuccess;
}
#endif
