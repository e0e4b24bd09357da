/* The direct path's sends and receives, host side (direct.h): a rank's
 * point-to-point calls of one call or group as kernels on the box that
 * direct.c set up (direct_kernel.h has the protocol). Apart from direct.c,
 * which has the set-up, the collectives' launches and the end. */
#include <string.h>

#include "cuda/cuda_comm.h"
#include "cuda/direct.h"
#include "cuda/module.h"
#include "log.h"

/* One kernel of up to RCOLL_DIRECT_P2P_OPS sends and receives: each
 * message follows the ones before it between the same two ranks, the same
 * way round (base), on every block. */
static rcollResult_t direct_p2p_launch(rcoll_cuda_comm_t *cc, const rcoll_p2p_op_t *ops, int nops,
                                       rcollStream_t stream) {
  struct rcollComm *c = cc->comm;
  rcoll_cuda_direct_t *d = &cc->direct;
  rcoll_direct_args_t a = {.region_bytes = d->chunk_bytes,
                           .timeout_ns = (uint64_t)c->timeout_ms * 1000000u,
                           .failed = (uint32_t *)(uintptr_t)cc->direct_failed_dev,
                           .sigs = (uint64_t *)(uintptr_t)cc->direct_sigs_dev,
                           .nranks = (uint32_t)c->nranks, .rank = (uint32_t)c->rank,
                           .p2p = 1, .nops = (uint32_t)nops, .nblocks = RCOLL_DIRECT_P2P_BLOCKS};
  memcpy(a.box, d->boxes, sizeof a.box);
  for (int j = 0; j < nops; j++) {
    uint64_t *count = ops[j].send ? &d->sent[ops[j].peer] : &d->recvd[ops[j].peer];
    a.ops[j] = (rcoll_direct_op_t){.buf = ops[j].buf, .bytes = ops[j].bytes, .base = *count,
                                        .peer = (uint32_t)ops[j].peer, .send = (uint32_t)ops[j].send};
    *count += rcoll_direct_p2p_rounds(&a, ops[j].bytes);
  }
  RCOLL_CHECK(rcoll_cuda_launch_direct(&a, rcollUint8, rcollSum, a.nblocks, stream));
  d->stream = stream;
  d->calls++;
  d->p2p_calls++;
  int e = rcoll_cuda_api()->event_record(d->done, stream);
  return e == 0 ? rcollSuccess : rcoll_error(rcollUnhandledCudaError, "rank %d: cudaEventRecord "
                                             "after direct sends and receives: %s", c->rank,
                                             rcoll_cuda_strerror(e));
}

/* The group's other streams (each once): before the kernels, `s0` waits
 * for the work queued on them (join = 1); after, they wait for the kernels
 * (d->done, just recorded on s0). */
static rcollResult_t direct_p2p_streams(rcoll_cuda_comm_t *cc, const rcoll_p2p_op_t *ops, int nops,
                                        int join) {
  const rcoll_cuda_api_t *api = rcoll_cuda_api();
  rcollStream_t s0 = ops[0].stream;
  for (int j = 1; j < nops; j++) {
    int seen = ops[j].stream == s0;
    for (int i = 1; i < j && !seen; i++)
      seen = ops[i].stream == ops[j].stream;
    if (seen)
      continue;
    rcoll_cuda_event_t e = cc->direct.done;
    int r = join ? rcoll_cuda_event_take(cc, cc->device, &e) : 0;
    if (r == 0 && join)
      r = api->event_record(e, ops[j].stream);
    if (r == 0)
      r = api->stream_wait_event(join ? s0 : ops[j].stream, e, 0);
    if (join) /* a wait holds the record it was made after: the event may be recorded again */
      rcoll_cuda_event_give(cc, cc->device, e);
    if (r != 0)
      return rcoll_error(rcollUnhandledCudaError, "rank %d: ordering the streams of direct sends and "
                         "receives: %s", cc->comm->rank, rcoll_cuda_strerror(r));
  }
  return rcollSuccess;
}

int rcoll_cuda_direct_p2p(struct rcollComm *c, const rcoll_p2p_op_t *ops, int nops, int device,
                          rcollResult_t *r) {
  /* Only once an earlier collective set the path up: that took every rank,
   * and all of them made it, so both ends of a send decide alike. Blocks:
   * P2P_BLOCKS on every kernel, as sender and receiver cut alike. */
  rcoll_cuda_comm_t *cc = c->cuda;
  if (!c->cuda_direct || cc == NULL || cc->device != device || cc->direct.state != RCOLL_DIRECT_ON ||
      cc->direct.max_blocks < RCOLL_DIRECT_P2P_BLOCKS || nops <= 0)
    return 0;
  if ((*r = rcoll_direct_failed(cc)) != rcollSuccess)
    return 1;
  rcollStream_t stream = ops[0].stream;
  *r = rcoll_direct_after_last(cc, stream);
  int saved = -1;
  if (*r == rcollSuccess && rcoll_cuda_device_enter(cc->device, &saved) != 0)
    *r = rcoll_error(rcollUnhandledCudaError, "rank %d: cannot select device %d", c->rank, cc->device);
  if (*r == rcollSuccess)
    *r = direct_p2p_streams(cc, ops, nops, 1);
  /* More than a kernel holds: kernels one after the other on the stream. */
  for (int j = 0; *r == rcollSuccess && j < nops; j += RCOLL_DIRECT_P2P_OPS)
    *r = direct_p2p_launch(cc, ops + j, nops - j < RCOLL_DIRECT_P2P_OPS ? nops - j : RCOLL_DIRECT_P2P_OPS,
                           stream);
  if (*r == rcollSuccess)
    *r = direct_p2p_streams(cc, ops, nops, 0);
  if (*r != rcollSuccess)
    rcoll_comm_set_error(c, *r);
  rcoll_cuda_device_leave(saved);
  return 1;
}
