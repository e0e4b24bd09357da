/* Element-wise reductions on host memory for every type and op. The scalar
 * math (including float16/bfloat16 conversion) lives in reduce_math.h, a header
 * usable from host and CUDA code, so the CPU tests cover what kernels run. */
#ifndef RCOLL_REDUCE_H
#define RCOLL_REDUCE_H

#include <stddef.h>

#include "rcoll.h"

/* Size in bytes of one element; 0 for an invalid type. */
size_t rcoll_type_size(rcollDataType_t t);
const char *rcoll_type_name(rcollDataType_t t); /* "float32", ... or "invalid" */
const char *rcoll_op_name(rcollRedOp_t op);     /* "sum", ... or "invalid" */

/* dst[i] = a[i] (op) b[i] for i < count. dst may alias a or b. For avg this
 * is the sum; rcoll_reduce_finish divides at the end. min/max propagate NaN
 * (a NaN operand gives NaN). */
void rcoll_reduce(void *dst, const void *a, const void *b, size_t count, rcollDataType_t t,
                  rcollRedOp_t op);

/* Post-processing once all nranks contributions are summed: for avg divides
 * by nranks (integer division for integer types, rounding to nearest for
 * floating types); nothing for the other ops. */
void rcoll_reduce_finish(void *buf, size_t count, rcollDataType_t t, rcollRedOp_t op, int nranks);

#endif
