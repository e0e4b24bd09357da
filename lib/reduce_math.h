/* Scalar element math for reductions: float16/bfloat16 conversion and the
 * per-type sum/prod/max/min/avg. This one header is included by the host
 * loops (lib/reduce.c) and by the CUDA kernels, so the CPU unit tests pin the
 * exact arithmetic the GPU runs.
 *
 * Rules every function follows:
 * - Integer sum and prod wrap modulo 2^bits. They are computed in the unsigned
 *   type of the same width, because signed overflow is undefined in C.
 * - Floating max/min propagate NaN: if either operand is NaN, so is the result.
 * - float16 and bfloat16 are computed in float and rounded once, to nearest
 *   even. float has more than twice their precision plus two bits, so this
 *   single rounding gives the correctly rounded result of + * and /.
 * - The code is branch-free (see rcoll_select_u32) so that the compiler
 *   vectorizes the loops that call it. */
#ifndef RCOLL_REDUCE_MATH_H
#define RCOLL_REDUCE_MATH_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define RCOLL_HD __host__ __device__
#define RCOLL_MATH_FN static __forceinline__ RCOLL_HD
#else
#define RCOLL_HD
#define RCOLL_MATH_FN static inline RCOLL_HD
#endif

/* ---- bit casts (memcpy is the portable spelling; it compiles to a move) ---- */

RCOLL_MATH_FN uint32_t rcoll_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

RCOLL_MATH_FN float rcoll_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Branch-free select. Written with masks rather than `?:` on purpose: GCC
 * turns a `?:` whose arm holds a float operation into a branch, and then
 * refuses to vectorize (it will not speculate an op that may raise a floating
 * point flag). With masks both arms are always computed and always used. */
RCOLL_MATH_FN uint32_t rcoll_select_u32(int cond, uint32_t if_true, uint32_t if_false) {
  uint32_t mask = 0u - (uint32_t)(cond != 0);
  return (if_true & mask) | (if_false & ~mask);
}

/* ---- bfloat16: the top half of a float32 ---- */

RCOLL_MATH_FN float rcoll_bf16_to_float(uint16_t h) {
  return rcoll_f32_from_bits((uint32_t)h << 16);
}

/* Round to nearest even by adding 0x7fff plus the lowest kept bit, then
 * truncating; a carry out of the mantissa correctly bumps the exponent, up to
 * infinity. NaN must not go through that addition (it could become inf), so it
 * keeps its sign and top payload bits and is forced quiet. */
RCOLL_MATH_FN uint16_t rcoll_float_to_bf16(float f) {
  uint32_t u = rcoll_f32_bits(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t quiet_nan = (u >> 16) | 0x0040u;
  int is_nan = (int32_t)(u & 0x7fffffffu) > 0x7f800000;
  return (uint16_t)(is_nan ? quiet_nan : rounded);
}

/* ---- float16 (IEEE binary16) ---- */

/* Normal numbers only need the exponent rebiased (127 - 15). Subnormals are
 * m * 2^-24, computed as an exact int-to-float conversion and a power-of-two
 * scale, so the result never depends on denormal (FTZ/DAZ) modes. Exponent 31
 * (inf/NaN) maps to exponent 255 with the mantissa kept. */
RCOLL_MATH_FN float rcoll_half_to_float(uint16_t h) {
  uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
  int32_t exp = (int32_t)(h & 0x7c00u);
  uint32_t mant = h & 0x03ffu;
  uint32_t shifted = ((uint32_t)h & 0x7fffu) << 13;
  uint32_t normal = shifted + ((127u - 15u) << 23);
  uint32_t special = shifted | 0x7f800000u;
  uint32_t sub = rcoll_f32_bits((float)(int32_t)mant * 0x1p-24f);
  uint32_t mag = rcoll_select_u32(exp == 0x7c00, special, normal);
  mag = rcoll_select_u32(exp == 0, sub, mag);
  return rcoll_f32_from_bits(sign | mag);
}

/* Three candidates, two selects:
 * - |f| >= 65520 (2^16 - 2^4, the midpoint above 65504) or inf: infinity;
 *   NaN: quiet NaN keeping the top payload bits.
 * - |f| < 2^-14 (half subnormal range): adding 0.5 makes the FPU round to a
 *   multiple of 2^-24, the half subnormal step, with round-to-nearest-even;
 *   the low mantissa bits of the sum are then the half's bits (a result of
 *   0x400 is exactly the smallest normal, which is the right encoding).
 * - otherwise: rebias the exponent and round the 13 dropped bits to nearest
 *   even with the same add-and-carry trick as bfloat16. */
RCOLL_MATH_FN uint16_t rcoll_float_to_half(float f) {
  uint32_t u = rcoll_f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  uint32_t odd = (a >> 13) & 1u;
  uint32_t normal = (a - ((127u - 15u) << 23) + 0x0fffu + odd) >> 13;
  float magic = 0.5f;
  uint32_t sub = rcoll_f32_bits(rcoll_f32_from_bits(a) + magic) - rcoll_f32_bits(magic);
  uint32_t big = (int32_t)a > 0x7f800000 ? (0x7e00u | ((a >> 13) & 0x03ffu)) : 0x7c00u;
  uint32_t mag = rcoll_select_u32((int32_t)a < (int32_t)(113u << 23), sub, normal);
  mag = rcoll_select_u32((int32_t)a >= (int32_t)0x477ff000, big, mag);
  return (uint16_t)(sign | mag);
}

/* ---- integer types ---- */

/* sfx: suffix; T: the type; U: its unsigned twin for wrapping arithmetic;
 * D: the divisor type for avg, wide enough that (D)nranks is exact. */
#define RCOLL_INT_MATH(sfx, T, U, D)                                                     \
  RCOLL_MATH_FN T rcoll_sum_##sfx(T a, T b) { return (T)(U)((U)a + (U)b); }              \
  RCOLL_MATH_FN T rcoll_prod_##sfx(T a, T b) { return (T)(U)((U)a * (U)b); }             \
  RCOLL_MATH_FN T rcoll_max_##sfx(T a, T b) { return a > b ? a : b; }                    \
  RCOLL_MATH_FN T rcoll_min_##sfx(T a, T b) { return a < b ? a : b; }                    \
  RCOLL_MATH_FN T rcoll_avg_##sfx(T sum, int nranks) { return (T)(sum / (D)nranks); }

RCOLL_INT_MATH(i8, int8_t, uint8_t, int)
RCOLL_INT_MATH(u8, uint8_t, uint8_t, unsigned)
RCOLL_INT_MATH(i32, int32_t, uint32_t, int32_t)
RCOLL_INT_MATH(u32, uint32_t, uint32_t, uint32_t)
RCOLL_INT_MATH(i64, int64_t, uint64_t, int64_t)
RCOLL_INT_MATH(u64, uint64_t, uint64_t, uint64_t)

/* ---- float32 and float64 ---- */

/* The comparison is false when b is NaN, so b is returned; `a != a` catches
 * a NaN a. Either way a NaN operand gives NaN. */
#define RCOLL_FLOAT_MATH(sfx, T)                                                         \
  RCOLL_MATH_FN T rcoll_sum_##sfx(T a, T b) { return a + b; }                            \
  RCOLL_MATH_FN T rcoll_prod_##sfx(T a, T b) { return a * b; }                           \
  RCOLL_MATH_FN T rcoll_max_##sfx(T a, T b) { return (a > b || a != a) ? a : b; }        \
  RCOLL_MATH_FN T rcoll_min_##sfx(T a, T b) { return (a < b || a != a) ? a : b; }        \
  RCOLL_MATH_FN T rcoll_avg_##sfx(T sum, int nranks) { return sum / (T)nranks; }

RCOLL_FLOAT_MATH(f32, float)
RCOLL_FLOAT_MATH(f64, double)

/* ---- float16 and bfloat16: widen, compute in float, round once ---- */

#define RCOLL_NARROW_MATH(sfx, to_f, from_f)                                             \
  RCOLL_MATH_FN uint16_t rcoll_sum_##sfx(uint16_t a, uint16_t b) {                       \
    return from_f(to_f(a) + to_f(b));                                                    \
  }                                                                                      \
  RCOLL_MATH_FN uint16_t rcoll_prod_##sfx(uint16_t a, uint16_t b) {                      \
    return from_f(to_f(a) * to_f(b));                                                    \
  }                                                                                      \
  RCOLL_MATH_FN uint16_t rcoll_max_##sfx(uint16_t a, uint16_t b) {                       \
    return from_f(rcoll_max_f32(to_f(a), to_f(b)));                                      \
  }                                                                                      \
  RCOLL_MATH_FN uint16_t rcoll_min_##sfx(uint16_t a, uint16_t b) {                       \
    return from_f(rcoll_min_f32(to_f(a), to_f(b)));                                      \
  }                                                                                      \
  RCOLL_MATH_FN uint16_t rcoll_avg_##sfx(uint16_t sum, int nranks) {                     \
    return from_f(to_f(sum) / (float)nranks);                                            \
  }

RCOLL_NARROW_MATH(f16, rcoll_half_to_float, rcoll_float_to_half)
RCOLL_NARROW_MATH(bf16, rcoll_bf16_to_float, rcoll_float_to_bf16)

#endif /* RCOLL_REDUCE_MATH_H */
