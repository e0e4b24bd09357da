/* The handful of CUDA runtime and driver functions the device path uses,
 * reached through one function table that is filled lazily with dlopen.
 *
 * Why a table and not -lcudart: librcoll.so must load and run host buffers on
 * a machine with no GPU and no driver, so nothing CUDA may appear in its
 * NEEDED list. The table also lets the unit tests replace CUDA with host
 * fakes (rcoll_cuda_api_override) to test the bookkeeping around it.
 *
 * The declarations below are our own, so that this code compiles without
 * CUDA headers; lib/cuda/abi_check.c checks them against the real headers
 * whenever configure found a toolkit. Every function returns the CUDA error
 * code (0 is success) of the runtime (cudaError_t) or the driver (CUresult). */
#ifndef RCOLL_CUDA_API_H
#define RCOLL_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

/* Runtime constants (driver_types.h). */
enum {
  RCOLL_CUDA_MEMTYPE_UNREGISTERED = 0,
  RCOLL_CUDA_MEMTYPE_HOST = 1,
  RCOLL_CUDA_MEMTYPE_DEVICE = 2,
  RCOLL_CUDA_MEMTYPE_MANAGED = 3,
  RCOLL_CUDA_MEMCPY_DEFAULT = 4,
  RCOLL_CUDA_HOST_ALLOC_PORTABLE = 1,
  RCOLL_CUDA_HOST_ALLOC_MAPPED = 2,
  RCOLL_CUDA_STREAM_NON_BLOCKING = 1,
  RCOLL_CUDA_EVENT_DISABLE_TIMING = 2,
  RCOLL_CUDA_IPC_LAZY_PEER_ACCESS = 1,
  RCOLL_CUDA_ERROR_NOT_READY = 600,
  RCOLL_CUDA_DEV_ATTR_SM_COUNT = 16, /* cudaDevAttrMultiProcessorCount */
  RCOLL_CUDA_DEV_ATTR_MPS_ENABLED = 133, /* cudaDevAttrMpsEnabled (CUDA 12.4 on) */
};

/* Driver constants (cuda.h). */
enum {
  RCOLL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  RCOLL_CU_MEMORYTYPE_HOST = 1,
  RCOLL_CU_MEMORYTYPE_DEVICE = 2,
  RCOLL_CU_MEMORYTYPE_UNIFIED = 4,
  RCOLL_CU_STREAM_WAIT_VALUE_GEQ = 0,
  RCOLL_CU_FLUSH_TARGET_CURRENT_CTX = 0,
  RCOLL_CU_FLUSH_TO_OWNER = 100,
};

#define RCOLL_CUDA_IPC_HANDLE_BYTES 64

/* struct cudaPointerAttributes. CUDA 13 added the reserved words, which the
 * runtime writes (abi_check.c caught this); older runtimes fill less. */
typedef struct rcoll_cuda_ptr_attr {
  int type;
  int device;
  void *device_pointer;
  void *host_pointer;
  long reserved[8];
} rcoll_cuda_ptr_attr_t;

/* cudaIpcMemHandle_t (passed by value, as the runtime declares it). */
typedef struct rcoll_cuda_ipc_handle {
  char reserved[RCOLL_CUDA_IPC_HANDLE_BYTES];
} rcoll_cuda_ipc_handle_t;

typedef void *rcoll_cuda_stream_t; /* cudaStream_t == CUstream */
typedef void *rcoll_cuda_event_t;  /* cudaEvent_t */
typedef void *rcoll_cu_module_t;   /* CUmodule */
typedef void *rcoll_cu_function_t; /* CUfunction */
typedef unsigned long long rcoll_cu_deviceptr_t;

typedef struct rcoll_cuda_api {
  /* ---- runtime (libcudart) ---- */
  int (*get_device_count)(int *count);
  int (*get_device)(int *device);
  int (*set_device)(int device);
  int (*pointer_get_attributes)(rcoll_cuda_ptr_attr_t *attr, const void *ptr);
  int (*malloc)(void **ptr, size_t bytes);
  int (*free)(void *ptr);
  int (*host_alloc)(void **ptr, size_t bytes, unsigned flags);
  int (*free_host)(void *ptr);
  int (*host_get_device_pointer)(void **dev, void *host, unsigned flags);
  int (*memcpy_async)(void *dst, const void *src, size_t bytes, int kind, rcoll_cuda_stream_t s);
  int (*stream_create_with_flags)(rcoll_cuda_stream_t *s, unsigned flags);
  int (*stream_destroy)(rcoll_cuda_stream_t s);
  int (*stream_synchronize)(rcoll_cuda_stream_t s);
  int (*event_create_with_flags)(rcoll_cuda_event_t *e, unsigned flags);
  int (*event_destroy)(rcoll_cuda_event_t e);
  int (*event_record)(rcoll_cuda_event_t e, rcoll_cuda_stream_t s);
  int (*event_query)(rcoll_cuda_event_t e);
  int (*stream_wait_event)(rcoll_cuda_stream_t s, rcoll_cuda_event_t e, unsigned flags);
  int (*ipc_get_mem_handle)(rcoll_cuda_ipc_handle_t *h, void *ptr);
  int (*ipc_open_mem_handle)(void **ptr, rcoll_cuda_ipc_handle_t h, unsigned flags);
  int (*ipc_close_mem_handle)(void *ptr);
  const char *(*get_error_string)(int err);
  int (*get_last_error)(void);
  /* ---- driver (libcuda) ---- */
  int (*cu_init)(unsigned flags);
  int (*cu_pointer_get_attribute)(void *data, int attribute, rcoll_cu_deviceptr_t ptr);
  int (*cu_mem_get_address_range)(rcoll_cu_deviceptr_t *base, size_t *bytes,
                                  rcoll_cu_deviceptr_t ptr);
  int (*cu_module_load_data)(rcoll_cu_module_t *m, const void *image);
  int (*cu_module_unload)(rcoll_cu_module_t m);
  int (*cu_module_get_function)(rcoll_cu_function_t *f, rcoll_cu_module_t m, const char *name);
  int (*cu_launch_kernel)(rcoll_cu_function_t f, unsigned gx, unsigned gy, unsigned gz,
                          unsigned bx, unsigned by, unsigned bz, unsigned shared_bytes,
                          rcoll_cuda_stream_t s, void **params, void **extra);
  /* Optional: NULL when the driver lacks them (the caller falls back). */
  int (*cu_stream_wait_value32)(rcoll_cuda_stream_t s, rcoll_cu_deviceptr_t addr, uint32_t value,
                                unsigned flags);
  int (*cu_flush_gpudirect_rdma_writes)(int target, int scope);
  /* cuFuncLoad (CUDA 12.4+): loads a function now instead of at its first
   * launch (module.c says why that matters). */
  int (*cu_func_load)(rcoll_cu_function_t f);
  int (*device_get_pci_bus_id)(char *bus_id, int len, int device); /* optional, runtime */
  int (*device_get_attribute)(int *value, int attr, int device);     /* optional, runtime */
} rcoll_cuda_api_t;

/* The table, loaded on first use (thread-safe); NULL when this machine has
 * no CUDA driver, runtime or device: every pointer is then host memory. */
const rcoll_cuda_api_t *rcoll_cuda_api(void);
/* Why rcoll_cuda_api() is NULL, in words ("" while it is not). */
const char *rcoll_cuda_api_why(void);
/* Test hook: use `fake` instead of the real libraries (NULL: back to them). */
void rcoll_cuda_api_override(const rcoll_cuda_api_t *fake);

/* The runtime's text for an error code of the table's runtime functions. */
const char *rcoll_cuda_strerror(int err);

#endif
