/* Throughput of rcoll_reduce on host buffers, in GB/s of output written
 * (each output byte also costs two input bytes read).
 *
 *   bench_reduce [MiB of output, default 16] [iterations, default 20]
 *   bench_reduce --device [MiB, default 256] [iterations, default 20]
 *
 * Prints one line per type, for sum out-of-place and in-place (dst == a),
 * with the best and the mean of the timed iterations.
 *
 * --device times the reduce kernel (rcoll_cuda_reduce, the one the device
 * path launches) on device buffers of device 0 beside a device-to-device
 * copy of the same size in the same run. Both are memory-bound, so they are
 * compared by memory traffic: a copy moves 2 bytes per byte copied, a
 * reduce 3 per byte of output; "% of copy" is reduce traffic over copy
 * traffic (100 %: the kernel streams as fast as the copy engine's copy).
 * Exit 77 where there is no CUDA device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda_api.h"
#include "cuda/module.h"
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

/* ---- --device ---- */

/* Seconds per call of fn(arg) on stream s, best of `iters` after 2 warm-ups
 * (each call waited for: one kernel or copy of 256 MiB takes far longer than
 * the launch, so the wait costs little). */
static double time_device(const rcoll_cuda_api_t *api, rcoll_cuda_stream_t s, int iters,
                          int (*fn)(void *), void *arg) {
  double best = 1e30;
  for (int i = -2; i < iters; i++) {
    double t0 = now_s();
    if (fn(arg) != 0 || api->stream_synchronize(s) != 0)
      return -1;
    double dt = now_s() - t0;
    if (i >= 0 && dt < best)
      best = dt;
  }
  return best;
}

typedef struct dev_call {
  const rcoll_cuda_api_t *api;
  rcoll_cuda_stream_t s;
  void *d, *a, *b;
  size_t bytes;
  rcollDataType_t t;
} dev_call_t;

static int dev_copy(void *arg) {
  dev_call_t *c = arg;
  return c->api->memcpy_async(c->d, c->a, c->bytes, RCOLL_CUDA_MEMCPY_DEFAULT, c->s);
}

static int dev_reduce(void *arg) {
  dev_call_t *c = arg;
  return rcoll_cuda_reduce(c->d, c->a, c->b, c->bytes / rcoll_type_size(c->t), c->t, rcollSum,
                           c->s) != rcollSuccess;
}

static int bench_device(size_t mib, int iters) {
  const rcoll_cuda_api_t *api = rcoll_cuda_api();
  int ndev = 0;
  if (api == NULL || api->get_device_count(&ndev) != 0 || ndev < 1) {
    printf("# bench_reduce --device: skipped, no CUDA device (%s)\n", api ? "none" : rcoll_cuda_api_why());
    return 77;
  }
  size_t bytes = mib << 20;
  dev_call_t c = {.api = api, .bytes = bytes};
  unsigned char *host = malloc(bytes);
  if (host == NULL || api->set_device(0) != 0 || rcoll_cuda_module_load(0) != rcollSuccess ||
      api->stream_create_with_flags(&c.s, RCOLL_CUDA_STREAM_NON_BLOCKING) != 0 ||
      api->malloc(&c.a, bytes) != 0 || api->malloc(&c.b, bytes) != 0 || api->malloc(&c.d, bytes) != 0) {
    fprintf(stderr, "bench_reduce --device: setting up %zu MiB buffers on device 0 failed\n", mib);
    return 1;
  }
  fill(host, bytes);
  api->memcpy_async(c.a, host, bytes, RCOLL_CUDA_MEMCPY_DEFAULT, c.s);
  api->memcpy_async(c.b, host, bytes, RCOLL_CUDA_MEMCPY_DEFAULT, c.s);
  api->stream_synchronize(c.s);
  double copy = time_device(api, c.s, iters, dev_copy, &c);
  printf("# device 0: %zu MiB, best of %d: d2d copy %.1f GB/s copied (%.1f GB/s of traffic)\n", mib,
         iters, bytes / copy * 1e-9, 2 * bytes / copy * 1e-9);
  printf("# %-9s %14s %14s %10s\n", "type", "output GB/s", "traffic GB/s", "% of copy");
  static const rcollDataType_t types[] = {rcollFloat32, rcollBfloat16, rcollFloat16, rcollFloat64,
                                          rcollInt8};
  int rc = copy > 0 ? 0 : 1;
  for (size_t k = 0; k < sizeof types / sizeof types[0] && rc == 0; k++) {
    c.t = types[k];
    double dt = time_device(api, c.s, iters, dev_reduce, &c);
    if (dt <= 0) {
      fprintf(stderr, "bench_reduce --device: the %s reduce failed\n", rcoll_type_name(c.t));
      rc = 1;
      break;
    }
    printf("  %-9s %14.1f %14.1f %9.1f%%\n", rcoll_type_name(c.t), bytes / dt * 1e-9,
           3 * bytes / dt * 1e-9, 100 * (3 * bytes / dt) / (2 * bytes / copy));
  }
  api->free(c.a), api->free(c.b), api->free(c.d);
  free(host);
  return rc;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--device") == 0)
    return bench_device(argc > 2 ? strtoul(argv[2], NULL, 10) : 256, argc > 3 ? atoi(argv[3]) : 20);
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
