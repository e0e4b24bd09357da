/* An all-reduce on GPU memory: buffers from cudaMalloc, the call queued on a
 * CUDA stream, as a trainer's gradients would be. One process per rank (the
 * usual one GPU per process), launched like init_from_env:
 *
 *   RANK=0 WORLD_SIZE=2 RCOLL_COMM_ID=127.0.0.1:29555 examples/bin/device_buffers &
 *   RANK=1 WORLD_SIZE=2 RCOLL_COMM_ID=127.0.0.1:29555 examples/bin/device_buffers
 *   torchrun --standalone --nproc_per_node=2 --no_python examples/bin/device_buffers
 *
 * Ranks share the GPUs round-robin (LOCAL_RANK, else RANK, modulo the device
 * count), so two ranks on a one-GPU machine work too.
 *
 * make builds it always: with the CUDA runtime (-DWITH_CUDA, -lcudart) where
 * configure found a CUDA toolkit, else without. Where there is no GPU, or
 * it was built without CUDA, it says so and exits 77 ("skipped"). */
#include <stdio.h>
#include <stdlib.h>

#include "rcoll.h"

#define SKIPPED 77

#ifdef WITH_CUDA
#include <cuda_runtime_api.h>

#define COUNT (1 << 20)

#define CUDA_OK(call)                                                               \
  do {                                                                              \
    cudaError_t e_ = (call);                                                        \
    if (e_ != cudaSuccess) {                                                        \
      fprintf(stderr, "device_buffers: %s: %s\n", #call, cudaGetErrorString(e_)); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

static int env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : fallback;
}

static int fail(const char *what, rcollResult_t r, rcollComm_t comm) {
  fprintf(stderr, "device_buffers: %s: %s: %s\n", what, rcollGetErrorString(r),
          rcollGetLastError(comm));
  return 1;
}

int main(void) {
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    printf("device_buffers: needs a CUDA GPU; none here (%s): skipped\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return SKIPPED;
  }
  /* Choose the GPU before init, as with NCCL: the communicator belongs to it. */
  CUDA_OK(cudaSetDevice(env_int("LOCAL_RANK", env_int("RANK", 0)) % ndev));
  rcollComm_t comm;
  rcollResult_t r = rcollCommInitFromEnv(&comm, NULL);
  if (r != rcollSuccess)
    return fail("rcollCommInitFromEnv", r, NULL);
  int rank, size;
  rcollCommUserRank(comm, &rank);
  rcollCommCount(comm, &size);

  /* The input is made on the host and copied up; rank r holds r + 1 everywhere. */
  float *host = malloc(COUNT * sizeof *host), *dev = NULL;
  if (host == NULL)
    return fail("malloc", rcollSystemError, NULL);
  for (int i = 0; i < COUNT; i++)
    host[i] = (float)(rank + 1);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA_OK(cudaMalloc((void **)&dev, COUNT * sizeof *dev));
  CUDA_OK(cudaMemcpyAsync(dev, host, COUNT * sizeof *dev, cudaMemcpyHostToDevice, stream));

  /* Queued after the copy on the same stream, and returns at once: the sum
   * happens when the stream gets there. Work queued after it (the copy back)
   * waits for it. */
  r = rcollAllReduce(dev, dev, COUNT, rcollFloat32, rcollSum, comm, stream);
  if (r != rcollSuccess)
    return fail("rcollAllReduce", r, comm);
  CUDA_OK(cudaMemcpyAsync(host, dev, COUNT * sizeof *dev, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  /* Errors of a queued call show up here, not as its return value. */
  rcollResult_t async = rcollSuccess;
  rcollCommGetAsyncError(comm, &async);
  if (async != rcollSuccess)
    return fail("the queued all-reduce", async, comm);

  float want = (float)size * (size + 1) / 2;
  long wrong = 0;
  for (int i = 0; i < COUNT; i++)
    wrong += host[i] != want;
  printf("rank %d of %d (GPU %d): all-reduce of %d floats in device memory: %s (%.0f)\n", rank,
         size, env_int("LOCAL_RANK", env_int("RANK", 0)) % ndev, COUNT,
         wrong ? "WRONG" : "every element correct", want);
  cudaFree(dev);
  cudaStreamDestroy(stream);
  free(host);
  rcollCommDestroy(comm);
  return wrong ? 1 : 0;
}

#else /* built without a CUDA toolkit */

int main(void) {
  int version = 0;
  rcollGetVersion(&version);
  printf("device_buffers: needs a CUDA GPU, and was built without CUDA (configure found no "
         "toolkit; rcoll %d.%d.%d, docs/gpu.md): skipped\n", version / 10000, version / 100 % 100,
         version % 100);
  return SKIPPED;
}

#endif
