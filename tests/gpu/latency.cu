/* What the GPU round trips that a small device call is made of cost on this
 * machine, each the median of many (issue 16 asks where each microsecond of
 * an 8-byte call goes). A call bounced through host memory
 * (lib/cuda/bounce.h) queues, on the user's stream:
 *   copy the input to a pinned slot; event; wait for the proxy's flag
 *   (cuStreamWaitValue32); copy the result back; event
 * and the proxy polls the first event, runs the host plan and writes the
 * flag. Between the proxy's flag of one call and the first event of the
 * next (queued behind it) the stream does: the wait's release, the copy
 * back, the next copy in and its event: "bounce gap" below, the device's
 * share of every bounced call. "kernel gap" is the same hand-over done by
 * one kernel that polls the flag in mapped host memory and copies the 8
 * bytes itself (what NCCL's kernels do with its proxy), for comparison.
 *
 * Usage: latency [rounds] (default 300). Prints one line per measure:
 *   latency: NAME: median X us (p10 Y, p90 Z)
 * Exit 77 without a GPU, 1 when a CUDA call fails. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define OK(call)                                                                           \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "latency: %s failed: %s\n", #call, cudaGetErrorString(e_));          \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

typedef CUresult (*wait_value_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static wait_value_fn wait_value;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void report(const char *name, double *t, int n) {
  qsort(t, n, sizeof *t, cmp);
  printf("latency: %s: median %.1f us (p10 %.1f, p90 %.1f)\n", name, t[n / 2], t[n / 10], t[n * 9 / 10]);
}

static void wait_event(cudaEvent_t e) {
  cudaError_t r;
  while ((r = cudaEventQuery(e)) == cudaErrorNotReady)
    ;
  OK(r);
}

static void stream_wait(cudaStream_t s, volatile uint32_t *flag_dev_view, uint32_t v) {
  CUresult r = wait_value((CUstream)s, (CUdeviceptr)(uintptr_t)flag_dev_view, v, CU_STREAM_WAIT_VALUE_GEQ);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "latency: cuStreamWaitValue32 failed (CUresult %d)\n", (int)r);
    exit(1);
  }
}

/* t[i]: an 8-byte copy queued, then its event seen. */
static void copies(double *t, int rounds, cudaStream_t s, cudaEvent_t ev, void *dst, const void *src,
                   cudaMemcpyKind kind) {
  for (int i = 0; i < rounds; i++) {
    double t0 = now_us();
    OK(cudaMemcpyAsync(dst, src, 8, kind, s));
    OK(cudaEventRecord(ev, s));
    wait_event(ev);
    t[i] = now_us() - t0;
  }
}

/* Round i: wait until *flag >= i, copy the 8 bytes to host memory, then say
 * so in *ack. Gives up after ~2 s of one round (a host that stopped). */
__global__ void kernel_rounds(volatile uint32_t *flag, volatile uint32_t *ack, const uint64_t *src,
                              volatile uint64_t *dst, int rounds) {
  for (int i = 1; i <= rounds; i++) {
    unsigned long long t0 = clock64();
    while (*flag < (uint32_t)i)
      if (clock64() - t0 > 4000000000ull)
        return;
    *dst = src[0] + (uint64_t)i;
    __threadfence_system();
    *ack = (uint32_t)i;
  }
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 300, ndev = 0;
  if (rounds < 20)
    rounds = 20;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    fprintf(stderr, "latency: no CUDA device here; skipped\n");
    return 77;
  }
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  wait_value = drv ? (wait_value_fn)dlsym(drv, "cuStreamWaitValue32_v2") : NULL;
  if (wait_value == NULL) {
    fprintf(stderr, "latency: no cuStreamWaitValue32_v2 in libcuda.so.1\n");
    return 1;
  }
  cudaStream_t s;
  OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  uint64_t *dev;
  OK(cudaMalloc((void **)&dev, 64));
  OK(cudaMemset(dev, 0, 64));
  uint64_t *host; /* pinned and mapped: [0] in, [1] out; then the flags */
  OK(cudaHostAlloc((void **)&host, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
  volatile uint32_t *flag = (volatile uint32_t *)(host + 8), *ack = (volatile uint32_t *)(host + 16);
  uint32_t *flag_dev, *ack_dev;
  uint64_t *host_dev;
  OK(cudaHostGetDevicePointer((void **)&flag_dev, (void *)flag, 0));
  OK(cudaHostGetDevicePointer((void **)&ack_dev, (void *)ack, 0));
  OK(cudaHostGetDevicePointer((void **)&host_dev, host, 0));
  cudaEvent_t ev[4];
  for (int i = 0; i < 4; i++)
    OK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
  double *t = (double *)calloc(rounds, sizeof *t);

  /* Warm-up: the first calls load modules and map memory. */
  for (int i = 0; i < 20; i++) {
    OK(cudaMemcpyAsync(host, dev, 8, cudaMemcpyDeviceToHost, s));
    OK(cudaStreamSynchronize(s));
  }
  kernel_rounds<<<1, 1, 0, s>>>((volatile uint32_t *)flag_dev, (volatile uint32_t *)ack_dev, dev,
                                (volatile uint64_t *)host_dev, 0);
  OK(cudaStreamSynchronize(s));

  for (int i = 0; i < rounds; i++) {
    double t0 = now_us();
    OK(cudaStreamSynchronize(s));
    t[i] = now_us() - t0;
  }
  report("cudaStreamSynchronize, nothing queued", t, rounds);

  for (int i = 0; i < rounds; i++) {
    double t0 = now_us();
    OK(cudaEventRecord(ev[0], s));
    wait_event(ev[0]);
    t[i] = now_us() - t0;
  }
  report("event recorded and seen (cudaEventQuery), nothing queued", t, rounds);

  copies(t, rounds, s, ev[0], host, dev, cudaMemcpyDeviceToHost);
  report("8-byte copy to pinned host memory, queued and seen done", t, rounds);
  copies(t, rounds, s, ev[0], dev, host + 1, cudaMemcpyHostToDevice);
  report("8-byte copy from pinned host memory, queued and seen done", t, rounds);

  /* The stream waits for a flag in host memory: from the host's store to
   * the event after the wait. */
  *flag = 0;
  for (int i = 0; i < rounds; i++) {
    stream_wait(s, (volatile uint32_t *)flag_dev, (uint32_t)i + 1);
    OK(cudaEventRecord(ev[0], s));
    double w0 = now_us();
    while (now_us() - w0 < 20) /* the wait reaches the GPU */
      ;
    double t0 = now_us();
    *flag = (uint32_t)i + 1;
    wait_event(ev[0]);
    t[i] = now_us() - t0;
  }
  report("cuStreamWaitValue32 released by a host store, event seen", t, rounds);

  /* The bounce's hand-over: call i's copy in, event A, wait, copy back,
   * event B; call i+1 queued behind. From the flag of call i to call i+1's
   * event A: what the device adds to each bounced call in a stream of them. */
  *flag = 0;
  for (int i = 0; i <= rounds; i++) {
    int a = (i % 2) * 2;
    OK(cudaMemcpyAsync(host, dev, 8, cudaMemcpyDeviceToHost, s));
    OK(cudaEventRecord(ev[a], s));
    stream_wait(s, (volatile uint32_t *)flag_dev, (uint32_t)i + 1);
    OK(cudaMemcpyAsync(dev, host + 1, 8, cudaMemcpyHostToDevice, s));
    OK(cudaEventRecord(ev[a + 1], s));
    if (i == 0)
      continue;
    int prev = ((i - 1) % 2) * 2;
    wait_event(ev[prev]); /* call i-1's input is in host memory */
    double w0 = now_us();
    while (now_us() - w0 < 20) /* call i is queued behind the wait */
      ;
    double t0 = now_us();
    *flag = (uint32_t)i; /* the proxy's flag for call i-1 */
    wait_event(ev[a]);   /* call i's input is in host memory */
    t[i - 1] = now_us() - t0;
  }
  *flag = (uint32_t)rounds + 1;
  OK(cudaStreamSynchronize(s));
  report("bounce gap: flag of a call to the next call's input in host memory", t, rounds);

  /* The same hand-over by one kernel polling the flag in host memory. */
  *flag = 0;
  *ack = 0;
  kernel_rounds<<<1, 1, 0, s>>>((volatile uint32_t *)flag_dev, (volatile uint32_t *)ack_dev, dev,
                                (volatile uint64_t *)host_dev, rounds);
  OK(cudaGetLastError());
  for (int i = 0; i < rounds; i++) {
    double w0 = now_us();
    while (now_us() - w0 < 20)
      ;
    double t0 = now_us();
    *flag = (uint32_t)i + 1;
    while (*ack < (uint32_t)i + 1)
      if (now_us() - t0 > 2e6) {
        fprintf(stderr, "latency: the kernel did not answer round %d\n", i + 1);
        return 1;
      }
    t[i] = now_us() - t0;
  }
  OK(cudaStreamSynchronize(s));
  report("kernel gap: flag to 8 bytes in host memory, by a polling kernel", t, rounds);
  return 0;
}
