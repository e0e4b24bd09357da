/* Reduction ops made at run time: rcollRedOpCreatePreMulSum. Each rank's
 * input is multiplied by its scalar into a copy, which the call then sums
 * as rcollSum would (so every algorithm, deterministic or not, serves it
 * unchanged). The copies live until the plan that reads them is reset. */
#ifndef RCOLL_REDOP_H
#define RCOLL_REDOP_H

#include <stddef.h>

#include "algo.h"
#include "rcoll.h"

struct rcollComm;

#define RCOLL_MAX_USER_OPS 64

typedef struct rcoll_user_op {
  int used;
  rcollDataType_t type;
  rcollScalarResidence_t residence;
  const void *ptr;            /* the user's scalar (read at each call for rcollScalarDevice) */
  unsigned char scalar[8];    /* its value, for rcollScalarHostImmediate */
} rcoll_user_op_t;

/* Checks op for a call on datatype (fn names the call in errors): a
 * built-in op, or one made on this communicator for this datatype. */
rcollResult_t rcoll_redop_check(struct rcollComm *c, const char *fn, rcollRedOp_t op,
                                rcollDataType_t datatype);
/* For a made op, and for an fp8 avg on host buffers (by fp8(1/nranks), as
 * NCCL): replaces a->sendbuff by its scaled copy of `elems` elements and
 * a->op by rcollSum. Host buffers only (device >= 0 is
 * refused). Nothing for a built-in op. */
rcollResult_t rcoll_redop_prepare(struct rcollComm *c, const char *fn, rcoll_coll_args_t *a, size_t elems,
                                  int device);
/* Frees the scaled copies (the plan that read them was reset or freed). */
void rcoll_redop_release(struct rcollComm *c);
/* Frees the table of made ops (communicator destroyed). */
void rcoll_redop_free(struct rcollComm *c);

#endif
