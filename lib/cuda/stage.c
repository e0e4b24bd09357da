/* Staging arithmetic, and the steps of peers reached through pinned host
 * slots (STAGE) or by a transport that takes device memory itself (GDR).
 *
 * STAGE: a send copies its chunk from the device into a pinned slot and sends
 * the slot; a receive lands in a pinned slot and is then copied to the device,
 * or reduced there by a kernel that reads the slot directly (mapped pinned
 * memory), so received data crosses the bus once and the reduction runs
 * where both operands already are. docs/gpu.md says why not on the host.
 * No copy is waited for: each ends in its slot's event, which the proxy polls
 * between the other steps, so copies of some chunks overlap the network
 * transfer of others.
 * GDR: sends and receives use the user's device buffers, registered with the
 * transport as RCOLL_MEM_CUDA for the step; receive-reduces still land in a
 * pinned slot (the reduction needs the received chunk beside the operand). */
#include "cuda/stage.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "cuda/module.h"
#include "log.h"
#include "reduce.h"

size_t rcoll_stage_nparts(size_t bytes, size_t slot) {
  if (bytes == 0 || slot == 0)
    return 1;
  return (bytes + slot - 1) / slot;
}

size_t rcoll_stage_part_bytes(size_t bytes, size_t slot, size_t k) {
  if (slot == 0 || k * slot >= bytes)
    return 0;
  size_t left = bytes - k * slot;
  return left < slot ? left : slot;
}

/* A copy towards lower addresses runs front to back in pieces no longer than
 * the distance between the buffers; towards higher addresses, back to front.
 * Each piece then reads only bytes no earlier piece has written. */
size_t rcoll_stage_pieces(const void *dst, const void *src, size_t bytes, rcoll_stage_piece_t *out,
                          size_t max) {
  const char *d = dst, *s = src;
  if (bytes == 0 || d == s)
    return 0;
  size_t dist = d > s ? (size_t)(d - s) : (size_t)(s - d);
  size_t step = dist < bytes ? dist : bytes;
  size_t n = (bytes + step - 1) / step;
  if (n > max)
    return 0;
  for (size_t i = 0; i < n; i++) {
    size_t off = d < s ? i * step : (bytes > (i + 1) * step ? bytes - (i + 1) * step : 0);
    size_t end = d < s ? off + step : bytes - i * step;
    if (end > bytes)
      end = bytes;
    out[i] = (rcoll_stage_piece_t){off, off, end - off};
  }
  return n;
}

int rcoll_stage_pick(const rcoll_cuda_slots_t *s, int nslots, size_t slot_bytes, size_t bytes) {
  if (bytes > slot_bytes)
    return s->big_busy ? -1 : -2;
  unsigned slot = s->next % (unsigned)nslots;
  return s->busy[slot] ? -1 : (int)slot;
}

char *rcoll_stage_buf(const rcoll_cuda_slots_t *s, int slot, size_t slot_bytes) {
  return slot == -2 ? s->big : s->base + (size_t)slot * slot_bytes;
}

void rcoll_stage_take(rcoll_cuda_slots_t *s, int nslots, int slot) {
  if (slot == -2) {
    s->big_busy = 1;
    return;
  }
  s->busy[slot] = 1;
  s->next = (s->next + 1) % (unsigned)nslots;
}

void rcoll_stage_give(rcoll_cuda_slots_t *s, int slot) {
  if (slot == -2)
    s->big_busy = 0;
  else if (slot >= 0)
    s->busy[slot] = 0;
}

rcollResult_t rcoll_dev_peer_error(struct rcollComm *c, int peer, rcollResult_t r, const char *what) {
  char name[128];
  rcoll_comm_peer_name(c, peer, name, sizeof name);
  return rcoll_error(r, "rank %d: %s %s failed: %s", c->rank, what, name, rcoll_error_text());
}

/* Counts a CUDA call that queued work, started at t0 (cuda_comm.h). */
static void issued(rcoll_cuda_comm_t *cc, int64_t t0) {
  cc->prof.issued++;
  cc->prof.issue_ns += rcoll_now_ns() - t0;
}

rcollResult_t rcoll_dev_copy_issue(rcoll_cuda_comm_t *cc, rcoll_cuda_stream_t s, void *dst, const void *src,
                                   size_t bytes) {
  if (bytes == 0)
    return rcollSuccess;
  int64_t t0 = rcoll_now_ns();
  int r = rcoll_cuda_api()->memcpy_async(dst, src, bytes, RCOLL_CUDA_MEMCPY_DEFAULT, s);
  issued(cc, t0);
  if (r != 0)
    return rcoll_error(rcollUnhandledCudaError, "rank %d: cudaMemcpyAsync of %zu bytes failed: %s",
                       cc->comm->rank, bytes, rcoll_cuda_strerror(r));
  return rcollSuccess;
}

rcollResult_t rcoll_dev_reduce_issue(rcoll_cuda_comm_t *cc, const rcoll_step_t *st, size_t off,
                                     const void *staged, size_t bytes) {
  rcollDataType_t t = (rcollDataType_t)st->dtype;
  rcollRedOp_t op = (rcollRedOp_t)st->op;
  size_t count = bytes / rcoll_type_size(t);
  char *dst = (char *)st->dst + off;
  int64_t t0 = rcoll_now_ns();
  rcollResult_t r = rcoll_cuda_reduce(dst, (const char *)st->src + off, staged, count, t, op, cc->stream);
  if (r == rcollSuccess && (st->flags & RCOLL_STEP_FINISH))
    r = rcoll_cuda_finish(dst, count, t, op, cc->comm->nranks, cc->stream);
  issued(cc, t0);
  return r;
}

rcollResult_t rcoll_dev_event_record(rcoll_cuda_comm_t *cc, rcoll_cuda_stream_t s, rcoll_cuda_event_t ev,
                                     const char *what) {
  int64_t t0 = rcoll_now_ns();
  int r = rcoll_cuda_api()->event_record(ev, s);
  issued(cc, t0);
  if (r != 0)
    return rcoll_error(rcollUnhandledCudaError, "rank %d: cudaEventRecord after %s failed on device %d: %s",
                       cc->comm->rank, what, cc->device, rcoll_cuda_strerror(r));
  return rcollSuccess;
}

/* The transport's registration of a slot area, made on first use (the
 * connection exists only once the engine has connected it). */
static rcollResult_t slots_mh(struct rcollComm *c, int peer, int send, rcoll_cuda_slots_t *s,
                              int slot, void **mh) {
  void *comm = send ? c->peers[peer].send_comm : c->peers[peer].recv_comm;
  const rcoll_transport_ops_t *ops = rcoll_peer_net(c, peer);
  void **cached = slot == -2 ? &s->big_mh : &s->mh;
  if (*cached == NULL) {
    char *base = slot == -2 ? s->big : s->base;
    size_t bytes = slot == -2 ? s->big_bytes : (size_t)c->nslots * c->chunk_bytes;
    RCOLL_CHECK(ops->reg_mr(comm, base, bytes, RCOLL_MEM_HOST, cached));
  }
  *mh = *cached;
  return rcollSuccess;
}

/* The slot's event, recorded after the copy into or out of it. */
static rcoll_cuda_event_t slot_event(const rcoll_cuda_slots_t *s, int slot) {
  return slot == -2 ? s->big_ev : s->ev[slot];
}

static rcollResult_t slot_record(rcoll_cuda_comm_t *cc, rcoll_cuda_stream_t on, const rcoll_cuda_slots_t *s,
                                 int slot) {
  cc->prof.staged_copies++;
  return rcoll_dev_event_record(cc, on, slot_event(s, slot), "a staging copy");
}

int rcoll_dev_event_ran(rcoll_cuda_comm_t *cc, rcoll_cuda_event_t ev, const char *what,
                        rcollResult_t *err) {
  int64_t t0 = rcoll_now_ns();
  int r = rcoll_cuda_api()->event_query(ev);
  cc->prof.queries++;
  cc->prof.query_ns += rcoll_now_ns() - t0;
  if (r == RCOLL_CUDA_ERROR_NOT_READY)
    return 0;
  if (r != 0) {
    *err = rcoll_error(rcollUnhandledCudaError, "rank %d: %s failed on device %d: %s",
                       cc->comm->rank, what, cc->device, rcoll_cuda_strerror(r));
    return 0;
  }
  cc->prof.queries_ran++;
  return 1;
}

/* 1 once the copy before the slot's event has run (rcoll_dev_event_ran). */
static int slot_copied(rcoll_cuda_comm_t *cc, const rcoll_cuda_slots_t *s, int slot,
                       const char *what, rcollResult_t *err) {
  return rcoll_dev_event_ran(cc, slot_event(s, slot), what, err);
}

/* Queues the copy of the step's chunk into a free slot; while it runs the
 * proxy moves other steps, and the send is made once the event says the
 * bytes are there. Copies queue on the proxy's second stream (cc->down) in
 * the order the steps come; a reduction whose result one sends has run
 * before, as the step is posted only once its dependencies are done. A
 * message's copy may be queued once the data message before it on the
 * connection has queued its own (copy_turn), so the GPU copies message
 * k + 1 while the proxy waits for message k's event; sends still go on the
 * wire in order (send_posted). Host messages between the two (the
 * fingerprints of point-to-point calls in a group) need no copy and do not
 * hold the next one back. */
static int stage_send_post(rcoll_plan_t *p, rcoll_step_t *st, rcoll_cuda_stepx_t *x,
                           rcollResult_t *err) {
  struct rcollComm *c = p->comm;
  rcoll_cuda_comm_t *cc = c->cuda;
  rcoll_cuda_slots_t *s = &cc->peers[st->peer].send;
  rcoll_peer_t *pe = &c->peers[st->peer];
  if (x->staged == 0) {
    if ((s->copy_turn > pe->send_posted ? s->copy_turn : pe->send_posted) < x->copy_after)
      return 0;
    int slot = rcoll_stage_pick(s, c->nslots, c->chunk_bytes, st->bytes);
    if (slot == -1)
      return 0;
    char *buf = rcoll_stage_buf(s, slot, c->chunk_bytes);
    *err = rcoll_dev_copy_issue(cc, cc->down, buf, st->src, st->bytes);
    if (*err == rcollSuccess)
      *err = slot_record(cc, cc->down, s, slot);
    if (*err != rcollSuccess)
      return 0;
    rcoll_stage_take(s, c->nslots, slot);
    x->slot = slot;
    x->buf = buf;
    x->staged = 1;
    s->copy_turn = st->seq + 1;
  }
  if (x->staged == 1) {
    if (!slot_copied(cc, s, x->slot, "a staging copy to host", err))
      return 0;
    x->staged = 2;
  }
  if (st->seq != pe->send_posted)
    return 0;
  void *mh = NULL, *req = NULL;
  rcollResult_t r = slots_mh(c, st->peer, 1, s, x->slot, &mh);
  if (r == rcollSuccess)
    r = rcoll_peer_net(c, st->peer)->isend(pe->send_comm, x->buf, st->bytes, 0, mh, &req);
  if (r != rcollSuccess) {
    *err = rcoll_dev_peer_error(c, st->peer, r, "send to");
    return 0;
  }
  if (req == NULL)
    return 0;
  pe->send_posted++;
  st->request = req;
  st->state = RCOLL_STEP_POSTED;
  return 1;
}

static int stage_recv_post(rcoll_plan_t *p, rcoll_step_t *st, rcoll_cuda_stepx_t *x,
                           rcollResult_t *err) {
  struct rcollComm *c = p->comm;
  rcoll_cuda_slots_t *s = &c->cuda->peers[st->peer].recv;
  rcoll_peer_t *pe = &c->peers[st->peer];
  int slot = rcoll_stage_pick(s, c->nslots, c->chunk_bytes, st->bytes);
  if (slot == -1)
    return 0;
  void *buf = rcoll_stage_buf(s, slot, c->chunk_bytes), *mh = NULL, *req = NULL;
  int tag = 0;
  rcollResult_t r = slots_mh(c, st->peer, 0, s, slot, &mh);
  if (r == rcollSuccess)
    r = rcoll_peer_net(c, st->peer)->irecv(pe->recv_comm, 1, &buf, &st->bytes, &tag, &mh, &req);
  if (r != rcollSuccess) {
    *err = rcoll_dev_peer_error(c, st->peer, r, "receive from");
    return 0;
  }
  if (req == NULL)
    return 0;
  rcoll_stage_take(s, c->nslots, slot);
  x->slot = slot;
  x->buf = buf;
  pe->recv_posted++;
  st->request = req;
  st->state = RCOLL_STEP_POSTED;
  return 1;
}

int rcoll_stage_post(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err) {
  rcoll_cuda_stepx_t *x = rcoll_cuda_stepx(p, st);
  x->mode = RCOLL_CUDA_MODE_STAGE;
  return st->kind == RCOLL_STEP_SEND ? stage_send_post(p, st, x, err)
                                     : stage_recv_post(p, st, x, err);
}

/* Tests the transport request; 1 when it finished with the expected size. */
static int request_done(struct rcollComm *c, rcoll_step_t *st, rcollResult_t *err) {
  int done = 0;
  size_t got = 0;
  rcollResult_t r = rcoll_peer_net(c, st->peer)->test(st->request, &done, &got);
  if (r != rcollSuccess) {
    *err = rcoll_dev_peer_error(c, st->peer, r,
                                st->kind == RCOLL_STEP_SEND ? "send to" : "receive from");
    return 0;
  }
  if (!done)
    return 0;
  st->request = NULL;
  if (st->kind != RCOLL_STEP_SEND && got != st->bytes) {
    char name[128];
    rcoll_comm_peer_name(c, st->peer, name, sizeof name);
    *err = rcoll_error(rcollInvalidUsage, "rank %d: %s sent %zu bytes where %zu were expected "
                       "(counts, types or call order differ between ranks, or a rank used host "
                       "buffers where the others used device buffers)", c->rank, name, got, st->bytes);
    return 0;
  }
  return 1;
}

/* A receive's chunk is copied to the device (or reduced there) on the proxy
 * stream once it arrived; the step is done when that copy is, and only then
 * does its slot take the next message. */
int rcoll_stage_test(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err) {
  struct rcollComm *c = p->comm;
  rcoll_cuda_comm_t *cc = c->cuda;
  rcoll_cuda_stepx_t *x = rcoll_cuda_stepx(p, st);
  rcoll_cuda_peer_t *cp = &cc->peers[st->peer];
  if (st->kind == RCOLL_STEP_SEND) {
    if (!request_done(c, st, err))
      return 0;
    rcoll_stage_give(&cp->send, x->slot);
    st->state = RCOLL_STEP_DONE;
    return 1;
  }
  if (x->staged == 0) {
    if (!request_done(c, st, err))
      return 0;
    if (st->kind == RCOLL_STEP_RECV_REDUCE)
      *err = rcoll_dev_reduce_issue(cc, st, 0, x->buf, st->bytes);
    else
      *err = rcoll_dev_copy_issue(cc, cc->stream, st->dst, x->buf, st->bytes);
    if (*err == rcollSuccess)
      *err = slot_record(cc, cc->stream, &cp->recv, x->slot);
    if (*err != rcollSuccess) {
      rcoll_stage_give(&cp->recv, x->slot);
      return 0;
    }
    x->staged = 1;
  }
  if (!slot_copied(cc, &cp->recv, x->slot, "a staged receive", err))
    return 0;
  rcoll_stage_give(&cp->recv, x->slot);
  st->state = RCOLL_STEP_DONE;
  return 1;
}

/* ---- GDR: the transport moves device memory itself ---- */

/* Registers the step's device buffer; on failure this peer falls back to
 * staging for good (the bytes on the wire are the same either way, so the
 * peer need not know). Returns 0 after such a fallback. */
static int gdr_register(rcoll_plan_t *p, rcoll_step_t *st, rcoll_cuda_stepx_t *x) {
  struct rcollComm *c = p->comm;
  rcoll_peer_t *pe = &c->peers[st->peer];
  void *comm = st->kind == RCOLL_STEP_SEND ? pe->send_comm : pe->recv_comm;
  void *buf = st->kind == RCOLL_STEP_SEND ? (void *)st->src : st->dst;
  if (x->mh != NULL)
    return 1;
  if (rcoll_peer_net(c, st->peer)->reg_mr(comm, buf, st->bytes, RCOLL_MEM_CUDA, &x->mh) ==
      rcollSuccess)
    return 1;
  x->mh = NULL;
  RCOLL_WARN("rank %d -> rank %d: GPUDirect RDMA registration failed (%s); staging through host "
             "memory from now on", c->rank, st->peer, rcoll_error_text());
  c->cuda->peers[st->peer].mode = RCOLL_CUDA_MODE_STAGE;
  return 0;
}

/* Messages up to this size are staged even to a GPUDirect peer. A
 * transport may move small messages with the CPU (ib sends up to 8 KiB
 * eagerly, through host slots, and copies them out with memcpy), which must
 * never touch device memory; and a small message gains nothing from skipping
 * one host copy. Both ends decide alone: staging and GPUDirect put the same
 * bytes on the wire. */
#define RCOLL_GDR_MIN_BYTES (64 * 1024)

int rcoll_gdr_post(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err) {
  struct rcollComm *c = p->comm;
  rcoll_cuda_stepx_t *x = rcoll_cuda_stepx(p, st);
  if (st->kind == RCOLL_STEP_SEND && x->staged == 0 && st->seq != c->peers[st->peer].send_posted)
    return 0; /* a staged send before it may have its copy queued, not its send */
  if (st->kind == RCOLL_STEP_RECV_REDUCE || st->bytes <= RCOLL_GDR_MIN_BYTES || !gdr_register(p, st, x))
    return rcoll_stage_post(p, st, err);
  x->mode = RCOLL_CUDA_MODE_GDR;
  rcoll_peer_t *pe = &c->peers[st->peer];
  const rcoll_transport_ops_t *ops = rcoll_peer_net(c, st->peer);
  void *req = NULL;
  rcollResult_t r;
  if (st->kind == RCOLL_STEP_SEND) {
    r = ops->isend(pe->send_comm, st->src, st->bytes, 0, x->mh, &req);
  } else {
    int tag = 0;
    r = ops->irecv(pe->recv_comm, 1, &st->dst, &st->bytes, &tag, &x->mh, &req);
  }
  if (r != rcollSuccess) {
    *err = rcoll_dev_peer_error(c, st->peer, r,
                                st->kind == RCOLL_STEP_SEND ? "send to" : "receive from");
    return 0;
  }
  if (req == NULL)
    return 0;
  if (st->kind == RCOLL_STEP_SEND)
    pe->send_posted++;
  else
    pe->recv_posted++;
  st->request = req;
  st->state = RCOLL_STEP_POSTED;
  return 1;
}

/* Data written into device memory by the NIC must be flushed before the GPU
 * reads it: the transport's iflush, then the driver's flush of GPUDirect
 * writes where it has one. */
static rcollResult_t gdr_flush(struct rcollComm *c, rcoll_step_t *st, void *mh) {
  rcoll_peer_t *pe = &c->peers[st->peer];
  const rcoll_transport_ops_t *ops = rcoll_peer_net(c, st->peer);
  void *req = NULL;
  RCOLL_CHECK(ops->iflush(pe->recv_comm, 1, &st->dst, &st->bytes, &mh, &req));
  int64_t deadline = rcoll_now_us() + c->timeout_ms * 1000;
  for (int done = req == NULL, polls = 0; !done; polls++) {
    RCOLL_CHECK(ops->test(req, &done, NULL));
    if (!done && rcoll_now_us() > deadline)
      return rcoll_error(rcollTimeout, "rank %d: flush of a GPUDirect receive did not finish", c->rank);
    if (!done && polls >= 64) /* a flush takes microseconds: spin, then yield the core */
      sched_yield();
  }
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  if (a->cu_flush_gpudirect_rdma_writes != NULL)
    a->cu_flush_gpudirect_rdma_writes(RCOLL_CU_FLUSH_TARGET_CURRENT_CTX, RCOLL_CU_FLUSH_TO_OWNER);
  return rcollSuccess;
}

int rcoll_gdr_test(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err) {
  struct rcollComm *c = p->comm;
  rcoll_cuda_stepx_t *x = rcoll_cuda_stepx(p, st);
  if (x->mode != RCOLL_CUDA_MODE_GDR)
    return rcoll_stage_test(p, st, err);
  if (!request_done(c, st, err))
    return 0;
  if (st->kind != RCOLL_STEP_SEND && (*err = gdr_flush(c, st, x->mh)) != rcollSuccess)
    return 0;
  rcoll_peer_t *pe = &c->peers[st->peer];
  rcoll_peer_net(c, st->peer)->dereg_mr(st->kind == RCOLL_STEP_SEND ? pe->send_comm : pe->recv_comm,
                                        x->mh);
  x->mh = NULL;
  st->state = RCOLL_STEP_DONE;
  return 1;
}
