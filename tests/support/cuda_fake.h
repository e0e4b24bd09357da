/* A host fake of the CUDA function table (lib/cuda/cuda_api.h), for testing
 * the device path's bookkeeping on machines without a GPU: stream order,
 * events, the flag waits that hold a stream, groups, staging and the IPC ring
 * protocol. It is not a GPU and proves nothing about one: "device memory" is
 * host memory the fake remembers, kernels run the host reductions, and each
 * stream is a thread that executes its operations in order (cuda_fake.c).
 *
 * Call fake_cuda_install() first. No Criterion here: any program may link it. */
#ifndef RCOLL_TESTS_SUPPORT_CUDA_FAKE_H
#define RCOLL_TESTS_SUPPORT_CUDA_FAKE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_api.h"
#include "rcoll.h"

/* What the tests look at. */
struct fake_stats {
  _Atomic int attr_queries;   /* cudaPointerGetAttributes */
  _Atomic int waits;          /* cuStreamWaitValue32 */
  _Atomic int wait_kernels;   /* rcoll_k_wait_flag launches */
  _Atomic int reduce_kernels;
  _Atomic int records;
  _Atomic uint32_t last_wait_value;
  _Atomic int refuse_memop;   /* set: cuStreamWaitValue32 fails */
  _Atomic int lazy_loads;     /* launches of a function not loaded yet: on a GPU such a
                                 load may synchronize the context (module.c) */
  _Atomic int deadlocks;      /* waits for the driver lock that gave up (cuda_fake.c) */
  _Atomic int events_created;
  _Atomic int direct_kernels; /* rcoll_k_direct_* launches */
  _Atomic int bounce_kernels; /* rcoll_k_bounce launches */
  _Atomic int direct_inplace; /* ... of them reading the peers' buffers in place */
  _Atomic int ipc_opens, ipc_closes; /* cudaIpcOpenMemHandle, cudaIpcCloseMemHandle */
  _Atomic int ipc_gets;       /* cudaIpcGetMemHandle */
  _Atomic int direct_max_blocks; /* the most blocks a direct kernel was launched with */
  _Atomic int sm_count;       /* set: cudaDeviceGetAttribute's multiprocessor count (else it fails) */
  _Atomic int copies;         /* cudaMemcpyAsync */
  _Atomic int syncs;          /* cudaStreamSynchronize */
  _Atomic int copy_delay_us;  /* set: every copy runs this long after its turn comes, as a copy
                                 over a bus takes time; data not waited for shows as stale */
  _Atomic int copy_bytes_per_us; /* set: every copy also takes bytes / this long (a bus's
                                    bandwidth: 25000 is 25 GB/s), after copy_delay_us; for
                                    benches: the bytes land when the copy starts (so that the
                                    memmove on this machine's cores is within the model's time),
                                    where with copy_delay_us alone they land when it ends */
  _Atomic int dev_bytes_per_us; /* set: device-to-device copies and reduce kernels move their
                                  traffic (a copy twice its bytes, a reduce three times) over one
                                  device memory that every stream shares, in turn: a GPU's (for
                                  benches: the bytes land when the work starts) */
  _Atomic int dev_op_us;      /* with it: such a copy or kernel pushed on an idle stream first
                                 waits this long (a launch), while other streams' work goes on */
  _Atomic int copies_running; /* copies of all streams running now, */
  _Atomic int copies_overlap; /* and the most that ran at once */
  _Atomic int copies_queued_most; /* the most copies queued on one stream at once (not yet run) */
};
extern struct fake_stats fake_stats;
/* Set in a thread: its cudaIpcGetMemHandle calls fail, as for memory from
 * cudaMallocAsync pools. */
extern _Thread_local int fake_refuse_ipc;
/* Set in a thread: the device memory it allocates has no IPC handle, in
 * whichever thread asks (as a cudaMallocAsync pool's). */
extern _Thread_local int fake_alloc_no_ipc;
/* Set in a thread: its cudaHostAlloc calls of more bytes fail. */
extern _Thread_local size_t fake_host_alloc_limit;
/* Device 0's PCI bus id (cudaDeviceGetPCIBusId fails while it is "") and
 * cudaDevAttrMpsEnabled (-1: the query fails, as before CUDA 12.4). */
extern char fake_bus_id[32];
extern int fake_mps;

struct rcoll_direct_args;
/* Runs a direct all-reduce kernel's blocks (cuda_fake_direct.c). */
void fake_direct_run(const struct rcoll_direct_args *a, rcollDataType_t t, rcollRedOp_t op);

/* Makes the fake the library's CUDA table, with a legacy default stream. */
void fake_cuda_install(void);

/* Frees "device" or pinned memory the fake handed out (cudaFree). */
int fake_free(void *p);

/* Waits until the stream (NULL: the legacy one) has run everything queued. */
int fake_stream_sync(rcoll_cuda_stream_t h);

/* Test hook: runs fn(arg) on the stream, in order with everything else. */
void fake_stream_host(rcoll_cuda_stream_t h, void (*fn)(void *), void *arg);

/* Test hook: every copy queued on this created stream from now on takes
 * `us` microseconds more (a stream slower than the others). */
void fake_stream_copy_delay(rcoll_cuda_stream_t h, int us);
/* The copies queued on this created stream so far. */
int fake_stream_copies(rcoll_cuda_stream_t h);

/* Test hook: cudaMemcpyAsync from device memory into pageable host memory,
 * which returns only once the copy is done, with the driver lock held
 * meanwhile. */
void fake_copy_to_pageable(void *dst, const void *src, size_t n, rcoll_cuda_stream_t h);

#endif
