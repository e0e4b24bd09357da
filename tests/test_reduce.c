/* Host reductions (lib/reduce.c) over every type and op, and the avg finish.
 *
 * Expected values never come from the code under test: conversions are
 * checked against literal bit patterns and against a reference built on libm
 * (frexp, ldexp, nearbyint in double); reductions against integer arithmetic
 * in 64 bits and floating arithmetic in double, rounded once to the element
 * type. Rounding a double result to float16/bfloat16/float32 gives the
 * correctly rounded + * / because double has more than twice their
 * precision plus two bits, so the two roundings agree exactly.
 *
 * The conversions themselves are tests/test_reduce_math.c; the reference
 * codec both use is tests/reduce_ref.h.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"
#include "reduce_math.h"
#include "reduce_ref.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

/* ---- type table ---- */

Test(reduce, type_sizes_and_names) {
  static const struct {
    rcollDataType_t t;
    size_t size;
    const char *name;
  } types[] = {
      {rcollInt8, 1, "int8"},       {rcollUint8, 1, "uint8"},     {rcollInt32, 4, "int32"},
      {rcollUint32, 4, "uint32"},   {rcollInt64, 8, "int64"},     {rcollUint64, 8, "uint64"},
      {rcollFloat16, 2, "float16"}, {rcollBfloat16, 2, "bfloat16"},
      {rcollFloat32, 4, "float32"}, {rcollFloat64, 8, "float64"},
      {rcollFloat8e4m3, 1, "float8e4m3"}, {rcollFloat8e5m2, 1, "float8e5m2"},
  };
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    cr_expect_eq(rcoll_type_size(types[i].t), types[i].size, "size of %s", types[i].name);
    cr_expect_str_eq(rcoll_type_name(types[i].t), types[i].name);
  }
  rcollDataType_t bad[] = {rcollNumTypes, (rcollDataType_t)-1, (rcollDataType_t)100};
  for (size_t i = 0; i < 3; i++) {
    cr_expect_eq(rcoll_type_size(bad[i]), 0);
    cr_expect_str_eq(rcoll_type_name(bad[i]), "invalid");
  }
  const char *ops[] = {"sum", "prod", "max", "min", "avg"};
  for (int op = 0; op < rcollNumOps; op++)
    cr_expect_str_eq(rcoll_op_name((rcollRedOp_t)op), ops[op]);
  cr_expect_str_eq(rcoll_op_name(rcollNumOps), "invalid");
  cr_expect_str_eq(rcoll_op_name((rcollRedOp_t)-1), "invalid");
}

/* ---- reference element arithmetic ---- */

static int is_float(rcollDataType_t t) {
  return t == rcollFloat16 || t == rcollBfloat16 || t == rcollFloat32 || t == rcollFloat64 ||
         t == rcollFloat8e4m3 || t == rcollFloat8e5m2;
}

static int is_signed(rcollDataType_t t) {
  return t == rcollInt8 || t == rcollInt32 || t == rcollInt64;
}

/* Integers travel as their low bytes in a uint64 (the machine is little
 * endian, checked in the sweep); modular arithmetic on uint64 then keeping
 * the low bytes is exactly two's complement wrap-around at any width. */
static uint64_t load_u(const void *p, size_t size) {
  uint64_t v = 0;
  memcpy(&v, p, size);
  return v;
}

static int64_t load_s(const void *p, size_t size) {
  int shift = 64 - 8 * (int)size;
  return (int64_t)(load_u(p, size) << shift) >> shift;
}

static double load_d(const void *p, rcollDataType_t t) {
  uint16_t h;
  switch (t) {
  case rcollFloat16: memcpy(&h, p, 2); return ref_decode(h, fmt_half);
  case rcollBfloat16: memcpy(&h, p, 2); return ref_decode(h, fmt_bf16);
  case rcollFloat8e4m3: return ref_fp8_decode(*(const uint8_t *)p, 1);
  case rcollFloat8e5m2: return ref_fp8_decode(*(const uint8_t *)p, 0);
  case rcollFloat32: { float f; memcpy(&f, p, 4); return f; }
  default: { double d; memcpy(&d, p, 8); return d; }
  }
}

static void store_d(void *p, rcollDataType_t t, double v) {
  uint16_t h;
  switch (t) {
  case rcollFloat16: h = ref_encode(v, fmt_half); memcpy(p, &h, 2); break;
  case rcollBfloat16: h = ref_encode(v, fmt_bf16); memcpy(p, &h, 2); break;
  /* fp8 results are computed in half, as NCCL does: round to half, then to fp8. */
  case rcollFloat8e4m3: *(uint8_t *)p = ref_fp8_encode(ref_decode(ref_encode(v, fmt_half), fmt_half), 1); break;
  case rcollFloat8e5m2: *(uint8_t *)p = ref_fp8_encode(ref_decode(ref_encode(v, fmt_half), fmt_half), 0); break;
  case rcollFloat32: { float f = (float)v; memcpy(p, &f, 4); break; }
  default: memcpy(p, &v, 8); break;
  }
}

static void ref_int(rcollDataType_t t, rcollRedOp_t op, const void *a, const void *b, void *out) {
  size_t size = rcoll_type_size(t);
  uint64_t ua = load_u(a, size), ub = load_u(b, size), r;
  int a_gt = is_signed(t) ? load_s(a, size) > load_s(b, size) : ua > ub;
  switch (op) {
  case rcollProd: r = ua * ub; break;
  case rcollMax: r = a_gt ? ua : ub; break;
  case rcollMin: r = a_gt ? ub : ua; break;
  default: r = ua + ub; break;
  }
  memcpy(out, &r, size);
}

static void ref_float(rcollDataType_t t, rcollRedOp_t op, const void *a, const void *b,
                      void *out) {
  double x = load_d(a, t), y = load_d(b, t), r;
  switch (op) {
  case rcollProd: r = x * y; break;
  case rcollMax: r = isnan(x) || isnan(y) ? NAN : (x > y ? x : y); break;
  case rcollMin: r = isnan(x) || isnan(y) ? NAN : (x < y ? x : y); break;
  default: r = x + y; break;
  }
  store_d(out, t, r);
}

static void ref_reduce(rcollDataType_t t, rcollRedOp_t op, const void *a, const void *b,
                       void *out) {
  (is_float(t) ? ref_float : ref_int)(t, op, a, b, out);
}

/* Equal bits, except: any NaN matches any NaN, and for max/min of two equal
 * values (+0 and -0) either operand is a right answer. */
static int same_value(rcollDataType_t t, rcollRedOp_t op, const void *got, const void *want) {
  size_t size = rcoll_type_size(t);
  if (memcmp(got, want, size) == 0)
    return 1;
  if (!is_float(t))
    return 0;
  double g = load_d(got, t), w = load_d(want, t);
  if (isnan(w))
    return isnan(g);
  return (op == rcollMax || op == rcollMin) && g == w;
}

/* ---- random inputs ---- */

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Integers, 16-bit and 8-bit floats: uniformly random bits, which covers wrap,
 * subnormals, inf and NaN. Wider floats: mostly values of moderate
 * magnitude (so sums are not dominated by one side), some raw bit patterns. */
static void fill_random(void *buf, size_t count, rcollDataType_t t, uint64_t *s) {
  size_t size = rcoll_type_size(t);
  for (size_t i = 0; i < count; i++) {
    uint64_t r = rng_next(s);
    char *p = (char *)buf + i * size;
    if ((t == rcollFloat32 || t == rcollFloat64) && (r & 7) != 0) {
      double m = (double)(r >> 11) * 0x1p-53 + 1.0;
      int e = (int)((r >> 3) & 31) - 16;
      store_d(p, t, (r & 0x100) ? -ldexp(m, e) : ldexp(m, e));
    } else {
      memcpy(p, &r, size);
    }
  }
}

/* ---- rcoll_reduce against the reference, every type x op ---- */

enum alias_mode { OUT_OF_PLACE, DST_IS_A, DST_IS_B, ALL_SAME };
static const char *const mode_names[] = {"out-of-place", "dst==a", "dst==b", "dst==a==b"};

#define GUARD 16
#define GUARD_BYTE 0xa5

/* One case: buffers start `off` elements past a 64-byte boundary (so loads
 * are not vector aligned), dst is followed by guard elements that must
 * stay untouched. */
static void check_case(rcollDataType_t t, rcollRedOp_t op, size_t count, size_t off,
                       enum alias_mode mode, uint64_t *seed) {
  size_t size = rcoll_type_size(t), bytes = ((count + off + GUARD) * size + 63) / 64 * 64;
  char *abuf = aligned_alloc(64, bytes), *bbuf = aligned_alloc(64, bytes);
  char *dbuf = aligned_alloc(64, bytes), *want = malloc(count * size + 1);
  char *a = abuf + off * size, *b = bbuf + (off + 1) % 4 * size, *dst = dbuf + off * size;
  fill_random(a, count, t, seed);
  fill_random(b, count, t, seed);
  if (mode == ALL_SAME)
    b = a;
  for (size_t i = 0; i < count; i++)
    ref_reduce(t, op, a + i * size, b + i * size, want + i * size);
  memset(dbuf, GUARD_BYTE, bytes);
  if (mode != OUT_OF_PLACE)
    memcpy(dst, mode == DST_IS_B ? b : a, count * size);
  const void *x = mode == OUT_OF_PLACE || mode == DST_IS_B ? a : dst;
  const void *y = mode == OUT_OF_PLACE || mode == DST_IS_A ? b : dst;
  rcoll_reduce(dst, x, y, count, t, op);
  for (size_t i = 0; i < count; i++)
    cr_assert(same_value(t, op, dst + i * size, want + i * size),
              "%s %s count=%zu off=%zu %s: element %zu differs", rcoll_type_name(t),
              rcoll_op_name(op), count, off, mode_names[mode], i);
  for (size_t i = count * size; i < (count + GUARD) * size; i++)
    cr_assert_eq((unsigned char)dst[i], GUARD_BYTE, "%s %s count=%zu: wrote past the end",
                 rcoll_type_name(t), rcoll_op_name(op), count);
  free(abuf), free(bbuf), free(dbuf), free(want);
}

static void sweep_type(rcollDataType_t t) {
  static const size_t counts[] = {0, 1, 2, 7, 31, 1001, 4099};
  uint64_t seed = 0x9e3779b97f4a7c15ull + (uint64_t)t;
  uint16_t one = 1;
  cr_assert_eq(*(unsigned char *)&one, 1, "the reference assumes little endian");
  for (int op = 0; op < rcollNumOps; op++)
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
      for (size_t off = 0; off < 3; off++)
        for (int mode = 0; mode < 4; mode++)
          check_case(t, (rcollRedOp_t)op, counts[c], off, (enum alias_mode)mode, &seed);
}

#define SWEEP_TEST(type)                                                                 \
  Test(reduce_sweep, type) { sweep_type(rcoll##type); }
SWEEP_TEST(Int8) SWEEP_TEST(Uint8) SWEEP_TEST(Int32) SWEEP_TEST(Uint32) SWEEP_TEST(Int64)
SWEEP_TEST(Uint64) SWEEP_TEST(Float16) SWEEP_TEST(Bfloat16) SWEEP_TEST(Float32)
SWEEP_TEST(Float64) SWEEP_TEST(Float8e4m3) SWEEP_TEST(Float8e5m2)

/* ---- specific behaviours, spelled out ---- */

Test(reduce, zero_count_and_invalid_arguments_touch_nothing) {
  unsigned char dst[16], a[16] = {1}, b[16] = {2};
  memset(dst, GUARD_BYTE, sizeof dst);
  for (int t = 0; t < rcollNumTypes; t++)
    for (int op = 0; op < rcollNumOps; op++) {
      rcoll_reduce(NULL, NULL, NULL, 0, (rcollDataType_t)t, (rcollRedOp_t)op);
      rcoll_reduce(dst, a, b, 0, (rcollDataType_t)t, (rcollRedOp_t)op);
      rcoll_reduce_finish(dst, 0, (rcollDataType_t)t, rcollAvg, 3);
    }
  rcoll_reduce(dst, a, b, 1, rcollNumTypes, rcollSum);
  rcoll_reduce(dst, a, b, 1, rcollInt8, rcollNumOps);
  rcoll_reduce_finish(dst, 1, rcollNumTypes, rcollAvg, 2);
  for (size_t i = 0; i < sizeof dst; i++)
    cr_assert_eq(dst[i], GUARD_BYTE);
}

Test(reduce, integer_wrap_around) {
  int8_t i8a[] = {127, -128, 16, -128}, i8b[] = {1, -1, 16, -1}, i8[4];
  rcoll_reduce(i8, i8a, i8b, 4, rcollInt8, rcollSum);
  cr_expect(i8[0] == -128 && i8[1] == 127);
  rcoll_reduce(i8, i8a, i8b, 4, rcollInt8, rcollProd);
  cr_expect(i8[2] == 0 && i8[3] == -128, "16*16 wraps to 0, -128*-1 to -128");
  uint8_t u8a[] = {255, 16}, u8b[] = {1, 17}, u8[2];
  rcoll_reduce(u8, u8a, u8b, 2, rcollUint8, rcollSum);
  cr_expect(u8[0] == 0 && u8[1] == 33);
  rcoll_reduce(u8, u8a, u8b, 2, rcollUint8, rcollProd);
  cr_expect(u8[0] == 255 && u8[1] == 16, "16*17 = 272 wraps to 16");
  int32_t i32a[] = {INT32_MAX, 65536}, i32b[] = {1, 65536}, i32[2];
  rcoll_reduce(i32, i32a, i32b, 2, rcollInt32, rcollSum);
  cr_expect_eq(i32[0], INT32_MIN);
  rcoll_reduce(i32, i32a, i32b, 2, rcollInt32, rcollProd);
  cr_expect_eq(i32[1], 0);
  uint32_t u32a[] = {UINT32_MAX, 0x10000}, u32b[] = {2, 0x10001}, u32[2];
  rcoll_reduce(u32, u32a, u32b, 2, rcollUint32, rcollSum);
  cr_expect_eq(u32[0], 1);
  rcoll_reduce(u32, u32a, u32b, 2, rcollUint32, rcollProd);
  cr_expect_eq(u32[1], 0x10000);
  int64_t i64a[] = {INT64_MAX, INT64_MIN}, i64b[] = {1, -1}, i64[2];
  rcoll_reduce(i64, i64a, i64b, 2, rcollInt64, rcollSum);
  cr_expect(i64[0] == INT64_MIN && i64[1] == INT64_MAX);
  rcoll_reduce(i64, i64a, i64b, 2, rcollInt64, rcollProd);
  cr_expect_eq(i64[1], INT64_MIN, "INT64_MIN * -1 wraps to itself");
  uint64_t u64a[] = {UINT64_MAX, 1ull << 32}, u64b[] = {1, 1ull << 32}, u64[2];
  rcoll_reduce(u64, u64a, u64b, 2, rcollUint64, rcollSum);
  cr_expect_eq(u64[0], 0);
  rcoll_reduce(u64, u64a, u64b, 2, rcollUint64, rcollProd);
  cr_expect_eq(u64[1], 0);
}

/* Values for max/min with NaN and inf, in a type-neutral table; each row
 * is a, b, max, min as indices into the type's constants below. */
enum { V_NAN, V_NNAN, V_SNAN, V_INF, V_NINF, V_ONE, V_TWO, V_MTHREE, V_COUNT };
static const int nan_rows[][4] = {
    {V_NAN, V_ONE, V_NAN, V_NAN},     {V_ONE, V_NAN, V_NAN, V_NAN},
    {V_NAN, V_NAN, V_NAN, V_NAN},     {V_NNAN, V_TWO, V_NAN, V_NAN},
    {V_TWO, V_SNAN, V_NAN, V_NAN},    {V_NAN, V_INF, V_NAN, V_NAN},
    {V_NINF, V_NAN, V_NAN, V_NAN},    {V_INF, V_ONE, V_INF, V_ONE},
    {V_NINF, V_ONE, V_ONE, V_NINF},   {V_INF, V_NINF, V_INF, V_NINF},
    {V_TWO, V_MTHREE, V_TWO, V_MTHREE}, {V_MTHREE, V_TWO, V_TWO, V_MTHREE},
};

static void check_nan_minmax(rcollDataType_t t, const void *vals) {
  size_t n = sizeof nan_rows / sizeof nan_rows[0], size = rcoll_type_size(t);
  char a[16 * 8], b[16 * 8], got[16 * 8];
  for (size_t i = 0; i < n; i++) {
    memcpy(a + i * size, (const char *)vals + nan_rows[i][0] * size, size);
    memcpy(b + i * size, (const char *)vals + nan_rows[i][1] * size, size);
  }
  for (int k = 0; k < 2; k++) {
    rcollRedOp_t op = k ? rcollMin : rcollMax;
    rcoll_reduce(got, a, b, n, t, op);
    for (size_t i = 0; i < n; i++) {
      const char *want = (const char *)vals + nan_rows[i][2 + k] * size;
      cr_expect(same_value(t, op, got + i * size, want), "%s %s row %zu", rcoll_type_name(t),
                rcoll_op_name(op), i);
    }
  }
}

Test(reduce, minmax_nan_and_inf) {
  uint16_t half[V_COUNT] = {0x7e00, 0xfe00, 0x7c01, 0x7c00, 0xfc00, 0x3c00, 0x4000, 0xc200};
  uint16_t bf16[V_COUNT] = {0x7fc0, 0xffc0, 0x7f81, 0x7f80, 0xff80, 0x3f80, 0x4000, 0xc040};
  float f32[V_COUNT] = {NAN, -NAN, bits_f(0x7f800001u), INFINITY, -INFINITY, 1, 2, -3};
  double f64[V_COUNT] = {NAN, -NAN, NAN, INFINITY, -INFINITY, 1, 2, -3};
  check_nan_minmax(rcollFloat16, half);
  check_nan_minmax(rcollBfloat16, bf16);
  check_nan_minmax(rcollFloat32, f32);
  check_nan_minmax(rcollFloat64, f64);
}

/* Of +0 and -0, max gives +0 and min -0 whichever comes first: recursive
 * doubling reduces a pair on both of its ranks in opposite orders, and the
 * ranks must end with the same bits. Every floating type, 19 elements so
 * that both the vector loops and their tails see both orders. */
Test(reduce, minmax_signed_zeros_whatever_the_order) {
  static const struct { rcollDataType_t t; uint64_t pos, neg; } types[] = {
      {rcollFloat16, 0, 0x8000},        {rcollBfloat16, 0, 0x8000},
      {rcollFloat32, 0, 0x80000000u},   {rcollFloat64, 0, 0x8000000000000000ull},
      {rcollFloat8e4m3, 0, 0x80},       {rcollFloat8e5m2, 0, 0x80},
  };
  enum { N = 19 };
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
    rcollDataType_t t = types[k].t;
    size_t size = rcoll_type_size(t);
    char a[N * 8], b[N * 8], got[N * 8];
    for (int i = 0; i < N; i++) { /* (a, b) = (+0, -0) at even i, (-0, +0) at odd i */
      memcpy(a + i * size, i % 2 ? &types[k].neg : &types[k].pos, size);
      memcpy(b + i * size, i % 2 ? &types[k].pos : &types[k].neg, size);
    }
    for (int m = 0; m < 2; m++) {
      rcollRedOp_t op = m ? rcollMin : rcollMax;
      rcoll_reduce(got, a, b, N, t, op);
      for (int i = 0; i < N; i++)
        cr_expect(memcmp(got + i * size, m ? &types[k].neg : &types[k].pos, size) == 0,
                  "%s %s of %s0 and %s0 (element %d) is not %s0", rcoll_type_name(t),
                  rcoll_op_name(op), i % 2 ? "-" : "+", i % 2 ? "+" : "-", i, m ? "-" : "+");
    }
    memcpy(b, a, N * size); /* two equal zeros keep their sign */
    rcoll_reduce(got, a, b, N, t, rcollMax);
    cr_expect(memcmp(got, a, N * size) == 0, "%s max of equal zeros", rcoll_type_name(t));
  }
}

Test(reduce, narrow_sum_rounds_once_and_overflows) {
  uint16_t a[] = {0x7bff, 0x3c00, 0x3c00, 0x7c00}, b[] = {0x5000, 0x1400, 0x1000, 0xfc00};
  uint16_t got[4];
  rcoll_reduce(got, a, b, 4, rcollFloat16, rcollSum);
  cr_expect_eq(got[0], 0x7c00, "65504 + 32 = 65536 overflows to inf");
  cr_expect_eq(got[1], 0x3c01, "1 + 2^-10 is exact");
  cr_expect_eq(got[2], 0x3c00, "1 + 2^-11 ties to even (1)");
  cr_expect(narrow_is_nan(got[3], fmt_half), "inf + -inf is NaN");
}

#if defined(__x86_64__)
/* Some frameworks run with denormals flushed (MXCSR FTZ and DAZ). float16
 * subnormals are normal floats, so float16 results must not change; this
 * pins both the portable conversion and any hardware path. Criterion runs
 * each test in its own process, so the mode does not leak. */
Test(reduce, float16_ignores_denormal_flush_modes) {
  enum { N = 19 }; /* two vector steps of 8 and a tail */
  uint16_t a[N], b[N], got[N], want[N];
  for (int i = 0; i < N; i++) {
    a[i] = (uint16_t)((i % 3 == 0 ? 0x8000 : 0) | (1 + 53 * i));  /* subnormals */
    b[i] = (uint16_t)(i % 2 ? 0x0001 + 97 * i : 0x0400 + 31 * i); /* and small normals */
  }
  _mm_setcsr(_mm_getcsr() | 0x8040);
  for (int op = 0; op < rcollNumOps; op++) {
    rcoll_reduce(got, a, b, N, rcollFloat16, (rcollRedOp_t)op);
    for (int i = 0; i < N; i++) {
      ref_reduce(rcollFloat16, (rcollRedOp_t)op, &a[i], &b[i], &want[i]);
      cr_assert(same_value(rcollFloat16, (rcollRedOp_t)op, &got[i], &want[i]),
                "%s element %d: 0x%04x, want 0x%04x", rcoll_op_name((rcollRedOp_t)op), i,
                got[i], want[i]);
    }
  }
  memcpy(got, a, sizeof a);
  rcoll_reduce_finish(got, N, rcollFloat16, rcollAvg, 3);
  for (int i = 0; i < N; i++)
    cr_assert_eq(got[i], ref_encode(ref_decode(a[i], fmt_half) / 3, fmt_half), "avg %d", i);
}
#endif

/* ---- avg finish ---- */

Test(reduce, avg_finish_known_values) {
  int32_t i32[] = {7, -7, 9, INT32_MIN};
  rcoll_reduce_finish(i32, 4, rcollInt32, rcollAvg, 2);
  cr_expect(i32[0] == 3 && i32[1] == -3 && i32[2] == 4 && i32[3] == INT32_MIN / 2,
            "C division truncates toward zero");
  int8_t i8[] = {-128, 127};
  rcoll_reduce_finish(i8, 2, rcollInt8, rcollAvg, 3);
  cr_expect(i8[0] == -42 && i8[1] == 42);
  uint8_t u8[] = {255, 255};
  rcoll_reduce_finish(u8, 1, rcollUint8, rcollAvg, 4);
  rcoll_reduce_finish(u8 + 1, 1, rcollUint8, rcollAvg, 300);
  cr_expect(u8[0] == 63 && u8[1] == 0, "a divisor above 255 must not be truncated");
  uint64_t u64[] = {UINT64_MAX};
  rcoll_reduce_finish(u64, 1, rcollUint64, rcollAvg, 3);
  cr_expect_eq(u64[0], UINT64_MAX / 3);
  uint16_t h[] = {0x3c00}, bf[] = {0x3f80};
  rcoll_reduce_finish(h, 1, rcollFloat16, rcollAvg, 3);
  rcoll_reduce_finish(bf, 1, rcollBfloat16, rcollAvg, 3);
  cr_expect_eq(h[0], 0x3555, "1/3 in half");
  cr_expect_eq(bf[0], 0x3eab, "1/3 in bfloat16");
  float f[] = {1.0f};
  rcoll_reduce_finish(f, 1, rcollFloat32, rcollAvg, 3);
  cr_expect_eq(f[0], 1.0f / 3.0f);
  int32_t keep[] = {9};
  rcoll_reduce_finish(keep, 1, rcollInt32, rcollSum, 2);
  rcoll_reduce_finish(keep, 1, rcollInt32, rcollAvg, 0);
  cr_expect_eq(keep[0], 9, "finish changes only avg, and ignores nranks <= 0");
}

static void ref_avg(rcollDataType_t t, const void *in, int nranks, void *out) {
  size_t size = rcoll_type_size(t);
  if (is_float(t)) {
    store_d(out, t, load_d(in, t) / nranks);
  } else {
    uint64_t r = is_signed(t) ? (uint64_t)(load_s(in, size) / nranks)
                              : load_u(in, size) / (uint64_t)nranks;
    memcpy(out, &r, size);
  }
}

Test(reduce, avg_finish_sweep) {
  static const int nranks[] = {1, 2, 3, 7, 8, 300};
  uint64_t seed = 12345;
  char in[1003 * 8], got[1003 * 8], want[8];
  for (int t = 0; t < rcollNumTypes; t++) {
    size_t size = rcoll_type_size((rcollDataType_t)t);
    for (size_t k = 0; k < sizeof nranks / sizeof nranks[0]; k++) {
      fill_random(in, 1003, (rcollDataType_t)t, &seed);
      memcpy(got, in, sizeof got);
      rcoll_reduce_finish(got + size, 1002, (rcollDataType_t)t, rcollAvg, nranks[k]);
      for (size_t i = 1; i < 1003; i++) {
        ref_avg((rcollDataType_t)t, in + i * size, nranks[k], want);
        cr_assert(same_value((rcollDataType_t)t, rcollAvg, got + i * size, want),
                  "%s avg / %d element %zu", rcoll_type_name((rcollDataType_t)t), nranks[k], i);
      }
    }
  }
}
