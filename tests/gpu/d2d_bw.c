/* Device-to-device copy bandwidth of this GPU (cudaMemcpy within one device),
 * measured with CUDA events: the ceiling that rcoll's all-reduce busbw on
 * one GPU is compared with in tests/gpu/run.sh.
 * Usage: d2d_bw [bytes] (default 256 MiB). Prints the copy rate counting the
 * bytes copied once, and the memory traffic (read + write, twice that). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_OK(call)                                                          \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));       \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(int argc, char **argv) {
  size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)256 << 20;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    fprintf(stderr, "d2d_bw: no CUDA device here; skipped\n");
    return 77;
  }
  void *a, *b;
  CUDA_OK(cudaMalloc(&a, bytes));
  CUDA_OK(cudaMalloc(&b, bytes));
  CUDA_OK(cudaMemset(a, 1, bytes));
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; i++) /* warm-up */
    CUDA_OK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  const int iters = 20;
  CUDA_OK(cudaEventRecord(start, 0));
  for (int i = 0; i < iters; i++)
    CUDA_OK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0));
  CUDA_OK(cudaEventRecord(stop, 0));
  CUDA_OK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  double sec = ms / 1e3 / iters;
  struct cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  printf("d2d_bw: %s, %zu bytes per copy, %.1f us per copy: %.1f GB/s copied "
         "(%.1f GB/s of memory traffic, read + write)\n",
         prop.name, bytes, sec * 1e6, bytes / sec / 1e9, 2 * bytes / sec / 1e9);
  return 0;
}
