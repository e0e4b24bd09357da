/* Element-wise reductions on host memory. Every (type, op) pair gets its own
 * plain indexed loop over the scalar math of reduce_math.h; the table lookup
 * happens once per call, so the loops contain no dispatch and the compiler
 * (this file is built with -O3) vectorizes them. */
#include "reduce.h"

#include "reduce_math.h"

typedef void (*rcoll_reduce_loop_t)(void *dst, const void *a, const void *b, size_t n);
typedef void (*rcoll_finish_loop_t)(void *buf, size_t n, int nranks);

static const struct {
  size_t size;
  const char *name;
} rcoll_types[rcollNumTypes] = {
    [rcollInt8] = {1, "int8"},       [rcollUint8] = {1, "uint8"},
    [rcollInt32] = {4, "int32"},     [rcollUint32] = {4, "uint32"},
    [rcollInt64] = {8, "int64"},     [rcollUint64] = {8, "uint64"},
    [rcollFloat16] = {2, "float16"}, [rcollBfloat16] = {2, "bfloat16"},
    [rcollFloat32] = {4, "float32"}, [rcollFloat64] = {8, "float64"},
};

static const char *const rcoll_op_names[rcollNumOps] = {
    [rcollSum] = "sum", [rcollProd] = "prod", [rcollMax] = "max",
    [rcollMin] = "min", [rcollAvg] = "avg",
};

size_t rcoll_type_size(rcollDataType_t t) {
  return (unsigned)t < rcollNumTypes ? rcoll_types[t].size : 0;
}

const char *rcoll_type_name(rcollDataType_t t) {
  return (unsigned)t < rcollNumTypes ? rcoll_types[t].name : "invalid";
}

const char *rcoll_op_name(rcollRedOp_t op) {
  return (unsigned)op < rcollNumOps ? rcoll_op_names[op] : "invalid";
}

/* No restrict: dst may be a or b. For this pattern (each element read before
 * it is written, at the same index) the vectorizer's runtime overlap check
 * accepts exact aliasing, so in-place calls take the vector path too. */
#define RCOLL_REDUCE_LOOP(op, sfx, T)                                                    \
  static void rcoll_loop_##op##_##sfx(void *dst, const void *a, const void *b,          \
                                      size_t n) {                                        \
    T *d = dst;                                                                          \
    const T *x = a, *y = b;                                                              \
    for (size_t i = 0; i < n; i++)                                                       \
      d[i] = rcoll_##op##_##sfx(x[i], y[i]);                                             \
  }

#define RCOLL_FINISH_LOOP(sfx, T)                                                        \
  static void rcoll_finish_avg_##sfx(void *buf, size_t n, int nranks) {                 \
    T *d = buf;                                                                          \
    for (size_t i = 0; i < n; i++)                                                       \
      d[i] = rcoll_avg_##sfx(d[i], nranks);                                              \
  }

#define RCOLL_TYPE_LOOPS(sfx, T)                                                         \
  RCOLL_REDUCE_LOOP(sum, sfx, T)                                                         \
  RCOLL_REDUCE_LOOP(prod, sfx, T)                                                        \
  RCOLL_REDUCE_LOOP(max, sfx, T)                                                         \
  RCOLL_REDUCE_LOOP(min, sfx, T)                                                         \
  RCOLL_FINISH_LOOP(sfx, T)

RCOLL_TYPE_LOOPS(i8, int8_t)
RCOLL_TYPE_LOOPS(u8, uint8_t)
RCOLL_TYPE_LOOPS(i32, int32_t)
RCOLL_TYPE_LOOPS(u32, uint32_t)
RCOLL_TYPE_LOOPS(i64, int64_t)
RCOLL_TYPE_LOOPS(u64, uint64_t)
RCOLL_TYPE_LOOPS(f16, uint16_t)
RCOLL_TYPE_LOOPS(bf16, uint16_t)
RCOLL_TYPE_LOOPS(f32, float)
RCOLL_TYPE_LOOPS(f64, double)

/* avg accumulates a sum; the division happens once, in rcoll_reduce_finish. */
#define RCOLL_TYPE_ROW(sfx)                                                              \
  {                                                                                      \
    [rcollSum] = rcoll_loop_sum_##sfx, [rcollProd] = rcoll_loop_prod_##sfx,              \
    [rcollMax] = rcoll_loop_max_##sfx, [rcollMin] = rcoll_loop_min_##sfx,                \
    [rcollAvg] = rcoll_loop_sum_##sfx,                                                   \
  }

static const rcoll_reduce_loop_t rcoll_reduce_loops[rcollNumTypes][rcollNumOps] = {
    [rcollInt8] = RCOLL_TYPE_ROW(i8),       [rcollUint8] = RCOLL_TYPE_ROW(u8),
    [rcollInt32] = RCOLL_TYPE_ROW(i32),     [rcollUint32] = RCOLL_TYPE_ROW(u32),
    [rcollInt64] = RCOLL_TYPE_ROW(i64),     [rcollUint64] = RCOLL_TYPE_ROW(u64),
    [rcollFloat16] = RCOLL_TYPE_ROW(f16),   [rcollBfloat16] = RCOLL_TYPE_ROW(bf16),
    [rcollFloat32] = RCOLL_TYPE_ROW(f32),   [rcollFloat64] = RCOLL_TYPE_ROW(f64),
};

static const rcoll_finish_loop_t rcoll_finish_loops[rcollNumTypes] = {
    [rcollInt8] = rcoll_finish_avg_i8,       [rcollUint8] = rcoll_finish_avg_u8,
    [rcollInt32] = rcoll_finish_avg_i32,     [rcollUint32] = rcoll_finish_avg_u32,
    [rcollInt64] = rcoll_finish_avg_i64,     [rcollUint64] = rcoll_finish_avg_u64,
    [rcollFloat16] = rcoll_finish_avg_f16,   [rcollBfloat16] = rcoll_finish_avg_bf16,
    [rcollFloat32] = rcoll_finish_avg_f32,   [rcollFloat64] = rcoll_finish_avg_f64,
};

/* Type and op were validated at the public entry; an invalid pair here is a
 * caller bug, and doing nothing is safer than indexing out of the tables. */
void rcoll_reduce(void *dst, const void *a, const void *b, size_t count, rcollDataType_t t,
                  rcollRedOp_t op) {
  if ((unsigned)t >= rcollNumTypes || (unsigned)op >= rcollNumOps || count == 0)
    return;
  rcoll_reduce_loops[t][op](dst, a, b, count);
}

void rcoll_reduce_finish(void *buf, size_t count, rcollDataType_t t, rcollRedOp_t op,
                         int nranks) {
  if (op != rcollAvg || (unsigned)t >= rcollNumTypes || nranks <= 0 || count == 0)
    return;
  rcoll_finish_loops[t](buf, count, nranks);
}
