/* A verbs connection that stops moving: poke it where a provider is known
 * to stop, and never hang silently.
 *
 * Soft-RoCE's send queue can stop for good (rdma_rxe of Linux 6.1, seen
 * between two VMs, issue 14): a write posted, the peer's credit for it
 * acknowledged, then no packet, no retransmission, no completion, the queue
 * pair still in RTS. The likely cause (read from rxe_req.c of 6.1.192, not
 * traced): rxe's requester runs inside ibv_post_send and stops when too
 * many of its packets are in flight (skb_out, or unacknowledged PSNs),
 * setting a flag to be woken when they drain; a softirq that drains them
 * between its test and its flag wakes nobody, and with nothing in flight
 * nothing times out. Only another ibv_post_send on that queue pair
 * runs the requester again, and rcoll's last message of a call has none
 * after it. So a send connection with a write or eager send posted and no
 * completion for RCOLL_IB_KICK_MS posts an empty RDMA write (no immediate:
 * it consumes no receive and needs no rkey, C9-88) on each of its queue
 * pairs, at most one per queue pair at a time. It queues behind the stuck
 * work request and runs the requester; on a NIC it is a no-op. In both
 * stalls seen under a kick the queue pair went to ERR at once; in the one
 * traced, rxe failed the write it resumed ("qp#N Error during finish
 * packet" in the kernel log). So the kick does not cure the stall, it makes
 * the connection fail a second into it, with the status, instead of
 * waiting out RCOLL_TIMEOUT.
 *
 * A queue pair that fails normally says so through a completion with an
 * error status (ib_io.c) or an async event (ib_dev.c). Should one reach the
 * error state with nothing on its queues to report it (or a provider drop
 * that report), the connection would only wait, and the engine's
 * RCOLL_TIMEOUT would blame the peer. So a connection with messages pending
 * and no completion for IB_QP_CHECK_US asks the device for its queue pairs'
 * state, once per IB_QP_CHECK_US (one system call; nothing while
 * completions flow), and fails at once, naming the peer and the state, when
 * one is in error.
 *
 * Past half of RCOLL_TIMEOUT without a completion it also logs, once, what
 * it waits for (messages, credits, eager accounting): the engine's timeout
 * says which message a rank waited on, this says why the transport could
 * not move it. */
#if RCOLL_HAVE_IBVERBS
#include <stdio.h>
#include <string.h>

#include "ib_priv.h"
#include "log.h"

#define IB_QP_CHECK_US 1000000

static const char *ib_qp_state_str(enum ibv_qp_state s) {
  switch (s) {
  case IBV_QPS_RESET: return "RESET";
  case IBV_QPS_INIT: return "INIT";
  case IBV_QPS_RTR: return "RTR";
  case IBV_QPS_RTS: return "RTS";
  case IBV_QPS_SQD: return "SQD";
  case IBV_QPS_SQE: return "SQE (send queue error)";
  case IBV_QPS_ERR: return "ERR";
  default: return "unknown";
  }
}

/* 0, or -1 with the comm failed: a queue pair is in an error state. */
static int ib_stall_qps(ib_comm_t *c) {
  for (int q = 0; q < c->nqps; q++) {
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    memset(&a, 0, sizeof a);
    if (ibv_query_qp(c->qps[q], &a, IBV_QP_STATE, &ia) != 0)
      continue; /* cannot tell: the engine's timeout still covers it */
    if (a.qp_state != IBV_QPS_ERR && a.qp_state != IBV_QPS_SQE)
      continue;
    /* Its completion with the error may be queued already: poll once more
     * first (the next progress), so that the status says what failed. */
    if (!c->qp_err_seen) {
      c->qp_err_seen = 1;
      c->qp_check_us = 0;
      return 0;
    }
    ib_comm_fail(c, rcollRemoteError,
                 "ib: queue pair %d of %d (QPN 0x%x) of the connection %s %s went to state %s with %d "
                 "message(s) pending, and no work completion reported why%s [RCOLL_IB_TIMEOUT=%d "
                 "RCOLL_IB_RETRY_CNT=%d]",
                 q, c->nqps, c->qps[q]->qp_num, c->is_send ? "to" : "from", c->peer,
                 ib_qp_state_str(a.qp_state), IB_NREQS - c->nfree,
                 c->kicks > 0 ? " (right after a kick of its stopped send queue)" : "", c->ctx->timeout,
                 c->ctx->retry_cnt);
    return -1;
  }
  return 0;
}

/* What the connection waits for, in one log line. */
static void ib_stall_log(ib_comm_t *c, int64_t quiet_us) {
  char buf[1024];
  size_t n = 0;
#define IB_ADD(...)                                                   \
  do {                                                                \
    if (n < sizeof buf)                                               \
      n += (size_t)snprintf(buf + n, sizeof buf - n, __VA_ARGS__);    \
  } while (0)
  for (int i = 0; i < IB_NREQS; i++) {
    const ib_req_t *r = &c->reqs[i];
    if (r->kind != IB_REQ_SEND && r->kind != IB_REQ_RECV)
      continue;
    int k = (int)(r->seq % IB_NREQS);
    IB_ADD(" [msg %u %zu B %s%s pending %d got %zu", r->seq, r->size, r->eager ? "eager " : "",
           r->kind == IB_REQ_SEND ? (r->posted ? "posted" : "unposted") : "recv", r->pending, r->got);
    if (r->kind == IB_REQ_SEND && !r->posted)
      IB_ADD(" credit %s", c->credit_valid[k] ? (c->credits[k].seq == r->seq ? "here" : "stale") : "none");
    IB_ADD("]");
  }
  if (c->is_send)
    IB_ADD(" next %u, %d unposted, eager %u sent %u returned, %d kick(s)", c->seq, c->nunposted, c->eager_sent,
           c->eager_ret, c->kicks);
  else {
    int busy = 0;
    for (int i = 0; i < IB_NCREDIT; i++)
      busy += c->credit_busy[i];
    IB_ADD(" next %u, credits %u posted (%d unacknowledged), %u eager waiting, %u landing buffers returned",
           c->seq, c->credit_next, busy, c->unexp_tail - c->unexp_head, c->eager_returned);
  }
#undef IB_ADD
  RCOLL_WARN("ib: no completion on the connection %s %s for %lld ms with %d message(s) pending:%s",
             c->is_send ? "to" : "from", c->peer, (long long)(quiet_us / 1000), IB_NREQS - c->nfree, buf);
}

/* Whether a send connection waits on work requests it posted (a send that
 * waits for its credit has none). */
static int ib_stall_posted(const ib_comm_t *c) {
  for (int i = 0; i < IB_NREQS; i++)
    if (c->reqs[i].kind == IB_REQ_SEND && c->reqs[i].posted && c->reqs[i].pending > 0)
      return 1;
  return 0;
}

/* An empty RDMA write on every queue pair without one outstanding. */
static void ib_stall_kick(ib_comm_t *c, int64_t now) {
  for (int q = 0; q < c->nqps; q++) {
    if (c->kick_busy[q])
      continue;
    struct ibv_send_wr wr = {.wr_id = IB_WR_ID(IB_WR_KICK, q),
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad;
    int e = ibv_post_send(c->qps[q], &wr, &bad);
    if (e != 0) {
      ib_comm_fail(c, rcollSystemError, "ib: posting an empty RDMA write (a kick) on queue pair 0x%x to %s, "
                   "after %lld ms without a completion, failed: %s", c->qps[q]->qp_num, c->peer,
                   (long long)((now - c->quiet_since_us) / 1000), strerror(e));
      return;
    }
    c->kick_busy[q] = 1;
  }
  c->kicked_us = now;
  c->kicks++;
  RCOLL_INFO(RCOLL_SUB_NET, "ib: kick %d of the connection to %s (%d queue pair(s)) after %lld ms without a "
             "completion", c->kicks, c->peer, c->nqps, (long long)((now - c->quiet_since_us) / 1000));
}

void ib_kick_in(ib_comm_t *c, int q) {
  if (q >= 0 && q < c->nqps)
    c->kick_busy[q] = 0;
}

void ib_stall_check(ib_comm_t *c, int64_t now, int moved) {
  if (moved || c->nfree == IB_NREQS || c->quiet_since_us == 0) {
    if (moved && c->kicks > 0)
      RCOLL_INFO(RCOLL_SUB_NET, "ib: the connection %s %s moved again %lld ms after a kick (%d kick(s), "
                 "no completion for %lld ms before)", c->is_send ? "to" : "from", c->peer,
                 (long long)((now - c->kicked_us) / 1000), c->kicks,
                 (long long)((now - c->quiet_since_us) / 1000));
    c->quiet_since_us = now;
    c->stall_logged = 0;
    c->kicks = 0;
    return;
  }
  int64_t quiet = now - c->quiet_since_us;
  int64_t kick_us = (int64_t)c->ctx->kick_ms * 1000;
  if (c->is_send && kick_us > 0 && quiet >= kick_us && now - c->kicked_us >= kick_us && ib_stall_posted(c)) {
    ib_stall_kick(c, now);
    if (c->err != rcollSuccess)
      return;
  }
  if (quiet < IB_QP_CHECK_US || now < c->qp_check_us)
    return;
  c->qp_check_us = now + IB_QP_CHECK_US;
  if (ib_stall_qps(c) != 0)
    return;
  if (!c->stall_logged && quiet >= c->ctx->timeout_ms * 500) {
    c->stall_logged = 1;
    ib_stall_log(c, quiet);
  }
}
#endif
