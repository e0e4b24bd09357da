/* A connection's verbs objects: completion channel and queue, the block of
 * credit and bounce slots, and the RC queue pairs with their transitions
 * RESET -> INIT (at creation) -> RTR -> RTS (once the peer's numbers are
 * known). Receives are pre-posted while the QPs are in INIT, so that nothing
 * the peer sends after the handshake can find a queue without one. */
#if RCOLL_HAVE_IBVERBS
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "error.h"
#include "ib_priv.h"
#include "log.h"

uint32_t ib_random_psn(void) {
  uint32_t v;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
    v = (uint32_t)rcoll_now_us() * 2654435761u;
  return v & 0xffffff;
}

rcollResult_t ib_qp_create(ib_comm_t *c, int access, uint32_t max_send, uint32_t max_recv, struct ibv_qp **out) {
  ib_ctx_t *ctx = c->ctx;
  struct ibv_qp_init_attr ia = {
      .qp_context = c,
      .send_cq = c->cq,
      .recv_cq = c->cq,
      .cap = {.max_send_wr = max_send, .max_recv_wr = max_recv, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC,
  };
  struct ibv_qp *qp = ibv_create_qp(ctx->pd, &ia);
  if (qp == NULL)
    return rcoll_error_quiet(rcollSystemError, "ib: cannot create a queue pair on %s: %s", ctx->port.desc,
                             strerror(errno));
  struct ibv_qp_attr a = {
      .qp_state = IBV_QPS_INIT,
      .pkey_index = 0,
      .port_num = (uint8_t)ctx->port.port,
      .qp_access_flags = (unsigned)access,
  };
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  int e = ibv_modify_qp(qp, &a, mask);
  if (e != 0) {
    uint32_t qpn = qp->qp_num;
    ibv_destroy_qp(qp);
    return rcoll_error_quiet(rcollSystemError, "ib: moving queue pair 0x%x to INIT on %s failed: %s", qpn,
                             ctx->port.desc, strerror(e));
  }
  *out = qp;
  return rcollSuccess;
}

static rcollResult_t ib_qp_init(ib_comm_t *c, int q) {
  RCOLL_CHECK(ib_qp_create(c, c->is_send ? 0 : IBV_ACCESS_REMOTE_WRITE, IB_NREQS * (IB_WRS_PER_QP + 1) + 4,
                           IB_NLAND + 4, &c->qps[q]));
  c->psn[q] = ib_random_psn();
  return rcollSuccess;
}

static rcollResult_t ib_comm_verbs(ib_comm_t *c) {
  ib_ctx_t *ctx = c->ctx;
  c->chan = ibv_create_comp_channel(ctx->verbs);
  if (c->chan == NULL)
    return rcoll_error_quiet(rcollSystemError, "ib: cannot create a completion channel: %s", strerror(errno));
  int fl = fcntl(c->chan->fd, F_GETFL);
  if (fl < 0 || fcntl(c->chan->fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return rcoll_error_quiet(rcollSystemError, "ib: fcntl on a completion channel: %s", strerror(errno));
  /* Every work request posted on any QP may complete at once, the flush
   * queue pair's READs included. */
  int cqe = c->nqps * (IB_NREQS * (IB_WRS_PER_QP + 1) + IB_NLAND + 8) + (c->is_send ? 0 : IB_NFLUSH + 2);
  c->cq = ibv_create_cq(ctx->verbs, cqe, c, c->chan, 0);
  if (c->cq == NULL)
    return rcoll_error_quiet(rcollSystemError, "ib: cannot create a completion queue of %d entries: %s", cqe,
                       strerror(errno));
  size_t bytes = (ib_block_bytes(c->is_send) + 4095) & ~(size_t)4095; /* aligned_alloc wants a multiple */
  c->block = aligned_alloc(4096, bytes);
  if (c->block == NULL)
    return rcoll_error_quiet(rcollSystemError, "ib: out of memory for connection buffers");
  memset(c->block, 0, bytes);
  int access = IBV_ACCESS_LOCAL_WRITE | (c->is_send ? 0 : IBV_ACCESS_REMOTE_WRITE);
  c->block_mr = ibv_reg_mr(ctx->pd, c->block, bytes, access);
  if (c->block_mr == NULL)
    return rcoll_error_quiet(rcollSystemError, "ib: cannot register %zu bytes of connection buffers: %s", bytes,
                       strerror(errno));
  for (int q = 0; q < c->nqps; q++)
    RCOLL_CHECK(ib_qp_init(c, q));
  return rcollSuccess;
}

rcollResult_t ib_comm_create(ib_ctx_t *ctx, int is_send, int nqps, int fd, const char *peer,
                             ib_comm_t **out) {
  ib_comm_t *c = calloc(1, sizeof *c);
  if (c == NULL)
    return rcoll_error_quiet(rcollSystemError, "ib: out of memory for a connection");
  c->is_send = is_send;
  c->ctx = ctx;
  c->nqps = nqps;
  c->fd = -1;
  /* A sender learns the receiver's wish in the handshake (ib_conn.c). */
  c->no_eager = is_send ? ctx->eager_mode == IB_EAGER_OFF : ib_eager_refused(ctx);
  snprintf(c->peer, sizeof c->peer, "%s", peer);
  for (int i = 0; i < IB_NREQS; i++) {
    c->reqs[i].comm = c;
    c->free_idx[i] = IB_NREQS - 1 - i;
  }
  c->nfree = IB_NREQS;
  c->max_wr_bytes = ctx->port.max_msg_sz && ctx->port.max_msg_sz < IB_MAX_WR_BYTES ? ctx->port.max_msg_sz
                                                                                   : IB_MAX_WR_BYTES;
  ib_ctx_ref(ctx);
  rcollResult_t r = ib_comm_verbs(c);
  if (r != rcollSuccess) {
    ib_comm_destroy(c);
    return r;
  }
  c->fd = fd;
  *out = c;
  return rcollSuccess;
}

void ib_comm_destroy(ib_comm_t *c) {
  ib_flush_destroy(c);
  for (int q = 0; q < c->nqps; q++)
    if (c->qps[q] != NULL)
      ibv_destroy_qp(c->qps[q]);
  /* With the queue pairs gone nothing can touch the buffers any more. */
  for (int i = 0; i < IB_NREQS; i++)
    if (c->reqs[i].kind != IB_REQ_FREE && c->reqs[i].mr != NULL)
      ib_mr_put(c->ctx, c->reqs[i].mr);
  if (c->cq != NULL)
    ibv_destroy_cq(c->cq);
  if (c->chan != NULL)
    ibv_destroy_comp_channel(c->chan);
  if (c->block_mr != NULL)
    ibv_dereg_mr(c->block_mr);
  free(c->block);
  if (c->fd >= 0)
    close(c->fd);
  ib_ctx_unref(c->ctx);
  free(c);
}

void ib_qp_info_fill(const ib_comm_t *c, uint64_t secret, ib_qp_info_t *info) {
  const ib_port_t *p = &c->ctx->port;
  memset(info, 0, sizeof *info);
  info->magic = IB_MAGIC;
  info->secret = secret;
  info->nqps = (uint32_t)c->nqps;
  info->mtu = (uint32_t)p->mtu;
  for (int q = 0; q < c->nqps; q++) {
    info->qpn[q] = c->qps[q]->qp_num;
    info->psn[q] = c->psn[q];
  }
  memcpy(info->gid, p->gid.raw, 16);
  info->lid = p->lid;
  info->link_layer = (uint8_t)p->link_layer;
  info->flags = !c->is_send && c->no_eager ? IB_QPI_NO_EAGER : 0;
  info->gid_index = p->gid_index;
  snprintf(info->desc, sizeof info->desc, "%.31s", p->desc);
}

static void ib_ah_fill(const ib_ctx_t *ctx, const ib_qp_info_t *r, struct ibv_ah_attr *ah) {
  memset(ah, 0, sizeof *ah);
  ah->port_num = (uint8_t)ctx->port.port;
  ah->sl = (uint8_t)ctx->sl;
  if (ctx->port.link_layer == IBV_LINK_LAYER_ETHERNET) {
    ah->is_global = 1;
    memcpy(ah->grh.dgid.raw, r->gid, 16);
    ah->grh.sgid_index = (uint8_t)ctx->port.gid_index;
    ah->grh.hop_limit = 255;
    ah->grh.traffic_class = (uint8_t)ctx->tc;
  } else {
    ah->dlid = r->lid;
  }
}

rcollResult_t ib_qp_ready(ib_comm_t *c, struct ibv_qp *qp, uint32_t sq_psn, const ib_qp_info_t *r, int q,
                          enum ibv_mtu mtu) {
  ib_ctx_t *ctx = c->ctx;
  char g[64];
  struct ibv_qp_attr a = {
      .qp_state = IBV_QPS_RTR,
      .path_mtu = mtu,
      .dest_qp_num = r->qpn[q],
      .rq_psn = r->psn[q],
      .max_dest_rd_atomic = 1,
      .min_rnr_timer = 12,
  };
  ib_ah_fill(ctx, r, &a.ah_attr);
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  int e = ibv_modify_qp(qp, &a, mask);
  if (e != 0)
    return rcoll_error_quiet(rcollSystemError,
                       "ib: moving queue pair 0x%x to RTR toward %s (%s, GID %s) failed: %s; local %s GID index %d",
                       qp->qp_num, c->peer, r->desc, ib_gid_str(r->gid, g, sizeof g), strerror(e),
                       ctx->port.desc, ctx->port.gid_index);
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = (uint8_t)ctx->timeout;
  a.retry_cnt = (uint8_t)ctx->retry_cnt;
  a.rnr_retry = 7; /* infinite: a receive is always pre-posted, so an RNR can only be transient */
  a.sq_psn = sq_psn;
  a.max_rd_atomic = 1;
  mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
         IBV_QP_MAX_QP_RD_ATOMIC;
  e = ibv_modify_qp(qp, &a, mask);
  if (e != 0)
    return rcoll_error_quiet(rcollSystemError, "ib: moving queue pair 0x%x to RTS toward %s failed: %s",
                       qp->qp_num, c->peer, strerror(e));
  return rcollSuccess;
}

rcollResult_t ib_qp_connect(ib_comm_t *c, const ib_qp_info_t *r) {
  const ib_port_t *p = &c->ctx->port;
  if ((int)r->nqps != c->nqps)
    return rcoll_error_quiet(rcollInvalidUsage, "ib: %s uses %u queue pairs per connection, this side %d "
                       "(RCOLL_IB_QPS_PER_CONNECTION must agree)", c->peer, r->nqps, c->nqps);
  if (r->link_layer != p->link_layer)
    return rcoll_error_quiet(rcollInvalidUsage, "ib: %s (%s) is on %s, this side (%s) on %s: no path between them",
                       c->peer, r->desc, r->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
                       p->desc, p->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand");
  enum ibv_mtu mtu = (enum ibv_mtu)r->mtu < p->mtu ? (enum ibv_mtu)r->mtu : p->mtu;
  for (int q = 0; q < c->nqps; q++)
    RCOLL_CHECK(ib_qp_ready(c, c->qps[q], c->psn[q], r, q, mtu));
  return rcollSuccess;
}

/* Receive side: QP 0 keeps IB_NLAND receives with landing buffers (eager
 * SENDs and write immediates alike take the next one); the other QPs only
 * see write immediates, which carry no payload, so theirs have no buffer. */
rcollResult_t ib_post_land(ib_comm_t *c, int land) {
  struct ibv_sge sge = {
      .addr = (uintptr_t)ib_block_land(c, land),
      .length = IB_LAND_BYTES,
      .lkey = c->block_mr->lkey,
  };
  struct ibv_recv_wr wr = {.wr_id = IB_WR_ID(IB_WR_LAND, land), .sg_list = &sge, .num_sge = 1}, *bad;
  int e = ibv_post_recv(c->qps[0], &wr, &bad);
  if (e != 0)
    return rcoll_error_quiet(rcollSystemError, "ib: posting a receive on queue pair 0x%x failed: %s",
                             c->qps[0]->qp_num, strerror(e));
  return rcollSuccess;
}

rcollResult_t ib_post_recvs(ib_comm_t *c) {
  for (int i = 0; i < IB_NLAND; i++)
    RCOLL_CHECK(ib_post_land(c, i));
  for (int q = 1; q < c->nqps; q++)
    for (int i = 0; i < IB_NREQS * IB_WRS_PER_QP; i++) {
      struct ibv_recv_wr wr = {.wr_id = IB_WR_ID(IB_WR_DATA_RECV, q)}, *bad;
      int e = ibv_post_recv(c->qps[q], &wr, &bad);
      if (e != 0)
        return rcoll_error_quiet(rcollSystemError, "ib: posting receives on queue pair 0x%x failed: %s",
                           c->qps[q]->qp_num, strerror(e));
    }
  return rcollSuccess;
}

/* Send side: a landing slot for one credit, on QP 0. */
rcollResult_t ib_post_credit_recv(ib_comm_t *c, int slot) {
  struct ibv_sge sge = {
      .addr = (uintptr_t)ib_block_credit(c, slot),
      .length = sizeof(ib_credit_t),
      .lkey = c->block_mr->lkey,
  };
  struct ibv_recv_wr wr = {.wr_id = IB_WR_ID(IB_WR_CREDIT_RECV, slot), .sg_list = &sge, .num_sge = 1}, *bad;
  int e = ibv_post_recv(c->qps[0], &wr, &bad);
  if (e != 0)
    return rcoll_error_quiet(rcollSystemError, "ib: posting a credit receive on queue pair 0x%x failed: %s",
                             c->qps[0]->qp_num, strerror(e));
  return rcollSuccess;
}

int ib_post_block_send(ib_comm_t *c, uint64_t wr_id, const void *buf, uint32_t len, const char *what) {
  struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = len, .lkey = c->block_mr->lkey};
  struct ibv_send_wr wr = {.wr_id = wr_id,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  int e = ibv_post_send(c->qps[0], &wr, &bad);
  if (e != 0) {
    ib_comm_fail(c, rcollSystemError, "ib: posting %s to %s failed: %s", what, c->peer, strerror(e));
    return -1;
  }
  return 0;
}
#endif
