/* A communicator's device state: made on its first device call, freed with
 * the communicator (cuda_comm.h). Everything that allocates CUDA memory or
 * loads code runs here, in the calling thread, before the call makes any
 * stream wait for the proxy: such calls may synchronize the device, and a
 * device that waits for our proxy while our proxy waits for the device
 * would never finish. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clock.h"
#include "cuda/cuda_comm.h"
#include "cuda/ipc.h"
#include "cuda/module.h"
#include "cuda/unit.h"
#include "log.h"

/* The pinned words a stream waits on (flag) and the wait kernel's report. */
typedef struct cuda_ctrl {
  _Atomic uint32_t flag;
  uint32_t timed_out;
  uint32_t direct_failed;  /* direct_kernel.h: RCOLL_DIRECT_FAILED */
  uint64_t direct_sigs[2]; /* ... and on a mismatch the peer's call, then ours */
  /* Per bounce slot, the bounce kernel's seq once a call's input is in host
   * memory (bounce_kernel.h): the GPU writes them and the proxy polls them,
   * on a line of their own. One per slot, since calls on two streams may
   * run their kernels in either order. */
  _Alignas(64) _Atomic uint32_t bounce_ready[RCOLL_CUDA_BOUNCE_SLOTS];
} cuda_ctrl_t;

/* cudaSetDevice even when the device is already the current one: it makes
 * the device's primary context current in this thread, which the driver
 * calls (module loading, launches) need and which a thread that never made
 * a runtime call does not have yet. */
int rcoll_cuda_device_enter(int device, int *saved) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  *saved = -1;
  int cur = -1;
  int r = a->get_device(&cur);
  if (r != 0)
    return r;
  if (cur != device)
    *saved = cur;
  return a->set_device(device);
}

void rcoll_cuda_device_leave(int saved) {
  if (saved >= 0)
    rcoll_cuda_api()->set_device(saved);
}

rcollResult_t rcoll_cuda_sync(rcoll_cuda_comm_t *cc, const char *what) {
  int64_t t0 = rcoll_now_us();
  int r = rcoll_cuda_api()->stream_synchronize(cc->stream);
  cc->prof.syncs++;
  cc->prof.sync_us += rcoll_now_us() - t0;
  if (r != 0)
    return rcoll_error(rcollUnhandledCudaError, "rank %d: %s failed on device %d: %s",
                       cc->comm->rank, what, cc->device, rcoll_cuda_strerror(r));
  return rcollSuccess;
}

/* NCCL's names (LOC PIX PXB PHB SYS) or a number; anything else is LOC. */
static int parse_gdr_level(const char *s) {
  static const char *const names[] = {"LOC", "PIX", "PXB", "PHB", "SYS"};
  static const int levels[] = {0, 1, 2, 3, 5};
  for (int i = 0; i < 5; i++)
    if (strcasecmp(s, names[i]) == 0)
      return levels[i];
  char *end;
  long v = strtol(s, &end, 10);
  if (*s != '\0' && *end == '\0' && v >= 0)
    return (int)v;
  RCOLL_WARN("RCOLL_NET_GDR_LEVEL=%s is not LOC, PIX, PXB, PHB, SYS or a number: GPUDirect RDMA "
             "off", s);
  return 0;
}

static void comm_settings(rcoll_cuda_comm_t *cc) {
  const rcoll_settings_t *s = &cc->comm->settings;
  cc->gdr_level = parse_gdr_level(s->net_gdr_level);
  cc->p2p_disable = s->p2p_disable != 0;
  cc->wait_mode = strcasecmp(s->cuda_wait, "kernel") == 0 ? RCOLL_CUDA_WAIT_KERNEL
                                                          : RCOLL_CUDA_WAIT_MEMOP;
  if (rcoll_cuda_api()->cu_stream_wait_value32 == NULL)
    cc->wait_mode = RCOLL_CUDA_WAIT_KERNEL;
}

static rcollResult_t comm_cuda_error(rcoll_cuda_comm_t *cc, const char *what, int r) {
  return rcoll_error(rcollUnhandledCudaError, "rank %d: %s on device %d failed: %s", cc->comm->rank,
                     what, cc->device, rcoll_cuda_strerror(r));
}

static rcollResult_t comm_resources(rcoll_cuda_comm_t *cc) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  struct rcollComm *c = cc->comm;
  RCOLL_CHECK(rcoll_cuda_module_load(cc->device));
  int r = a->stream_create_with_flags(&cc->stream, RCOLL_CUDA_STREAM_NON_BLOCKING);
  if (r == 0)
    r = a->stream_create_with_flags(&cc->down, RCOLL_CUDA_STREAM_NON_BLOCKING);
  if (r != 0)
    return comm_cuda_error(cc, "creating the proxy streams", r);
  void *ctrl = NULL;
  r = rcoll_cuda_ctrl_alloc(&ctrl, sizeof(cuda_ctrl_t));
  if (r != 0)
    return comm_cuda_error(cc, "cudaHostAlloc of the stream flag", r);
  cc->flag = &((cuda_ctrl_t *)ctrl)->flag;
  void *dev = NULL;
  r = a->host_get_device_pointer(&dev, ctrl, 0);
  if (r != 0)
    return comm_cuda_error(cc, "cudaHostGetDevicePointer of the stream flag", r);
  cc->flag_dev = (rcoll_cu_deviceptr_t)(uintptr_t)dev;
  cc->timed_out_dev = cc->flag_dev + offsetof(cuda_ctrl_t, timed_out);
  cc->direct_failed = &((cuda_ctrl_t *)ctrl)->direct_failed;
  cc->direct_failed_dev = cc->flag_dev + offsetof(cuda_ctrl_t, direct_failed);
  cc->direct_sigs = ((cuda_ctrl_t *)ctrl)->direct_sigs;
  cc->direct_sigs_dev = cc->flag_dev + offsetof(cuda_ctrl_t, direct_sigs);
  cc->bounce_ready = ((cuda_ctrl_t *)ctrl)->bounce_ready;
  cc->bounce_ready_dev = cc->flag_dev + offsetof(cuda_ctrl_t, bounce_ready);
  void *scratch = NULL;
  size_t bytes = (size_t)c->nscratch * c->chunk_bytes;
  r = a->malloc(&scratch, bytes);
  if (r != 0)
    return comm_cuda_error(cc, "cudaMalloc of the scratch ring", r);
  cc->dev_scratch = scratch;
  return rcollSuccess;
}

static void slots_free(rcoll_cuda_slots_t *s, struct rcollComm *c, int peer, int send) {
  const rcoll_transport_ops_t *ops = rcoll_peer_net(c, peer);
  void *comm = send ? c->peers[peer].send_comm : c->peers[peer].recv_comm;
  if (ops != NULL && comm != NULL && s->mh != NULL)
    ops->dereg_mr(comm, s->mh);
  if (ops != NULL && comm != NULL && s->big_mh != NULL)
    ops->dereg_mr(comm, s->big_mh);
  for (int i = 0; i < s->nretired; i++) {
    if (ops != NULL && comm != NULL && s->retired[i].mh != NULL)
      ops->dereg_mr(comm, s->retired[i].mh);
    rcoll_cuda_api()->free_host(s->retired[i].buf);
  }
  if (s->base != NULL)
    rcoll_cuda_api()->free_host(s->base);
  if (s->big != NULL)
    rcoll_cuda_api()->free_host(s->big);
  for (int i = 0; i < RCOLL_MAX_SLOTS; i++)
    if (s->ev[i] != NULL)
      rcoll_cuda_api()->event_destroy(s->ev[i]);
  if (s->big_ev != NULL)
    rcoll_cuda_api()->event_destroy(s->big_ev);
  memset(s, 0, sizeof *s);
}

/* Frees what was allocated; called with the proxy stopped (or never run).
 * drain: first let receivers finish reading our IPC rings (not on abort). */
static void comm_free_resources(rcoll_cuda_comm_t *cc, int drain) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  /* A failed comm's peers have mostly failed too (a mismatch fails both
   * ranks) and will not read what is left in our rings: wait a moment for
   * one that still might, not the whole timeout. */
  int64_t ms = cc->comm->async_error == rcollSuccess ? cc->comm->timeout_ms
               : cc->comm->timeout_ms < 1000 ? cc->comm->timeout_ms : 1000;
  for (int p = 0; cc->peers != NULL && drain && p < cc->comm->nranks; p++)
    rcoll_ipc_tx_drain(&cc->peers[p].tx, ms);
  rcoll_cuda_direct_free(cc, drain);
  int saved = -1;
  rcoll_cuda_device_enter(cc->device, &saved); /* the slots' events are its */
  rcoll_cuda_bounce_free(cc);
  for (int p = 0; cc->peers != NULL && p < cc->comm->nranks; p++) {
    slots_free(&cc->peers[p].send, cc->comm, p, 1);
    slots_free(&cc->peers[p].recv, cc->comm, p, 0);
    rcoll_ipc_tx_free(&cc->peers[p].tx);
    rcoll_ipc_rx_free(&cc->peers[p].rx);
  }
  for (int i = 0; i < RCOLL_CUDA_COPY_EVENTS; i++)
    if (cc->copy_ev[i] != NULL)
      a->event_destroy(cc->copy_ev[i]);
  rcoll_cuda_device_leave(saved);
  free(cc->peers);
  if (cc->dev_scratch != NULL)
    a->free(cc->dev_scratch);
  /* cc->flag's block is never freed: a user stream may not have reached
   * its wait on it yet (ctrl_pool.c). */
  if (cc->stream != NULL)
    a->stream_destroy(cc->stream);
  if (cc->down != NULL)
    a->stream_destroy(cc->down);
  free(cc->spare_steps);
  rcoll_cuda_event_pool_free(cc);
  pthread_mutex_destroy(&cc->mu);
  pthread_cond_destroy(&cc->cv);
  free(cc);
}

static rcollResult_t comm_create(struct rcollComm *c, int device, rcoll_cuda_comm_t **out) {
  rcoll_cuda_comm_t *cc = calloc(1, sizeof *cc);
  if (cc == NULL || (cc->peers = calloc((size_t)c->nranks, sizeof *cc->peers)) == NULL) {
    free(cc);
    return rcoll_error(rcollSystemError, "rank %d: out of memory for the device state", c->rank);
  }
  cc->comm = c;
  cc->device = device;
  pthread_mutex_init(&cc->mu, NULL);
  pthread_cond_init(&cc->cv, NULL);
  comm_settings(cc);
  int saved = -1;
  rcollResult_t r = rcoll_cuda_device_enter(device, &saved) == 0
                        ? comm_resources(cc)
                        : rcoll_error(rcollUnhandledCudaError, "rank %d: cannot select device %d",
                                      c->rank, device);
  rcoll_cuda_device_leave(saved);
  if (r == rcollSuccess)
    r = rcoll_cuda_proxy_start(cc);
  if (r != rcollSuccess) {
    comm_free_resources(cc, 0);
    return r;
  }
  RCOLL_INFO(RCOLL_SUB_INIT, "rank %d: device path on CUDA device %d (streams wait with %s)", c->rank,
             device, cc->wait_mode == RCOLL_CUDA_WAIT_MEMOP ? "cuStreamWaitValue32" : "a wait kernel");
  *out = cc;
  return rcollSuccess;
}

rcollResult_t rcoll_cuda_comm_get(struct rcollComm *c, int device, rcoll_cuda_comm_t **out) {
  if (c->cuda == NULL)
    RCOLL_CHECK(comm_create(c, device, &c->cuda));
  if (c->cuda->device != device)
    return rcoll_error(rcollInvalidUsage, "rank %d: the communicator's device buffers are on device "
                       "%d; these are on device %d", c->rank, c->cuda->device, device);
  *out = c->cuda;
  return rcollSuccess;
}

/* ---- per-peer modes and resources ---- */

static const char *mode_name(int mode) {
  switch (mode) {
  case RCOLL_CUDA_MODE_IPC: return "CUDA IPC";
  case RCOLL_CUDA_MODE_GDR: return "GPUDirect RDMA";
  default: return "staging through pinned host memory";
  }
}

/* Same node: IPC (unless RCOLL_P2P_DISABLE). Else GDR when the transport can
 * register device memory and RCOLL_NET_GDR_LEVEL allows it; else staging.
 * Only IPC changes what travels, and both ends decide it from the same
 * inputs (topology and settings). */
static int peer_mode(rcoll_cuda_comm_t *cc, int peer) {
  struct rcollComm *c = cc->comm;
  if (!cc->p2p_disable && c->topo.node_of != NULL && c->topo.node_of[peer] == c->topo.node)
    return RCOLL_CUDA_MODE_IPC;
  const rcoll_comm_net_t *n = &c->nets[c->peers[peer].net];
  rcoll_net_props_t props;
  memset(&props, 0, sizeof props);
  if (cc->gdr_level > 0 && n->ops != NULL &&
      n->ops->get_properties(n->ctx, 0, &props) == rcollSuccess &&
      (props.ptr_support & RCOLL_PTR_CUDA))
    return RCOLL_CUDA_MODE_GDR;
  return RCOLL_CUDA_MODE_STAGE;
}

static rcollResult_t slots_alloc(rcoll_cuda_comm_t *cc, rcoll_cuda_slots_t *s, size_t big) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  struct rcollComm *c = cc->comm;
  unsigned flags = RCOLL_CUDA_HOST_ALLOC_MAPPED | RCOLL_CUDA_HOST_ALLOC_PORTABLE;
  int r = 0;
  if (s->base == NULL)
    r = a->host_alloc((void **)&s->base, (size_t)c->nslots * c->chunk_bytes, flags);
  if (r != 0)
    return comm_cuda_error(cc, "cudaHostAlloc of staging slots", r);
  /* Made here, in the calling thread: event_pool.c says why not in the proxy. */
  for (int i = 0; i < c->nslots && r == 0; i++)
    if (s->ev[i] == NULL)
      r = a->event_create_with_flags(&s->ev[i], RCOLL_CUDA_EVENT_DISABLE_TIMING);
  if (r == 0 && big > 0 && s->big_ev == NULL)
    r = a->event_create_with_flags(&s->big_ev, RCOLL_CUDA_EVENT_DISABLE_TIMING);
  if (r != 0)
    return comm_cuda_error(cc, "cudaEventCreate for staging slots", r);
  if (big > s->big_bytes) {
    /* Powers of two, so that a growing message size reallocates rarely. The
     * old buffer is kept until the comm goes: freeing pinned memory may
     * synchronize the device while a stream waits for us. */
    size_t bytes = 2 * c->chunk_bytes;
    while (bytes < big)
      bytes *= 2;
    if (s->big != NULL && s->nretired == RCOLL_CUDA_MAX_RETIRED)
      return rcoll_error(rcollSystemError, "rank %d: staging buffer grew too often", c->rank);
    void *p = NULL;
    r = a->host_alloc(&p, bytes, flags);
    if (r != 0)
      return comm_cuda_error(cc, "cudaHostAlloc of a large staging buffer", r);
    if (s->big != NULL)
      s->retired[s->nretired++] = (rcoll_cuda_retired_t){s->big, s->big_mh};
    s->big = p;
    s->big_bytes = bytes;
    s->big_mh = NULL;
  }
  return rcollSuccess;
}

static rcollResult_t peer_prepare(rcoll_cuda_comm_t *cc, int peer, int sends, int recvs,
                                  size_t big_send, size_t big_recv) {
  rcoll_cuda_peer_t *cp = &cc->peers[peer];
  if (cp->mode == RCOLL_CUDA_MODE_NONE) {
    cp->mode = peer_mode(cc, peer);
    RCOLL_INFO(RCOLL_SUB_NET | RCOLL_SUB_P2P, "rank %d <-> rank %d: device buffers via %s",
               cc->comm->rank, peer, mode_name(cp->mode));
  }
  if (cp->mode == RCOLL_CUDA_MODE_IPC) {
    if (recvs)
      RCOLL_CHECK(rcoll_ipc_rx_alloc(cc, peer));
    return sends && cp->tx.ring == NULL ? rcoll_ipc_tx_alloc(cc, peer) : rcollSuccess;
  }
  /* GDR falls back to staging per connection, so it keeps slots too. */
  if (sends)
    RCOLL_CHECK(slots_alloc(cc, &cp->send, big_send));
  if (recvs)
    RCOLL_CHECK(slots_alloc(cc, &cp->recv, big_recv));
  return rcollSuccess;
}

static void *scratch_twin(rcoll_cuda_comm_t *cc, const void *ptr) {
  struct rcollComm *c = cc->comm;
  const char *p = ptr, *base = c->scratch;
  size_t bytes = (size_t)c->nscratch * c->chunk_bytes;
  if (base == NULL || p < base || p >= base + bytes)
    return (void *)ptr;
  return cc->dev_scratch + (p - base);
}

typedef struct peer_need {
  int sends, recvs;
  size_t big_send, big_recv; /* largest message over a slot, each way */
} peer_need_t;

/* The local copies' events, made once (event_pool.c says why here). */
static rcollResult_t copy_events_make(rcoll_cuda_comm_t *cc) {
  for (int i = 0; i < RCOLL_CUDA_COPY_EVENTS; i++) {
    int r = cc->copy_ev[i] != NULL ? 0
            : rcoll_cuda_api()->event_create_with_flags(&cc->copy_ev[i], RCOLL_CUDA_EVENT_DISABLE_TIMING);
    if (r != 0)
      return comm_cuda_error(cc, "cudaEventCreate for local copies", r);
  }
  return rcollSuccess;
}

static rcollResult_t plan_peers(rcoll_cuda_comm_t *cc, const rcoll_plan_t *p, peer_need_t *need) {
  struct rcollComm *c = cc->comm;
  for (int i = 0; i < p->nsteps; i++) {
    const rcoll_step_t *st = &p->steps[i];
    if (st->kind == RCOLL_STEP_COPY && cc->copy_ev[0] == NULL)
      RCOLL_CHECK(copy_events_make(cc));
    if (st->kind == RCOLL_STEP_COPY || (st->flags & RCOLL_STEP_FP))
      continue; /* fingerprints travel as host messages (fingerprint.c) */
    peer_need_t *n = &need[st->peer];
    size_t big = st->bytes > c->chunk_bytes ? st->bytes : 0;
    if (st->kind == RCOLL_STEP_SEND) {
      n->sends = 1;
      n->big_send = big > n->big_send ? big : n->big_send;
    } else {
      n->recvs = 1;
      n->big_recv = big > n->big_recv ? big : n->big_recv;
    }
  }
  rcollResult_t r = rcollSuccess;
  for (int peer = 0; peer < c->nranks && r == rcollSuccess; peer++)
    if (need[peer].sends || need[peer].recvs)
      r = peer_prepare(cc, peer, need[peer].sends, need[peer].recvs, need[peer].big_send,
                       need[peer].big_recv);
  return r;
}

rcollResult_t rcoll_cuda_plan_prepare(rcoll_cuda_comm_t *cc, rcoll_plan_t *p) {
  struct rcollComm *c = cc->comm;
  peer_need_t *need = calloc((size_t)c->nranks, sizeof *need);
  if (need == NULL)
    return rcoll_error(rcollSystemError, "rank %d: out of memory preparing a device call", c->rank);
  int saved = -1;
  rcollResult_t r = rcoll_cuda_device_enter(cc->device, &saved) == 0
                        ? plan_peers(cc, p, need)
                        : rcoll_error(rcollUnhandledCudaError, "rank %d: cannot select device %d",
                                      c->rank, cc->device);
  rcoll_cuda_device_leave(saved);
  free(need);
  for (int i = 0; i < p->nsteps; i++) {
    p->steps[i].src = scratch_twin(cc, p->steps[i].src);
    p->steps[i].dst = scratch_twin(cc, p->steps[i].dst);
  }
  return r;
}

/* ---- streams ---- */

rcollResult_t rcoll_cuda_stream_hold(rcoll_cuda_comm_t *owner, rcoll_cuda_stream_t s, uint32_t seq) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  if (owner->wait_mode == RCOLL_CUDA_WAIT_MEMOP) {
    int r = a->cu_stream_wait_value32(s, owner->flag_dev, seq, RCOLL_CU_STREAM_WAIT_VALUE_GEQ);
    if (r == 0)
      return rcollSuccess;
    RCOLL_WARN("rank %d: cuStreamWaitValue32 failed (CUresult %d); streams wait with a kernel from "
               "now on", owner->comm->rank, r);
    owner->wait_mode = RCOLL_CUDA_WAIT_KERNEL;
  }
  /* The kernel's timeout is only a backstop against a dead proxy: it must
   * not fire while a slow collective still makes progress. */
  int64_t ms = 4 * owner->comm->timeout_ms;
  return rcoll_cuda_launch_wait(owner->flag_dev, seq, (uint64_t)(ms < 60000 ? 60000 : ms) * 1000000u,
                                owner->timed_out_dev, s);
}

void rcoll_cuda_stream_release(rcoll_cuda_comm_t *owner, uint32_t seq) {
  atomic_store_explicit(owner->flag, seq, memory_order_release);
}

int rcoll_cuda_wait_timed_out(const rcoll_cuda_comm_t *cc) {
  return ((const cuda_ctrl_t *)(const void *)cc->flag)->timed_out != 0;
}

/* ---- teardown ---- */

rcollResult_t rcoll_cuda_comm_drain(struct rcollComm *c) {
  if (c->cuda == NULL)
    return rcollSuccess;
  return rcoll_cuda_proxy_drain(c->cuda, c->timeout_ms);
}

static void prof_log(const rcoll_cuda_comm_t *cc) {
  const struct rcoll_cuda_prof *p = &cc->prof;
  if (p->units == 0)
    return;
  RCOLL_INFO(RCOLL_SUB_P2P, "rank %d: CUDA proxy: %lld units, %.3f ms running them (%.1f us each; "
             "%.3f ms in %lld stream syncs, the rest issuing work and waiting for peers), %.3f ms "
             "queued before the proxy took them, %.3f ms waiting for the streams' earlier work; %lld "
             "local copies; %lld staging copies; CUDA IPC parts %lld sent, %lld received; %lld small "
             "calls as host plans (RCOLL_CUDA_BOUNCE); CUDA calls running units: %lld issuing work "
             "(copies, kernels, events) %.3f ms, %lld event queries %.3f ms (%lld found the work done)",
             cc->comm->rank, (long long)p->units, p->run_us / 1e3, (double)p->run_us / (double)p->units,
             p->sync_us / 1e3, (long long)p->syncs, p->queue_us / 1e3, p->event_wait_us / 1e3,
             (long long)p->local_copies, (long long)p->staged_copies, (long long)p->ipc_parts_sent,
             (long long)p->ipc_parts_recv, (long long)p->bounced, (long long)p->issued, p->issue_ns / 1e6,
             (long long)p->queries, p->query_ns / 1e6, (long long)p->queries_ran);
}

void rcoll_cuda_comm_destroy(struct rcollComm *c) {
  rcoll_cuda_comm_t *cc = c->cuda;
  if (cc == NULL)
    return;
  int user_abort = c->aborted;
  if (!user_abort)
    rcoll_cuda_comm_drain(c);
  /* Aborted, or the drain timed out: whatever is queued runs into the abort
   * flag or the comm's error at once; streams are released either way. */
  c->aborted = 1;
  if (!rcoll_cuda_proxy_stop(cc, c->timeout_ms)) {
    RCOLL_WARN("rank %d: the CUDA proxy thread did not stop; its memory is left", c->rank);
    rcoll_cuda_stream_release(cc, cc->next_seq);
    c->cuda = NULL;
    return;
  }
  rcoll_cuda_stream_release(cc, cc->next_seq);
  prof_log(cc); /* the proxy has stopped: its counters are still */
  comm_free_resources(cc, !user_abort);
  c->cuda = NULL;
}
