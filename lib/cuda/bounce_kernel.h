/* The bounce kernel (RCOLL_CUDA_BOUNCE_KERNEL=1, bounce.h): one small kernel
 * on the user's stream does what a bounced call otherwise queues as four
 * stream operations (the copy of the input to its pinned slot, the event the
 * proxy polls, the stream's wait for the proxy's flag, the copy of the result
 * back), the way NCCL's kernels work with its proxy through host memory:
 *
 *   copy the input into the pinned slot; fence; *ready = seq
 *   proxy: sees *ready (a plain load of host memory, no CUDA call), runs
 *          the host plan on the slot, writes the comm's flag = seq
 *   wait for flag >= seq (gives up after timeout_ns: *timed_out = 1);
 *   copy the result from the pinned slot to the user's buffer
 *
 * The GPU then goes from one call's flag to the next call's input in host
 * memory without the stream's operations in between (tests/gpu/latency.cu
 * measures both hand-overs). Shared by kernels.cu, the host code that
 * launches it, and the CUDA fake that runs it on the CPU. */
#ifndef RCOLL_CUDA_BOUNCE_KERNEL_H
#define RCOLL_CUDA_BOUNCE_KERNEL_H

#include <stdint.h>

#define RCOLL_BOUNCE_THREADS 256

typedef struct rcoll_bounce_kargs {
  const char *in;       /* the user's input (device memory), or NULL: nothing to copy in */
  char *in_host;        /* its pinned slot, mapped */
  uint64_t in_bytes;
  const char *out_host; /* the result's pinned slot */
  char *out;            /* the user's output, or NULL: nothing to copy back */
  uint64_t out_bytes;
  uint32_t *ready;      /* mapped host word: seq once the input is in host memory */
  const uint32_t *flag; /* mapped host word: the comm's flag, >= seq once the plan ran */
  uint32_t *timed_out;  /* mapped host word: set when the flag did not come in time */
  uint64_t timeout_ns;
  uint32_t seq;
} rcoll_bounce_kargs_t;

#endif
