/* Inputs and the element-wise check of results.
 *
 * Every input element is a deterministic function of (type, op, rank, index,
 * seed), so any rank can recompute any other rank's input. Expected results
 * are computed here, independently of the library: integer ops in 64-bit
 * unsigned arithmetic truncated to the type's width (the wrap-around the
 * library promises), floating ops in double and rounded once to the type.
 * Inputs are chosen so that floating sums and products are exact in every
 * type for the rank counts used in practice, and min/max see full ranges. */
#include <math.h>
#include <string.h>

#include "common_impl.h"

static int type_is_fp8(rcollDataType_t t) {
  return t == rcollFloat8e4m3 || t == rcollFloat8e5m2;
}

int bench_type_is_float(rcollDataType_t t) {
  return t == rcollFloat16 || t == rcollBfloat16 || t == rcollFloat32 || t == rcollFloat64 ||
         type_is_fp8(t);
}

static int type_is_signed(rcollDataType_t t) {
  return t == rcollInt8 || t == rcollInt32 || t == rcollInt64;
}

static unsigned type_bits(rcollDataType_t t) {
  return (unsigned)(8 * bench_type_size(t));
}

static uint64_t width_mask(rcollDataType_t t) {
  unsigned b = type_bits(t);
  return b >= 64 ? ~0ull : (1ull << b) - 1;
}

/* Value of an integer element's bits, sign-extended when the type is signed. */
static int64_t int_value(rcollDataType_t t, uint64_t bits) {
  unsigned b = type_bits(t);
  if (!type_is_signed(t) || b >= 64)
    return (int64_t)bits;
  uint64_t sign = 1ull << (b - 1);
  return (int64_t)((bits ^ sign) - sign);
}

/* ---- small IEEE formats (float16: 10+5 bits, bfloat16: 7+8 bits) ---- */

uint16_t bench_fp_encode(double d, int mbits, int ebits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const uint32_t inf = ((1u << ebits) - 1) << mbits;
  uint32_t sign = signbit(d) ? 1u << (mbits + ebits) : 0;
  double a = fabs(d);
  if (isnan(d))
    return (uint16_t)(inf | (1u << (mbits - 1)));
  if (a == 0)
    return (uint16_t)sign;
  int e;
  frexp(a, &e);
  int exponent = e - 1; /* a in [2^exponent, 2^(exponent+1)) */
  if (exponent < 1 - bias) {
    /* Subnormal: whole units of 2^(1-bias-mbits); rounding up to 2^mbits
     * units gives the smallest normal number's encoding, as it should. */
    double q = nearbyint(ldexp(a, mbits - (1 - bias)));
    return (uint16_t)(sign | (uint32_t)q);
  }
  double q = nearbyint(ldexp(a, mbits - exponent)); /* in [2^mbits, 2^(mbits+1)] */
  if (q >= ldexp(1.0, mbits + 1)) {
    q /= 2;
    exponent++;
  }
  if (exponent > bias)
    return (uint16_t)(sign | inf);
  uint32_t mant = (uint32_t)q - (1u << mbits);
  return (uint16_t)(sign | ((uint32_t)(exponent + bias) << mbits) | mant);
}

double bench_fp_decode(uint64_t bits, int mbits, int ebits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const uint64_t emask = (1u << ebits) - 1;
  double sign = (bits >> (mbits + ebits)) & 1 ? -1.0 : 1.0;
  uint64_t e = (bits >> mbits) & emask;
  uint64_t m = bits & ((1u << mbits) - 1);
  if (e == emask)
    return m ? NAN : sign * INFINITY;
  if (e == 0)
    return sign * ldexp((double)m, 1 - bias - mbits);
  return sign * ldexp((double)(m | (1ull << mbits)), (int)e - bias - mbits);
}

/* fp8: e4m3 (3+4 bits, bias 7) spends its top exponent on numbers up to 448
 * and has one NaN (S.1111.111); e5m2 (2+5 bits) is IEEE-like, largest 57344.
 * Both round to nearest even and saturate (NVIDIA's __NV_SATFINITE), which
 * clamping to the largest value before rounding gives. */
static uint8_t fp8_encode(double d, rcollDataType_t t) {
  const int e4m3 = t == rcollFloat8e4m3, mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  uint8_t sign = signbit(d) ? 0x80 : 0;
  if (isnan(d))
    return (uint8_t)(sign | 0x7f);
  double a = fmin(fabs(d), e4m3 ? 448.0 : 57344.0);
  if (a == 0)
    return sign;
  int e;
  frexp(a, &e);
  int exponent = e - 1 < 1 - bias ? 1 - bias : e - 1;
  double q = nearbyint(ldexp(a, mbits - exponent));
  if (q >= ldexp(1.0, mbits + 1)) {
    q /= 2;
    exponent++;
  }
  if (q < ldexp(1.0, mbits)) /* subnormal */
    return (uint8_t)(sign | (uint32_t)q);
  return (uint8_t)(sign | ((uint32_t)(exponent + bias) << mbits) | ((uint32_t)q - (1u << mbits)));
}

static double fp8_decode(uint8_t v, rcollDataType_t t) {
  if (t == rcollFloat8e5m2)
    return bench_fp_decode(v, 2, 5);
  if ((v & 0x7f) == 0x7f)
    return NAN;
  double sign = v & 0x80 ? -1.0 : 1.0;
  int e = (v >> 3) & 15, m = v & 7;
  return e == 0 ? sign * ldexp(m, -9) : sign * ldexp(m | 8, e - 10);
}

/* Rounds d to the nearest value of a floating type. */
static double round_to_type(rcollDataType_t t, double d) {
  switch (t) {
  case rcollFloat16: return bench_fp_decode(bench_fp_encode(d, 10, 5), 10, 5);
  case rcollBfloat16: return bench_fp_decode(bench_fp_encode(d, 7, 8), 7, 8);
  case rcollFloat8e4m3: case rcollFloat8e5m2: return fp8_decode(fp8_encode(d, t), t);
  case rcollFloat32: return (double)(float)d;
  default: return d;
  }
}

bench_val_t bench_load(const void *buf, size_t i, rcollDataType_t t) {
  bench_val_t v = {0, 0};
  const unsigned char *p = (const unsigned char *)buf + i * bench_type_size(t);
  switch (t) {
  case rcollFloat16: { uint16_t h; memcpy(&h, p, 2); v.f = bench_fp_decode(h, 10, 5); break; }
  case rcollBfloat16: { uint16_t h; memcpy(&h, p, 2); v.f = bench_fp_decode(h, 7, 8); break; }
  case rcollFloat8e4m3: case rcollFloat8e5m2: v.f = fp8_decode(*p, t); break;
  case rcollFloat32: { float f; memcpy(&f, p, 4); v.f = f; break; }
  case rcollFloat64: memcpy(&v.f, p, 8); break;
  default: {
    /* Little-endian hosts: the low bytes of a uint64 are the element. */
    memcpy(&v.u, p, bench_type_size(t));
    break;
  }
  }
  return v;
}

void bench_store(void *buf, size_t i, rcollDataType_t t, bench_val_t v) {
  unsigned char *p = (unsigned char *)buf + i * bench_type_size(t);
  switch (t) {
  case rcollFloat16: { uint16_t h = bench_fp_encode(v.f, 10, 5); memcpy(p, &h, 2); break; }
  case rcollBfloat16: { uint16_t h = bench_fp_encode(v.f, 7, 8); memcpy(p, &h, 2); break; }
  case rcollFloat8e4m3: case rcollFloat8e5m2: *p = fp8_encode(v.f, t); break;
  case rcollFloat32: { float f = (float)v.f; memcpy(p, &f, 4); break; }
  case rcollFloat64: memcpy(p, &v.f, 8); break;
  default: memcpy(p, &v.u, bench_type_size(t)); break;
  }
}

/* ---- inputs ---- */

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

/* Integer inputs. Sums may wrap (that is part of the contract); avg keeps
 * the sum in range so that the result does not depend on where the library
 * wraps; prod uses odd factors so that products never wrap to zero. */
static uint64_t int_input(rcollDataType_t t, rcollRedOp_t op, int nranks, uint64_t h) {
  static const int64_t odd[6] = {1, 3, 5, 7, -1, -3};
  int64_t v;
  switch (op) {
  case rcollProd: v = odd[h % 6]; break;
  case rcollMax:
  case rcollMin: return h & width_mask(t);
  case rcollAvg: {
    uint64_t range = type_is_signed(t) ? (width_mask(t) >> 1) / (uint64_t)nranks
                                       : width_mask(t) / (uint64_t)nranks;
    if (range > 100)
      range = 100;
    v = (int64_t)(h % (range + 1));
    if (type_is_signed(t) && ((h >> 32) & 1))
      v = -v;
    break;
  }
  default: v = (int64_t)(h % 201) - 100; break;
  }
  return (uint64_t)v & width_mask(t);
}

/* Floating inputs, exactly representable even in bfloat16 (8 significant
 * bits). Prod multiplies {1, 2, 1/2} chosen by (index + rank) mod 3: over
 * any run of consecutive ranks the 2s and 1/2s nearly cancel, so products
 * stay within [1/2, 3] for every rank count and never overflow. */
static double float_input(rcollRedOp_t op, int rank, size_t index, uint64_t h) {
  static const double scale[4] = {1.0, 1.5, 1.25, 0.75};
  switch (op) {
  case rcollProd: {
    static const double pow2[3] = {1.0, 2.0, 0.5};
    double v = pow2[(index + (size_t)rank) % 3];
    if (rank == 0)
      v *= scale[(h >> 16) & 3];
    return (h >> 8) & 1 ? -v : v;
  }
  case rcollMax:
  case rcollMin: return ((double)(h % 255) - 127.0) * 0.125;
  default: return ((double)(h % 17) - 8.0) * 0.25;
  }
}

static uint64_t rank_key(uint64_t seed, int rank) {
  return mix64(seed * 0x9e3779b97f4a7c15ull + (uint64_t)rank + 1);
}

static bench_val_t input_keyed(rcollDataType_t t, rcollRedOp_t op, int nranks, int rank,
                               size_t index, uint64_t key) {
  bench_val_t v = {0, 0};
  uint64_t h = mix64(key + index * 0xd1b54a32d192ed03ull);
  if (bench_type_is_float(t)) /* fp8 cannot hold them all: round, and expect what was sent */
    v.f = round_to_type(t, float_input(op, rank, index, h));
  else
    v.u = int_input(t, op, nranks, h);
  return v;
}

bench_val_t bench_input(rcollDataType_t t, rcollRedOp_t op, int nranks, int rank, size_t index,
                        uint64_t seed) {
  return input_keyed(t, op, nranks, rank, index, rank_key(seed, rank));
}

void bench_fill_input(void *buf, size_t count, rcollDataType_t t, rcollRedOp_t op, int nranks,
                      int rank, uint64_t seed) {
  uint64_t key = rank_key(seed, rank);
  for (size_t i = 0; i < count; i++)
    bench_store(buf, i, t, input_keyed(t, op, nranks, rank, i, key));
}

/* ---- expected values ---- */

static uint64_t int_reduce(rcollDataType_t t, rcollRedOp_t op, int nranks, const uint64_t *keys,
                           size_t index) {
  uint64_t acc = input_keyed(t, op, nranks, 0, index, keys[0]).u;
  for (int r = 1; r < nranks; r++) {
    uint64_t x = input_keyed(t, op, nranks, r, index, keys[r]).u;
    int64_t sx = int_value(t, x), sacc = int_value(t, acc);
    switch (op) {
    case rcollProd: acc *= x; break;
    case rcollMax: acc = type_is_signed(t) ? (sx > sacc ? x : acc) : (x > acc ? x : acc); break;
    case rcollMin: acc = type_is_signed(t) ? (sx < sacc ? x : acc) : (x < acc ? x : acc); break;
    default: acc += x; break;
    }
    acc &= width_mask(t);
  }
  if (op == rcollAvg) /* C division of the (in-range) sum, truncating */
    acc = type_is_signed(t) ? (uint64_t)(int_value(t, acc) / nranks) : acc / (uint64_t)nranks;
  return acc & width_mask(t);
}

/* Returns the exact result rounded to the type; *scale receives the
 * magnitude the tolerance is relative to (sum of |inputs| for sum/avg). */
static double float_reduce(rcollDataType_t t, rcollRedOp_t op, int nranks, const uint64_t *keys,
                           size_t index, double *scale) {
  double acc = input_keyed(t, op, nranks, 0, index, keys[0]).f;
  double mag = fabs(acc);
  for (int r = 1; r < nranks; r++) {
    double x = input_keyed(t, op, nranks, r, index, keys[r]).f;
    mag += fabs(x);
    switch (op) {
    case rcollProd: acc *= x; break;
    case rcollMax: acc = x > acc ? x : acc; break;
    case rcollMin: acc = x < acc ? x : acc; break;
    default: acc += x; break;
    }
  }
  if (op == rcollAvg) {
    acc /= nranks;
    mag /= nranks;
  }
  *scale = (op == rcollSum || op == rcollAvg) ? mag : fabs(acc);
  return round_to_type(t, acc);
}

/* Relative tolerance per type, before scaling by the rank count: a few
 * units in the last place, for reductions done in another order. */
static double type_tolerance(rcollDataType_t t) {
  switch (t) {
  case rcollFloat8e5m2: return 0.25; /* 2 mantissa bits, and avg scales by fp8(1/n) first */
  case rcollFloat8e4m3: return 0.125;
  case rcollBfloat16: return 1e-2;
  case rcollFloat16: return 1e-3;
  case rcollFloat32: return 1e-5;
  default: return 1e-12;
  }
}

static int mantissa_bits(rcollDataType_t t) {
  switch (t) {
  case rcollFloat8e4m3: return 3;
  case rcollFloat8e5m2: return 2;
  case rcollBfloat16: return 7;
  case rcollFloat16: return 10;
  case rcollFloat32: return 23;
  default: return 52;
  }
}

/* Whether every partial result, in any order of reduction, is exactly
 * representable: then the result must be exact and any difference, however
 * small, is an error. min/max only select. Sums add multiples of 1/4 of
 * magnitude <= 2, so partial sums need log2(8n) significant bits. Partial
 * products are +-2^k times {1, 1.5, 1.25, 0.75} with |k| <= n, so they are
 * exact while 2^n stays inside the exponent range. avg rounds once when it
 * divides, so it keeps the tolerance. */
static int result_is_exact(rcollDataType_t t, rcollRedOp_t op, int nranks) {
  switch (op) {
  case rcollMax:
  case rcollMin: return 1;
  case rcollSum: return 8.0 * nranks <= ldexp(1.0, mantissa_bits(t) + 1);
  case rcollProd:
    return nranks <= (type_is_fp8(t) ? 6 : t == rcollFloat16 ? 14 : t == rcollFloat64 ? 1000 : 120);
  default: return 0;
  }
}

static int float_matches(double got, double want, double scale, double tol) {
  if (got == want)
    return 1;
  return fabs(got - want) <= tol * fmax(scale, fabs(want)); /* false for NaN */
}

int64_t bench_count_wrong(const bench_coll_t *coll, const bench_call_t *call, uint64_t seed) {
  const rcollDataType_t t = call->type;
  const int n = call->nranks;
  const int is_float = bench_type_is_float(t);
  const double tol = result_is_exact(t, call->op, n) ? 0.0 : type_tolerance(t) * n;
  uint64_t keys[n];
  for (int r = 0; r < n; r++)
    keys[r] = rank_key(seed, r);
  int64_t wrong = 0;
  for (size_t j = 0; j < call->counts.recv_count; j++) {
    bench_src_t src = coll->source(call, j);
    if (src.kind == BENCH_SRC_SKIP)
      continue;
    bench_val_t got = bench_load(call->recv, j, t);
    if (src.kind == BENCH_SRC_COPY) {
      bench_val_t want = input_keyed(t, call->op, n, src.rank, src.index, keys[src.rank]);
      wrong += is_float ? !(got.f == want.f) : got.u != want.u;
    } else if (is_float) {
      double scale;
      double want = float_reduce(t, call->op, n, keys, src.index, &scale);
      wrong += !float_matches(got.f, want, scale, tol);
    } else {
      wrong += got.u != int_reduce(t, call->op, n, keys, src.index);
    }
  }
  return wrong;
}

int64_t bench_count_modified_input(const bench_call_t *call, uint64_t seed) {
  uint64_t key = rank_key(seed, call->rank);
  size_t ws = bench_type_size(call->type);
  int64_t modified = 0;
  for (size_t i = 0; i < call->counts.send_count; i++) {
    bench_val_t want = input_keyed(call->type, call->op, call->nranks, call->rank, i, key);
    unsigned char expect[8];
    bench_store(expect, 0, call->type, want);
    modified += memcmp((const unsigned char *)call->send + i * ws, expect, ws) != 0;
  }
  return modified;
}

/* ---- guards ---- */

static unsigned char guard_byte(size_t i) {
  return (unsigned char)(0x5a ^ (i * 131));
}

void bench_guard_set(unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    p[i] = guard_byte(i);
}

size_t bench_guard_count_bad(const unsigned char *p, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += p[i] != guard_byte(i);
  return bad;
}
