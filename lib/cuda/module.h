/* The kernels of lib/cuda/kernels.cu: loading the embedded image into a
 * device's context and launching them through the driver API. */
#ifndef RCOLL_CUDA_MODULE_H
#define RCOLL_CUDA_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_api.h"
#include "rcoll.h"

/* The image nvcc built (a fatbin with sm_80 and sm_90 code and compute_90
 * PTX), embedded by the build; size 0 when configure found no CUDA. */
extern const unsigned char rcoll_cuda_fatbin[];
extern const size_t rcoll_cuda_fatbin_size;

enum rcoll_cuda_kernel_kind {
  RCOLL_CUDA_K_REDUCE = 0,
  RCOLL_CUDA_K_AVG,
  RCOLL_CUDA_K_WAIT,
  RCOLL_CUDA_K_DIRECT, /* rcoll_k_direct_<op>_<type>: the direct all-reduce (direct_kernel.h) */
  RCOLL_CUDA_K_BOUNCE, /* rcoll_k_bounce: a small call's copies and wait (bounce_kernel.h) */
};

/* Writes the kernel's name (rcoll_k_sum_f32, rcoll_k_avg_bf16,
 * rcoll_k_wait_flag) into buf; avg reduces with the sum kernel. Returns -1
 * for an invalid type or op. */
int rcoll_cuda_kernel_name(int kind, rcollDataType_t t, rcollRedOp_t op, char *buf, size_t len);

/* Loads the image into the current context of `device` (once per device;
 * the caller has made that device current). Fails, with a message, when the
 * build has no image or the driver refuses it. */
rcollResult_t rcoll_cuda_module_load(int device);

/* dst[i] = a[i] (op) b[i] for i < count, on `stream`, on the current
 * device (whose module must be loaded). avg sums; rcoll_cuda_finish divides.
 * Any of the pointers may be mapped pinned host memory. */
rcollResult_t rcoll_cuda_reduce(void *dst, const void *a, const void *b, size_t count,
                                rcollDataType_t t, rcollRedOp_t op, rcoll_cuda_stream_t stream);
/* The avg divide by nranks on device memory; nothing for other ops. */
rcollResult_t rcoll_cuda_finish(void *buf, size_t count, rcollDataType_t t, rcollRedOp_t op,
                                int nranks, rcoll_cuda_stream_t stream);
/* Launches the one-thread kernel that holds `stream` until the mapped word
 * at flag_dev reaches value, or sets *timed_out_dev after timeout_ns. */
rcollResult_t rcoll_cuda_launch_wait(rcoll_cu_deviceptr_t flag_dev, uint32_t value,
                                     uint64_t timeout_ns, rcoll_cu_deviceptr_t timed_out_dev,
                                     rcoll_cuda_stream_t stream);

struct rcoll_bounce_kargs;
/* The bounce kernel, one block, on stream. */
rcollResult_t rcoll_cuda_launch_bounce(const struct rcoll_bounce_kargs *args, rcoll_cuda_stream_t stream);

struct rcoll_direct_args;
/* The direct all-reduce's kernel for (t, op) with nblocks blocks on stream
 * (avg is the sum kernel; args->avg divides). */
rcollResult_t rcoll_cuda_launch_direct(const struct rcoll_direct_args *args, rcollDataType_t t,
                                       rcollRedOp_t op, unsigned nblocks, rcoll_cuda_stream_t stream);

/* Blocks of `threads` for `count` elements: enough to fill a large GPU,
 * never more than there are elements. */
unsigned rcoll_cuda_grid_blocks(size_t count, unsigned threads);

#endif
