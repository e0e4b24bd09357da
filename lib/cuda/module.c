/* Loading the embedded kernel image and launching its kernels (module.h).
 *
 * One module per device, loaded into the device's primary context (the
 * runtime's, which the user's streams and buffers belong to) the first time
 * a communicator uses that device, and kept for the life of the process:
 * unloading would need every stream that might still run a kernel to be
 * idle, which a library cannot know. */
#include "cuda/module.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "cuda/bounce_kernel.h"
#include "cuda/direct_kernel.h"
#include "error.h"
#include "log.h"

#define MODULE_MAX_DEVICES 64
#define MODULE_REDUCE_OPS 4 /* sum prod max min; avg uses sum */

typedef struct cuda_module {
  _Atomic int loaded;
  rcoll_cu_module_t mod;
  rcoll_cu_function_t reduce[rcollNumTypes][MODULE_REDUCE_OPS];
  rcoll_cu_function_t avg[rcollNumTypes];
  rcoll_cu_function_t wait, bounce;
  rcoll_cu_function_t direct[rcollNumTypes][MODULE_REDUCE_OPS];
} cuda_module_t;

static cuda_module_t modules[MODULE_MAX_DEVICES];
static pthread_mutex_t modules_mu = PTHREAD_MUTEX_INITIALIZER;

/* Indexed by rcollDataType_t and rcollRedOp_t (include/rcoll.h). */
static const char *const type_sfx[rcollNumTypes] = {"i8",  "u8",  "i32", "u32", "i64",
                                                    "u64", "f16", "f32", "f64", "bf16",
                                                    "e4m3", "e5m2"};
static const char *const op_name[rcollNumOps] = {"sum", "prod", "max", "min", "sum"};

int rcoll_cuda_kernel_name(int kind, rcollDataType_t t, rcollRedOp_t op, char *buf, size_t len) {
  if (kind == RCOLL_CUDA_K_WAIT || kind == RCOLL_CUDA_K_BOUNCE) {
    snprintf(buf, len, kind == RCOLL_CUDA_K_WAIT ? "rcoll_k_wait_flag" : "rcoll_k_bounce");
    return 0;
  }
  if ((int)t < 0 || t >= rcollNumTypes)
    return -1;
  if (kind == RCOLL_CUDA_K_REDUCE && ((int)op < 0 || op >= rcollNumOps))
    return -1;
  if (kind == RCOLL_CUDA_K_DIRECT && ((int)op < 0 || op >= rcollNumOps))
    return -1;
  if (kind == RCOLL_CUDA_K_AVG)
    snprintf(buf, len, "rcoll_k_avg_%s", type_sfx[t]);
  else if (kind == RCOLL_CUDA_K_DIRECT)
    snprintf(buf, len, "rcoll_k_direct_%s_%s", op_name[op], type_sfx[t]);
  else
    snprintf(buf, len, "rcoll_k_%s_%s", op_name[op], type_sfx[t]);
  return 0;
}

static rcollResult_t module_fn(const rcoll_cuda_api_t *a, cuda_module_t *m, int kind,
                               rcollDataType_t t, rcollRedOp_t op, rcoll_cu_function_t *out) {
  char name[64];
  rcoll_cuda_kernel_name(kind, t, op, name, sizeof name);
  int r = a->cu_module_get_function(out, m->mod, name);
  if (r != 0)
    return rcoll_error(rcollUnhandledCudaError, "cuda: kernel %s is missing from the image "
                       "(CUresult %d)", name, r);
  return rcollSuccess;
}

/* Loads one function now. With lazy loading (the default since CUDA 12.2)
 * cuModuleGetFunction may leave a function unloaded until its first launch,
 * and loading it then may synchronize the whole context. Our first launches
 * come from the proxy thread while the user's streams wait for that same
 * proxy (cuStreamWaitValue32 or the wait kernel): a context synchronization
 * there waits for itself. On an H200 every device call hung at its first
 * reduction in every mode, which is what this would do. So each function is
 * loaded here, when the first comm on the device is set up in the caller's
 * thread and no stream waits for us yet. */
static rcollResult_t module_preload(const rcoll_cuda_api_t *a, rcoll_cu_function_t f) {
  if (a->cu_func_load == NULL)
    return rcollSuccess; /* a driver before 12.4: module_load warned once */
  int r = a->cu_func_load(f);
  if (r != 0)
    return rcoll_error(rcollUnhandledCudaError, "cuda: cuFuncLoad of a kernel failed (CUresult %d)", r);
  return rcollSuccess;
}

static rcollResult_t module_resolve(const rcoll_cuda_api_t *a, cuda_module_t *m) {
  for (int t = 0; t < rcollNumTypes; t++) {
    for (int op = 0; op < MODULE_REDUCE_OPS; op++) {
      RCOLL_CHECK(module_fn(a, m, RCOLL_CUDA_K_REDUCE, (rcollDataType_t)t, (rcollRedOp_t)op,
                            &m->reduce[t][op]));
      RCOLL_CHECK(module_preload(a, m->reduce[t][op]));
      RCOLL_CHECK(module_fn(a, m, RCOLL_CUDA_K_DIRECT, (rcollDataType_t)t, (rcollRedOp_t)op,
                            &m->direct[t][op]));
      RCOLL_CHECK(module_preload(a, m->direct[t][op]));
    }
    RCOLL_CHECK(module_fn(a, m, RCOLL_CUDA_K_AVG, (rcollDataType_t)t, rcollAvg, &m->avg[t]));
    RCOLL_CHECK(module_preload(a, m->avg[t]));
  }
  RCOLL_CHECK(module_fn(a, m, RCOLL_CUDA_K_WAIT, rcollInt8, rcollSum, &m->wait));
  RCOLL_CHECK(module_preload(a, m->wait));
  RCOLL_CHECK(module_fn(a, m, RCOLL_CUDA_K_BOUNCE, rcollInt8, rcollSum, &m->bounce));
  return module_preload(a, m->bounce);
}

rcollResult_t rcoll_cuda_module_load(int device) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  if (a == NULL)
    return rcoll_error(rcollUnhandledCudaError, "cuda: no CUDA here (%s)", rcoll_cuda_api_why());
  if (device < 0 || device >= MODULE_MAX_DEVICES)
    return rcoll_error(rcollUnhandledCudaError, "cuda: device %d is beyond the %d supported",
                       device, MODULE_MAX_DEVICES);
  cuda_module_t *m = &modules[device];
  if (atomic_load_explicit(&m->loaded, memory_order_acquire))
    return rcollSuccess;
  if (rcoll_cuda_fatbin_size == 0)
    return rcoll_error(rcollUnhandledCudaError, "cuda: this build has no device code (configure "
                       "found no CUDA toolkit); device buffers cannot be reduced");
  rcollResult_t res = rcollSuccess;
  pthread_mutex_lock(&modules_mu);
  if (!atomic_load(&m->loaded)) {
    int r = a->cu_module_load_data(&m->mod, rcoll_cuda_fatbin);
    if (r != 0)
      res = rcoll_error(rcollUnhandledCudaError, "cuda: cuModuleLoadData of the kernel image "
                        "failed on device %d (CUresult %d; a GPU older than sm_80, or a driver "
                        "older than CUDA 13?)", device, r);
    else
      res = module_resolve(a, m);
    if (res == rcollSuccess && a->cu_func_load == NULL)
      RCOLL_WARN("cuda: this driver has no cuFuncLoad (CUDA < 12.4): kernels load at their first "
                 "launch, which can deadlock against streams that wait for rcoll; set "
                 "CUDA_MODULE_LOADING=EAGER");
    if (res == rcollSuccess)
      atomic_store_explicit(&m->loaded, 1, memory_order_release);
  }
  pthread_mutex_unlock(&modules_mu);
  return res;
}

/* The module of the calling thread's current device. */
static rcollResult_t module_current(const rcoll_cuda_api_t **api, cuda_module_t **out) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  int dev = -1;
  if (a == NULL || a->get_device(&dev) != 0 || dev < 0 || dev >= MODULE_MAX_DEVICES)
    return rcoll_error(rcollUnhandledCudaError, "cuda: no current device for a kernel launch");
  if (!atomic_load_explicit(&modules[dev].loaded, memory_order_acquire))
    RCOLL_CHECK(rcoll_cuda_module_load(dev));
  *api = a;
  *out = &modules[dev];
  return rcollSuccess;
}

unsigned rcoll_cuda_grid_blocks(size_t count, unsigned threads) {
  size_t blocks = (count + threads - 1) / threads;
  if (blocks > 2048)
    blocks = 2048; /* 16 blocks on each of 128 SMs; the loop strides over the rest */
  return blocks == 0 ? 1 : (unsigned)blocks;
}

static rcollResult_t launch(const rcoll_cuda_api_t *a, rcoll_cu_function_t f, size_t count,
                            rcoll_cuda_stream_t stream, void **params) {
  const unsigned threads = 256;
  int r = a->cu_launch_kernel(f, rcoll_cuda_grid_blocks(count, threads), 1, 1, threads, 1, 1, 0,
                              stream, params, NULL);
  if (r != 0)
    return rcoll_error(rcollUnhandledCudaError, "cuda: kernel launch failed (CUresult %d)", r);
  return rcollSuccess;
}

rcollResult_t rcoll_cuda_reduce(void *dst, const void *a, const void *b, size_t count,
                                rcollDataType_t t, rcollRedOp_t op, rcoll_cuda_stream_t stream) {
  if ((int)t < 0 || t >= rcollNumTypes || (int)op < 0 || op >= rcollNumOps)
    return rcoll_error(rcollInvalidArgument, "cuda: reduce with type %d op %d", (int)t, (int)op);
  if (count == 0)
    return rcollSuccess;
  const rcoll_cuda_api_t *api;
  cuda_module_t *m;
  RCOLL_CHECK(module_current(&api, &m));
  rcoll_cu_function_t f = m->reduce[t][op == rcollAvg ? rcollSum : op];
  void *params[] = {&dst, &a, &b, &count};
  return launch(api, f, count, stream, params);
}

rcollResult_t rcoll_cuda_finish(void *buf, size_t count, rcollDataType_t t, rcollRedOp_t op,
                                int nranks, rcoll_cuda_stream_t stream) {
  if (op != rcollAvg || count == 0)
    return rcollSuccess;
  if ((int)t < 0 || t >= rcollNumTypes)
    return rcoll_error(rcollInvalidArgument, "cuda: finish with type %d", (int)t);
  const rcoll_cuda_api_t *api;
  cuda_module_t *m;
  RCOLL_CHECK(module_current(&api, &m));
  void *params[] = {&buf, &count, &nranks};
  return launch(api, m->avg[t], count, stream, params);
}

rcollResult_t rcoll_cuda_launch_wait(rcoll_cu_deviceptr_t flag_dev, uint32_t value,
                                     uint64_t timeout_ns, rcoll_cu_deviceptr_t timed_out_dev,
                                     rcoll_cuda_stream_t stream) {
  const rcoll_cuda_api_t *api;
  cuda_module_t *m;
  RCOLL_CHECK(module_current(&api, &m));
  unsigned long long timeout = timeout_ns;
  void *params[] = {&flag_dev, &value, &timeout, &timed_out_dev};
  int r = api->cu_launch_kernel(m->wait, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
  if (r != 0)
    return rcoll_error(rcollUnhandledCudaError, "cuda: launching the stream wait kernel failed "
                       "(CUresult %d)", r);
  return rcollSuccess;
}

rcollResult_t rcoll_cuda_launch_bounce(const struct rcoll_bounce_kargs *args, rcoll_cuda_stream_t stream) {
  const rcoll_cuda_api_t *api;
  cuda_module_t *m;
  RCOLL_CHECK(module_current(&api, &m));
  rcoll_bounce_kargs_t copy = *args; /* the launch reads the parameter through a non-const pointer */
  void *params[] = {&copy};
  int r = api->cu_launch_kernel(m->bounce, 1, 1, 1, RCOLL_BOUNCE_THREADS, 1, 1, 0, stream, params, NULL);
  if (r != 0)
    return rcoll_error(rcollUnhandledCudaError, "cuda: launching the bounce kernel of a small device "
                       "call failed (CUresult %d)", r);
  return rcollSuccess;
}

rcollResult_t rcoll_cuda_launch_direct(const struct rcoll_direct_args *args, rcollDataType_t t,
                                       rcollRedOp_t op, unsigned nblocks, rcoll_cuda_stream_t stream) {
  if ((int)t < 0 || t >= rcollNumTypes || (int)op < 0 || op >= rcollNumOps)
    return rcoll_error(rcollInvalidArgument, "cuda: direct all-reduce with type %d op %d", (int)t, (int)op);
  const rcoll_cuda_api_t *api;
  cuda_module_t *m;
  RCOLL_CHECK(module_current(&api, &m));
  rcoll_direct_args_t copy = *args; /* the launch reads the parameter through a non-const pointer */
  void *params[] = {&copy};
  int r = api->cu_launch_kernel(m->direct[t][op == rcollAvg ? rcollSum : op], nblocks, 1, 1,
                                RCOLL_DIRECT_THREADS, 1, 1, 0, stream, params, NULL);
  if (r != 0)
    return rcoll_error(rcollUnhandledCudaError, "cuda: launching the direct all-reduce failed "
                       "(CUresult %d)", r);
  return rcollSuccess;
}
