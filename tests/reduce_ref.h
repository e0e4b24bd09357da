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

static inline int narrow_is_nan(uint16_t h, struct narrow_fmt f) {
  return isnan(ref_decode(h, f));
}

/* Bit casts; reduce_math.h's are a plain memcpy, nothing to verify there. */
#define fbits rcoll_f32_bits
#define bits_f rcoll_f32_from_bits

#endif
