/* The direct path on device buffers: for a communicator whose ranks all
 * share one node (RCOLL_CUDA_DIRECT=1 on every rank, CUDA IPC allowed), an
 * all-reduce is one kernel launch on the caller's stream, made by the
 * calling thread, and so is every other collective's call (but sends and
 * receives). No proxy thread, no host flag, no stream wait: the blocks of
 * every rank's kernel meet through flags in each other's device memory
 * (direct_kernel.h has the protocol and why it is safe).
 *
 * Why beside the proxy path rather than inside it: the proxy path runs any
 * plan over any transport, one host step at a time, which costs a host round
 * trip per part (the H200 runs: 74 us at 8 B, 20 GB/s at 128 MiB under MPS).
 * On one node nothing but the GPU need take part. The box is the
 * communicator's, mapped once at the first call (never a user buffer, whose
 * mapping would pin freed memory in the peers), at the price of one copy of
 * the input into it. */
#ifndef RCOLL_CUDA_DIRECT_H
#define RCOLL_CUDA_DIRECT_H

#include <stdint.h>

#include "cuda/cuda_api.h"
#include "cuda/direct_kernel.h"
#include "device.h"
#include "rcoll.h"

enum { RCOLL_DIRECT_UNTRIED = 0, RCOLL_DIRECT_ON, RCOLL_DIRECT_OFF };

typedef struct rcoll_cuda_direct {
  int state;
  char *box;                            /* ours: header, then RCOLL_DIRECT_REGIONS regions */
  char *boxes[RCOLL_DIRECT_MAX_RANKS];  /* every rank's, as mapped here */
  uint8_t opened[RCOLL_DIRECT_MAX_RANKS]; /* from cudaIpcOpenMemHandle (to close) */
  size_t chunk_bytes;                   /* one block's region */
  uint64_t rounds;                      /* rounds issued so far (the sequence) */
  uint64_t last[RCOLL_DIRECT_MAX_BLOCKS];
  rcoll_cuda_event_t done;              /* recorded after each call */
  rcoll_cuda_stream_t stream;           /* the last call's */
  int64_t calls;
  struct rcoll_direct_meet *meet;       /* in place: where calls meet (direct_meet.h); NULL never */
  uint64_t inplace_min;                 /* bytes from which calls meet (rank 0's setting) */
  int64_t inplace_calls;
  uint32_t max_blocks;                  /* per call, agreed at setup (direct.c says why) */
  /* Sends and receives: each pair's rounds so far, to and from each peer. */
  uint64_t sent[RCOLL_DIRECT_MAX_RANKS], recvd[RCOLL_DIRECT_MAX_RANKS];
  int64_t p2p_calls;                    /* kernels of sends and receives */
} rcoll_cuda_direct_t;

/* One rank's GPU as the direct all-reduce's setup sees it. */
typedef struct rcoll_direct_gpu {
  int64_t pid;
  uint64_t ns_key; /* rcoll_pid_ns_key(): whose pid numbers `pid` is in (0: unknown) */
  char bus[32];    /* its PCI bus id ("": unknown) */
  int32_t mps;     /* cudaDevAttrMpsEnabled: 1, 0, or -1 (unknown) */
} rcoll_direct_gpu_t;

/* 1 when ranks x and y are two processes on one GPU without MPS: the GPU
 * then runs one process's kernels at a time, taking turns every time slice,
 * and a direct all-reduce needs every rank's blocks running at once (each
 * flag would wait for a turn). 0 when no such pair is known: threads of one
 * process share their context, and an unknown bus id or MPS state is not
 * held against the ranks. */
int rcoll_direct_take_turns(const rcoll_direct_gpu_t *x, const rcoll_direct_gpu_t *y);

struct rcollComm;
struct rcoll_cuda_comm;

/* The device op (lib/device.h): 1 when the call was taken (*r says how it
 * went), 0 when it must go through the proxy (sends and receives, calls of
 * no elements but all-reduces, PreMulSum, the direct path off). In a
 * group it is offered at rcollGroupEnd (lib/group.h).
 * coll: RCOLL_COLL_* (lib/algo.h); count as NCCL's. */
int rcoll_cuda_direct(struct rcollComm *c, int coll, const void *in, void *out, size_t count,
                      rcollDataType_t t, rcollRedOp_t op, int root, rcollStream_t stream,
                      int device, rcollResult_t *r);
/* The device op direct_p2p (lib/device.h): a rank's sends and receives of
 * one call or group (ops in the order made) as kernels of up to
 * RCOLL_DIRECT_P2P_OPS each, on the first op's stream (the others' join it
 * before and wait for it after), when the direct path is on (set up by an
 * earlier collective: its set-up needs every rank, a send only two). 1 when
 * taken (*r says how it went), 0 when they go through the proxy. */
int rcoll_cuda_direct_p2p(struct rcollComm *c, const rcoll_p2p_op_t *ops, int nops, int device,
                          rcollResult_t *r);
/* What an earlier kernel's wait gave up on, as this call's error (also
 * the comm's); rcollSuccess when none did. */
rcollResult_t rcoll_direct_failed(struct rcoll_cuda_comm *cc);
/* A call on another stream than the last direct one waits (on the host)
 * for that one: their kernels share the box. */
rcollResult_t rcoll_direct_after_last(struct rcoll_cuda_comm *cc, rcollStream_t stream);
/* Waits (up to RCOLL_TIMEOUT) until our last direct kernel has ended; `why`
 * completes the error ("waited for it ..."). */
rcollResult_t rcoll_direct_wait_last(struct rcoll_cuda_comm *cc, const char *why);
/* "all-reduce", "reduce-scatter", ..., from RCOLL_DIRECT_SIG. */
static inline const char *rcoll_direct_call_name(uint64_t sig) {
  static const char *const names[8] = {"all-reduce", "reduce-scatter", "all-gather", "broadcast",
                                       "reduce", "gather", "scatter", "all-to-all"};
  return names[(sig >> 12) & 7];
}
/* "rank N made another call: ..." for two calls' RCOLL_DIRECT_SIG. */
rcollResult_t rcoll_direct_mismatch(const struct rcollComm *c, unsigned peer, uint64_t ours,
                                    uint64_t theirs);
/* When the comm goes (its proxy stopped): waits for our last kernel and,
 * with drain, for every peer to be done reading our box; then frees it. */
void rcoll_cuda_direct_free(struct rcoll_cuda_comm *cc, int drain);

#endif
