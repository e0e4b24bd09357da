/* Scalar element math for reductions: float16/bfloat16 conversion and the
 * per-type sum/prod/max/min/avg. This one header is included by the host
 * loops (lib/reduce.c) and by the CUDA kernels, so the CPU unit tests pin the
 * exact arithmetic the GPU runs.
 *
 * Rules every function follows:
 * - Integer sum and prod wrap modulo 2^bits. They are computed in the unsigned
 *   type of the same width, because signed overflow is undefined in C.
 * - Floating max/min propagate NaN: if either operand is NaN, so is the result.
 *   Of +0 and -0, max gives +0 and min -0 whatever their order (IEEE 754-2019
 *   maximum and minimum), so that every op but a NaN's payload gives the same
 *   bits for (a, b) and (b, a): recursive doubling reduces each pair of
 *   partial results on both ranks, in opposite orders, and all ranks must
 *   end with the same bits.
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
 * a NaN a. Either way a NaN operand gives NaN. Operands that compare equal
 * have the same bits but for the sign of a zero: their AND is +0 unless both
 * are -0 (max), their OR -0 unless both are +0 (min). */
#define RCOLL_FLOAT_MATH(sfx, T, U)                                                      \
  RCOLL_MATH_FN T rcoll_bitop_##sfx(T a, T b, int both_set) {                            \
    U x, y;                                                                              \
    memcpy(&x, &a, sizeof x);                                                            \
    memcpy(&y, &b, sizeof y);                                                            \
    x = both_set ? x & y : x | y;                                                        \
    memcpy(&a, &x, sizeof a);                                                            \
    return a;                                                                            \
  }                                                                                      \
  RCOLL_MATH_FN T rcoll_sum_##sfx(T a, T b) { return a + b; }                            \
  RCOLL_MATH_FN T rcoll_prod_##sfx(T a, T b) { return a * b; }                           \
  RCOLL_MATH_FN T rcoll_max_##sfx(T a, T b) {                                            \
    return (a > b || a != a) ? a : a == b ? rcoll_bitop_##sfx(a, b, 1) : b;              \
  }                                                                                      \
  RCOLL_MATH_FN T rcoll_min_##sfx(T a, T b) {                                            \
    return (a < b || a != a) ? a : a == b ? rcoll_bitop_##sfx(a, b, 0) : b;              \
  }                                                                                      \
  RCOLL_MATH_FN T rcoll_avg_##sfx(T sum, int nranks) { return sum / (T)nranks; }

RCOLL_FLOAT_MATH(f32, float, uint32_t)
RCOLL_FLOAT_MATH(f64, double, uint64_t)

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

/* ---- fp8: float8 e4m3 and e5m2, as NVIDIA's __nv_fp8_e4m3/__nv_fp8_e5m2 ----
 * e4m3: bias 7, 3 mantissa bits, no infinity, NaN = S.1111.111, largest 448.
 * e5m2: bias 15, 2 mantissa bits, IEEE-like (infinities, NaNs), largest 57344.
 * Arithmetic follows NCCL 2.28.9 (src/device/reduce_kernel.h) exactly: each
 * operand widens to half, the op runs in half (rounded to nearest even), and
 * the half result narrows back to fp8 with round to nearest even and
 * saturation to the largest finite value (__NV_SATFINITE: overflow and
 * infinity give +-max, NaN stays NaN). Every fp8 value is exact in half and in
 * float, so "in half" is float arithmetic rounded once to half here. The one
 * difference is max/min: NCCL's __hmax/__hmin return the other operand when
 * one is NaN; rcoll propagates NaN, as for every floating type. */

/* Decoding is exact: normal values rebias the exponent; subnormals are
 * m * 2^(1 - bias - mbits), an exact int-to-float conversion times a power of
 * two (so no denormal-mode dependence). */
RCOLL_MATH_FN float rcoll_fp8_to_float(uint8_t v, int mbits, int bias, int e4m3) {
  uint32_t sign = ((uint32_t)v & 0x80u) << 24;
  uint32_t emax = (1u << (7 - mbits)) - 1u, mmask = (1u << mbits) - 1u;
  uint32_t exp = ((uint32_t)v >> mbits) & emax, mant = (uint32_t)v & mmask;
  uint32_t mag;
  if (exp == 0)
    mag = rcoll_f32_bits((float)(int32_t)mant *
                         rcoll_f32_from_bits((uint32_t)(127 + 1 - bias - mbits) << 23));
  else if (exp == emax && (e4m3 ? mant == mmask : 1))
    mag = mant ? 0x7fc00000u : 0x7f800000u; /* e4m3 NaN, e5m2 NaN or infinity */
  else
    mag = ((exp + 127u - (uint32_t)bias) << 23) | (mant << (23 - mbits));
  return rcoll_f32_from_bits(sign | mag);
}

/* Round to nearest even, saturating, as __nv_cvt_halfraw_to_fp8(x,
 * __NV_SATFINITE, ...) on a value that is exact in half; sat is the first
 * magnitude that saturates (bits of a float): e4m3 above 464 (448 plus half
 * an ulp, ties going down to the even 448), e5m2 from 61440 (its tie would
 * round up to infinity). Below the smallest normal, adding a power of two
 * whose float ulp is the fp8 subnormal step lets the FPU round (the float16
 * trick of rcoll_float_to_half); above, the add-and-carry trick of bfloat16. */
RCOLL_MATH_FN uint8_t rcoll_float_to_fp8(float f, int mbits, int bias, int e4m3) {
  uint32_t u = rcoll_f32_bits(f);
  uint32_t sign = (u >> 24) & 0x80u;
  uint32_t a = u & 0x7fffffffu;
  uint32_t maxnorm = e4m3 ? 0x7eu : 0x7bu;
  uint32_t minnorm = (uint32_t)(127 + 1 - bias) << 23;
  uint32_t shift = 23u - (uint32_t)mbits;
  if (a > 0x7f800000u) /* NaN: e4m3's one NaN; e5m2 quiet, top payload bits */
    return (uint8_t)(sign | (e4m3 ? 0x7fu : (0x7eu | ((a >> 21) & 0x3u))));
  if (e4m3 ? a > 0x43e80000u : a >= 0x47700000u) /* 464.0f, 61440.0f; infinity too */
    return (uint8_t)(sign | maxnorm);
  if (a < minnorm) {
    float magic = rcoll_f32_from_bits((uint32_t)(127 + 1 - bias - mbits + 23) << 23);
    return (uint8_t)(sign | (rcoll_f32_bits(rcoll_f32_from_bits(a) + magic) - rcoll_f32_bits(magic)));
  }
  uint32_t r = (a + (1u << (shift - 1)) - 1u + ((a >> shift) & 1u)) >> shift;
  return (uint8_t)(sign | (r - ((uint32_t)(127 - bias) << mbits)));
}

RCOLL_MATH_FN float rcoll_e4m3_to_float(uint8_t v) { return rcoll_fp8_to_float(v, 3, 7, 1); }
RCOLL_MATH_FN float rcoll_e5m2_to_float(uint8_t v) { return rcoll_fp8_to_float(v, 2, 15, 0); }
/* A float result is first rounded to half (NCCL computes in half), then to fp8. */
RCOLL_MATH_FN uint8_t rcoll_float_to_e4m3(float f) {
  return rcoll_float_to_fp8(rcoll_half_to_float(rcoll_float_to_half(f)), 3, 7, 1);
}
RCOLL_MATH_FN uint8_t rcoll_float_to_e5m2(float f) {
  return rcoll_float_to_fp8(rcoll_half_to_float(rcoll_float_to_half(f)), 2, 15, 0);
}

#define RCOLL_FP8_MATH(sfx)                                                              \
  RCOLL_MATH_FN uint8_t rcoll_sum_##sfx(uint8_t a, uint8_t b) {                          \
    return rcoll_float_to_##sfx(rcoll_##sfx##_to_float(a) + rcoll_##sfx##_to_float(b));  \
  }                                                                                      \
  RCOLL_MATH_FN uint8_t rcoll_prod_##sfx(uint8_t a, uint8_t b) {                         \
    return rcoll_float_to_##sfx(rcoll_##sfx##_to_float(a) * rcoll_##sfx##_to_float(b));  \
  }                                                                                      \
  RCOLL_MATH_FN uint8_t rcoll_max_##sfx(uint8_t a, uint8_t b) {                          \
    return rcoll_float_to_##sfx(rcoll_max_f32(rcoll_##sfx##_to_float(a), rcoll_##sfx##_to_float(b))); \
  }                                                                                      \
  RCOLL_MATH_FN uint8_t rcoll_min_##sfx(uint8_t a, uint8_t b) {                          \
    return rcoll_float_to_##sfx(rcoll_min_f32(rcoll_##sfx##_to_float(a), rcoll_##sfx##_to_float(b))); \
  }                                                                                      \
  RCOLL_MATH_FN uint8_t rcoll_avg_##sfx(uint8_t sum, int nranks) {                       \
    return rcoll_float_to_##sfx(rcoll_##sfx##_to_float(sum) / (float)nranks);            \
  }

RCOLL_FP8_MATH(e4m3)
RCOLL_FP8_MATH(e5m2)

#endif /* RCOLL_REDUCE_MATH_H */
