/* iflush: making data the NIC wrote into device memory visible to the GPU.
 *
 * A NIC's writes into GPU memory cross PCIe as posted writes; the GPU may
 * read its memory before they have all landed. A read issued by the NIC
 * through the same path is ordered behind those writes, so its completion
 * means they are visible. Hence each receive comm that must flush owns one
 * RC queue pair connected to itself (its own QPN, PSN and GID/LID as the
 * remote: loopback through the same port) and a small registered host
 * buffer; iflush posts one signalled RDMA READ of the first bytes of the
 * received buffer, with that buffer's rkey, into the host buffer, and the
 * flush request is done when the READ's completion arrives. The queue pair
 * shares the comm's completion queue, so ib_progress sees its completions
 * and ib_wait sleeps on them like on any other.
 *
 * Which receives are flushed (RCOLL_IB_FLUSH): auto, those registered as
 * device memory; off, none (the caller relies on cuFlushGPUDirectRDMAWrites
 * alone); force, every registered receive, host memory too, so that the
 * READ path runs on devices without a GPU (Soft-RoCE). An unregistered
 * buffer is host memory whose temporary registration ended with its
 * receive, so it is never flushed. */
#if RCOLL_HAVE_IBVERBS
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "ib_priv.h"
#include "log.h"

/* iflush with nothing to do returns this token; ib_test reports it done. */
const char ib_flush_token;

rcollResult_t ib_flush_mode_parse(const char *text, int *mode) {
  if (text == NULL || *text == '\0' || strcasecmp(text, "auto") == 0)
    *mode = IB_FLUSH_AUTO;
  else if (strcmp(text, "0") == 0 || strcasecmp(text, "off") == 0)
    *mode = IB_FLUSH_OFF;
  else if (strcasecmp(text, "force") == 0)
    *mode = IB_FLUSH_FORCE;
  else
    return rcoll_error_quiet(rcollInvalidArgument,
                             "ib: RCOLL_IB_FLUSH=\"%s\" is not one of auto (flush receives into device memory), "
                             "0/off (never), force (every registered receive)", text);
  return rcollSuccess;
}

/* ---- the queue pair ---- */

static rcollResult_t ib_flush_buf(ib_comm_t *c, ib_flush_t *f) {
  f->buf = aligned_alloc(64, (size_t)IB_NFLUSH * IB_FLUSH_BYTES);
  if (f->buf == NULL)
    return rcoll_error_quiet(rcollSystemError, "ib: out of memory for the flush buffer of %s", c->peer);
  memset(f->buf, 0, (size_t)IB_NFLUSH * IB_FLUSH_BYTES);
  f->mr = ibv_reg_mr(c->ctx->pd, f->buf, (size_t)IB_NFLUSH * IB_FLUSH_BYTES, IBV_ACCESS_LOCAL_WRITE);
  if (f->mr == NULL)
    return rcoll_error_quiet(rcollSystemError, "ib: cannot register the flush buffer of %s: %s", c->peer,
                             strerror(errno));
  return rcollSuccess;
}

/* Connects the flush queue pair to itself: the remote numbers are its own. */
static rcollResult_t ib_flush_loopback(ib_comm_t *c, ib_flush_t *f) {
  ib_qp_info_t self;
  ib_qp_info_fill(c, 0, &self);
  self.nqps = 1;
  self.qpn[0] = f->qp->qp_num;
  self.psn[0] = f->psn;
  return ib_qp_ready(c, f->qp, f->psn, &self, 0, c->ctx->port.mtu);
}

static void ib_flush_free(ib_flush_t *f) {
  if (f->qp != NULL)
    ibv_destroy_qp(f->qp);
  if (f->mr != NULL)
    ibv_dereg_mr(f->mr);
  free(f->buf);
  free(f);
}

/* The comm's flush objects, made on its first flush. */
static rcollResult_t ib_flush_setup(ib_comm_t *c) {
  ib_flush_t *f = calloc(1, sizeof *f);
  if (f == NULL)
    return rcoll_error_quiet(rcollSystemError, "ib: out of memory for the flush queue pair of %s", c->peer);
  f->psn = ib_random_psn();
  rcollResult_t r = ib_flush_buf(c, f);
  if (r == rcollSuccess)
    r = ib_qp_create(c, IBV_ACCESS_REMOTE_READ, IB_NFLUSH, 1, &f->qp);
  if (r == rcollSuccess)
    r = ib_flush_loopback(c, f);
  if (r != rcollSuccess) {
    ib_flush_free(f);
    return rcoll_error_quiet(r, "ib: cannot set up flushing for %s: %s", c->peer, rcoll_error_text());
  }
  for (int i = 0; i < IB_NFLUSH; i++)
    f->reqs[i] = (ib_req_t){.comm = c, .kind = IB_REQ_FREE};
  c->flush = f;
  RCOLL_INFO(RCOLL_SUB_NET, "ib: flush queue pair 0x%x for %s on %s", f->qp->qp_num, c->peer, c->ctx->port.desc);
  return rcollSuccess;
}

void ib_flush_destroy(ib_comm_t *c) {
  if (c->flush != NULL)
    ib_flush_free(c->flush);
  c->flush = NULL;
}

/* ---- iflush ---- */

/* The buffer to read back: the last one with data (the NIC wrote them in
 * order), or -1 when none needs a flush. */
static int ib_flush_pick(const ib_comm_t *c, int n, const size_t *sizes, void **mh) {
  for (int i = n - 1; i >= 0; i--) {
    if (sizes[i] == 0)
      continue;
    const ib_mr_t *m = mh != NULL ? mh[i] : NULL;
    if (m == NULL || c->ctx->flush_mode == IB_FLUSH_OFF)
      return -1;
    return c->ctx->flush_mode == IB_FLUSH_FORCE || m->mem_type == RCOLL_MEM_CUDA ? i : -1;
  }
  return -1;
}

/* A free flush request: one is freed when the caller tests it done. */
static ib_req_t *ib_flush_slot(ib_comm_t *c) {
  for (int i = 0; i < IB_NFLUSH; i++)
    if (c->flush->reqs[i].kind == IB_REQ_FREE)
      return &c->flush->reqs[i];
  return NULL;
}

static rcollResult_t ib_flush_post(ib_comm_t *c, ib_req_t *r, const char *data, size_t size, const ib_mr_t *m) {
  int slot = (int)(r - c->flush->reqs);
  struct ibv_sge sge = {
      .addr = (uintptr_t)(c->flush->buf + (size_t)slot * IB_FLUSH_BYTES),
      .length = (uint32_t)(size < IB_FLUSH_BYTES ? size : IB_FLUSH_BYTES),
      .lkey = c->flush->mr->lkey,
  };
  struct ibv_send_wr wr = {
      .wr_id = IB_WR_ID(IB_WR_FLUSH, slot),
      .sg_list = &sge,
      .num_sge = 1,
      .opcode = IBV_WR_RDMA_READ,
      .send_flags = IBV_SEND_SIGNALED,
      .wr.rdma = {.remote_addr = (uintptr_t)data, .rkey = m->mr->rkey},
  }, *bad;
  int e = ibv_post_send(c->flush->qp, &wr, &bad);
  if (e != 0) {
    ib_comm_fail(c, rcollSystemError, "ib: posting the flush read of a receive from %s failed: %s", c->peer,
                 strerror(e));
    return ib_comm_error(c);
  }
  *r = (ib_req_t){.comm = c, .kind = IB_REQ_FLUSH, .pending = 1, .buf = (char *)data, .size = sge.length};
  return rcollSuccess;
}

rcollResult_t ib_iflush(void *comm, int n, void **data, const size_t *sizes, void **mh, void **request) {
  ib_comm_t *c = comm;
  *request = NULL;
  if (c->is_send || n < 1 || n > RCOLL_NET_MAX_RECVS || data == NULL || sizes == NULL)
    return rcoll_error_quiet(rcollInvalidArgument, "ib: iflush of %d buffers on a %s comm", n,
                             c->is_send ? "send" : "receive");
  if (c->err != rcollSuccess)
    return ib_comm_error(c);
  int i = ib_flush_pick(c, n, sizes, mh);
  if (i < 0) {
    *request = (void *)&ib_flush_token;
    return rcollSuccess;
  }
  const ib_mr_t *m = mh[i];
  if ((uintptr_t)data[i] < m->beg || (uintptr_t)data[i] + sizes[i] > m->end)
    return rcoll_error_quiet(rcollInvalidArgument, "ib: flushed buffer %p+%zu lies outside its registration",
                             data[i], sizes[i]);
  if (c->flush == NULL)
    RCOLL_CHECK(ib_flush_setup(c));
  ib_req_t *r = ib_flush_slot(c);
  if (r == NULL)
    return rcoll_error_quiet(rcollInvalidUsage, "ib: %d flushes of receives from %s are outstanding; test them "
                             "before flushing more", IB_NFLUSH, c->peer);
  RCOLL_CHECK(ib_flush_post(c, r, data[i], sizes[i], m));
  *request = r;
  return rcollSuccess;
}

/* ---- completions ---- */

void ib_flush_in(ib_comm_t *c, int slot) {
  if (c->flush == NULL || slot < 0 || slot >= IB_NFLUSH || c->flush->reqs[slot].kind != IB_REQ_FLUSH) {
    ib_comm_fail(c, rcollInternalError, "ib: completion of flush %d of %s, which was never posted", slot, c->peer);
    return;
  }
  c->flush->reqs[slot].pending = 0;
}

void ib_flush_wc_fail(ib_comm_t *c, const struct ibv_wc *wc) {
  const char *hint = "";
  if (wc->status == IBV_WC_REM_ACCESS_ERR || wc->status == IBV_WC_REM_INV_REQ_ERR)
    hint = "; the received buffer's registration does not allow remote reads or no longer covers it";
  else if (wc->status == IBV_WC_RETRY_EXC_ERR)
    hint = "; the port did not answer its own read (is it down?)";
  ib_comm_fail(c, rcollRemoteError,
               "ib: the flush of a receive from %s (an RDMA read of the received buffer through %s, queue pair "
               "0x%x) failed: work completion status '%s' (%d, vendor error 0x%x)%s; RCOLL_IB_FLUSH=0 turns "
               "flushing off", c->peer, c->ctx->port.desc, wc->qp_num, ibv_wc_status_str(wc->status),
               (int)wc->status, wc->vendor_err, hint);
}

rcollResult_t ib_flush_test(ib_req_t *r, int *done) {
  ib_comm_t *c = r->comm;
  *done = 0;
  if (r->pending)
    ib_progress(c);
  if (!r->pending) {
    r->kind = IB_REQ_FREE;
    *done = 1;
    return rcollSuccess;
  }
  return c->err != rcollSuccess ? ib_comm_error(c) : rcollSuccess;
}
#endif
