/* rcollRedOpCreatePreMulSum and rcollRedOpDestroy, and what a call with a
 * made op does (redop.h). */
#include "redop.h"

#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "error.h"
#include "memtype.h"
#include "reduce.h"
#include "reduce_math.h"

static rcoll_user_op_t *user_op(struct rcollComm *c, rcollRedOp_t op) {
  long i = (long)op - rcollNumOps;
  if (c->user_ops == NULL || i < 0 || i >= RCOLL_MAX_USER_OPS || !c->user_ops[i].used)
    return NULL;
  return &c->user_ops[i];
}

RCOLL_API rcollResult_t rcollRedOpCreatePreMulSum(rcollRedOp_t *op, void *scalar, rcollDataType_t datatype,
                                                  rcollScalarResidence_t residence, rcollComm_t comm) {
  static const char fn[] = "rcollRedOpCreatePreMulSum";
  RCOLL_CHECK(rcoll_comm_check(comm, fn));
  if (op == NULL)
    return rcoll_error(rcollInvalidArgument, "%s: op is NULL", fn);
  if (scalar == NULL)
    return rcoll_error(rcollInvalidArgument, "%s: scalar is NULL", fn);
  if (datatype < 0 || datatype >= rcollNumTypes)
    return rcoll_error(rcollInvalidArgument, "%s: datatype %d is not an rcollDataType_t", fn, (int)datatype);
  if (residence != rcollScalarDevice && residence != rcollScalarHostImmediate)
    return rcoll_error(rcollInvalidArgument, "%s: residence %d is not an rcollScalarResidence_t", fn,
                       (int)residence);
  size_t tsize = rcoll_type_size(datatype);
  rcoll_mem_info_t mi;
  RCOLL_CHECK(rcoll_mem_query(scalar, tsize, &mi));
  if (mi.type != RCOLL_MEM_HOST)
    return rcoll_error(rcollInvalidUsage, "%s: scalar %p is device memory; rcoll takes host scalars only "
                       "(PreMulSum runs on host buffers)", fn, scalar);
  if (comm->user_ops == NULL && (comm->user_ops = calloc(RCOLL_MAX_USER_OPS, sizeof *comm->user_ops)) == NULL)
    return rcoll_error(rcollSystemError, "%s: out of memory", fn);
  int i = 0;
  while (i < RCOLL_MAX_USER_OPS && comm->user_ops[i].used)
    i++;
  if (i == RCOLL_MAX_USER_OPS)
    return rcoll_error(rcollInvalidUsage, "%s: the communicator already has %d ops; destroy some with "
                       "rcollRedOpDestroy", fn, RCOLL_MAX_USER_OPS);
  rcoll_user_op_t *u = &comm->user_ops[i];
  *u = (rcoll_user_op_t){1, datatype, residence, scalar, {0}};
  memcpy(u->scalar, scalar, tsize);
  *op = (rcollRedOp_t)(rcollNumOps + i);
  return rcollSuccess;
}

RCOLL_API rcollResult_t rcollRedOpDestroy(rcollRedOp_t op, rcollComm_t comm) {
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollRedOpDestroy"));
  if (op >= 0 && op < rcollNumOps)
    return rcoll_error(rcollInvalidArgument, "rcollRedOpDestroy: op %d is a built-in op", (int)op);
  rcoll_user_op_t *u = user_op(comm, op);
  if (u == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollRedOpDestroy: op %d was not made on this communicator "
                       "by rcollRedOpCreatePreMulSum (or is destroyed already)", (int)op);
  u->used = 0;
  return rcollSuccess;
}

rcollResult_t rcoll_redop_check(struct rcollComm *c, const char *fn, rcollRedOp_t op,
                                rcollDataType_t datatype) {
  if (op >= 0 && op < rcollNumOps)
    return rcollSuccess;
  const rcoll_user_op_t *u = user_op(c, op);
  if (u == NULL)
    return rcoll_error(rcollInvalidArgument, "%s: op %d is not an rcollRedOp_t nor an op made on this "
                       "communicator", fn, (int)op);
  if (u->type != datatype)
    return rcoll_error(rcollInvalidArgument, "%s: op %d was made for datatype %s, not %s", fn, (int)op,
                       rcoll_type_name(u->type), rcoll_type_name(datatype));
  return rcollSuccess;
}

/* Keeps buf until the plan is reset. */
static int keep(struct rcollComm *c, void *buf) {
  if (c->npremul == c->premul_cap) {
    int cap = c->premul_cap ? 2 * c->premul_cap : 8;
    void **b = realloc(c->premul_bufs, (size_t)cap * sizeof *b);
    if (b == NULL)
      return -1;
    c->premul_bufs = b;
    c->premul_cap = cap;
  }
  c->premul_bufs[c->npremul++] = buf;
  return 0;
}

/* NCCL 2.28.9 computes an fp8 avg as a PreMulSum by fp8(1/nranks)
 * (hostToDevRedOp in its enqueue.cc), not as a sum divided at the end: an fp8
 * sum saturates (448 in e4m3) long before the division could bring it back.
 * rcoll does the same on host buffers; its device kernels still sum and then
 * divide (rcoll_k_avg_e4m3). Returns whether the call is such an avg, with
 * the scalar in *scalar. */
static int fp8_avg_scalar(const rcoll_coll_args_t *a, int device, uint8_t *scalar) {
  if (a->op != rcollAvg || device >= 0 || a->nranks <= 0)
    return 0;
  float inv = (float)(1.0 / a->nranks);
  if (a->dtype == rcollFloat8e4m3)
    *scalar = rcoll_float_to_fp8(inv, 3, 7, 1);
  else if (a->dtype == rcollFloat8e5m2)
    *scalar = rcoll_float_to_fp8(inv, 2, 15, 0);
  else
    return 0;
  return 1;
}

rcollResult_t rcoll_redop_prepare(struct rcollComm *c, const char *fn, rcoll_coll_args_t *a, size_t elems,
                                  int device) {
  uint8_t avg_scalar;
  const void *scalar;
  if (fp8_avg_scalar(a, device, &avg_scalar)) {
    scalar = &avg_scalar;
  } else if (a->op >= 0 && a->op < rcollNumOps) {
    return rcollSuccess;
  } else if (device >= 0) {
    return rcoll_error(rcollInvalidUsage, "%s: PreMulSum ops run on host buffers only, and these are on "
                       "CUDA device %d", fn, device);
  } else {
    const rcoll_user_op_t *u = user_op(c, a->op);
    scalar = u->residence == rcollScalarDevice ? u->ptr : u->scalar;
  }
  size_t tsize = rcoll_type_size(a->dtype);
  char *buf = malloc(elems * tsize + 1);
  if (buf == NULL || keep(c, buf) != 0) {
    free(buf);
    return rcoll_error(rcollSystemError, "%s: out of memory for the scaled input (%zu bytes)", fn,
                       elems * tsize);
  }
  /* buf = scalar (x) sendbuff, element by element, with the type's own
   * multiplication (float16 and bfloat16 through float, as rcollProd). */
  for (size_t i = 0; i < elems; i++)
    memcpy(buf + i * tsize, scalar, tsize);
  rcoll_reduce(buf, a->sendbuff, buf, elems, a->dtype, rcollProd);
  a->sendbuff = buf;
  a->op = rcollSum;
  return rcollSuccess;
}

void rcoll_redop_release(struct rcollComm *c) {
  for (int i = 0; i < c->npremul; i++)
    free(c->premul_bufs[i]);
  c->npremul = 0;
}

void rcoll_redop_free(struct rcollComm *c) {
  rcoll_redop_release(c);
  free(c->premul_bufs);
  c->premul_bufs = NULL;
  c->premul_cap = 0;
  free(c->user_ops);
  c->user_ops = NULL;
}
