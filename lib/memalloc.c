/* rcollMemAlloc and rcollMemFree. On a machine with a CUDA device the memory
 * is device memory on the calling thread's current device, as NCCL's
 * ncclMemAlloc gives (lib/cuda/mem_alloc.c). Without one it is host memory
 * from rcoll's pool (lib/pool.c), which the node's other processes can map. */
#include <stddef.h>

#include "device.h"
#include "error.h"
#include "memtype.h"
#include "pool.h"

RCOLL_API rcollResult_t rcollMemAlloc(void **ptr, size_t size) {
  if (ptr == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollMemAlloc: ptr is NULL");
  *ptr = NULL;
  if (size == 0) /* as cudaMalloc: nothing to allocate, and *ptr is NULL */
    return rcollSuccess;
  RCOLL_CHECK(rcoll_device_ops.mem_alloc(ptr, size));
  if (*ptr != NULL)
    return rcollSuccess;
  return rcoll_pool_alloc(ptr, size);
}

RCOLL_API rcollResult_t rcollMemFree(void *ptr) {
  if (ptr == NULL)
    return rcollSuccess;
  if (rcoll_pool_free(ptr))
    return rcollSuccess;
  rcoll_mem_info_t mi;
  if (rcoll_mem_query(ptr, 0, &mi) == rcollSuccess && mi.type == RCOLL_MEM_CUDA)
    return rcoll_device_ops.mem_free(ptr);
  return rcoll_error(rcollInvalidArgument, "rcollMemFree: %p was not allocated by rcollMemAlloc (or is "
                     "freed already)", ptr);
}
