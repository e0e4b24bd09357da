/* The device side of rcollMemAlloc/rcollMemFree and of the device a
 * communicator binds at init (lib/device.h's mem_alloc, mem_free,
 * current_device, set_device). NCCL 2.28.9 allocates with the cuMem* (VMM)
 * API rounded to the allocation granularity, so that the memory can be
 * exported to peers; rcoll's device path shares buffers by CUDA IPC, which
 * works on cudaMalloc memory, so plain cudaMalloc is enough here. */
#include "cuda/cuda_api.h"
#include "cuda/cuda_comm.h"
#include "error.h"

/* The table, only when it has at least one device. */
static const rcoll_cuda_api_t *api_with_device(void) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  int n = 0;
  if (a == NULL || a->get_device_count(&n) != 0 || n <= 0)
    return NULL;
  return a;
}

rcollResult_t rcoll_cuda_mem_alloc(void **ptr, size_t bytes) {
  *ptr = NULL;
  const rcoll_cuda_api_t *a = api_with_device();
  if (a == NULL)
    return rcollSuccess;
  int r = a->malloc(ptr, bytes);
  if (r != 0) {
    *ptr = NULL;
    a->get_last_error(); /* not sticky for the next call */
    return rcoll_error(rcollUnhandledCudaError, "rcollMemAlloc: cudaMalloc of %zu bytes failed: %s", bytes,
                       rcoll_cuda_strerror(r));
  }
  return rcollSuccess;
}

rcollResult_t rcoll_cuda_mem_free(void *ptr) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  if (a == NULL)
    return rcoll_error(rcollInternalError, "rcollMemFree: %p is device memory but CUDA is not loaded", ptr);
  int r = a->free(ptr);
  if (r != 0) {
    a->get_last_error();
    return rcoll_error(rcollUnhandledCudaError, "rcollMemFree: cudaFree(%p) failed: %s", ptr,
                       rcoll_cuda_strerror(r));
  }
  return rcollSuccess;
}

int rcoll_cuda_current_device(void) {
  const rcoll_cuda_api_t *a = api_with_device();
  int d = -1;
  if (a == NULL || a->get_device(&d) != 0)
    return -1;
  return d;
}

rcollResult_t rcoll_cuda_set_device(int device) {
  const rcoll_cuda_api_t *a = api_with_device();
  if (a == NULL)
    return rcollSuccess;
  int r = a->set_device(device);
  if (r != 0) {
    a->get_last_error();
    return rcoll_error(rcollInvalidArgument, "cudaSetDevice(%d) failed: %s", device, rcoll_cuda_strerror(r));
  }
  return rcollSuccess;
}
