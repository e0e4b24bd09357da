/* Public collective and point-to-point calls: validate the arguments once,
 * plan with the chosen algorithm, and run (or, inside a group, keep the plan
 * for rcollGroupEnd). */
#include <stdint.h>
#include <stdio.h>

#include "algo.h"
#include "comm.h"
#include "group.h"
#include "log.h"
#include "memtype.h"
#include "reduce.h"

typedef void (*planner_t)(rcoll_plan_t *, const rcoll_coll_args_t *);

typedef struct coll_desc {
  const char *name;
  planner_t plan;
  const char *algo;
  int has_op;     /* validate op */
  int has_root;   /* validate root (or peer) */
  int send_mult;  /* sendbuff holds count * (send_mult ? nranks : 1) elements */
  int recv_mult;  /* recvbuff likewise */
  int need_send;  /* sendbuff must be valid (0: unused, e.g. recv) */
  int need_recv;
} coll_desc_t;

static const coll_desc_t ALLREDUCE = {"rcollAllReduce", rcoll_allreduce_ring, "ring", 1, 0, 0, 0, 1, 1};
static const coll_desc_t BROADCAST = {"rcollBroadcast", rcoll_broadcast_chain, "chain", 0, 1, 0, 0, 0, 1};
static const coll_desc_t REDUCE = {"rcollReduce", rcoll_reduce_chain, "chain", 1, 1, 0, 0, 1, 0};
static const coll_desc_t ALLGATHER = {"rcollAllGather", rcoll_allgather_ring, "ring", 0, 0, 0, 1, 1, 1};
static const coll_desc_t REDUCE_SCATTER = {"rcollReduceScatter", rcoll_reduce_scatter_ring, "ring",
                                           1, 0, 1, 0, 1, 1};
static const coll_desc_t SEND = {"rcollSend", rcoll_send_p2p, "p2p", 0, 1, 0, 0, 1, 0};
static const coll_desc_t RECV = {"rcollRecv", rcoll_recv_p2p, "p2p", 0, 1, 0, 0, 0, 1};

static rcollResult_t check_buffer(const coll_desc_t *d, const char *what, const void *buf,
                                  size_t bytes, rcollStream_t stream) {
  if (buf == NULL)
    return rcoll_error(rcollInvalidArgument, "%s: %s is NULL", d->name, what);
  rcoll_mem_info_t mi;
  RCOLL_CHECK(rcoll_mem_query(buf, bytes, &mi));
  if (mi.type != RCOLL_MEM_HOST)
    return rcoll_error(rcollInvalidUsage, "%s: %s is device memory; this build moves host buffers "
                       "only", d->name, what);
  if (stream != NULL)
    return rcoll_error(rcollInvalidUsage, "%s: stream must be NULL for host buffers", d->name);
  return rcollSuccess;
}

static rcollResult_t check_args(const coll_desc_t *d, const rcoll_coll_args_t *a, struct rcollComm *c,
                                rcollStream_t stream) {
  if (a->dtype < 0 || a->dtype >= rcollNumTypes)
    return rcoll_error(rcollInvalidArgument, "%s: datatype %d is not an rcollDataType_t", d->name,
                       (int)a->dtype);
  if (d->has_op && (a->op < 0 || a->op >= rcollNumOps))
    return rcoll_error(rcollInvalidArgument, "%s: op %d is not an rcollRedOp_t", d->name, (int)a->op);
  if (d->has_root && (a->root < 0 || a->root >= c->nranks))
    return rcoll_error(rcollInvalidArgument, "%s: %s %d is not a rank in [0, %d)", d->name,
                       d->plan == rcoll_send_p2p || d->plan == rcoll_recv_p2p ? "peer" : "root",
                       a->root, c->nranks);
  size_t tsize = rcoll_type_size(a->dtype);
  /* A negative int passed as a count arrives as a huge size_t. */
  if (a->count > (SIZE_MAX / 4) / tsize / (size_t)c->nranks)
    return rcoll_error(rcollInvalidArgument, "%s: count %zu is too large (a negative count?)",
                       d->name, a->count);
  if (a->count == 0)
    return rcollSuccess;
  size_t sbytes = a->count * tsize * (d->send_mult ? (size_t)c->nranks : 1);
  size_t rbytes = a->count * tsize * (d->recv_mult ? (size_t)c->nranks : 1);
  int is_root = a->rank == a->root;
  int send_used = d->need_send || (d->plan == rcoll_broadcast_chain && is_root);
  int recv_used = d->need_recv || (d->plan == rcoll_reduce_chain && is_root);
  if (send_used)
    RCOLL_CHECK(check_buffer(d, "sendbuff", a->sendbuff, sbytes, stream));
  if (recv_used)
    RCOLL_CHECK(check_buffer(d, "recvbuff", a->recvbuff, rbytes, stream));
  return rcollSuccess;
}

static rcollResult_t coll_run(const coll_desc_t *d, rcoll_coll_args_t *a, rcollComm_t comm,
                              rcollStream_t stream) {
  rcollResult_t r = rcoll_comm_check(comm, d->name);
  if (r == rcollSuccess && comm->async_error != rcollSuccess)
    r = rcoll_error(rcollInvalidUsage, "%s: communicator failed earlier (%s); destroy or abort it",
                    d->name, comm->last_error);
  if (r == rcollSuccess) {
    a->rank = comm->rank;
    a->nranks = comm->nranks;
    r = check_args(d, a, comm, stream);
  }
  if (r != rcollSuccess) {
    if (rcoll_group_active())
      rcoll_group_fail(r);
    return r;
  }
  if (a->count == 0)
    return rcollSuccess;
  d->plan(&comm->plan, a);
  comm->plan.algo = d->algo;
  RCOLL_INFO(RCOLL_SUB_COLL, "%s: %zu x %s%s%s root %d via %s/%s, chunk %zu", d->name, a->count,
             rcoll_type_name(a->dtype), d->has_op ? " " : "", d->has_op ? rcoll_op_name(a->op) : "",
             a->root, d->algo, comm->net_summary, comm->plan.chunk_bytes);
  if (rcoll_group_active())
    return rcoll_group_add(comm);
  rcoll_plan_t *plans[1] = {&comm->plan};
  r = rcoll_engine_run(plans, 1);
  rcoll_plan_reset(&comm->plan, comm);
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
