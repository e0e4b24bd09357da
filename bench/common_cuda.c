/* Device buffers for the benchmarks (-G), through the CUDA runtime loaded
 * with dlopen: the benchmarks, like the library, start and run host buffers
 * on machines without CUDA. Results are copied back to host memory to be
 * checked there by the same code as host runs. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common_impl.h"

enum { CUDA_MEMCPY_HOST_TO_DEVICE = 1, CUDA_MEMCPY_DEVICE_TO_HOST = 2, CUDA_STREAM_NON_BLOCKING = 1 };

static struct {
  int (*get_device_count)(int *);
  int (*set_device)(int);
  int (*malloc)(void **, size_t);
  int (*free)(void *);
  int (*memcpy)(void *, const void *, size_t, int);
  int (*device_synchronize)(void);
  int (*stream_create_with_flags)(void **, unsigned);
  int (*stream_destroy)(void *);
  const char *(*get_error_string)(int);
} rt;
static int rt_devices = -1; /* -1: not probed yet */
static pthread_once_t rt_once = PTHREAD_ONCE_INIT;

static void *rt_open(void) {
  static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so",
                                      "/usr/local/cuda/lib64/libcudart.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h != NULL)
      return h;
  }
  return NULL;
}

static int rt_sym(void *h, const char *name, void *slot) {
  void *p = dlsym(h, name);
  memcpy(slot, &p, sizeof p);
  return p != NULL;
}

static void rt_load(void) {
  rt_devices = 0;
  void *h = rt_open();
  if (h == NULL || !rt_sym(h, "cudaGetDeviceCount", &rt.get_device_count) ||
      !rt_sym(h, "cudaSetDevice", &rt.set_device) || !rt_sym(h, "cudaMalloc", &rt.malloc) ||
      !rt_sym(h, "cudaFree", &rt.free) || !rt_sym(h, "cudaMemcpy", &rt.memcpy) ||
      !rt_sym(h, "cudaDeviceSynchronize", &rt.device_synchronize) ||
      !rt_sym(h, "cudaStreamCreateWithFlags", &rt.stream_create_with_flags) ||
      !rt_sym(h, "cudaStreamDestroy", &rt.stream_destroy) ||
      !rt_sym(h, "cudaGetErrorString", &rt.get_error_string))
    return;
  int n = 0;
  if (rt.get_device_count(&n) == 0 && n > 0)
    rt_devices = n;
}

int bench_cuda_devices(void) {
  pthread_once(&rt_once, rt_load);
  return rt_devices;
}

static void cuda_check(int r, int rank, const char *what) {
  if (r == 0)
    return;
  fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, rt.get_error_string(r));
  exit(BENCH_EXIT_ERROR);
}

/* The device of a rank: its index among the ranks of this machine (the
 * launcher's local rank when there is one), modulo the devices here. */
int bench_cuda_select(int local_index, int rank) {
  static const char *const names[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                      "SLURM_LOCALID"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *v = getenv(names[i]);
    if (v != NULL && *v != '\0') {
      local_index = atoi(v);
      break;
    }
  }
  int dev = local_index % bench_cuda_devices();
  cuda_check(rt.set_device(dev), rank, "cudaSetDevice");
  return dev;
}

void *bench_cuda_alloc(size_t bytes, int rank) {
  void *p = NULL;
  cuda_check(rt.malloc(&p, bytes), rank, "cudaMalloc");
  return p;
}

void bench_cuda_free(void *p) {
  if (p != NULL)
    rt.free(p);
}

void bench_cuda_upload(void *dev, const void *host, size_t bytes, int rank) {
  cuda_check(rt.memcpy(dev, host, bytes, CUDA_MEMCPY_HOST_TO_DEVICE), rank, "cudaMemcpy to device");
}

void bench_cuda_download(void *host, const void *dev, size_t bytes, int rank) {
  cuda_check(rt.memcpy(host, dev, bytes, CUDA_MEMCPY_DEVICE_TO_HOST), rank, "cudaMemcpy to host");
}

/* Device calls return before they finish: wait for everything queued. */
void bench_cuda_sync(int rank) {
  cuda_check(rt.device_synchronize(), rank, "cudaDeviceSynchronize");
}

void *bench_cuda_stream_create(int rank) {
  void *s = NULL;
  cuda_check(rt.stream_create_with_flags(&s, CUDA_STREAM_NON_BLOCKING), rank,
             "cudaStreamCreateWithFlags");
  return s;
}

void bench_cuda_stream_destroy(void *stream) {
  if (stream != NULL)
    rt.stream_destroy(stream);
}
