/* Where a buffer lives, asked of CUDA: the device ops' mem_query
 * (lib/device.h), which lib/memtype.c's rcoll_mem_query calls. */
#include <stdint.h>

#include "cuda/cuda_api.h"
#include "cuda/cuda_comm.h"
#include "error.h"

/* The driver answers first, because it needs no context: for a pointer CUDA
 * does not know (plain host memory) it says so without the runtime creating
 * a context on the current GPU, which a host-only program on a GPU machine
 * would otherwise pay for in time and device memory on every call. Only
 * device-side pointers reach cudaPointerGetAttributes. */
rcollResult_t rcoll_cuda_mem_query(const void *ptr, size_t bytes, rcoll_mem_info_t *out) {
  out->type = RCOLL_MEM_HOST;
  out->device = -1;
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  if (a == NULL || ptr == NULL)
    return rcollSuccess;
  unsigned int mt = 0;
  rcoll_cu_deviceptr_t p = (rcoll_cu_deviceptr_t)(uintptr_t)ptr;
  if (a->cu_pointer_get_attribute(&mt, RCOLL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != 0 ||
      mt == RCOLL_CU_MEMORYTYPE_HOST)
    return rcollSuccess; /* not CUDA memory, or pinned host memory */
  rcoll_cuda_ptr_attr_t at;
  int r = a->pointer_get_attributes(&at, ptr);
  if (r != 0) {
    a->get_last_error(); /* the runtime keeps the error sticky for the next call otherwise */
    return rcoll_error(rcollUnhandledCudaError, "cudaPointerGetAttributes(%p) failed: %s", ptr,
                       rcoll_cuda_strerror(r));
  }
  if (at.type != RCOLL_CUDA_MEMTYPE_DEVICE && at.type != RCOLL_CUDA_MEMTYPE_MANAGED)
    return rcollSuccess;
  rcoll_cu_deviceptr_t base = 0;
  size_t size = 0;
  if (at.type == RCOLL_CUDA_MEMTYPE_DEVICE && bytes > 0 &&
      a->cu_mem_get_address_range(&base, &size, p) == 0 && p + bytes > base + size)
    return rcoll_error(rcollInvalidArgument, "device buffer %p of %zu bytes runs %llu bytes past the "
                       "end of its allocation", ptr, bytes,
                       (unsigned long long)(p + bytes - (base + size)));
  out->type = RCOLL_MEM_CUDA;
  out->device = at.device;
  return rcollSuccess;
}
