/* fp8 (rcollFloat8e4m3, rcollFloat8e5m2): the conversions of lib/reduce_math.h
 * against literal bit patterns and against the libm reference codec of
 * tests/reduce_ref.h, over every fp8 value and every float16 value; and the
 * arithmetic NCCL 2.28.9 does (in half, then back to fp8, saturating) on
 * spelled-out cases. tests/test_reduce.c sweeps the loops over random bits. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "rcoll.h"
#include "reduce.h"
#include "reduce_math.h"
#include "reduce_ref.h"

Test(fp8, literal_encodings) {
  cr_expect_eq(rcoll_e4m3_to_float(0x38), 1.0f);
  cr_expect_eq(rcoll_e4m3_to_float(0x7e), 448.0f, "largest e4m3");
  cr_expect(isnan(rcoll_e4m3_to_float(0x7f)), "S.1111.111 is e4m3's NaN");
  cr_expect(isnan(rcoll_e4m3_to_float(0xff)));
  cr_expect_eq(rcoll_e4m3_to_float(0x78), 256.0f, "e4m3 has no infinity: exponent 15 is a number");
  cr_expect_eq(rcoll_e4m3_to_float(0x01), 0x1p-9f, "smallest e4m3 subnormal");
  cr_expect_eq(rcoll_e4m3_to_float(0xb8), -1.0f);
  cr_expect_eq(rcoll_e5m2_to_float(0x3c), 1.0f);
  cr_expect_eq(rcoll_e5m2_to_float(0x7b), 57344.0f, "largest e5m2");
  cr_expect(isinf(rcoll_e5m2_to_float(0x7c)) && rcoll_e5m2_to_float(0x7c) > 0);
  cr_expect(isnan(rcoll_e5m2_to_float(0x7d)));
  cr_expect_eq(rcoll_e5m2_to_float(0x01), 0x1p-16f, "smallest e5m2 subnormal");
  cr_expect_eq(rcoll_float_to_e4m3(1.0f), 0x38);
  cr_expect_eq(rcoll_float_to_e4m3(1e6f), 0x7e, "saturates to 448");
  cr_expect_eq(rcoll_float_to_e4m3(-INFINITY), 0xfe, "infinity saturates too");
  cr_expect_eq(rcoll_float_to_e4m3(464.0f), 0x7e, "the tie above 448 goes to the even 448");
  cr_expect_eq(rcoll_float_to_e5m2(61440.0f), 0x7b, "the tie above 57344 saturates");
  cr_expect_eq(rcoll_float_to_e5m2(INFINITY), 0x7b);
  cr_expect_eq(rcoll_float_to_e4m3(0x1p-10f), 0x00, "half the smallest subnormal ties to 0");
  cr_expect_eq(rcoll_float_to_e4m3(0x1.8p-9f), 0x02, "1.5 subnormal steps tie to the even 2");
  cr_expect_eq(rcoll_float_to_e4m3(-0.0f), 0x80);
  cr_expect_eq(rcoll_float_to_e4m3(NAN), 0x7f);
  cr_expect(isnan(rcoll_e5m2_to_float(rcoll_float_to_e5m2(NAN))));
}

/* Every fp8 value decodes to the reference's value (NaN to NaN). */
Test(fp8, decode_every_value) {
  for (int v = 0; v < 256; v++)
    for (int e4m3 = 0; e4m3 < 2; e4m3++) {
      double want = ref_fp8_decode((uint8_t)v, e4m3);
      float got = e4m3 ? rcoll_e4m3_to_float((uint8_t)v) : rcoll_e5m2_to_float((uint8_t)v);
      if (isnan(want))
        cr_assert(isnan(got), "%s 0x%02x should be NaN", e4m3 ? "e4m3" : "e5m2", v);
      else
        cr_assert_eq((double)got, want, "%s 0x%02x: %g, want %g", e4m3 ? "e4m3" : "e5m2", v, got, want);
    }
}

/* Narrowing: every float16 value (NCCL narrows from half) and the midpoints
 * between consecutive fp8 values, against the reference encoder. */
Test(fp8, encode_every_half_and_every_midpoint) {
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = rcoll_half_to_float((uint16_t)h);
    for (int e4m3 = 0; e4m3 < 2; e4m3++) {
      uint8_t got = rcoll_float_to_fp8(f, e4m3 ? 3 : 2, e4m3 ? 7 : 15, e4m3);
      uint8_t want = ref_fp8_encode(f, e4m3);
      if (isnan(f))
        cr_assert(isnan(ref_fp8_decode(got, e4m3)), "half 0x%04x: NaN stays NaN", h);
      else
        cr_assert_eq(got, want, "%s of half 0x%04x (%g): 0x%02x, want 0x%02x", e4m3 ? "e4m3" : "e5m2",
                     h, f, got, want);
    }
  }
  for (int v = 0; v < 0x7f; v++)
    for (int e4m3 = 0; e4m3 < 2; e4m3++) {
      double a = ref_fp8_decode((uint8_t)v, e4m3), b = ref_fp8_decode((uint8_t)(v + 1), e4m3);
      if (isnan(a) || isnan(b) || isinf(b))
        continue;
      float mid = (float)((a + b) / 2);
      uint8_t got = e4m3 ? rcoll_float_to_fp8(mid, 3, 7, 1) : rcoll_float_to_fp8(mid, 2, 15, 0);
      cr_assert_eq(got, ref_fp8_encode(mid, e4m3), "%s midpoint above 0x%02x", e4m3 ? "e4m3" : "e5m2", v);
      cr_assert_eq(got & 1, 0, "ties go to even");
    }
}

/* NCCL's arithmetic: in half, back to fp8 saturating. */
Test(fp8, arithmetic_as_nccl) {
  uint8_t a[] = {0x7e, 0x38, 0x3c, 0x01}, b[] = {0x7e, 0x38, 0x18, 0x01}, d[4];
  rcoll_reduce(d, a, b, 4, rcollFloat8e4m3, rcollSum);
  cr_expect_eq(d[0], 0x7e, "448 + 448 saturates to 448");
  cr_expect_eq(d[1], 0x40, "1 + 1 = 2");
  cr_expect_eq(d[2], 0x3c, "1.5 + 0.0625 = 1.5625, a tie, rounds to the even 1.5");
  cr_expect_eq(d[3], 0x02, "subnormals add exactly");
  uint8_t x[] = {0x7b, 0x7c, 0x7c}, y[] = {0x7b, 0x3c, 0xfc}, e[3];
  rcoll_reduce(e, x, y, 3, rcollFloat8e5m2, rcollSum);
  cr_expect_eq(e[0], 0x7b, "57344 + 57344 overflows half to inf, which saturates");
  cr_expect_eq(e[1], 0x7b, "inf + 1 saturates to the largest finite (SATFINITE)");
  cr_expect(isnan(rcoll_e5m2_to_float(e[2])), "inf + -inf is NaN");
  rcoll_reduce(e, x, y, 1, rcollFloat8e5m2, rcollProd);
  cr_expect_eq(e[0], 0x7b, "products saturate too");
  uint8_t n[] = {0x7f, 0x38}, m[] = {0x38, 0xb8}, r[2];
  rcoll_reduce(r, n, m, 2, rcollFloat8e4m3, rcollMax);
  cr_expect_eq(r[0], 0x7f, "max propagates NaN (rcoll's rule for every floating type)");
  cr_expect_eq(r[1], 0x38);
  uint8_t s[] = {0x48}; /* 4.0 */
  rcoll_reduce_finish(s, 1, rcollFloat8e4m3, rcollAvg, 3);
  cr_expect_eq(s[0], ref_fp8_encode(ref_decode(ref_encode(4.0 / 3, fmt_half), fmt_half), 1), "4/3");
}

/* Through a real collective: two ranks of this process (rcollCommInitAll),
 * driven from one thread inside a group. NCCL's fp8 avg scales each input
 * by fp8(1/nranks) before summing, so 448 and 448 average to 448; a sum
 * divided afterwards would saturate first (448) and give 224. */
Test(fp8, allreduce_avg_scales_first_as_nccl, .timeout = 120) {
  setenv("RCOLL_TIMEOUT", "30", 1);
  rcollComm_t comms[2];
  cr_assert_eq(rcollCommInitAll(comms, 2, NULL), rcollSuccess, "%s", rcollGetLastError(NULL));
  static const rcollDataType_t types[2] = {rcollFloat8e4m3, rcollFloat8e5m2};
  static const uint8_t largest[2] = {0x7e, 0x7b};
  for (int k = 0; k < 2; k++) {
    uint8_t in[2][3], out[2][3];
    for (int r = 0; r < 2; r++) {
      in[r][0] = largest[k];
      in[r][1] = rcoll_float_to_fp8(r ? 3.0f : 1.0f, k ? 2 : 3, k ? 15 : 7, !k);
      in[r][2] = 0x80; /* -0 */
    }
    for (rcollRedOp_t op = rcollSum; op <= rcollAvg; op = op == rcollSum ? rcollAvg : rcollNumOps) {
      cr_assert_eq(rcollGroupStart(), rcollSuccess);
      for (int r = 0; r < 2; r++)
        cr_assert_eq(rcollAllReduce(in[r], out[r], 3, types[k], op, comms[r], NULL), rcollSuccess, "%s",
                     rcollGetLastError(comms[r]));
      cr_assert_eq(rcollGroupEnd(), rcollSuccess, "%s", rcollGetLastError(NULL));
      for (int r = 0; r < 2; r++) {
        cr_expect_eq(out[r][0], largest[k], "%s %s of the largest value: 0x%02x", rcoll_type_name(types[k]),
                     rcoll_op_name(op), out[r][0]);
        float want = op == rcollSum ? 4.0f : 2.0f;
        float got = k ? rcoll_e5m2_to_float(out[r][1]) : rcoll_e4m3_to_float(out[r][1]);
        cr_expect_eq(got, want, "%s %s of 1 and 3: %g", rcoll_type_name(types[k]), rcoll_op_name(op), got);
        cr_expect_eq(out[r][2], 0x80, "-0 + -0 is -0");
      }
    }
  }
  for (int r = 0; r < 2; r++)
    cr_expect_eq(rcollCommDestroy(comms[r]), rcollSuccess);
}

/* PreMulSum on fp8: each rank's input times its own fp8 scalar (in half,
 * back to fp8), then summed: 1 x 0.5 + 3 x 2.0 = 6.5, which e4m3 rounds to
 * 6.5 exactly (1.101b x 4) and e5m2 to 6 (ties to even: 1.10b x 4). */
Test(fp8, premulsum_scales_each_rank, .timeout = 120) {
  setenv("RCOLL_TIMEOUT", "30", 1);
  rcollComm_t comms[2];
  cr_assert_eq(rcollCommInitAll(comms, 2, NULL), rcollSuccess, "%s", rcollGetLastError(NULL));
  static const rcollDataType_t types[2] = {rcollFloat8e4m3, rcollFloat8e5m2};
  static const float want[2] = {6.5f, 6.0f};
  for (int k = 0; k < 2; k++) {
    int mb = k ? 2 : 3, bias = k ? 15 : 7, e4m3 = !k;
    uint8_t scalar[2] = {rcoll_float_to_fp8(0.5f, mb, bias, e4m3), rcoll_float_to_fp8(2.0f, mb, bias, e4m3)};
    uint8_t in[2] = {rcoll_float_to_fp8(1.0f, mb, bias, e4m3), rcoll_float_to_fp8(3.0f, mb, bias, e4m3)};
    uint8_t out[2];
    rcollRedOp_t op[2];
    for (int r = 0; r < 2; r++)
      cr_assert_eq(rcollRedOpCreatePreMulSum(&op[r], &scalar[r], types[k], rcollScalarHostImmediate, comms[r]),
                   rcollSuccess, "%s", rcollGetLastError(comms[r]));
    cr_assert_eq(rcollGroupStart(), rcollSuccess);
    for (int r = 0; r < 2; r++)
      cr_assert_eq(rcollAllReduce(&in[r], &out[r], 1, types[k], op[r], comms[r], NULL), rcollSuccess);
    cr_assert_eq(rcollGroupEnd(), rcollSuccess, "%s", rcollGetLastError(NULL));
    for (int r = 0; r < 2; r++) {
      float got = k ? rcoll_e5m2_to_float(out[r]) : rcoll_e4m3_to_float(out[r]);
      cr_expect_eq(got, want[k], "%s rank %d: %g", rcoll_type_name(types[k]), r, got);
      cr_expect_eq(rcollRedOpDestroy(op[r], comms[r]), rcollSuccess);
    }
  }
  for (int r = 0; r < 2; r++)
    rcollCommDestroy(comms[r]);
}
