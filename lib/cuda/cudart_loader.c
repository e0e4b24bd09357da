/* Lazy loading of the CUDA driver and runtime (cuda_api.h).
 *
 * Order matters: the driver first, because without libcuda.so.1 (no NVIDIA
 * driver) or without a device there is nothing to do and the runtime is never
 * touched. cuInit does not create a context, so a host-only program on a GPU
 * machine pays for the driver's start once and keeps its GPU memory. The
 * libraries stay loaded for the life of the process: the table's functions
 * may be called until the very end, from helper threads too. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_api.h"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static rcoll_cuda_api_t loaded;
static const rcoll_cuda_api_t *loaded_ok; /* &loaded once every symbol was found */
static char load_why[256];
static _Atomic(const rcoll_cuda_api_t *) fake_api;

/* CUDA 13 is what we build with; an older runtime of the same ABI serves too,
 * as does whatever the unversioned name points to. */
static const char *const runtime_names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};

static void *open_runtime(void) {
  for (size_t i = 0; i < sizeof runtime_names / sizeof runtime_names[0]; i++) {
    void *h = dlopen(runtime_names[i], RTLD_NOW | RTLD_LOCAL);
    if (h != NULL)
      return h;
  }
  return NULL;
}

/* Stores dlsym(lib, name) into *slot; returns 0 when it is missing. */
static int sym(void *lib, const char *name, void *slot) {
  void *p = dlsym(lib, name);
  memcpy(slot, &p, sizeof p); /* object to function pointer, as POSIX allows */
  if (p == NULL)
    snprintf(load_why, sizeof load_why, "the CUDA library lacks %s", name);
  return p != NULL;
}

static int load_runtime_symbols(void *rt, rcoll_cuda_api_t *a) {
  return sym(rt, "cudaGetDeviceCount", &a->get_device_count) &&
         sym(rt, "cudaGetDevice", &a->get_device) && sym(rt, "cudaSetDevice", &a->set_device) &&
         sym(rt, "cudaPointerGetAttributes", &a->pointer_get_attributes) &&
         sym(rt, "cudaMalloc", &a->malloc) && sym(rt, "cudaFree", &a->free) &&
         sym(rt, "cudaHostAlloc", &a->host_alloc) && sym(rt, "cudaFreeHost", &a->free_host) &&
         sym(rt, "cudaHostGetDevicePointer", &a->host_get_device_pointer) &&
         sym(rt, "cudaMemcpyAsync", &a->memcpy_async) &&
         sym(rt, "cudaStreamCreateWithFlags", &a->stream_create_with_flags) &&
         sym(rt, "cudaStreamDestroy", &a->stream_destroy) &&
         sym(rt, "cudaStreamSynchronize", &a->stream_synchronize) &&
         sym(rt, "cudaEventCreateWithFlags", &a->event_create_with_flags) &&
         sym(rt, "cudaEventDestroy", &a->event_destroy) &&
         sym(rt, "cudaEventRecord", &a->event_record) && sym(rt, "cudaEventQuery", &a->event_query) &&
         sym(rt, "cudaStreamWaitEvent", &a->stream_wait_event) &&
         sym(rt, "cudaIpcGetMemHandle", &a->ipc_get_mem_handle) &&
         sym(rt, "cudaIpcOpenMemHandle", &a->ipc_open_mem_handle) &&
         sym(rt, "cudaIpcCloseMemHandle", &a->ipc_close_mem_handle) &&
         sym(rt, "cudaGetErrorString", &a->get_error_string) &&
         sym(rt, "cudaGetLastError", &a->get_last_error);
}

/* The driver exports versioned names for functions whose ABI changed; cuda.h
 * maps the plain names to these (cuStreamWaitValue32 -> _v2, ...). */
static int load_driver_symbols(void *drv, rcoll_cuda_api_t *a) {
  int ok = sym(drv, "cuPointerGetAttribute", &a->cu_pointer_get_attribute) &&
           sym(drv, "cuMemGetAddressRange_v2", &a->cu_mem_get_address_range) &&
           sym(drv, "cuModuleLoadData", &a->cu_module_load_data) &&
           sym(drv, "cuModuleUnload", &a->cu_module_unload) &&
           sym(drv, "cuModuleGetFunction", &a->cu_module_get_function) &&
           sym(drv, "cuLaunchKernel", &a->cu_launch_kernel);
  if (!ok)
    return 0;
  void *p = dlsym(drv, "cuStreamWaitValue32_v2");
  memcpy(&a->cu_stream_wait_value32, &p, sizeof p);
  p = dlsym(drv, "cuFlushGPUDirectRDMAWrites");
  memcpy(&a->cu_flush_gpudirect_rdma_writes, &p, sizeof p);
  p = dlsym(drv, "cuFuncLoad");
  memcpy(&a->cu_func_load, &p, sizeof p);
  return 1;
}

static void load(void) {
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (drv == NULL) {
    snprintf(load_why, sizeof load_why, "no CUDA driver (%s)", dlerror());
    return;
  }
  if (!sym(drv, "cuInit", &loaded.cu_init))
    return;
  int r = loaded.cu_init(0);
  if (r != 0) {
    snprintf(load_why, sizeof load_why, "cuInit failed with CUresult %d (no usable GPU)", r);
    return;
  }
  if (!load_driver_symbols(drv, &loaded))
    return;
  void *rt = open_runtime();
  if (rt == NULL) {
    snprintf(load_why, sizeof load_why, "no CUDA runtime (libcudart.so.13 or libcudart.so: %s)",
             dlerror());
    return;
  }
  if (!load_runtime_symbols(rt, &loaded))
    return;
  (void)sym(rt, "cudaDeviceGetPCIBusId", &loaded.device_get_pci_bus_id); /* optional: may stay NULL */
  (void)sym(rt, "cudaDeviceGetAttribute", &loaded.device_get_attribute);  /* optional too */
  int n = 0;
  r = loaded.get_device_count(&n);
  if (r != 0 || n < 1) {
    snprintf(load_why, sizeof load_why, "no CUDA device (cudaGetDeviceCount: error %d, %d devices)",
             r, n);
    return;
  }
  loaded_ok = &loaded;
}

const rcoll_cuda_api_t *rcoll_cuda_api(void) {
  const rcoll_cuda_api_t *fake = atomic_load(&fake_api);
  if (fake != NULL)
    return fake;
  pthread_once(&load_once, load);
  return loaded_ok;
}

const char *rcoll_cuda_api_why(void) {
  return rcoll_cuda_api() != NULL ? "" : load_why;
}

void rcoll_cuda_api_override(const rcoll_cuda_api_t *fake) {
  atomic_store(&fake_api, fake);
}

const char *rcoll_cuda_strerror(int err) {
  static _Thread_local char buf[48];
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  if (a != NULL && a->get_error_string != NULL)
    return a->get_error_string(err);
  snprintf(buf, sizeof buf, "CUDA error %d", err);
  return buf;
}
