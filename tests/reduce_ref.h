/* A reference float16/bfloat16 codec, written from the format definitions
 * with libm (frexp, ldexp, nearbyint in double), never from the code under
 * test: tests/test_reduce_math.c checks lib/reduce_math.h's conversions
 * against it, tests/test_reduce.c the reductions. Unlike the harnesses in
 * tests/support/ it stays a header: three short inline functions, the two
 * formats and two aliases of reduce_math.h's inline bit casts. */
#ifndef RCOLL_TESTS_REDUCE_REF_H
#define RCOLL_TESTS_REDUCE_REF_H

#include <math.h>
#include <stdint.h>

#include "reduce_math.h"


struct narrow_fmt {
  int mbits; /* stored mantissa bits */
  int emax;  /* largest exponent, also the bias */
};
static const struct narrow_fmt fmt_half = {10, 15};
static const struct narrow_fmt fmt_bf16 = {7, 127};

static inline double ref_decode(uint16_t h, struct narrow_fmt f) {
  int emask = 2 * f.emax + 1;
  int e = (h >> f.mbits) & emask;
  int m = h & ((1 << f.mbits) - 1);
  double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == emask)
    return m ? NAN : s * INFINITY;
  if (e == 0)
    return s * ldexp(m, 1 - f.emax - f.mbits);
  return s * ldexp(m + (1 << f.mbits), e - f.emax - f.mbits);
}

/* Scale x so that one unit is the format's step at x's exponent (clamped to
 * the subnormal step), round with nearbyint (ties to even), then re-encode. */
static inline uint16_t ref_encode(double x, struct narrow_fmt f) {
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  uint16_t inf = (uint16_t)((2 * f.emax + 1) << f.mbits);
  if (isnan(x))
    return sign | inf | (uint16_t)(1 << (f.mbits - 1));
  x = fabs(x);
  if (isinf(x))
    return sign | inf;
  if (x == 0)
    return sign;
  int e;
  frexp(x, &e);
  int E = e - 1 < 1 - f.emax ? 1 - f.emax : e - 1;
  double m = nearbyint(ldexp(x, f.mbits - E));
  if (m >= ldexp(1, f.mbits + 1)) {
    m /= 2;
    E++;
  }
  if (E > f.emax)
    return sign | inf;
  if (m < ldexp(1, f.mbits))
    return sign | (uint16_t)m;
  return sign | (uint16_t)(((E + f.emax) << f.mbits) + ((int)m - (1 << f.mbits)));
}

/* fp8 as NVIDIA's __nv_fp8_e4m3 (bias 7, 3 mantissa bits, no infinity, one
 * NaN S.1111.111, largest 448) and __nv_fp8_e5m2 (bias 15, 2 mantissa bits,
 * IEEE-like, largest 57344). Encoding rounds to nearest even and saturates
 * (__NV_SATFINITE): anything beyond the largest finite value, infinity too,
 * gives +-largest; NaN gives NaN. */
static inline double ref_fp8_decode(uint8_t v, int e4m3) {
  int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, emask = e4m3 ? 15 : 31;
  int e = (v >> mbits) & emask, m = v & ((1 << mbits) - 1);
  double s = (v & 0x80) ? -1.0 : 1.0;
  if (e4m3 && e == emask && m == 7)
    return NAN;
  if (!e4m3 && e == emask)
    return m ? NAN : s * INFINITY;
  if (e == 0)
    return s * ldexp(m, 1 - bias - mbits);
  return s * ldexp(m + (1 << mbits), e - bias - mbits);
}

static inline uint8_t ref_fp8_encode(double x, int e4m3) {
  int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  double largest = e4m3 ? 448.0 : 57344.0;
  uint8_t sign = signbit(x) ? 0x80 : 0;
  if (isnan(x))
    return sign | (e4m3 ? 0x7f : 0x7e);
  x = fabs(x);
  if (x == 0)
    return sign;
  /* The tie above the largest value goes to it in e4m3 (448 is even) and
   * would go to infinity in e5m2, which saturates instead. */
  double past = largest + ldexp(1.0, e4m3 ? 4 : 12);
  if (x > past || (!e4m3 && x == past))
    return sign | (e4m3 ? 0x7e : 0x7b);
  int e;
  frexp(x, &e);
  int E = e - 1 < 1 - bias ? 1 - bias : e - 1;
  double m = nearbyint(ldexp(x, mbits - E));
  if (m >= ldexp(1, mbits + 1)) {
    m /= 2;
    E++;
  }
  if (m < ldexp(1, mbits))
    return sign | (uint8_t)m;
  return sign | (uint8_t)(((E + bias) << mbits) + ((int)m - (1 << mbits)));
}

static inline int narrow_is_nan(uint16_t h, struct narrow_fmt f) {
  return isnan(ref_decode(h, f));
}

/* Bit casts; reduce_math.h's are a plain memcpy, nothing to verify there. */
#define fbits rcoll_f32_bits
#define bits_f rcoll_f32_from_bits

#endif
