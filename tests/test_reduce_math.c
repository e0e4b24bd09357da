/* The scalar conversions of lib/reduce_math.h (float16 and bfloat16 to and
 * from float), checked against literal bit patterns and, for every one of
 * the 65536 patterns, against the reference codec of tests/reduce_ref.h.
 * The reductions that use them are tests/test_reduce.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "reduce_ref.h"

/* ---- conversions: literal bit patterns ---- */

Test(reduce_math, half_known_patterns) {
  static const struct {
    float in;
    uint16_t out;
  } cases[] = {
      {1.0f, 0x3c00}, {-2.0f, 0xc000}, {0.5f, 0x3800}, {65504.0f, 0x7bff},
      {65519.99f, 0x7bff}, {65520.0f, 0x7c00}, {-65520.0f, 0xfc00}, {1e10f, 0x7c00},
      {INFINITY, 0x7c00}, {-INFINITY, 0xfc00}, {0.0f, 0x0000}, {-0.0f, 0x8000},
      {0x1p-14f, 0x0400}, {0x1p-24f, 0x0001}, {0x3ffp-24f, 0x03ff},
      {0x1p-25f, 0x0000},            /* tie between 0 and the smallest: even (0) */
      {0x1.000002p-25f, 0x0001},     /* just above the tie */
      {0x3p-25f, 0x0002},            /* 1.5 steps: tie, even is 2 */
      {0x5p-25f, 0x0002},            /* 2.5 steps: tie, even is 2 */
      {0x7ffp-25f, 0x0400},          /* 1023.5 steps rounds up into the normals */
      {1.0f + 0x1p-11f, 0x3c00},     /* tie: even mantissa 0 */
      {1.0f + 0x3p-11f, 0x3c02},     /* tie: even mantissa 2 */
      {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01},
      {2049.0f, 0x6800}, {2051.0f, 0x6802}, {1e-10f, 0x0000}, {-1e-10f, 0x8000},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_expect_eq(rcoll_float_to_half(cases[i].in), cases[i].out,
                 "float_to_half(%a) = 0x%04x, want 0x%04x", (double)cases[i].in,
                 rcoll_float_to_half(cases[i].in), cases[i].out);
  static const struct {
    uint16_t in;
    float out;
  } dec[] = {{0x3c00, 1.0f},      {0x7bff, 65504.0f}, {0x0001, 0x1p-24f}, {0x03ff, 0x3ffp-24f},
             {0x0400, 0x1p-14f},  {0x7c00, INFINITY}, {0xfc00, -INFINITY}, {0x8000, -0.0f}};
  for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++)
    cr_expect_eq(fbits(rcoll_half_to_float(dec[i].in)), fbits(dec[i].out), "decode 0x%04x",
                 dec[i].in);
  cr_expect(isnan(rcoll_half_to_float(0x7e00)) && isnan(rcoll_half_to_float(0x7c01)) &&
            isnan(rcoll_half_to_float(0xfe00)));
}

Test(reduce_math, bf16_known_patterns) {
  static const struct {
    float in;
    uint16_t out;
  } cases[] = {
      {1.0f, 0x3f80}, {-2.0f, 0xc000}, {3.0f, 0x4040}, {INFINITY, 0x7f80},
      {-INFINITY, 0xff80}, {-0.0f, 0x8000}, {0x1p-133f, 0x0001}, /* smallest subnormal */
      {1.0f + 0x1p-8f, 0x3f80},                 /* tie: even */
      {1.0f + 0x3p-8f, 0x3f82},                 /* tie: even */
      {1.0f + 0x1p-8f + 0x1p-20f, 0x3f81},
      {0x1.fffffep127f, 0x7f80},                /* FLT_MAX rounds to inf */
      {0x1.fep127f, 0x7f7f},                    /* largest bf16 stays finite */
      {1.0f / 3.0f, 0x3eab},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_expect_eq(rcoll_float_to_bf16(cases[i].in), cases[i].out,
                 "float_to_bf16(%a) = 0x%04x, want 0x%04x", (double)cases[i].in,
                 rcoll_float_to_bf16(cases[i].in), cases[i].out);
  cr_expect_eq(rcoll_bf16_to_float(0x3f80), 1.0f);
  cr_expect_eq(rcoll_bf16_to_float(0x7f80), INFINITY);
  cr_expect(isnan(rcoll_bf16_to_float(0x7fc0)));
  cr_expect(isnan(rcoll_bf16_to_float(0x7f81)));
}

/* A NaN stays a NaN through both directions; in particular a signalling
 * float NaN with only low payload bits must not round to infinity. */
Test(reduce_math, nan_stays_nan) {
  uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfffffu, 0xff800001u,
                     0x7fffffffu};
  for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
    float f = bits_f(nans[i]);
    cr_expect(narrow_is_nan(rcoll_float_to_half(f), fmt_half), "half of 0x%08x", nans[i]);
    cr_expect(narrow_is_nan(rcoll_float_to_bf16(f), fmt_bf16), "bf16 of 0x%08x", nans[i]);
  }
}

/* ---- conversions: exhaustive against the reference codec ---- */

static void check_decode_all(float (*dec)(uint16_t), uint16_t (*enc)(float),
                             struct narrow_fmt f, const char *name) {
  for (uint32_t h = 0; h <= 0xffff; h++) {
    float got = dec((uint16_t)h);
    double want = ref_decode((uint16_t)h, f);
    if (isnan(want)) {
      cr_assert(isnan(got), "%s 0x%04x should decode to NaN", name, h);
      cr_assert(narrow_is_nan(enc(got), f), "%s 0x%04x NaN round trip", name, h);
      continue;
    }
    cr_assert_eq(fbits(got), fbits((float)want), "%s 0x%04x decodes to %a, want %a", name, h,
                 (double)got, want);
    cr_assert_eq(enc(got), h, "%s 0x%04x round trip gives 0x%04x", name, h, enc(got));
  }
}

Test(reduce_math, decode_and_round_trip_all_patterns) {
  check_decode_all(rcoll_half_to_float, rcoll_float_to_half, fmt_half, "half");
  check_decode_all(rcoll_bf16_to_float, rcoll_float_to_bf16, fmt_bf16, "bf16");
}

static void check_encode(uint16_t (*enc)(float), struct narrow_fmt f, float x) {
  uint16_t got = enc(x), want = ref_encode(x, f);
  if (narrow_is_nan(want, f))
    cr_assert(narrow_is_nan(got, f), "encode(%a) should be NaN", (double)x);
  else
    cr_assert_eq(got, want, "encode(%a) = 0x%04x, want 0x%04x", (double)x, got, want);
}

/* Every midpoint between neighbouring values (where round-to-even decides),
 * and the floats one step either side of it. */
static void check_midpoints(uint16_t (*enc)(float), struct narrow_fmt f) {
  uint16_t inf = (uint16_t)((2 * f.emax + 1) << f.mbits);
  for (uint16_t h = 0; h < inf; h++) {
    float mid = (float)((ref_decode(h, f) + ref_decode(h + 1, f)) / 2);
    for (int s = 0; s < 2; s++) {
      float x = s ? -mid : mid;
      check_encode(enc, f, x);
      check_encode(enc, f, nextafterf(x, INFINITY));
      check_encode(enc, f, nextafterf(x, -INFINITY));
    }
  }
}

Test(reduce_math, encode_midpoints) {
  check_midpoints(rcoll_float_to_half, fmt_half);
  check_midpoints(rcoll_float_to_bf16, fmt_bf16);
}

/* A stride through all 2^32 float patterns (odd, so it meets every
 * exponent and sign with varied mantissas). */
Test(reduce_math, encode_float_sweep) {
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4099) {
    check_encode(rcoll_float_to_half, fmt_half, bits_f((uint32_t)u));
    check_encode(rcoll_float_to_bf16, fmt_bf16, bits_f((uint32_t)u));
  }
}
