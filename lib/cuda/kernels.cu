/* Device code of the CUDA path: element-wise reductions for every type and
 * op, the avg finish, and the flag wait that holds a user stream until the
 * proxy thread has finished a collective (the fallback when the driver has no
 * stream memory operations).
 *
 * This file is compiled by `nvcc -fatbin` into an image that is embedded in
 * the library as bytes and loaded through the driver API on first use
 * (lib/cuda/module.c). Nothing here is linked as host code, so the library
 * needs no CUDA runtime registration at load time. Kernels are extern "C" so
 * that module.c finds them by plain names: rcoll_k_<op>_<type>,
 * rcoll_k_avg_<type> and rcoll_k_wait_flag.
 *
 * The arithmetic is lib/reduce_math.h, the header the host loops use, so the
 * CPU unit tests pin exactly what these kernels compute. */
#include <stddef.h>
#include <stdint.h>

#include "reduce_math.h"

#ifndef RCOLL_KERNEL_EMU /* tests/kernel_emu.cpp compiles this file for the CPU, with its own clock and flag loads */
static __device__ __forceinline__ unsigned long long rcoll_globaltimer_ns(void) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* A flag another rank stores: read from global memory every time. Written
 * as the PTX instruction itself, not a volatile C++ load: nvcc 13.0 merged
 * `cond ? a->sig : *(volatile uint64_t *)flag` (direct_kernel.h, with `a`
 * the kernel's __grid_constant__ parameter) into a volatile *generic* load
 * from the parameter's address, which the GPU refuses: every direct
 * all-reduce on the H200 stopped with "an illegal memory access" at its
 * first wait. tests/check_ptx.sh fails on any generic load or store. */
static __device__ __forceinline__ uint64_t rcoll_dk_flag_load(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(__cvta_generic_to_global(p)) : "memory");
  return v;
}
#endif

/* A load that bypasses L1 (ld.global.cg): what another SM or GPU wrote since
 * this SM last read the line must be seen. */
template <typename T> static __device__ __forceinline__ T rcoll_dk_load(const T *p) {
  T v;
  if constexpr (sizeof(T) == 1) {
    unsigned char u = __ldcg((const unsigned char *)p);
    memcpy(&v, &u, 1);
  } else if constexpr (sizeof(T) == 2) {
    unsigned short u = __ldcg((const unsigned short *)p);
    memcpy(&v, &u, 2);
  } else if constexpr (sizeof(T) == 4) {
    unsigned int u = __ldcg((const unsigned int *)p);
    memcpy(&v, &u, 4);
  } else {
    unsigned long long u = __ldcg((const unsigned long long *)p);
    memcpy(&v, &u, 8);
  }
  return v;
}

#include "cuda/bounce_kernel.h"
#include "cuda/direct_kernel.h"

/* Grid-stride loops: any grid size covers any count; module.c sizes the
 * grid to fill the GPU without launching more blocks than elements. When
 * the three pointers are 16-byte aligned (cudaMalloc's are, and the device
 * path's slots and rings), each thread takes 16 bytes of each operand at a
 * time: one load instruction where 2-byte types would need eight, which is
 * what keeps a memory-bound loop at the memory's speed. The few elements
 * past the last whole vector, and unaligned calls, go one by one. */
#define RCOLL_REDUCE_KERNEL(op, sfx, T)                                                      \
  extern "C" __global__ void rcoll_k_##op##_##sfx(T *dst, const T *a, const T *b, size_t n) { \
    enum { V = 16 / sizeof(T) };                                                             \
    union vec { uint4 w; T e[V]; };                                                          \
    size_t stride = (size_t)gridDim.x * blockDim.x;                                          \
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x, done = 0;                  \
    if ((((uintptr_t)dst | (uintptr_t)a | (uintptr_t)b) & 15) == 0) {                        \
      done = n / V * V;                                                                      \
      for (size_t v = first; v < n / V; v += stride) {                                       \
        union vec x, y;                                                                      \
        x.w = ((const uint4 *)a)[v];                                                         \
        y.w = ((const uint4 *)b)[v];                                                         \
        for (int j = 0; j < V; j++)                                                          \
          x.e[j] = rcoll_##op##_##sfx(x.e[j], y.e[j]);                                       \
        ((uint4 *)dst)[v] = x.w;                                                             \
      }                                                                                      \
    }                                                                                        \
    for (size_t i = done + first; i < n; i += stride)                                        \
      dst[i] = rcoll_##op##_##sfx(a[i], b[i]);                                               \
  }

#define RCOLL_AVG_KERNEL(sfx, T)                                                             \
  extern "C" __global__ void rcoll_k_avg_##sfx(T *buf, size_t n, int nranks) {               \
    size_t stride = (size_t)gridDim.x * blockDim.x;                                          \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)       \
      buf[i] = rcoll_avg_##sfx(buf[i], nranks);                                              \
  }

/* avg reduces with sum and divides once at the end (rcoll_k_avg_*). */
#define RCOLL_TYPE_KERNELS(sfx, T) \
  RCOLL_REDUCE_KERNEL(sum, sfx, T) \
  RCOLL_REDUCE_KERNEL(prod, sfx, T) \
  RCOLL_REDUCE_KERNEL(max, sfx, T) \
  RCOLL_REDUCE_KERNEL(min, sfx, T) \
  RCOLL_AVG_KERNEL(sfx, T)

RCOLL_TYPE_KERNELS(i8, int8_t)
RCOLL_TYPE_KERNELS(u8, uint8_t)
RCOLL_TYPE_KERNELS(i32, int32_t)
RCOLL_TYPE_KERNELS(u32, uint32_t)
RCOLL_TYPE_KERNELS(i64, int64_t)
RCOLL_TYPE_KERNELS(u64, uint64_t)
RCOLL_TYPE_KERNELS(f16, uint16_t)
RCOLL_TYPE_KERNELS(f32, float)
RCOLL_TYPE_KERNELS(f64, double)
RCOLL_TYPE_KERNELS(bf16, uint16_t)
RCOLL_TYPE_KERNELS(e4m3, uint8_t)
RCOLL_TYPE_KERNELS(e5m2, uint8_t)

/* Holds the stream until *flag reaches value (the same cyclic comparison as
 * CU_STREAM_WAIT_VALUE_GEQ, so counters may wrap). One thread polls a word
 * of mapped pinned host memory, sleeping between reads so that it costs the
 * bus almost nothing. It gives up after timeout_ns and sets *timed_out, so
 * that a dead proxy can never hang the stream forever. */
extern "C" __global__ void rcoll_k_wait_flag(const volatile uint32_t *flag, uint32_t value,
                                             unsigned long long timeout_ns,
                                             volatile uint32_t *timed_out) {
  unsigned long long start = rcoll_globaltimer_ns();
  while ((int32_t)(*flag - value) < 0) {
    if (rcoll_globaltimer_ns() - start > timeout_ns) {
      *timed_out = 1;
      break;
    }
    __nanosleep(2000);
  }
}

/* The direct all-reduce (direct_kernel.h): rcoll_k_direct_<op>_<type>, one
 * block of RCOLL_DIRECT_THREADS per channel. One block per multiprocessor
 * is all a call counts on (direct.c sizes calls by it), so ptxas may use up
 * to 128 registers rather than spill; the parameter is read where it is
 * (__grid_constant__) rather than copied to local memory. */
#define RCOLL_DIRECT_KERNEL(op, sfx, T)                                                          \
  RCOLL_DIRECT_BODY(op, sfx, T)                                                                  \
  extern "C" __global__ void __launch_bounds__(RCOLL_DIRECT_THREADS, 1)                          \
      rcoll_k_direct_##op##_##sfx(const __grid_constant__ rcoll_direct_args_t a) {              \
    rcoll_direct_##op##_##sfx(&a, blockIdx.x, threadIdx.x, blockDim.x);                          \
  }
RCOLL_DIRECT_ALL(RCOLL_DIRECT_KERNEL)

/* A small call's bytes between the user's device buffer and a pinned slot:
 * 16 at a time when both ends and the length allow, else one by one. Loads
 * of host memory use ld.global.cv (fetched again, never a cached line): the
 * proxy wrote the result there after this kernel started. */
static __device__ __forceinline__ void rcoll_bounce_copy(char *dst, const char *src, uint64_t n,
                                                         unsigned tid) {
  const uint64_t nt = blockDim.x;
  if ((((uintptr_t)dst | (uintptr_t)src | n) & 15) == 0) {
    for (uint64_t i = (uint64_t)tid * 16; i < n; i += 16 * nt)
      *(uint4 *)(void *)(dst + i) = __ldcv((const uint4 *)(const void *)(src + i));
  } else {
    for (uint64_t i = tid; i < n; i += nt)
      ((unsigned char *)dst)[i] = __ldcv((const unsigned char *)src + i);
  }
}

/* The bounce kernel (bounce_kernel.h): one block (RCOLL_BOUNCE_THREADS). */
extern "C" __global__ void __launch_bounds__(RCOLL_BOUNCE_THREADS)
    rcoll_k_bounce(const rcoll_bounce_kargs_t a) {
  __shared__ int came;
  const unsigned tid = threadIdx.x;
  if (a.in != NULL)
    rcoll_bounce_copy(a.in_host, a.in, a.in_bytes, tid);
  __syncthreads();
  if (tid == 0) {
    __threadfence_system(); /* the input is in host memory before the proxy hears of it */
    *(volatile uint32_t *)a.ready = a.seq;
    unsigned long long start = rcoll_globaltimer_ns();
    came = 1;
    while ((int32_t)(*(const volatile uint32_t *)a.flag - a.seq) < 0) {
      if (rcoll_globaltimer_ns() - start > a.timeout_ns) {
        *(volatile uint32_t *)a.timed_out = 1;
        came = 0;
        break;
      }
    }
    __threadfence_system(); /* the result is read after the flag */
  }
  __syncthreads();
  if (came && a.out != NULL)
    rcoll_bounce_copy(a.out, a.out_host, a.out_bytes, tid);
}
