/* Reference arithmetic for the conformance sweep (conformance_ref.h).
 *
 * Everything here is computed independently of the library: inputs are
 * generated from a hash of (case seed, rank, index), every element is handled
 * as its raw bit pattern in a uint64_t, and the expected result of a reduction
 * is computed with plain C arithmetic. Floating inputs are small integers
 * (prod: 1, 2 or -1), so sums and products are exact in every floating type and
 * results compare bit for bit; only avg rounds, and for float16/bfloat16 that
 * rounding uses the converters below, written with frexp/rint rather than the
 * library's bit tricks. */
#include "conformance_ref.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

const char *const ref_type_names[rcollNumTypes] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16",
    "float8e4m3", "float8e5m2"};
const char *const ref_op_names[rcollNumOps] = {"sum", "prod", "max", "min", "avg"};

size_t ref_type_size(rcollDataType_t t) {
  static const size_t sizes[rcollNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return sizes[t];
}

static int ref_is_fp8(rcollDataType_t t) {
  return t == rcollFloat8e4m3 || t == rcollFloat8e5m2;
}

static int ref_is_float(rcollDataType_t t) {
  return t == rcollFloat16 || t == rcollBfloat16 || t == rcollFloat32 || t == rcollFloat64 ||
         ref_is_fp8(t);
}

static int ref_is_signed(rcollDataType_t t) {
  return t == rcollInt8 || t == rcollInt32 || t == rcollInt64;
}

static uint64_t ref_mask(rcollDataType_t t) {
  size_t bits = 8 * ref_type_size(t);
  return bits == 64 ? ~0ull : (1ull << bits) - 1;
}

/* Two's-complement reading of a raw integer of type t. */
static int64_t ref_sext(rcollDataType_t t, uint64_t raw) {
  size_t bits = 8 * ref_type_size(t);
  if (bits == 64)
    return (int64_t)raw;
  uint64_t sign = 1ull << (bits - 1);
  return (int64_t)((raw ^ sign) - sign);
}

/* ---- float16 / bfloat16 encoding, round to nearest even ----
 * frexp gives x = f * 2^e with f in [0.5, 1); scaling the significand to
 * `mant_bits` + 1 bits and rint() (nearest even in the default mode) rounds
 * exactly once. Overflow gives infinity. */
static uint64_t ref_encode_narrow(double x, int mant_bits, int exp_bits) {
  int bias = (1 << (exp_bits - 1)) - 1;
  uint64_t sign = signbit(x) ? 1ull << (mant_bits + exp_bits) : 0;
  uint64_t inf = ((1ull << exp_bits) - 1) << mant_bits;
  x = fabs(x);
  if (x == 0)
    return sign;
  int e;
  (void)frexp(x, &e);
  e -= 1; /* now x = 1.m * 2^e */
  if (e < 1 - bias) /* subnormal: units of 2^(1 - bias - mant_bits) */
    return sign | (uint64_t)rint(ldexp(x, mant_bits + bias - 1));
  double m = rint(ldexp(x, mant_bits - e)); /* in [2^mant_bits, 2^(mant_bits+1)] */
  if (m == ldexp(1.0, mant_bits + 1)) {
    m /= 2;
    e += 1;
  }
  if (e > bias)
    return sign | inf;
  return sign | ((uint64_t)(e + bias) << mant_bits) | ((uint64_t)m - (1ull << mant_bits));
}

static uint64_t ref_f16_bits(double x) { return ref_encode_narrow(x, 10, 5); }
static uint64_t ref_bf16_bits(double x) { return ref_encode_narrow(x, 7, 8); }

/* ---- fp8 (e4m3: 3+4 bits, bias 7, no infinity, largest 448; e5m2: 2+5
 * bits, bias 15, largest 57344), round to nearest even, saturating ----
 * Clamping to the largest value first is the saturation (every value between
 * it and the saturation threshold rounds to it anyway). */
static int ref_fp8_mbits(rcollDataType_t t) { return t == rcollFloat8e4m3 ? 3 : 2; }
static int ref_fp8_bias(rcollDataType_t t) { return t == rcollFloat8e4m3 ? 7 : 15; }
static double ref_fp8_largest(rcollDataType_t t) { return t == rcollFloat8e4m3 ? 448.0 : 57344.0; }

static uint64_t ref_fp8_bits(rcollDataType_t t, double x) {
  int mbits = ref_fp8_mbits(t), bias = ref_fp8_bias(t);
  uint64_t sign = signbit(x) ? 0x80 : 0;
  x = fmin(fabs(x), ref_fp8_largest(t));
  if (x == 0)
    return sign;
  int e;
  (void)frexp(x, &e);
  e -= 1;
  if (e < 1 - bias)
    return sign | (uint64_t)rint(ldexp(x, mbits + bias - 1));
  double m = rint(ldexp(x, mbits - e));
  if (m == ldexp(1.0, mbits + 1)) {
    m /= 2;
    e += 1;
  }
  return sign | ((uint64_t)(e + bias) << mbits) | ((uint64_t)m - (1ull << mbits));
}

/* The value of fp8 bits; NaN for e4m3's S.1111.111 and e5m2's exponent 31
 * (infinity too: no result of the sweep may be one). */
static double ref_fp8_value(rcollDataType_t t, uint64_t raw) {
  int mbits = ref_fp8_mbits(t), bias = ref_fp8_bias(t), emask = (1 << (7 - mbits)) - 1;
  int e = (int)(raw >> mbits) & emask, m = (int)raw & ((1 << mbits) - 1);
  double s = raw & 0x80 ? -1.0 : 1.0;
  if (e == emask && (t == rcollFloat8e5m2 || m == (1 << mbits) - 1))
    return NAN;
  if (e == 0)
    return s * ldexp(m, 1 - bias - mbits);
  return s * ldexp(m + (1 << mbits), e - bias - mbits);
}

static uint64_t ref_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static uint64_t ref_f64_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

/* Raw bits of the small integer k (exactly representable) in floating type t. */
static uint64_t ref_float_raw(rcollDataType_t t, double k) {
  switch (t) {
  case rcollFloat16: return ref_f16_bits(k);
  case rcollBfloat16: return ref_bf16_bits(k);
  case rcollFloat8e4m3: case rcollFloat8e5m2: return ref_fp8_bits(t, k);
  case rcollFloat32: return ref_f32_bits((float)k);
  default: return ref_f64_bits(k);
  }
}

/* ---- inputs ---- */

uint64_t ref_hash(uint64_t x) { /* splitmix64 finalizer */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The small integer behind a floating input: -8..8, or 1/2/-1 for prod.
 * fp8 holds few integers exactly (e4m3 up to 16, e5m2 up to 8), so its
 * inputs are -2..2 (e4m3) and -1..1 (e5m2): then sums over up to 8 ranks are
 * exact in any order, and only larger communicators need ref_accepts's
 * tolerance. */
static int ref_small(rcollDataType_t t, rcollRedOp_t op, uint64_t h) {
  if (op == rcollProd) {
    static const int prod_vals[3] = {1, 2, -1};
    return prod_vals[h % 3];
  }
  if (ref_is_fp8(t)) {
    int half = t == rcollFloat8e4m3 ? 2 : 1;
    return (int)(h % (uint64_t)(2 * half + 1)) - half;
  }
  return (int)(h % 17) - 8;
}

static uint64_t ref_mix(uint64_t seed, int rank, size_t i) {
  return ref_hash(seed ^ ((uint64_t)rank * 0xd1b54a32d192ed03ull) ^ ((uint64_t)i << 8));
}

/* Raw input element i of `rank` for a case. Integers use every bit, so that
 * sums and products wrap and min/max see both signs. */
/* Floating inputs are small integers (-8..8), whose encodings are looked up:
 * encoding each with frexp/ldexp was most of the sweep's time (the
 * expected value of an element re-reads every rank's input). */
static uint64_t ref_small_raw[rcollNumTypes][17];
static pthread_once_t ref_small_once = PTHREAD_ONCE_INIT;

static void ref_small_fill(void) {
  for (int t = 0; t < rcollNumTypes; t++)
    for (int k = -8; k <= 8; k++)
      if (ref_is_float((rcollDataType_t)t))
        ref_small_raw[t][k + 8] = ref_float_raw((rcollDataType_t)t, k);
}

uint64_t ref_input(rcollDataType_t t, rcollRedOp_t op, uint64_t seed, int rank, size_t i) {
  uint64_t h = ref_mix(seed, rank, i);
  if (!ref_is_float(t))
    return h & ref_mask(t);
  pthread_once(&ref_small_once, ref_small_fill);
  return ref_small_raw[t][ref_small(t, op, h) + 8];
}

/* ---- expected reductions ---- */

/* Reduction over ranks 0..n-1 of element i at position `pos` of each rank's
 * input. Integer sum/prod wrap modulo 2^bits; avg divides the wrapped sum with
 * C's truncating division; floating avg divides in the type the library
 * computes in (float for the 16-bit types) and then rounds to the type. */
static uint64_t ref_reduce_int(rcollDataType_t t, rcollRedOp_t op, int n, uint64_t seed, size_t pos) {
  uint64_t mask = ref_mask(t);
  uint64_t acc = ref_input(t, op, seed, 0, pos);
  for (int r = 1; r < n; r++) {
    uint64_t v = ref_input(t, op, seed, r, pos);
    int v_less = ref_is_signed(t) ? ref_sext(t, v) < ref_sext(t, acc) : v < acc;
    switch (op) {
    case rcollSum: case rcollAvg: acc = (acc + v) & mask; break;
    case rcollProd: acc = (acc * v) & mask; break;
    case rcollMax: acc = v_less ? acc : v; break;
    default: acc = v_less ? v : acc; break;
    }
  }
  if (op != rcollAvg)
    return acc;
  if (ref_is_signed(t))
    return (uint64_t)(ref_sext(t, acc) / n) & mask;
  return acc / (uint64_t)n;
}

static uint64_t ref_reduce_float(rcollDataType_t t, rcollRedOp_t op, int n, uint64_t seed, size_t pos) {
  double acc = ref_small(t, op, ref_mix(seed, 0, pos));
  for (int r = 1; r < n; r++) {
    double v = ref_small(t, op, ref_mix(seed, r, pos));
    switch (op) {
    case rcollSum: case rcollAvg: acc += v; break;
    case rcollProd: acc *= v; break;
    case rcollMax: acc = v > acc ? v : acc; break;
    default: acc = v < acc ? v : acc; break;
    }
  }
  if (ref_is_fp8(t)) /* exact (prod: saturated); ref_accepts allows the rounding */
    return ref_fp8_bits(t, op == rcollAvg ? acc / n : acc);
  if (op != rcollAvg)
    return ref_float_raw(t, acc);
  if (t == rcollFloat64)
    return ref_f64_bits(acc / n);
  float q = (float)acc / (float)n;
  return t == rcollFloat32 ? ref_f32_bits(q) : t == rcollFloat16 ? ref_f16_bits(q) : ref_bf16_bits(q);
}

uint64_t ref_reduce(rcollDataType_t t, rcollRedOp_t op, int n, uint64_t seed, size_t pos) {
  return ref_is_float(t) ? ref_reduce_float(t, op, n, seed, pos) : ref_reduce_int(t, op, n, seed, pos);
}

/* fp8 sums round at every step (NCCL's arithmetic: in half, back to fp8),
 * so the result depends on the order the algorithm adds in. Each addition of
 * integers errs by at most half an fp8 step at the partial sum's magnitude,
 * at most S = the sum of |inputs|, and not at all while S <= 2^(mbits+1).
 * avg scales each input by fp8(1/n) first: 1/n, each product and each sum
 * round with relative error at most u (half an fp8 step plus the rounding
 * through half), on magnitudes at most S/n (1 + u)^2. Products of 1, 2, -1
 * and min/max are exact (products saturate, which ref_reduce does too). */
static double ref_fp8_tolerance(rcollDataType_t t, rcollRedOp_t op, int n, uint64_t seed, size_t pos) {
  if (op != rcollSum && op != rcollAvg)
    return 0;
  double s = 0;
  for (int r = 0; r < n; r++)
    s += fabs((double)ref_small(t, op, ref_mix(seed, r, pos)));
  int mbits = ref_fp8_mbits(t), e;
  if (op == rcollSum) {
    if (s <= ldexp(1.0, mbits + 1))
      return 0;
    (void)frexp(s, &e); /* s in [2^(e-1), 2^e) */
    return (n - 1) * ldexp(1.0, e - 1 - mbits - 1);
  }
  double u = ldexp(1.0, -(mbits + 1)) + ldexp(1.0, -11);
  return (n + 1) * u * (s / n) * (1 + u) * (1 + u);
}

int ref_accepts(rcollDataType_t t, rcollRedOp_t op, int n, uint64_t seed, size_t pos, uint64_t got,
                uint64_t want) {
  if (got == want || !ref_is_fp8(t))
    return got == want;
  double g = ref_fp8_value(t, got), w = ref_fp8_value(t, want);
  return fabs(g - w) <= ref_fp8_tolerance(t, op, n, seed, pos); /* false for NaN */
}

/* ---- raw element access ---- */

uint64_t ref_load(const void *buf, rcollDataType_t t, size_t i) {
  uint64_t v = 0;
  size_t sz = ref_type_size(t);
  memcpy(&v, (const char *)buf + i * sz, sz); /* little-endian hosts only */
  return v;
}

void ref_store(void *buf, rcollDataType_t t, size_t i, uint64_t raw) {
  size_t sz = ref_type_size(t);
  memcpy((char *)buf + i * sz, &raw, sz);
}
