/* Public collective and point-to-point calls: validate the arguments once,
 * let the tuner choose the algorithm and chunk (tuner.h), plan, and run (or,
 * inside a group, keep the plan for rcollGroupEnd). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "algo.h"
#include "call.h"
#include "comm.h"
#include "device.h"
#include "flat.h"
#include "group.h"
#include "log.h"
#include "memtype.h"
#include "plan_cache.h"
#include "redop.h"
#include "reduce.h"
#include "trace.h"
#include "tuner.h"

/* Where a call reads its send buffer or writes its receive buffer. */
enum buf_use { USED_NOWHERE = 0, USED_AT_ROOT, USED_EVERYWHERE };

typedef struct coll_desc {
  const char *name;
  rcoll_coll_kind_t coll;
  int has_op;     /* validate op */
  int has_root;   /* validate root (or peer) */
  int send_mult;  /* sendbuff holds count * (send_mult ? nranks : 1) elements */
  int recv_mult;  /* recvbuff likewise */
  enum buf_use send_at, recv_at; /* where each buffer must be valid */
} coll_desc_t;

/* As nccl.h: a buffer "not used" on some ranks may be NULL there. */
static const coll_desc_t ALLREDUCE = {"rcollAllReduce", RCOLL_COLL_ALLREDUCE, 1, 0, 0, 0,
                                      USED_EVERYWHERE, USED_EVERYWHERE};
static const coll_desc_t BROADCAST = {"rcollBroadcast", RCOLL_COLL_BROADCAST, 0, 1, 0, 0, USED_AT_ROOT,
                                      USED_EVERYWHERE};
static const coll_desc_t BCAST = {"rcollBcast", RCOLL_COLL_BROADCAST, 0, 1, 0, 0, USED_AT_ROOT,
                                  USED_EVERYWHERE};
static const coll_desc_t REDUCE = {"rcollReduce", RCOLL_COLL_REDUCE, 1, 1, 0, 0, USED_EVERYWHERE,
                                   USED_AT_ROOT};
static const coll_desc_t ALLGATHER = {"rcollAllGather", RCOLL_COLL_ALLGATHER, 0, 0, 0, 1,
                                      USED_EVERYWHERE, USED_EVERYWHERE};
static const coll_desc_t REDUCE_SCATTER = {"rcollReduceScatter", RCOLL_COLL_REDUCE_SCATTER, 1, 0, 1, 0,
                                           USED_EVERYWHERE, USED_EVERYWHERE};
static const coll_desc_t ALLTOALL = {"rcollAlltoAll", RCOLL_COLL_ALLTOALL, 0, 0, 1, 1,
                                     USED_EVERYWHERE, USED_EVERYWHERE};
static const coll_desc_t GATHER = {"rcollGather", RCOLL_COLL_GATHER, 0, 1, 0, 1, USED_EVERYWHERE,
                                   USED_AT_ROOT};
static const coll_desc_t SCATTER = {"rcollScatter", RCOLL_COLL_SCATTER, 0, 1, 1, 0, USED_AT_ROOT,
                                    USED_EVERYWHERE};
static const coll_desc_t SEND = {"rcollSend", RCOLL_COLL_SEND, 0, 1, 0, 0, USED_EVERYWHERE,
                                 USED_NOWHERE};
static const coll_desc_t RECV = {"rcollRecv", RCOLL_COLL_RECV, 0, 1, 0, 0, USED_NOWHERE,
                                 USED_EVERYWHERE};

static rcollResult_t check_buffer(const coll_desc_t *d, const char *what, const void *buf,
                                  size_t bytes, rcoll_mem_info_t *mi) {
  if (buf == NULL)
    return rcoll_error(rcollInvalidArgument, "%s: %s is NULL", d->name, what);
  return rcoll_mem_query(buf, bytes, mi);
}

/* The bytes of each buffer (the same on every rank), and whether this rank
 * reads its send buffer and writes its receive buffer. */
static void call_buffers(const coll_desc_t *d, const rcoll_coll_args_t *a, size_t *sbytes,
                         size_t *rbytes, int *send_used, int *recv_used) {
  size_t bytes = a->count * rcoll_type_size(a->dtype);
  *sbytes = bytes * (d->send_mult ? (size_t)a->nranks : 1);
  *rbytes = bytes * (d->recv_mult ? (size_t)a->nranks : 1);
  int is_root = a->rank == a->root;
  *send_used = d->send_at == USED_EVERYWHERE || (d->send_at == USED_AT_ROOT && is_root);
  *recv_used = d->recv_at == USED_EVERYWHERE || (d->recv_at == USED_AT_ROOT && is_root);
}

/* *device: the CUDA device of the buffers, -1 for host buffers (memtype.h
 * says which combinations of buffers and stream a call may use). */
static rcollResult_t check_args(const coll_desc_t *d, const rcoll_coll_args_t *a, struct rcollComm *c,
                                rcollStream_t stream, int *device) {
  *device = -1;
  if (a->dtype < 0 || a->dtype >= rcollNumTypes)
    return rcoll_error(rcollInvalidArgument, "%s: datatype %d is not an rcollDataType_t", d->name,
                       (int)a->dtype);
  if (d->has_op) /* a built-in op, or one made on this communicator for this datatype */
    RCOLL_CHECK(rcoll_redop_check(c, d->name, a->op, a->dtype));
  if (d->has_root && (a->root < 0 || a->root >= c->nranks))
    return rcoll_error(rcollInvalidArgument, "%s: %s %d is not a rank in [0, %d)", d->name,
                       d->coll == RCOLL_COLL_SEND || d->coll == RCOLL_COLL_RECV ? "peer" : "root",
                       a->root, c->nranks);
  /* A negative int passed as a count arrives as a huge size_t. */
  if (a->count > (SIZE_MAX / 4) / rcoll_type_size(a->dtype) / (size_t)c->nranks)
    return rcoll_error(rcollInvalidArgument, "%s: count %zu is too large (a negative count?)",
                       d->name, a->count);
  if (a->count == 0)
    return rcollSuccess;
  size_t sbytes, rbytes;
  int send_used, recv_used;
  call_buffers(d, a, &sbytes, &rbytes, &send_used, &recv_used);
  rcoll_mem_info_t smi, rmi;
  if (send_used) /* rcollBcast has one buffer, which NCCL calls buff */
    RCOLL_CHECK(check_buffer(d, d == &BCAST ? "buff" : "sendbuff", a->sendbuff, sbytes, &smi));
  if (recv_used)
    RCOLL_CHECK(check_buffer(d, "recvbuff", a->recvbuff, rbytes, &rmi));
  /* All-to-all in place means the same buffer; a shifted overlap would read
   * blocks after they were overwritten. */
  uintptr_t sb = (uintptr_t)a->sendbuff, rb = (uintptr_t)a->recvbuff; /* two objects: compare as integers */
  if (d->coll == RCOLL_COLL_ALLTOALL && sb != rb && sb < rb + rbytes && rb < sb + sbytes)
    return rcoll_error(rcollInvalidArgument, "%s: sendbuff %p and recvbuff %p overlap without being "
                       "equal (in place is sendbuff == recvbuff)", d->name, a->sendbuff, a->recvbuff);
  return rcoll_mem_check_call(c, d->name, send_used ? &smi : NULL, recv_used ? &rmi : NULL, stream,
                              device);
}

/* Asks the tuner for the algorithm and chunk, and plans the call with
 * them. The tuner was made with the communicator (its figures are agreed
 * by all ranks over the bootstrap then, which a call could not do). The
 * chunk never exceeds the communicator's staging slot, which
 * receive-reduces land in. */
static rcollResult_t coll_plan(const coll_desc_t *d, const rcoll_coll_args_t *a, struct rcollComm *comm,
                               int device) {
  rcoll_plan_t *p = &comm->plan;
  size_t bytes = a->count * rcoll_type_size(a->dtype);
  if (p->tuner == NULL)
    return rcoll_error(rcollInternalError, "%s: rank %d: the communicator has no tuner", d->name,
                       comm->rank);
  if (rcoll_coll_per_rank(d->coll))
    bytes *= (size_t)a->nranks;
  rcoll_tune_choice_t ch = rcoll_tune_choose(p->tuner, d->coll, bytes);
  if (device >= 0 && comm->flat != NULL && ch.desc == rcoll_flat_algorithm(comm)) /* the board is host memory */
    ch = rcoll_tune_choose_without(p->tuner, d->coll, bytes, ch.algo);
  const rcoll_algorithm_t *algo = ch.desc;
  if (algo == NULL)
    return rcoll_error(rcollInternalError, "%s: no algorithm implements %s", d->name,
                       rcoll_coll_name(d->coll));
  p->chunk_bytes = ch.chunk < comm->chunk_bytes ? ch.chunk : comm->chunk_bytes;
  /* A device plan within a node moves each part as GPU work its proxy
   * waits for (an IPC or staging copy, then a stream synchronization or an
   * event), where the tuner's shm figures cap chunks at 512 KiB to keep host
   * copies in cache. On an H200 a part cost ~10 us of such round trips and
   * its 512 KiB moved in under 1 us: a 128 MiB all-reduce of 2 ranks made
   * 512 synchronizations, 42 % of its proxy's time. So whole slots there,
   * 8 times fewer parts: that all-reduce then took 1.2 ms, against 7.5 in an
   * earlier run on another H200 machine (4 ranks: 9.4 against 12.6 ms;
   * docs/gpu.md). The slot is the least of all ranks' (the tuner agreed
   * it): ranks cut messages alike even where RCOLL_CHUNK_SIZE differs. */
  size_t slot = p->tuner->prm.max_chunk & ~(size_t)63;
  if (device >= 0 && p->tuner->nnodes == 1)
    p->chunk_bytes = slot;
  /* A device plan's point-to-point message goes in parts of a slot
   * (sendrecv.c). Both ends cut alike: a send and its receive are both
   * device calls (the fingerprint's magic says so) of the same bytes, and
   * the slot is the same everywhere, where the tuner's chunk could differ
   * between a send and a receive. */
  p->p2p_part_bytes = device >= 0 ? slot : 0;
  p->predicted_us += ch.time_us;
  algo->plan(p, a);
  p->algo = algo->name;
  return rcollSuccess;
}

/* Plans the call, then numbers, fingerprints and records it (call.h): the
 * fingerprint names the algorithm and the path of a device call (bounced or
 * not) and goes to the peers the plan uses.
 * PreMulSum calls sum a scaled copy of the input (redop.h). */
static rcollResult_t coll_plan_call(const coll_desc_t *d, rcoll_coll_args_t *a, struct rcollComm *comm,
                                    int device, int bounced) {
  rcollRedOp_t user_op = a->op;
  int first_step = comm->plan.nsteps;
  rcoll_plan_cache_drop(comm);
  rcollResult_t r = rcoll_redop_prepare(comm, d->name, a, a->count * (d->send_mult ? (size_t)a->nranks : 1),
                                        device);
  if (r == rcollSuccess)
    r = coll_plan(d, a, comm, device);
  uint16_t mem = bounced ? RCOLL_FP_MAGIC_BOUNCED : device >= 0 ? RCOLL_FP_MAGIC_DEVICE : RCOLL_FP_MAGIC;
  if (r == rcollSuccess)
    r = rcoll_call_add(comm, d->coll, a, user_op, first_step, mem);
  if (r == rcollSuccess && comm->flat != NULL && !rcoll_coll_is_p2p(d->coll)) {
    const rcoll_fp_t *fp = comm->calls[comm->ncalls - 1].fp;
    if (comm->plan.nsteps > first_step && (comm->plan.steps[first_step].flags & RCOLL_STEP_BOARD))
      comm->plan.steps[first_step].seq = fp->seq;
    rcoll_flat_note(comm, fp); /* peers waiting on the board see what this rank called */
  }
  return r;
}

/* A send's input, a receive's output. */
static void *coll_p2p_buf(const coll_desc_t *d, const rcoll_coll_args_t *a) {
  return d->coll == RCOLL_COLL_SEND ? (void *)a->sendbuff : a->recvbuff;
}

/* The INFO line of every call: tools (check_bench_json.sh) read it. */
static void coll_log(const coll_desc_t *d, const rcoll_coll_args_t *a, const struct rcollComm *comm,
                     const char *algo, size_t chunk) {
  RCOLL_INFO(RCOLL_SUB_COLL, "%s: %zu x %s%s%s root %d via %s/%s, chunk %zu", d->name, a->count,
             rcoll_type_name(a->dtype), d->has_op ? " " : "", d->has_op ? rcoll_op_name(a->op) : "",
             a->root, algo, comm->net_summary, chunk);
}

/* Offers the call to the device path's bounce (lib/cuda/bounce.h); when it
 * takes it, the call goes on with pinned host copies of its buffers. */
static int coll_bounce(const coll_desc_t *d, rcoll_coll_args_t *a, struct rcollComm *comm,
                       rcollStream_t stream, int device, rcollResult_t *r) {
  size_t sbytes, rbytes;
  int send_used, recv_used;
  call_buffers(d, a, &sbytes, &rbytes, &send_used, &recv_used);
  rcoll_bounce_call_t b = {sbytes > rbytes ? sbytes : rbytes, send_used ? a->sendbuff : NULL,
                           sbytes, recv_used ? a->recvbuff : NULL, rbytes, NULL, NULL};
  if (!rcoll_device_ops.bounce_begin(comm, &b, stream, device, r))
    return 0;
  a->sendbuff = b.host_send;
  a->recvbuff = b.host_recv;
  return 1;
}

static rcollResult_t coll_run(const coll_desc_t *d, rcoll_coll_args_t *a, rcollComm_t comm,
                              rcollStream_t stream) {
  int device = -1;
  rcollResult_t r = rcoll_comm_check(comm, d->name);
  if (r == rcollSuccess && comm->revoked)
    r = rcoll_error(rcollInvalidUsage, "%s: comm was revoked (rcollCommRevoke or RCOLL_SHRINK_ABORT); "
                    "only rcollCommShrink, rcollCommDestroy and rcollCommAbort may follow", d->name);
  else if (r == rcollSuccess && comm->async_error != rcollSuccess)
    r = rcoll_error(rcollInvalidUsage, "%s: communicator failed earlier (%s); destroy or abort it",
                    d->name, comm->last_error);
  if (r == rcollSuccess) {
    a->rank = comm->rank;
    a->nranks = comm->nranks;
    r = check_args(d, a, comm, stream, &device);
  }
  if (r != rcollSuccess) {
    if (rcoll_group_active())
      rcoll_group_fail(r);
    return r;
  }
  if (a->count == 0)
    return rcollSuccess;
  int group = rcoll_group_active();
  rcollRedOp_t user_op = a->op;
  /* An all-reduce the tuner puts on the flat board runs there without a
   * plan (flat.h); in a group, or with a PreMulSum op, it is a plan step. */
  rcoll_tune_choice_t ch;
  if (!group && device < 0 && d->coll == RCOLL_COLL_ALLREDUCE && comm->flat != NULL &&
      rcoll_flat_takes(comm, a, a->count * rcoll_type_size(a->dtype), &ch)) {
    coll_log(d, a, comm, "flat", ch.chunk < comm->chunk_bytes ? ch.chunk : comm->chunk_bytes);
    return rcoll_flat_allreduce(comm, a, user_op);
  }
  /* On one node, with RCOLL_CUDA_DIRECT, a device collective is one kernel,
   * and so are a call's or group's sends and receives once a collective set
   * the path up (lib/cuda/direct.h). In a group they wait for
   * rcollGroupEnd: the calls of a group start there, after the user's work
   * queued on their streams before it, as NCCL's do, and the group may turn
   * out to hold such calls for several communicators (group.c). */
  int p2p = rcoll_coll_is_p2p(d->coll);
  if (group && device >= 0 && comm->cuda_direct && (p2p || ((int)a->op >= 0 && a->op < rcollNumOps))) {
    r = rcoll_device_ops.submit(comm, stream, device, d->name); /* joins the group, planning nothing */
    if (r == rcollSuccess)
      r = rcoll_group_hold(&(rcoll_held_t){d, *a, comm, stream, device, p2p});
    if (r != rcollSuccess)
      rcoll_group_fail(r);
    return r;
  }
  if (!group && device >= 0 && comm->cuda_direct &&
      (p2p ? rcoll_device_ops.direct_p2p(comm, &(rcoll_p2p_op_t){coll_p2p_buf(d, a), a->count *
                                                                 rcoll_type_size(a->dtype), a->root,
                                                                 d->coll == RCOLL_COLL_SEND, stream},
                                          1, device, &r)
           : rcoll_device_ops.direct(comm, d->coll, a->sendbuff, a->recvbuff, a->count, a->dtype, a->op,
                                     a->root, stream, device, &r))) {
    coll_log(d, a, comm, "cuda-direct", 0);
    return r;
  }
  /* A small device call runs as a host call on pinned copies of its buffers,
   * planned as a device call (lib/cuda/bounce.h). */
  int bounced = !group && device >= 0 && coll_bounce(d, a, comm, stream, device, &r);
  if (r != rcollSuccess)
    return r;
  /* A repeat of the last call outside a group reuses its plan (plan_cache.h). */
  if (group || device >= 0 || !rcoll_plan_cache_hit(comm, d->coll, a)) {
    r = coll_plan_call(d, a, comm, device, bounced);
    if (r == rcollSuccess && !group && device < 0)
      rcoll_plan_cache_save(comm, d->coll, a, user_op);
  } else if (comm->flat != NULL) {
    rcoll_flat_note(comm, comm->calls[0].fp);
  }
  if (r != rcollSuccess) {
    if (group)
      rcoll_group_fail(r); /* rcollGroupEnd discards the group's plan */
    else
      rcoll_calls_discard(comm), rcoll_plan_discard(&comm->plan);
    if (bounced)
      rcoll_device_ops.bounce_cancel(comm, stream);
    return r;
  }
  coll_log(d, a, comm, comm->plan.algo, comm->plan.chunk_bytes);
  if (device >= 0) /* queued on the stream for the comm's CUDA proxy */
    return rcoll_device_ops.submit(comm, stream, device, d->name);
  /* Host calls only: the proxy runs device plans later, on its own thread,
   * and they appear in the trace as "device plan" (with their algorithm). */
  if (comm->trace != NULL)
    rcoll_trace_call(comm->trace, d->name, a->count * rcoll_type_size(a->dtype));
  if (group)
    return rcoll_group_add(comm);
  rcoll_plan_t *plans[1] = {&comm->plan};
  r = rcoll_engine_run(plans, 1);
  rcoll_plan_reset(&comm->plan, comm);
  return r;
}

rcollResult_t rcoll_coll_release_p2p(const rcoll_held_t *h, int n) {
  rcoll_p2p_op_t *ops = calloc((size_t)n, sizeof *ops);
  if (ops == NULL)
    return rcoll_error(rcollSystemError, "rcollGroupEnd: out of memory");
  for (int i = 0; i < n; i++)
    ops[i] = (rcoll_p2p_op_t){coll_p2p_buf(h[i].d, &h[i].a), h[i].a.count * rcoll_type_size(h[i].a.dtype),
                              h[i].a.root, h[i].d->coll == RCOLL_COLL_SEND, h[i].stream};
  rcollResult_t r = rcollSuccess;
  int taken = rcoll_device_ops.direct_p2p(h[0].comm, ops, n, h[0].device, &r);
  free(ops);
  for (int i = 0; i < n && taken; i++)
    coll_log(h[i].d, &h[i].a, h[i].comm, "cuda-direct", 0);
  for (int i = 0; i < n && !taken && r == rcollSuccess; i++)
    r = rcoll_coll_release(&h[i], 0);
  return r;
}

rcollResult_t rcoll_coll_release(const rcoll_held_t *h, int direct) {
  const coll_desc_t *d = h->d;
  rcoll_coll_args_t a = h->a;
  rcollResult_t r = rcollSuccess;
  if (direct && rcoll_device_ops.direct(h->comm, d->coll, a.sendbuff, a.recvbuff, a.count, a.dtype,
                                        a.op, a.root, h->stream, h->device, &r)) {
    coll_log(d, &a, h->comm, "cuda-direct", 0);
    return r;
  }
  r = coll_plan_call(d, &a, h->comm, h->device, 0);
  if (r == rcollSuccess)
    coll_log(d, &a, h->comm, h->comm->plan.algo, h->comm->plan.chunk_bytes);
  return r;
}

RCOLL_API rcollResult_t rcollAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                       rcollDataType_t datatype, rcollRedOp_t op, rcollComm_t comm,
                                       rcollStream_t stream) {
  rcoll_coll_args_t a = {sendbuff, recvbuff, count, datatype, op, 0, 0, 0};
  return coll_run(&ALLREDUCE, &a, comm, stream);
}

RCOLL_API rcollResult_t rcollBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                       rcollDataType_t datatype, int root, rcollComm_t comm,
                                       rcollStream_t stream) {
  rcoll_coll_args_t a = {sendbuff, recvbuff, count, datatype, rcollSum, root, 0, 0};
  return coll_run(&BROADCAST, &a, comm, stream);
}

RCOLL_API rcollResult_t rcollReduce(const void *sendbuff, void *recvbuff, size_t count,
                                    rcollDataType_t datatype, rcollRedOp_t op, int root,
                                    rcollComm_t comm, rcollStream_t stream) {
  rcoll_coll_args_t a = {sendbuff, recvbuff, count, datatype, op, root, 0, 0};
  return coll_run(&REDUCE, &a, comm, stream);
}

RCOLL_API rcollResult_t rcollAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                       rcollDataType_t datatype, rcollComm_t comm,
                                       rcollStream_t stream) {
  rcoll_coll_args_t a = {sendbuff, recvbuff, sendcount, datatype, rcollSum, 0, 0, 0};
  return coll_run(&ALLGATHER, &a, comm, stream);
}

RCOLL_API rcollResult_t rcollReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                           rcollDataType_t datatype, rcollRedOp_t op,
                                           rcollComm_t comm, rcollStream_t stream) {
  rcoll_coll_args_t a = {sendbuff, recvbuff, recvcount, datatype, op, 0, 0, 0};
  return coll_run(&REDUCE_SCATTER, &a, comm, stream);
}

RCOLL_API rcollResult_t rcollSend(const void *sendbuff, size_t count, rcollDataType_t datatype,
                                  int peer, rcollComm_t comm, rcollStream_t stream) {
  rcoll_coll_args_t a = {sendbuff, NULL, count, datatype, rcollSum, peer, 0, 0};
  return coll_run(&SEND, &a, comm, stream);
}

RCOLL_API rcollResult_t rcollRecv(void *recvbuff, size_t count, rcollDataType_t datatype, int peer,
                                  rcollComm_t comm, rcollStream_t stream) {
  rcoll_coll_args_t a = {NULL, recvbuff, count, datatype, rcollSum, peer, 0, 0};
  return coll_run(&RECV, &a, comm, stream);
}

/* The legacy in-place broadcast: rcollBroadcast(buff, buff, ...). */
RCOLL_API rcollResult_t rcollBcast(void *buff, size_t count, rcollDataType_t datatype, int root,
                                   rcollComm_t comm, rcollStream_t stream) {
  rcoll_coll_args_t a = {buff, buff, count, datatype, rcollSum, root, 0, 0};
  return coll_run(&BCAST, &a, comm, stream);
}

RCOLL_API rcollResult_t rcollAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                      rcollDataType_t datatype, rcollComm_t comm,
                                      rcollStream_t stream) {
  rcoll_coll_args_t a = {sendbuff, recvbuff, count, datatype, rcollSum, 0, 0, 0};
  return coll_run(&ALLTOALL, &a, comm, stream);
}

RCOLL_API rcollResult_t rcollGather(const void *sendbuff, void *recvbuff, size_t count,
                                    rcollDataType_t datatype, int root, rcollComm_t comm,
                                    rcollStream_t stream) {
  rcoll_coll_args_t a = {sendbuff, recvbuff, count, datatype, rcollSum, root, 0, 0};
  return coll_run(&GATHER, &a, comm, stream);
}

RCOLL_API rcollResult_t rcollScatter(const void *sendbuff, void *recvbuff, size_t count,
                                     rcollDataType_t datatype, int root, rcollComm_t comm,
                                     rcollStream_t stream) {
  rcoll_coll_args_t a = {sendbuff, recvbuff, count, datatype, rcollSum, root, 0, 0};
  return coll_run(&SCATTER, &a, comm, stream);
}
