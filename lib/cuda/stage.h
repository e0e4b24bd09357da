/* Staging arithmetic and the per-mode step executors of device plans.
 *
 * The arithmetic is pure (unit-tested without CUDA): how a message is cut
 * into parts that fit a slot, and how an overlapping device copy is cut into
 * pieces that do not overlap (cudaMemcpy has no memmove). */
#ifndef RCOLL_CUDA_STAGE_H
#define RCOLL_CUDA_STAGE_H

#include <stddef.h>

#include "cuda/cuda_comm.h"

/* Parts of a `bytes` message through slots of `slot` bytes: at least one,
 * so that an empty message is still signalled. */
size_t rcoll_stage_nparts(size_t bytes, size_t slot);
/* Bytes of part k (the last one may be short; 0 for an empty message). */
size_t rcoll_stage_part_bytes(size_t bytes, size_t slot, size_t k);

/* One non-overlapping piece of an overlapping copy. */
typedef struct rcoll_stage_piece {
  size_t dst_off, src_off, bytes;
} rcoll_stage_piece_t;
/* Cuts memmove(dst, src, bytes) into pieces, in the order they must run,
 * each of which is a plain copy; returns how many (at most max; 0 when
 * bytes is 0 or dst == src, or when more than max would be needed). */
size_t rcoll_stage_pieces(const void *dst, const void *src, size_t bytes, rcoll_stage_piece_t *out,
                          size_t max);

/* Which buffer of `s` a message of `bytes` uses: a free slot index, -2 for
 * the big buffer (bytes > slot), or -1 when none is free now. */
int rcoll_stage_pick(const rcoll_cuda_slots_t *s, int nslots, size_t slot_bytes, size_t bytes);
char *rcoll_stage_buf(const rcoll_cuda_slots_t *s, int slot, size_t slot_bytes);
void rcoll_stage_take(rcoll_cuda_slots_t *s, int nslots, int slot);
void rcoll_stage_give(rcoll_cuda_slots_t *s, int slot);

/* Executors, called by dev_step.c for steps whose peer uses that mode.
 * post returns 1 when the step moved; test returns 1 when it finished. */
int rcoll_stage_post(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err);
int rcoll_stage_test(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err);
int rcoll_gdr_post(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err);
int rcoll_gdr_test(rcoll_plan_t *p, rcoll_step_t *st, rcollResult_t *err);

/* Shared by the executors: queues dst = src op staged for `bytes` at byte
 * offset `off` of the step on the proxy stream (all three device-accessible),
 * then the avg finish of that range if the step carries it. The caller
 * waits for it (rcoll_cuda_sync, or an event it records). */
rcollResult_t rcoll_dev_reduce_issue(rcoll_cuda_comm_t *cc, const rcoll_step_t *st, size_t off,
                                     const void *staged, size_t bytes);
/* Queues a copy on one of the proxy's streams (the caller waits). */
rcollResult_t rcoll_dev_copy_issue(rcoll_cuda_comm_t *cc, rcoll_cuda_stream_t s, void *dst, const void *src,
                                   size_t bytes);
/* Records ev on s after the work it stands for ("after <what>"). */
rcollResult_t rcoll_dev_event_record(rcoll_cuda_comm_t *cc, rcoll_cuda_stream_t s, rcoll_cuda_event_t ev,
                                     const char *what);
/* 1 once the work queued before ev has run; 0 while it runs, or with *err
 * set ("<what> failed on device D") when the device reported a failure. */
int rcoll_dev_event_ran(rcoll_cuda_comm_t *cc, rcoll_cuda_event_t ev, const char *what,
                        rcollResult_t *err);
/* "rank R: <what> rank P (host) failed: <text>" as the host engine says it. */
rcollResult_t rcoll_dev_peer_error(struct rcollComm *c, int peer, rcollResult_t r, const char *what);

#endif
