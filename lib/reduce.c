/* Element-wise reductions on host memory. Every (type, op) pair gets its own
 * plain indexed loop over the scalar math of reduce_math.h; the table lookup
 * happens once per call, so the loops contain no dispatch and the compiler
 * (this file is built with -O3) vectorizes them. On x86-64 the loops are
 * also built for newer instruction sets, and float16 has F16C loops. */
#include "reduce.h"

#include <pthread.h>

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
    [rcollFloat8e4m3] = {1, "float8e4m3"}, [rcollFloat8e5m2] = {1, "float8e5m2"},
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

/* x86-64's baseline (SSE2) lacks the 32-to-16-bit packs, blends and 64-bit
 * compares and multiplies that these loops want, which makes float16 and
 * bfloat16 compute-bound at a quarter of memory speed. So each loop is also
 * built for x86-64-v3 (AVX2, F16C) and v4 (AVX-512), and the dynamic loader
 * picks one for this CPU once (GCC target_clones, an ifunc). Defining
 * RCOLL_REDUCE_NO_CLONES builds one variant only, so that tests can cover
 * each through -march. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && \
    __GNUC__ >= 11 && !defined(RCOLL_REDUCE_NO_CLONES)
#define RCOLL_REDUCE_X86 1
#include <immintrin.h>
#define RCOLL_REDUCE_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RCOLL_REDUCE_X86 0
#define RCOLL_REDUCE_CLONES
#endif

/* No restrict: dst may be a or b. For this pattern (each element read before
 * it is written, at the same index) the vectorizer's runtime overlap check
 * accepts exact aliasing, so in-place calls take the vector path too. */
#define RCOLL_REDUCE_LOOP(op, sfx, T)                                                    \
  RCOLL_REDUCE_CLONES static void rcoll_loop_##op##_##sfx(void *dst, const void *a,     \
                                                          const void *b, size_t n) {    \
    T *d = dst;                                                                          \
    const T *x = a, *y = b;                                                              \
    for (size_t i = 0; i < n; i++)                                                       \
      d[i] = rcoll_##op##_##sfx(x[i], y[i]);                                             \
  }

#define RCOLL_FINISH_LOOP(sfx, T)                                                        \
  RCOLL_REDUCE_CLONES static void rcoll_finish_avg_##sfx(void *buf, size_t n,          \
                                                         int nranks) {                  \
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

/* fp8 on the host. The scalar math of reduce_math.h (which the kernels use)
 * spends about 100 ns an element in branches. With 256 values per operand,
 * every result of an op is one entry of a 256 x 256 table: a loop then does
 * one load per element. The tables (64 KiB per format and op, 512 KiB in
 * all, filled on first use from the scalar functions, so that the two paths
 * agree by construction) live in zeroed memory that costs nothing until
 * then. tests/test_reduce.c checks these loops against a libm reference. */
enum { FP8_SUM, FP8_PROD, FP8_MAX, FP8_MIN, FP8_NOPS };

static uint8_t fp8_tab[2][FP8_NOPS][256 * 256]; /* [e5m2][op][a << 8 | b] */
static _Atomic int fp8_ready[2][FP8_NOPS];
static pthread_mutex_t fp8_lock = PTHREAD_MUTEX_INITIALIZER;

static uint8_t fp8_scalar(int e5m2, int op, uint8_t a, uint8_t b) {
  switch (op) {
  case FP8_SUM: return e5m2 ? rcoll_sum_e5m2(a, b) : rcoll_sum_e4m3(a, b);
  case FP8_PROD: return e5m2 ? rcoll_prod_e5m2(a, b) : rcoll_prod_e4m3(a, b);
  case FP8_MAX: return e5m2 ? rcoll_max_e5m2(a, b) : rcoll_max_e4m3(a, b);
  default: return e5m2 ? rcoll_min_e5m2(a, b) : rcoll_min_e4m3(a, b);
  }
}

static const uint8_t *fp8_table(int e5m2, int op) {
  if (!fp8_ready[e5m2][op]) {
    pthread_mutex_lock(&fp8_lock);
    if (!fp8_ready[e5m2][op]) {
      for (int a = 0; a < 256; a++)
        for (int b = 0; b < 256; b++)
          fp8_tab[e5m2][op][a << 8 | b] = fp8_scalar(e5m2, op, (uint8_t)a, (uint8_t)b);
      fp8_ready[e5m2][op] = 1;
    }
    pthread_mutex_unlock(&fp8_lock);
  }
  return fp8_tab[e5m2][op];
}

#define RCOLL_FP8_LOOP(op, OP, sfx, e5m2)                                                 \
  static void rcoll_loop_##op##_##sfx(void *dst, const void *a, const void *b, size_t n) { \
    const uint8_t *T = fp8_table(e5m2, OP);                                              \
    uint8_t *d = dst;                                                                    \
    const uint8_t *x = a, *y = b;                                                        \
    for (size_t i = 0; i < n; i++)                                                       \
      d[i] = T[(unsigned)x[i] << 8 | y[i]];                                              \
  }

/* The avg finish divides by a different nranks each time: no table. It
 * runs on device results copied back and in tests; a host avg of fp8 is a
 * PreMulSum (lib/redop.c). */
#define RCOLL_FP8_LOOPS(sfx, e5m2)                                                       \
  RCOLL_FP8_LOOP(sum, FP8_SUM, sfx, e5m2)                                                \
  RCOLL_FP8_LOOP(prod, FP8_PROD, sfx, e5m2)                                              \
  RCOLL_FP8_LOOP(max, FP8_MAX, sfx, e5m2)                                                \
  RCOLL_FP8_LOOP(min, FP8_MIN, sfx, e5m2)                                                \
  static void rcoll_finish_avg_##sfx(void *buf, size_t n, int nranks) {                  \
    uint8_t *d = buf;                                                                    \
    for (size_t i = 0; i < n; i++)                                                       \
      d[i] = rcoll_avg_##sfx(d[i], nranks);                                              \
  }

RCOLL_FP8_LOOPS(e4m3, 0)
RCOLL_FP8_LOOPS(e5m2, 1)

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
    [rcollFloat8e4m3] = RCOLL_TYPE_ROW(e4m3), [rcollFloat8e5m2] = RCOLL_TYPE_ROW(e5m2),
};

static const rcoll_finish_loop_t rcoll_finish_loops[rcollNumTypes] = {
    [rcollInt8] = rcoll_finish_avg_i8,       [rcollUint8] = rcoll_finish_avg_u8,
    [rcollInt32] = rcoll_finish_avg_i32,     [rcollUint32] = rcoll_finish_avg_u32,
    [rcollInt64] = rcoll_finish_avg_i64,     [rcollUint64] = rcoll_finish_avg_u64,
    [rcollFloat16] = rcoll_finish_avg_f16,   [rcollBfloat16] = rcoll_finish_avg_bf16,
    [rcollFloat32] = rcoll_finish_avg_f32,   [rcollFloat64] = rcoll_finish_avg_f64,
    [rcollFloat8e4m3] = rcoll_finish_avg_e4m3, [rcollFloat8e5m2] = rcoll_finish_avg_e5m2,
};

#if RCOLL_REDUCE_X86
/* The vectorizer does not turn the bit-level float16 conversion into the
 * F16C instructions that x86-64-v3 CPUs have, and even with AVX-512 the
 * portable code leaves float16 compute-bound at a quarter of memory speed. So
 * float16 gets hand-written loops, eight elements a step, over F16C.
 * vcvtps2ph with round-to-nearest-even gives the bits rcoll_float_to_half
 * gives, NaN included (quiet, top payload bits kept); the tails use the
 * portable math. */
#define RCOLL_F16C_FN __attribute__((target("avx2,f16c"))) static inline

RCOLL_F16C_FN __m256 rcoll_f16c_load(const uint16_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

RCOLL_F16C_FN void rcoll_f16c_store(uint16_t *p, __m256 v) {
  __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  _mm_storeu_si128((__m128i *)p, h);
}

RCOLL_F16C_FN __m256 rcoll_f16c_sum(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
RCOLL_F16C_FN __m256 rcoll_f16c_prod(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }

/* The selection of rcoll_max_f32: a where a > b or a is NaN; where they
 * are equal (+0 and -0 differ in sign only) their AND; else b. */
RCOLL_F16C_FN __m256 rcoll_f16c_max(__m256 a, __m256 b) {
  __m256 take_a = _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  __m256 other = _mm256_blendv_ps(b, _mm256_and_ps(a, b), _mm256_cmp_ps(a, b, _CMP_EQ_OQ));
  return _mm256_blendv_ps(other, a, take_a);
}

/* rcoll_min_f32's: as max, with OR where they are equal. */
RCOLL_F16C_FN __m256 rcoll_f16c_min(__m256 a, __m256 b) {
  __m256 take_a = _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  __m256 other = _mm256_blendv_ps(b, _mm256_or_ps(a, b), _mm256_cmp_ps(a, b, _CMP_EQ_OQ));
  return _mm256_blendv_ps(other, a, take_a);
}

/* Each step loads both inputs before it stores, so dst == a or b is safe. */
#define RCOLL_F16C_LOOP(op)                                                              \
  __attribute__((target("avx2,f16c"))) static void rcoll_f16c_loop_##op(                 \
      void *dst, const void *a, const void *b, size_t n) {                               \
    uint16_t *d = dst;                                                                   \
    const uint16_t *x = a, *y = b;                                                       \
    size_t i = 0;                                                                        \
    for (; i + 8 <= n; i += 8)                                                           \
      rcoll_f16c_store(d + i, rcoll_f16c_##op(rcoll_f16c_load(x + i), rcoll_f16c_load(y + i))); \
    for (; i < n; i++)                                                                   \
      d[i] = rcoll_##op##_f16(x[i], y[i]);                                               \
  }

RCOLL_F16C_LOOP(sum)
RCOLL_F16C_LOOP(prod)
RCOLL_F16C_LOOP(max)
RCOLL_F16C_LOOP(min)

__attribute__((target("avx2,f16c"))) static void rcoll_f16c_finish_avg(void *buf, size_t n,
                                                                       int nranks) {
  uint16_t *d = buf;
  __m256 div = _mm256_set1_ps((float)nranks);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    rcoll_f16c_store(d + i, _mm256_div_ps(rcoll_f16c_load(d + i), div));
  for (; i < n; i++)
    d[i] = rcoll_avg_f16(d[i], nranks);
}

static const rcoll_reduce_loop_t rcoll_f16c_loops[rcollNumOps] = {
    [rcollSum] = rcoll_f16c_loop_sum, [rcollProd] = rcoll_f16c_loop_prod,
    [rcollMax] = rcoll_f16c_loop_max, [rcollMin] = rcoll_f16c_loop_min,
    [rcollAvg] = rcoll_f16c_loop_sum,
};

/* libgcc reads the CPU features once, in a constructor; this is two loads. */
static int rcoll_have_f16c(void) {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}
#endif

/* Type and op were validated at the public entry; an invalid pair here is a
 * caller bug, and doing nothing is safer than indexing out of the tables. */
void rcoll_reduce(void *dst, const void *a, const void *b, size_t count, rcollDataType_t t,
                  rcollRedOp_t op) {
  if ((unsigned)t >= rcollNumTypes || (unsigned)op >= rcollNumOps || count == 0)
    return;
#if RCOLL_REDUCE_X86
  if (t == rcollFloat16 && rcoll_have_f16c()) {
    rcoll_f16c_loops[op](dst, a, b, count);
    return;
  }
#endif
  rcoll_reduce_loops[t][op](dst, a, b, count);
}

void rcoll_reduce_finish(void *buf, size_t count, rcollDataType_t t, rcollRedOp_t op,
                         int nranks) {
  if (op != rcollAvg || (unsigned)t >= rcollNumTypes || nranks <= 0 || count == 0)
    return;
#if RCOLL_REDUCE_X86
  if (t == rcollFloat16 && rcoll_have_f16c()) {
    rcoll_f16c_finish_avg(buf, count, nranks);
    return;
  }
#endif
  rcoll_finish_loops[t](buf, count, nranks);
}
