/* Compile-time check of cuda_api.h against the real CUDA headers, whenever
 * configure found a toolkit: our declarations exist so that the library
 * builds without CUDA, and this keeps them honest. Nothing here runs. */
#if RCOLL_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stddef.h>

#include "cuda/cuda_api.h"

#define SAME_LAYOUT(ours, theirs, f1, f2)                                      \
  _Static_assert(offsetof(ours, f1) == offsetof(theirs, f2), #f1 " offset")

_Static_assert(sizeof(rcoll_cuda_ptr_attr_t) == sizeof(struct cudaPointerAttributes),
               "cudaPointerAttributes size");
SAME_LAYOUT(rcoll_cuda_ptr_attr_t, struct cudaPointerAttributes, type, type);
SAME_LAYOUT(rcoll_cuda_ptr_attr_t, struct cudaPointerAttributes, device, device);
SAME_LAYOUT(rcoll_cuda_ptr_attr_t, struct cudaPointerAttributes, device_pointer, devicePointer);
SAME_LAYOUT(rcoll_cuda_ptr_attr_t, struct cudaPointerAttributes, host_pointer, hostPointer);
_Static_assert(sizeof(rcoll_cuda_ipc_handle_t) == sizeof(cudaIpcMemHandle_t), "IPC handle size");
_Static_assert((int)RCOLL_CUDA_IPC_HANDLE_BYTES == (int)CUDA_IPC_HANDLE_SIZE, "IPC handle bytes");
_Static_assert(sizeof(rcoll_cu_deviceptr_t) == sizeof(CUdeviceptr), "CUdeviceptr size");
_Static_assert(sizeof(rcoll_cuda_stream_t) == sizeof(cudaStream_t), "stream handle size");

_Static_assert((int)RCOLL_CUDA_MEMTYPE_UNREGISTERED == (int)cudaMemoryTypeUnregistered, "memory type");
_Static_assert((int)RCOLL_CUDA_MEMTYPE_HOST == (int)cudaMemoryTypeHost, "memory type");
_Static_assert((int)RCOLL_CUDA_MEMTYPE_DEVICE == (int)cudaMemoryTypeDevice, "memory type");
_Static_assert((int)RCOLL_CUDA_MEMTYPE_MANAGED == (int)cudaMemoryTypeManaged, "memory type");
_Static_assert((int)RCOLL_CUDA_MEMCPY_DEFAULT == (int)cudaMemcpyDefault, "memcpy kind");
_Static_assert((int)RCOLL_CUDA_HOST_ALLOC_PORTABLE == (int)cudaHostAllocPortable, "host alloc flag");
_Static_assert((int)RCOLL_CUDA_HOST_ALLOC_MAPPED == (int)cudaHostAllocMapped, "host alloc flag");
_Static_assert((int)RCOLL_CUDA_STREAM_NON_BLOCKING == (int)cudaStreamNonBlocking, "stream flag");
_Static_assert((int)RCOLL_CUDA_EVENT_DISABLE_TIMING == (int)cudaEventDisableTiming, "event flag");
_Static_assert((int)RCOLL_CUDA_IPC_LAZY_PEER_ACCESS == (int)cudaIpcMemLazyEnablePeerAccess, "IPC flag");
_Static_assert((int)RCOLL_CUDA_ERROR_NOT_READY == (int)cudaErrorNotReady, "not-ready error");
_Static_assert((int)RCOLL_CUDA_DEV_ATTR_SM_COUNT == (int)cudaDevAttrMultiProcessorCount, "SM count");
#if CUDART_VERSION >= 12040
_Static_assert((int)RCOLL_CUDA_DEV_ATTR_MPS_ENABLED == (int)cudaDevAttrMpsEnabled, "MPS enabled");
#endif

_Static_assert((int)RCOLL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE == (int)CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
               "attr");
_Static_assert((int)RCOLL_CU_MEMORYTYPE_HOST == (int)CU_MEMORYTYPE_HOST, "driver memory type");
_Static_assert((int)RCOLL_CU_MEMORYTYPE_DEVICE == (int)CU_MEMORYTYPE_DEVICE, "driver memory type");
_Static_assert((int)RCOLL_CU_MEMORYTYPE_UNIFIED == (int)CU_MEMORYTYPE_UNIFIED, "driver memory type");
_Static_assert((int)RCOLL_CU_STREAM_WAIT_VALUE_GEQ == (int)CU_STREAM_WAIT_VALUE_GEQ, "wait flag");
_Static_assert((int)RCOLL_CU_FLUSH_TARGET_CURRENT_CTX ==
                   (int)CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
               "flush target");
_Static_assert((int)RCOLL_CU_FLUSH_TO_OWNER == (int)CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER,
               "flush scope");

/* Our function types return int where CUDA returns these enums. */
_Static_assert(sizeof(cudaError_t) == sizeof(int), "cudaError_t is an int");
_Static_assert(sizeof(CUresult) == sizeof(int), "CUresult is an int");
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int rcoll_cuda_abi_check_unused;
#endif
