/* Throughput of rcoll_reduce on host buffers, in GB/s of output written
 * (each output byte also costs two input bytes read).
 *
 *   bench_reduce [MiB of output, default 16] [iterations, default 20]
 *
 * Prints one line per type, for sum out-of-place and in-place (dst == a),
 * with the best and the mean of the timed iterations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reduce.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs one reduction `iters` times after two warm-up calls (first touch of
 * the pages must not be timed); returns best and mean seconds. */
static void time_reduce(void *dst, const void *a, const void *b, size_t count,
                        rcollDataType_t t, rcollRedOp_t op, int iters, double *best,
                        double *mean) {
  double total = 0;
  *best = 1e30;
  for (int i = -2; i < iters; i++) {
    double t0 = now_s();
    rcoll_reduce(dst, a, b, count, t, op);
    double dt = now_s() - t0;
    if (i < 0)
      continue;
    total += dt;
    *best = dt < *best ? dt : *best;
  }
  *mean = total / iters;
}

/* Inputs are small positive values (bytes 0x01..0x3f repeated) so that no
 * type runs on NaN or inf, which could take a different speed path. */
static void fill(unsigned char *p, size_t bytes) {
  for (size_t i = 0; i < bytes; i++)
    p[i] = (unsigned char)(1 + i % 0x3f);
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 16;
  int iters = argc > 2 ? atoi(argv[2]) : 20;
  size_t bytes = mib << 20;
  if (bytes == 0 || iters <= 0) {
    fprintf(stderr, "usage: %s [MiB] [iterations]\n", argv[0]);
    return 2;
  }
  unsigned char *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
  unsigned char *d = aligned_alloc(64, bytes);
  if (!a || !b || !d) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  fill(a, bytes), fill(b, bytes), memset(d, 0, bytes);
  static const rcollDataType_t types[] = {rcollFloat32, rcollBfloat16, rcollFloat16,
                                          rcollFloat64, rcollInt32, rcollInt8,
                                          rcollFloat8e4m3, rcollFloat8e5m2};
  printf("# rcoll_reduce sum, %zu MiB output, %d iterations: GB/s of output\n", mib, iters);
  printf("# %-9s %12s %12s %12s %12s\n", "type", "oop best", "oop mean", "inpl best",
         "inpl mean");
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
    size_t count = bytes / rcoll_type_size(types[k]);
    double ob, om, ib, im;
    time_reduce(d, a, b, count, types[k], rcollSum, iters, &ob, &om);
    fill(d, bytes);
    time_reduce(d, d, b, count, types[k], rcollSum, iters, &ib, &im);
    printf("  %-9s %12.2f %12.2f %12.2f %12.2f\n", rcoll_type_name(types[k]), bytes / ob * 1e-9,
           bytes / om * 1e-9, bytes / ib * 1e-9, bytes / im * 1e-9);
  }
  free(a), free(b), free(d);
  return 0;
}
