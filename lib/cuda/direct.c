/* The direct all-reduce's host side (direct.h): the box exchange at the
 * first call, each call's launch, and the end. */
#include "cuda/direct.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "algo.h"
#include "bootstrap.h"
#include "clock.h"
#include "cuda/cuda_comm.h"
#include "cuda/direct_meet.h"
#include "cuda/module.h"
#include "cuda/unit.h"
#include "log.h"
#include "pidns.h"
#include "reduce.h"

/* A block for every 64 KiB of the vector, up to the agreed most (below):
 * one block keeps a small call's latency to one chain of flags; large calls
 * need many to reach the memory's bandwidth. */
#define DIRECT_BYTES_PER_BLOCK ((size_t)64 << 10)

typedef struct direct_offer {
  int32_t ok;
  int32_t meet_ok;         /* round 2: mapped the meeting file (or there is none) */
  rcoll_ipc_hello_t hello; /* the box: handle, address, and whose process */
  int64_t inplace_min;     /* rank 0's RCOLL_CUDA_DIRECT_INPLACE */
  int32_t sms;             /* its GPU's multiprocessors (0: unknown) */
  int32_t max_blocks;      /* round 2: the blocks its GPU holds for each of its ranks */
  int64_t chunk_bytes;     /* its RCOLL_CUDA_DIRECT_CHUNK (its box has 32 regions of it) */
  rcoll_direct_gpu_t gpu;  /* whose process, which GPU, under MPS or not */
  char meet[RCOLL_SETTING_STR_MAX + 48]; /* rank 0: the meeting file it made, or "" */
} direct_offer_t;

/* The header, the collectives' regions, then a region per destination
 * and point-to-point block of an eighth each (direct_kernel.h). */
static size_t box_bytes(const rcoll_cuda_direct_t *d) {
  return RCOLL_DIRECT_HDR_BYTES + RCOLL_DIRECT_REGIONS * d->chunk_bytes +
         (size_t)RCOLL_DIRECT_MAX_RANKS * d->chunk_bytes;
}

static void direct_release(rcoll_cuda_direct_t *d) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  rcoll_direct_meet_close(d->meet);
  d->meet = NULL;
  for (int q = 0; q < RCOLL_DIRECT_MAX_RANKS; q++)
    if (d->opened[q])
      a->ipc_close_mem_handle(d->boxes[q]);
  if (d->box != NULL)
    a->free(d->box);
  if (d->done != NULL)
    a->event_destroy(d->done);
  memset(d->boxes, 0, sizeof d->boxes);
  memset(d->opened, 0, sizeof d->opened);
  d->box = NULL;
  d->done = NULL;
}

/* Our box with its flags at 0, and its offer to the others. */
static int direct_make_box(rcoll_cuda_comm_t *cc, direct_offer_t *me) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  rcoll_cuda_direct_t *d = &cc->direct;
  void *box = NULL, *zeros = calloc(1, RCOLL_DIRECT_HDR_BYTES);
  int r = zeros == NULL ? -1 : a->malloc(&box, box_bytes(d));
  d->box = box;
  if (r == 0)
    r = a->memcpy_async(box, zeros, RCOLL_DIRECT_HDR_BYTES, RCOLL_CUDA_MEMCPY_DEFAULT, cc->stream);
  if (r == 0)
    r = a->stream_synchronize(cc->stream);
  if (r == 0)
    r = a->event_create_with_flags(&d->done, RCOLL_CUDA_EVENT_DISABLE_TIMING);
  me->hello = (rcoll_ipc_hello_t){.magic = RCOLL_IPC_MAGIC, .pid = getpid(),
                                  .ns_key = rcoll_pid_ns_key(), .device = cc->device,
                                  .slot_bytes = box_bytes(d), .ring_addr = (uint64_t)(uintptr_t)box};
  if (r == 0)
    r = a->ipc_get_mem_handle(&me->hello.handle, box);
  free(zeros);
  if (r != 0)
    RCOLL_WARN("rank %d: the direct all-reduce's %zu-byte box on device %d: %s; device "
               "all-reduces go through the proxy", cc->comm->rank, box_bytes(d), cc->device,
               r < 0 ? "out of host memory" : rcoll_cuda_strerror(r));
  return r == 0;
}

static int direct_map(rcoll_cuda_comm_t *cc, const direct_offer_t *all) {
  struct rcollComm *c = cc->comm;
  rcoll_cuda_direct_t *d = &cc->direct;
  for (int q = 0; q < c->nranks; q++) {
    const rcoll_ipc_hello_t *h = &all[q].hello;
    if (q == c->rank || rcoll_ipc_same_process(h)) {
      d->boxes[q] = (char *)(uintptr_t)h->ring_addr;
      continue;
    }
    void *p = NULL;
    int r = rcoll_cuda_api()->ipc_open_mem_handle(&p, h->handle, RCOLL_CUDA_IPC_LAZY_PEER_ACCESS);
    if (r != 0) {
      RCOLL_WARN("rank %d: cudaIpcOpenMemHandle of rank %d's direct all-reduce box (device %d) "
                 "failed: %s; device all-reduces go through the proxy", c->rank, q, (int)h->device,
                 rcoll_cuda_strerror(r));
      return 0;
    }
    d->boxes[q] = p;
    d->opened[q] = 1;
  }
  return 1;
}

/* Blocks of different ranks wait for each other, so every block of every
 * rank's kernel must be resident at once, or the waits never end (they give
 * up after RCOLL_TIMEOUT). A block takes a multiprocessor (up to 128
 * registers for 512 threads): each rank gets its GPU's multiprocessors
 * shared by the ranks on that GPU (all of them, when the bus ids are not
 * known), and all ranks take the least, as their blocks must match; so do
 * they of RCOLL_CUDA_DIRECT_BLOCKS. */
static int32_t direct_max_blocks(const rcoll_cuda_comm_t *cc, const direct_offer_t *all) {
  const direct_offer_t *me = &all[cc->comm->rank];
  int sharing = 0;
  for (int q = 0; q < cc->comm->nranks; q++)
    sharing += me->gpu.bus[0] == '\0' || strcmp(all[q].gpu.bus, me->gpu.bus) == 0;
  int32_t n = me->sms > 0 ? me->sms / sharing : RCOLL_DIRECT_MAX_BLOCKS;
  int32_t most = (int32_t)cc->comm->settings.cuda_direct_blocks;
  return n < 1 ? 1 : n > most ? most : n;
}

static void direct_describe_gpu(const rcoll_cuda_comm_t *cc, direct_offer_t *me) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  int sms = 0, mps = 0;
  if (a->device_get_attribute != NULL &&
      a->device_get_attribute(&sms, RCOLL_CUDA_DEV_ATTR_SM_COUNT, cc->device) == 0)
    me->sms = sms;
  me->gpu.mps = a->device_get_attribute != NULL &&
                a->device_get_attribute(&mps, RCOLL_CUDA_DEV_ATTR_MPS_ENABLED, cc->device) == 0
                ? mps != 0 : -1;
  if (a->device_get_pci_bus_id == NULL ||
      a->device_get_pci_bus_id(me->gpu.bus, (int)sizeof me->gpu.bus, cc->device) != 0)
    me->gpu.bus[0] = '\0';
  me->gpu.bus[sizeof me->gpu.bus - 1] = '\0';
  me->gpu.pid = getpid();
  me->gpu.ns_key = rcoll_pid_ns_key();
}

int rcoll_direct_take_turns(const rcoll_direct_gpu_t *x, const rcoll_direct_gpu_t *y) {
  int same_gpu = x->bus[0] != '\0' && strcmp(x->bus, y->bus) == 0;
  int other_process = x->pid != y->pid || x->ns_key != y->ns_key;
  return same_gpu && other_process && (x->mps == 0 || y->mps == 0);
}

/* Off on every rank (each finds the same pair in the same offers) when two
 * ranks would take turns on one GPU (direct.h). */
static int direct_turns_apart(const struct rcollComm *c, const direct_offer_t *all) {
  for (int p = 0; p < c->nranks; p++)
    for (int q = p + 1; q < c->nranks; q++)
      if (rcoll_direct_take_turns(&all[p].gpu, &all[q].gpu)) {
        if (c->rank == 0)
          RCOLL_WARN("RCOLL_CUDA_DIRECT: ranks %d and %d are two processes on one GPU (%s) "
                     "without MPS: the GPU runs one process's kernels at a time, and a direct "
                     "all-reduce needs every rank's running at once; device all-reduces go "
                     "through the proxy (start MPS, nvidia-cuda-mps-control -d, to use it)",
                     p, q, all[p].gpu.bus);
        return 1;
      }
  return 0;
}

/* Two rounds over the bootstrap, as the flat board: every rank offers its
 * box, then says whether it mapped them all. Any refusal turns the direct
 * path off on every rank, which then agree on the proxy. Only a failing
 * bootstrap (a dead peer) is an error. Rank 0 also offers the meeting file
 * of in-place calls (direct_meet.h); a rank that cannot map it turns those
 * off everywhere, and rank 0 removes the file once all have answered. */
static rcollResult_t direct_setup(rcoll_cuda_comm_t *cc) {
  struct rcollComm *c = cc->comm;
  rcoll_cuda_direct_t *d = &cc->direct;
  d->chunk_bytes = (size_t)c->settings.cuda_direct_chunk / 256 * 256;
  /* The box's allocation and mapping may synchronize the device: first let
   * the proxy finish what streams may be waiting for. */
  RCOLL_CHECK(rcoll_cuda_proxy_drain(cc, c->timeout_ms));
  direct_offer_t *all = calloc((size_t)c->nranks, sizeof *all);
  if (all == NULL)
    return rcoll_error(rcollSystemError, "rank %d: out of memory for the direct all-reduce", c->rank);
  int saved = -1;
  int entered = rcoll_cuda_device_enter(cc->device, &saved) == 0;
  direct_offer_t *me = &all[c->rank];
  me->ok = entered && direct_make_box(cc, me);
  me->inplace_min = c->settings.cuda_direct_inplace;
  me->chunk_bytes = (int64_t)d->chunk_bytes;
  if (entered)
    direct_describe_gpu(cc, me);
  if (c->rank == 0 && me->ok && me->inplace_min > 0 &&
      !rcoll_direct_meet_make(c, me->meet, sizeof me->meet))
    me->meet[0] = '\0';
  char made[sizeof me->meet];
  snprintf(made, sizeof made, "%s", me->meet);
  rcollResult_t r = rcoll_bootstrap_allgather(c->bootstrap, all, sizeof *all);
  int ok = r == rcollSuccess;
  for (int q = 0; q < c->nranks && ok; q++)
    ok = all[q].ok && all[q].hello.magic == RCOLL_IPC_MAGIC;
  ok = ok && !direct_turns_apart(c, all) && direct_map(cc, all);
  all[0].meet[sizeof all[0].meet - 1] = '\0';
  d->inplace_min = (uint64_t)all[0].inplace_min;
  /* Every rank reads the others' regions where its own would be: all take
   * the least region (each box holds 32 of its own, at least as large). */
  for (int q = 0; q < c->nranks && ok; q++)
    if ((size_t)all[q].chunk_bytes < d->chunk_bytes)
      d->chunk_bytes = (size_t)all[q].chunk_bytes;
  if (ok && all[0].meet[0] != '\0')
    d->meet = rcoll_direct_meet_open(c, all[0].meet);
  int meet_ok = d->meet != NULL;
  int32_t max_blocks = direct_max_blocks(cc, all);
  memset(all, 0, (size_t)c->nranks * sizeof *all);
  all[c->rank].ok = ok;
  all[c->rank].meet_ok = meet_ok;
  all[c->rank].max_blocks = max_blocks;
  if (r == rcollSuccess)
    r = rcoll_bootstrap_allgather(c->bootstrap, all, sizeof *all);
  if (made[0] != '\0')
    unlink(made);
  for (int q = 0; q < c->nranks && ok; q++) {
    ok = all[q].ok;
    meet_ok = meet_ok && all[q].meet_ok;
    max_blocks = all[q].max_blocks < max_blocks ? all[q].max_blocks : max_blocks;
  }
  d->max_blocks = (uint32_t)(max_blocks < 1 ? 1 : max_blocks);
  free(all);
  if (!meet_ok) {
    rcoll_direct_meet_close(d->meet);
    d->meet = NULL;
  }
  if (!ok || r != rcollSuccess)
    direct_release(d);
  rcoll_cuda_device_leave(saved);
  d->state = ok && r == rcollSuccess ? RCOLL_DIRECT_ON : RCOLL_DIRECT_OFF;
  if (d->state == RCOLL_DIRECT_ON)
    RCOLL_INFO(RCOLL_SUB_INIT | RCOLL_SUB_P2P, "rank %d: device all-reduces run as one kernel "
               "(RCOLL_CUDA_DIRECT), and so do the other collectives and sends and receives: %d "
               "ranks, a %zu-byte box each over CUDA IPC; in place from %llu bytes%s; up to %u "
               "blocks", c->rank, c->nranks, box_bytes(d),
               (unsigned long long)d->inplace_min, d->meet != NULL ? "" : " (never: no meeting file)",
               d->max_blocks);
  return r;
}

rcollResult_t rcoll_direct_wait_last(rcoll_cuda_comm_t *cc, const char *why) {
  rcoll_cuda_direct_t *d = &cc->direct;
  if (d->calls == 0)
    return rcollSuccess;
  int64_t deadline = rcoll_now_ms() + cc->comm->timeout_ms;
  int r;
  while ((r = rcoll_cuda_api()->event_query(d->done)) == RCOLL_CUDA_ERROR_NOT_READY) {
    if (rcoll_now_ms() > deadline)
      return rcoll_error(rcollSystemError, "rank %d: rcollAllReduce: the previous direct "
                         "all-reduce did not end within RCOLL_TIMEOUT (waited for it %s)",
                         cc->comm->rank, why);
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
  return r == 0 ? rcollSuccess : rcoll_error(rcollUnhandledCudaError, "rank %d: waiting for the "
                                             "previous direct all-reduce: %s", cc->comm->rank,
                                             rcoll_cuda_strerror(r));
}

/* Calls on another stream than the last one start after it: their kernels
 * share the box. Waited for on the host, as it is rare. */
rcollResult_t rcoll_direct_after_last(rcoll_cuda_comm_t *cc, rcollStream_t stream) {
  if (cc->direct.stream == stream)
    return rcollSuccess;
  return rcoll_direct_wait_last(cc, "as this call is on another stream");
}

/* All but reductions copy: bytes, as the sum kernel of one source. */
static int direct_copies(int coll) {
  return coll != RCOLL_DIRECT_ALLREDUCE && coll != RCOLL_DIRECT_REDUCE_SCATTER &&
         coll != RCOLL_DIRECT_REDUCE;
}

/* Calls whose count is each rank's part of the largest buffer. */
static int direct_per_rank(int coll) {
  return coll != RCOLL_DIRECT_ALLREDUCE && coll != RCOLL_DIRECT_BROADCAST && coll != RCOLL_DIRECT_REDUCE;
}

/* Calls with a root. */
static int direct_rooted(int coll) {
  return coll == RCOLL_DIRECT_BROADCAST || coll == RCOLL_DIRECT_REDUCE || coll == RCOLL_DIRECT_GATHER ||
         coll == RCOLL_DIRECT_SCATTER;
}

/* "AllReduce 100 x float32 sum", "Broadcast 100 x int8 root 1", from
 * RCOLL_DIRECT_SIG; "a send or receive of 400 bytes" (RCOLL_DIRECT_P2P_SIG). */
static void direct_sig_name(uint64_t sig, char *buf, size_t cap) {
  if ((sig >> 19) & 1) {
    snprintf(buf, cap, "a send or receive of %llu bytes", (unsigned long long)(sig >> 20));
    return;
  }
  static const char *const coll[8] = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast",
                                      "Reduce", "Gather", "Scatter", "AlltoAll"};
  unsigned k = (unsigned)(sig >> 12) & 7;
  int has_op = !direct_copies((int)k);
  char root[24] = "";
  if (direct_rooted((int)k))
    snprintf(root, sizeof root, " root %u", (unsigned)(sig >> 15) & 31);
  snprintf(buf, cap, "%s %llu x %s%s%s%s", coll[k], (unsigned long long)(sig >> 20),
           rcoll_type_name((rcollDataType_t)((sig >> 4) & 255)), has_op ? " " : "",
           has_op ? rcoll_op_name((rcollRedOp_t)(sig & 15)) : "", root);
}

rcollResult_t rcoll_direct_mismatch(const struct rcollComm *c, unsigned peer, uint64_t ours,
                                    uint64_t theirs) {
  char here[96], there[96];
  direct_sig_name(ours, here, sizeof here);
  direct_sig_name(theirs, there, sizeof there);
  return rcoll_error(rcollInvalidUsage, "rank %d: rank %u made another call: %s here, %s there "
                     "(a direct device call carries its call); every rank must make the same "
                     "calls in the same order", c->rank, peer, here, there);
}

/* What an earlier kernel's wait gave up on, as the error of this call. */
rcollResult_t rcoll_direct_failed(rcoll_cuda_comm_t *cc) {
  static const char *const what[] = {"input in its box, or in place its buffers",
                                     "reduced slice, or in place its part", "reading our box", "",
                                     "send to us", "receive of our send"};
  uint32_t f = *(volatile uint32_t *)cc->direct_failed;
  if (f == 0)
    return rcollSuccess;
  unsigned peer = (f - 1) & 255, kind = (f - 1) >> 8;
  rcollResult_t r;
  if (kind == RCOLL_DIRECT_MISMATCH) {
    r = rcoll_direct_mismatch(cc->comm, peer, ((volatile uint64_t *)cc->direct_sigs)[1],
                              ((volatile uint64_t *)cc->direct_sigs)[0]);
  } else {
    r = rcoll_error(rcollSystemError, "rank %d: a direct device call gave up after RCOLL_TIMEOUT "
                    "waiting for rank %u (its %s); the results of that call and the ones queued "
                    "after it are wrong (a rank whose group held direct calls for two communicators "
                    "ran it through the proxy: group such calls alike on every rank)", cc->comm->rank, peer,
                    kind < sizeof what / sizeof what[0] ? what[kind] : "?");
  }
  rcoll_comm_set_error(cc->comm, r);
  return r;
}

/* The call as the kernel sees it: `count` elements, or for a reduce-scatter
 * and an all-gather each rank's part (NCCL's recvcount and sendcount). All
 * but the all-reduce run in place only (direct_kernel.h). */
typedef struct direct_call {
  int coll; /* RCOLL_DIRECT_ALLREDUCE, ... */
  const void *in;
  void *out;
  size_t count;
  rcollDataType_t t;
  rcollRedOp_t op;
  int root;
} direct_call_t;

/* The call's largest buffer. */
static size_t direct_bytes(const struct rcollComm *c, int coll, size_t count, rcollDataType_t t) {
  return count * rcoll_type_size(t) * (direct_per_rank(coll) ? (size_t)c->nranks : 1);
}

/* Rounds and blocks: a block for every 64 KiB of the call's largest buffer;
 * through the regions, as many rounds of them as the regions need (each
 * holds a rank's segments of its stretch side by side, when pulling a
 * collective that has them). */
static void direct_shape(const rcoll_cuda_direct_t *d, size_t bytes, size_t kcount, size_t es,
                         rcoll_direct_args_t *a) {
  uint64_t nb = (bytes + DIRECT_BYTES_PER_BLOCK - 1) / DIRECT_BYTES_PER_BLOCK;
  uint64_t most = a->inplace || d->max_blocks < RCOLL_DIRECT_REGIONS ? d->max_blocks : RCOLL_DIRECT_REGIONS;
  nb = nb < 1 ? 1 : nb > most ? most : nb;
  uint64_t vec = 16 / es, rounds = 1;
  if (!a->inplace) {
    uint64_t segs = rcoll_direct_segments(a) ? a->nranks : 1;
    uint64_t cap = d->chunk_bytes / es / segs / vec * vec; /* elements of a segment (whole vectors) */
    rounds = (kcount + nb * cap - 1) / (nb * cap);
  }
  /* Even stretches of whole 16-byte vectors. */
  uint64_t chunk = (kcount + rounds * nb - 1) / (rounds * nb);
  a->chunk = (chunk + vec - 1) / vec * vec;
  a->rounds = (uint32_t)rounds;
  a->nblocks = (uint32_t)nb;
  /* A rank's segments and places lie its part apart. */
  uintptr_t any = (uintptr_t)a->in | (uintptr_t)a->out | (direct_per_rank((int)a->coll) ? kcount * es : 0);
  for (uint32_t q = 0; q < a->nranks && a->inplace; q++)
    any |= (uintptr_t)a->ins[q] | (uintptr_t)a->outs[q];
  a->vec = (any & 15) == 0;
}

/* Meets the peers for an in-place call and points the kernel at the
 * buffers: 1 in place, 0 not (every rank decides the same); *r on failure. */
static int direct_meet_call(rcoll_cuda_comm_t *cc, const direct_call_t *k, rcoll_direct_args_t *a,
                            rcollResult_t *r) {
  /* A broadcast's and scatter's input and a reduce's and gather's output
   * are the root's only: the other ranks' may be anything, even NULL, and
   * are not handed over. */
  int c = k->coll, root = (int)a->rank == k->root;
  const void *in = (c == RCOLL_DIRECT_BROADCAST || c == RCOLL_DIRECT_SCATTER) && !root ? k->out : k->in;
  void *out = (c == RCOLL_DIRECT_REDUCE || c == RCOLL_DIRECT_GATHER) && !root ? (void *)k->in : k->out;
  /* An all-to-all in place would overwrite segments a peer has yet to
   * send: this rank refuses (NULL), and all go through the regions. */
  if (c == RCOLL_DIRECT_ALLTOALL && in == out)
    in = NULL;
  if (!rcoll_direct_meet(cc, in, out, a->sig, a, r))
    return 0;
  /* Our segment of every input, our place in every output. */
  size_t part = k->count * rcoll_type_size(k->t), at = (size_t)a->rank * part;
  const char *mine = a->ins[a->rank];
  for (uint32_t q = 0; q < a->nranks; q++) {
    if (c == RCOLL_DIRECT_REDUCE_SCATTER || c == RCOLL_DIRECT_SCATTER)
      a->ins[q] += at;
    if (c == RCOLL_DIRECT_ALLTOALL) /* ours, segment q for rank q */
      a->ins[q] = mine + q * part;
    if (c == RCOLL_DIRECT_ALLGATHER || c == RCOLL_DIRECT_GATHER || c == RCOLL_DIRECT_ALLTOALL)
      a->outs[q] += at;
  }
  return 1;
}

/* In place when the call is large and every rank could hand over its
 * buffers, else through the regions. */
static rcollResult_t direct_launch(rcoll_cuda_comm_t *cc, const direct_call_t *k, rcollStream_t stream) {
  struct rcollComm *c = cc->comm;
  rcoll_cuda_direct_t *d = &cc->direct;
  int copies = direct_copies(k->coll);
  rcollDataType_t kt = copies ? rcollUint8 : k->t;
  rcollRedOp_t kop = k->op; /* the sum, for copies (rcoll_cuda_direct) */
  size_t es = rcoll_type_size(kt), kcount = copies ? k->count * rcoll_type_size(k->t) : k->count;
  rcoll_direct_args_t a = {.out = k->out, .in = k->in, .count = kcount,
                           .region_bytes = d->chunk_bytes, .base = d->rounds,
                           .timeout_ns = (uint64_t)c->timeout_ms * 1000000u,
                           .failed = (uint32_t *)(uintptr_t)cc->direct_failed_dev,
                           .sigs = (uint64_t *)(uintptr_t)cc->direct_sigs_dev,
                           .sig = RCOLL_DIRECT_SIG(k->coll, k->root, k->count, k->t, k->op),
                           .nranks = (uint32_t)c->nranks, .rank = (uint32_t)c->rank,
                           .avg = kop == rcollAvg, .coll = (uint32_t)k->coll,
                           .root = (uint32_t)k->root};
  memcpy(a.box, d->boxes, sizeof a.box);
  memcpy(a.last, d->last, sizeof a.last);
  size_t bytes = direct_bytes(c, k->coll, k->count, k->t);
  rcollResult_t r = rcollSuccess;
  if (d->meet != NULL && bytes >= d->inplace_min && bytes > 0)
    a.inplace = (uint32_t)direct_meet_call(cc, k, &a, &r);
  if (r != rcollSuccess) {
    rcoll_comm_set_error(c, r);
    return r;
  }
  a.pull = !a.inplace && k->coll != RCOLL_DIRECT_ALLREDUCE;
  direct_shape(d, bytes, kcount, es, &a);
  d->inplace_calls += a.inplace;
  RCOLL_CHECK(rcoll_cuda_launch_direct(&a, kt, kop, a.nblocks, stream));
  d->rounds += a.rounds;
  for (uint64_t b = 0; b < a.nblocks && !a.inplace; b++) /* in place leaves the regions alone */
    d->last[b] = d->rounds;
  d->stream = stream;
  d->calls++;
  int e = rcoll_cuda_api()->event_record(d->done, stream);
  return e == 0 ? rcollSuccess : rcoll_error(rcollUnhandledCudaError, "rank %d: cudaEventRecord "
                                             "after a direct device call: %s", c->rank,
                                             rcoll_cuda_strerror(e));
}

int rcoll_cuda_direct(struct rcollComm *c, int kind, const void *in, void *out, size_t count,
                      rcollDataType_t t, rcollRedOp_t op, int root, rcollStream_t stream,
                      int device, rcollResult_t *r) {
  int coll = kind == RCOLL_COLL_ALLREDUCE        ? RCOLL_DIRECT_ALLREDUCE
             : kind == RCOLL_COLL_REDUCE_SCATTER ? RCOLL_DIRECT_REDUCE_SCATTER
             : kind == RCOLL_COLL_ALLGATHER      ? RCOLL_DIRECT_ALLGATHER
             : kind == RCOLL_COLL_BROADCAST      ? RCOLL_DIRECT_BROADCAST
             : kind == RCOLL_COLL_REDUCE         ? RCOLL_DIRECT_REDUCE
             : kind == RCOLL_COLL_GATHER         ? RCOLL_DIRECT_GATHER
             : kind == RCOLL_COLL_SCATTER        ? RCOLL_DIRECT_SCATTER
             : kind == RCOLL_COLL_ALLTOALL       ? RCOLL_DIRECT_ALLTOALL
                                                 : -1;
  if (direct_copies(coll))
    op = rcollSum; /* not the user's to give */
  if (!direct_rooted(coll))
    root = 0;
  /* PreMulSum ops (beyond rcollNumOps) carry a scalar: the proxy has them. */
  if (coll < 0 || !c->cuda_direct || (int)op < 0 || op >= rcollNumOps ||
      c->nranks > RCOLL_DIRECT_MAX_RANKS)
    return 0;
  rcoll_cuda_comm_t *cc = NULL;
  *r = rcoll_cuda_comm_get(c, device, &cc);
  if (*r == rcollSuccess && cc->direct.state == RCOLL_DIRECT_UNTRIED)
    *r = direct_setup(cc);
  if (*r != rcollSuccess)
    return 1;
  if (cc->direct.state != RCOLL_DIRECT_ON)
    return 0;
  if ((*r = rcoll_direct_failed(cc)) != rcollSuccess)
    return 1;
  if (coll != RCOLL_DIRECT_ALLREDUCE && count == 0)
    return 0; /* nothing to move: the proxy's plan is empty */
  *r = rcoll_direct_after_last(cc, stream);
  int saved = -1;
  direct_call_t k = {coll, in, out, count, t, op, root};
  if (*r == rcollSuccess && rcoll_cuda_device_enter(cc->device, &saved) != 0)
    *r = rcoll_error(rcollUnhandledCudaError, "rank %d: cannot select device %d", c->rank, cc->device);
  else if (*r == rcollSuccess)
    *r = direct_launch(cc, &k, stream);
  rcoll_cuda_device_leave(saved);
  return 1;
}

/* 1 once every peer has said DONE for every region's last use, and TAKEN
 * every round we sent it (read from our own box, which only we free). */
static int direct_peers_done(rcoll_cuda_comm_t *cc, uint64_t *hdr) {
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  rcoll_cuda_direct_t *d = &cc->direct;
  if (a->memcpy_async(hdr, d->box, RCOLL_DIRECT_HDR_BYTES, RCOLL_CUDA_MEMCPY_DEFAULT, cc->stream) != 0 ||
      a->stream_synchronize(cc->stream) != 0)
    return 1; /* nothing to wait for on a broken device */
  for (uint32_t q = 0; q < (uint32_t)cc->comm->nranks; q++)
    for (uint32_t b = 0; q != (uint32_t)cc->comm->rank && b < RCOLL_DIRECT_MAX_BLOCKS; b++)
      if (*rcoll_direct_flag((char *)hdr, RCOLL_DIRECT_DONE, q, b) < d->last[b])
        return 0;
  rcoll_direct_args_t args = {.region_bytes = d->chunk_bytes};
  for (uint32_t q = 0; q < (uint32_t)cc->comm->nranks; q++)
    for (uint32_t b = 0; b < RCOLL_DIRECT_P2P_BLOCKS && d->sent[q] > 0; b++)
      if (*rcoll_direct_p2p_flag(&args, (char *)hdr, RCOLL_DIRECT_TAKEN, q, b) < d->sent[q])
        return 0;
  return 1;
}

void rcoll_cuda_direct_free(rcoll_cuda_comm_t *cc, int drain) {
  rcoll_cuda_direct_t *d = &cc->direct;
  if (d->box == NULL)
    return;
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  struct rcollComm *c = cc->comm;
  int64_t ms = c->async_error == rcollSuccess && drain ? c->timeout_ms
               : c->timeout_ms < 1000 ? c->timeout_ms : 1000;
  int64_t deadline = rcoll_now_ms() + ms;
  int saved = -1;
  rcoll_cuda_device_enter(cc->device, &saved);
  /* Our last kernel still writes flags into the peers' boxes. */
  while (d->calls > 0 && a->event_query(d->done) == RCOLL_CUDA_ERROR_NOT_READY &&
         rcoll_now_ms() < deadline) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  if (d->calls > 0 && a->event_query(d->done) == RCOLL_CUDA_ERROR_NOT_READY) {
    RCOLL_WARN("rank %d: a direct all-reduce kernel still runs; its box is left", c->rank);
    rcoll_cuda_device_leave(saved);
    return;
  }
  uint64_t *hdr = drain && d->calls > 0 ? malloc(RCOLL_DIRECT_HDR_BYTES) : NULL;
  while (hdr != NULL && !direct_peers_done(cc, hdr) && rcoll_now_ms() < deadline) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  free(hdr);
  direct_release(d);
  rcoll_cuda_device_leave(saved);
}
