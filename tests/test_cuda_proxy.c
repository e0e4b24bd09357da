/* The device path's bookkeeping, run on the host fake of CUDA (cuda_fake.h):
 * stream order (a call starts after the work queued before it and holds
 * the work queued after it, and returns at once), groups as one unit, the
 * IPC ring and staging protocols between ranks (threads of this process),
 * errors becoming the communicator's async error, and the memory-type rules.
 *
 * This is not a GPU test: the fake runs the host reductions where kernels
 * would run. What it pins is everything around the kernels; tests/gpu/run.sh
 * runs the real thing. Expected values are computed here from the inputs. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

#include "comm.h"
#include "cuda/cuda_comm.h"
#include "cuda/module.h"
#include "memtype.h"
#include "rcoll.h"
#include "support/cuda_fake.h"
#include "support/cuda_colls.h"
#include "support/cuda_ranks.h"

TestSuite(cuda_proxy, .init = cuda_ranks_setup, .timeout = 120);

/* Small chunks make every message many slots and IPC parts long, so rings
 * wrap and slots are reused within one call. */
static void sweep(int nranks, const char *p2p_disable) {
  setenv("RCOLL_CHUNK_SIZE", "4096", 1);
  setenv("RCOLL_P2P_DISABLE", p2p_disable, 1);
  static const size_t counts[] = {1, 7, 1024, 12289};
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
    rank_ctx_t ctx[MAX_RANKS] = {0};
    cuda_ranks_run(nranks, counts[k], cuda_colls_all, ctx);
  }
}

Test(cuda_proxy, ipc_two_ranks_every_collective) { sweep(2, "0"); }
Test(cuda_proxy, ipc_three_ranks_every_collective) { sweep(3, "0"); }
Test(cuda_proxy, staged_two_ranks_every_collective) { sweep(2, "1"); }
Test(cuda_proxy, staged_three_ranks_over_sockets) {
  setenv("RCOLL_SHM_DISABLE", "1", 1);
  sweep(3, "1");
}

/* Copies that take their time: a staged chunk sent before its copy to the
 * host ran, or a received one called done before its copy to the device
 * ran, shows as stale data somewhere in the sweep. */
Test(cuda_proxy, staged_slow_copies_over_sockets) {
  setenv("RCOLL_SHM_DISABLE", "1", 1);
  atomic_store(&fake_stats.copy_delay_us, 300);
  sweep(3, "1");
  atomic_store(&fake_stats.copy_delay_us, 0);
}

/* The same over CUDA IPC: a part published before its copy into the ring
 * ran, or a slot handed back before the copy or reduction out of it ran,
 * shows as stale data (ipc.c waits for both by event). */
Test(cuda_proxy, ipc_slow_copies) {
  atomic_store(&fake_stats.copy_delay_us, 300);
  sweep(3, "0");
  atomic_store(&fake_stats.copy_delay_us, 0);
}

static void one_allreduce(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  x->wrong += cuda_colls_allreduce(x, comm, s);
  rcoll_cuda_api()->stream_destroy(s);
}

/* A ring all-reduce of 3 ranks and 3 x 64 chunks per rank, with copies
 * taking 100 us: the copies it made and the stream syncs, which are only
 * those of the local copy at the start and of setting up and tearing down
 * when the proxy waits for every staging copy and IPC part by polling its
 * event between other steps (each was one sync before). Per rank and chunk
 * a ring all-reduce of 3 ranks sends 4 times and receives 4 times: every
 * send and the 2 plain receives are copies (the 2 receive-reduces are
 * kernels). */
static void syncs_of_a_ring_allreduce(const char *p2p_disable) {
  setenv("RCOLL_CHUNK_SIZE", "4096", 1);
  setenv("RCOLL_P2P_DISABLE", p2p_disable, 1);
  setenv("RCOLL_ALGO", "ring", 1);
  atomic_store(&fake_stats.copy_delay_us, 100);
  int syncs0 = atomic_load(&fake_stats.syncs), copies0 = atomic_load(&fake_stats.copies);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(3, 3 * 64 * 1024, one_allreduce, ctx);
  int syncs = atomic_load(&fake_stats.syncs) - syncs0, copies = atomic_load(&fake_stats.copies) - copies0;
  atomic_store(&fake_stats.copy_delay_us, 0);
  unsetenv("RCOLL_ALGO");
  cr_log_info("3 ranks (RCOLL_P2P_DISABLE=%s): %d copies, %d stream syncs", p2p_disable, copies, syncs);
  cr_expect_geq(copies, 3 * 6 * 64, "%d copies: fewer than the chunks need", copies);
  cr_expect_leq(syncs, 3 * 8, "%d stream syncs for %d copies", syncs, copies);
}

Test(cuda_proxy, staged_copies_leave_the_proxy_free) {
  setenv("RCOLL_SHM_DISABLE", "1", 1);
  syncs_of_a_ring_allreduce("1");
}
Test(cuda_proxy, ipc_parts_leave_the_proxy_free) { syncs_of_a_ring_allreduce("0"); }

/* An out-of-place all-gather copies the rank's own block into the output
 * on the device: the copy ends in an event the proxy polls (dev_step.c),
 * as staging copies and IPC parts do, where the proxy used to sit in a
 * stream sync for it. With copies taking 300 us, the output is right (the
 * call ended only once the copy ran) and no stream was synchronized. */
static void allgather_out_of_place(rank_ctx_t *x, rcollComm_t comm) {
  size_t n = x->count;
  float *a = cuda_ranks_dev_alloc(n * sizeof(float));
  float *b = cuda_ranks_dev_alloc((size_t)x->nranks * n * sizeof(float));
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  cuda_ranks_fill(a, n, x->rank);
  x->result = rcollAllGather(a, b, n, rcollFloat32, comm, s);
  fake_stream_sync(s);
  for (int r = 0; r < x->nranks; r++)
    for (size_t i = 0; i < n; i++)
      x->wrong += b[(size_t)r * n + i] != cuda_ranks_input(r, i);
  /* The accounts: the copy and its event issued, the event seen to fire. */
  const struct rcoll_cuda_prof *prof = &comm->cuda->prof;
  if (prof->local_copies != 1 || prof->issued < 2 || prof->queries_ran < 1 ||
      prof->queries < prof->queries_ran) {
    cr_log_error("rank %d: one all-gather: %lld local copies, %lld CUDA calls issuing work, %lld event "
                 "queries of which %lld found it done", x->rank, (long long)prof->local_copies,
                 (long long)prof->issued, (long long)prof->queries, (long long)prof->queries_ran);
    x->wrong++;
  }
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(a);
  fake_free(b);
}

static void local_copy_without_syncs(const char *p2p_disable) {
  setenv("RCOLL_P2P_DISABLE", p2p_disable, 1);
  atomic_store(&fake_stats.copy_delay_us, 300);
  int syncs0 = atomic_load(&fake_stats.syncs);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 1000, allgather_out_of_place, ctx);
  atomic_store(&fake_stats.copy_delay_us, 0);
  cr_expect_eq(atomic_load(&fake_stats.syncs) - syncs0, 0, "%d stream syncs for 2 all-gathers",
               atomic_load(&fake_stats.syncs) - syncs0);
}

Test(cuda_proxy, ipc_local_copies_leave_the_proxy_free) { local_copy_without_syncs("0"); }
Test(cuda_proxy, staged_local_copies_leave_the_proxy_free) { local_copy_without_syncs("1"); }

/* Rank 0 sends rank 1 *(int *)user messages of `count` floats, in a group
 * on one stream (the callers choose the path, the slots and the copies'
 * delay). */
static void send_messages(rank_ctx_t *x, rcollComm_t comm) {
  const int msgs = *(const int *)x->user;
  size_t n = x->count;
  float *buf = cuda_ranks_dev_alloc((size_t)msgs * n * sizeof(float));
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  cuda_ranks_fill(buf, (size_t)msgs * n, x->rank);
  rcollGroupStart();
  for (int k = 0; k < msgs; k++)
    x->result = x->rank == 0 ? rcollSend(buf + k * n, n, rcollFloat32, 1, comm, s)
                             : rcollRecv(buf + k * n, n, rcollFloat32, 0, comm, s);
  rcollResult_t r = rcollGroupEnd();
  if (x->result == rcollSuccess)
    x->result = r;
  fake_stream_sync(s);
  for (size_t i = 0; x->rank == 1 && i < (size_t)msgs * n; i++)
    x->wrong += buf[i] != cuda_ranks_input(0, i);
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(buf);
}

/* send_messages of one message of 8 parts, and the streams their copies
 * ran on: the sender's into its ring on the proxy's second stream, the
 * receiver's out of it on the first, so that the GPU may run both at once
 * (ipc.c). */
static void send_parts_on_two_streams(rank_ctx_t *x, rcollComm_t comm) {
  send_messages(x, comm);
  int down = fake_stream_copies(comm->cuda->down), main = fake_stream_copies(comm->cuda->stream);
  if (x->rank == 0 ? down != 8 || main != 0 : down != 0 || main != 8) {
    cr_log_error("rank %d: %d copies on the proxy's first stream, %d on its second", x->rank, main, down);
    x->wrong++;
  }
}

static void send_slowly(int msgs, size_t count, void (*body)(rank_ctx_t *, rcollComm_t)) {
  setenv("RCOLL_P2P_DISABLE", "0", 1);
  setenv("RCOLL_CHUNK_SIZE", "4096", 1);
  setenv("RCOLL_NSLOTS", "4", 1);
  atomic_store(&fake_stats.copy_delay_us, 30000);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  ctx[0].user = ctx[1].user = &msgs;
  cuda_ranks_run(2, count, body, ctx);
  atomic_store(&fake_stats.copy_delay_us, 0);
}

/* Each IPC part is published once its own copy ran (ipc.h), so the
 * receiver copies part k out while the sender copies part k + 1 in: a
 * message of 8 parts through a ring of 4 slots has two copies running at
 * once. Published a batch at a time, the two sides take turns (the
 * receiver sees the first part only when the sender's batch has run, and
 * the sender finds room only when the receiver's has): never more than
 * one. */
Test(cuda_proxy, ipc_parts_are_published_one_by_one) {
  send_slowly(1, 8 * 4096 / sizeof(float), send_parts_on_two_streams);
  cr_expect_geq(atomic_load(&fake_stats.copies_overlap), 2, "a copy into the ring and one out of it "
                "never ran at once: the receiver waited for the sender's whole batch");
}

/* A message lets the next one on its connection start once its parts are
 * issued (ipc.h), so the next copy queues on the proxy stream behind it and
 * the GPU need not wait for the proxy to see each copy end: 3 messages of
 * one part have copies queued on one stream together. When a message had
 * to be done (its copy run and published) before the next could start,
 * there was one at a time. */
Test(cuda_proxy, ipc_messages_queue_behind_each_other) {
  send_slowly(3, 4096 / sizeof(float), send_messages);
  cr_expect_geq(atomic_load(&fake_stats.copies_queued_most), 2, "the copies of 3 messages to one peer "
                "never queued together: each waited for the one before to be done");
}

/* A broadcast from rank 0 of 3 staging slots of 4096 bytes, where rank 0's
 * copies take 30 ms and rank 1's none (so only the sender's copies can
 * queue): rank 0 sends rank 1 3 messages. A first call makes the proxy's
 * streams. */
static void broadcast_slowly(rank_ctx_t *x, rcollComm_t comm) {
  size_t n = x->count;
  float *buf = cuda_ranks_dev_alloc(n * sizeof(float));
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  x->result = rcollBroadcast(buf, buf, 1, rcollFloat32, 0, comm, s);
  fake_stream_sync(s);
  if (x->rank == 0) /* staged sends copy on the proxy's second stream */
    fake_stream_copy_delay(comm->cuda->down, 30000);
  cuda_ranks_fill(buf, n, x->rank);
  if (x->result == rcollSuccess)
    x->result = rcollBroadcast(buf, buf, n, rcollFloat32, 0, comm, s);
  fake_stream_sync(s);
  for (size_t i = 0; i < n; i++)
    x->wrong += buf[i] != cuda_ranks_input(0, i);
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(buf);
}

/* Staged sends the same way (stage.c): a message's copy into its slot
 * queues once the one before it on the connection has queued its own, and
 * the sends go on the wire in order. When a send had to be on the wire
 * before the next copy was queued, one at a time. */
Test(cuda_proxy, staged_messages_queue_behind_each_other) {
  setenv("RCOLL_P2P_DISABLE", "1", 1);
  setenv("RCOLL_CHUNK_SIZE", "4096", 1);
  setenv("RCOLL_NSLOTS", "4", 1);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 3 * 4096 / sizeof(float), broadcast_slowly, ctx);
  cr_expect_geq(atomic_load(&fake_stats.copies_queued_most), 2, "the staging copies of 3 messages to one "
                "peer never queued together: each waited for the one before to be sent");
}

/* Point-to-point sends in a group, staged: each message follows its own
 * fingerprint (a host message) on the connection, yet a message's copy
 * into its slot queues once the copy of the data message before it has
 * (stage.c), so 3 sends of one slot from a rank whose copies take 30 ms
 * have copies queued together. When a copy waited for the message before
 * it to be on the wire (a fingerprint between them is sent only then), one
 * at a time. A first exchange makes rank 0's proxy streams. */
static void send_group_slowly(rank_ctx_t *x, rcollComm_t comm) {
  float *one = cuda_ranks_dev_alloc(sizeof(float));
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  x->result = x->rank == 0 ? rcollSend(one, 1, rcollFloat32, 1, comm, s)
                           : rcollRecv(one, 1, rcollFloat32, 0, comm, s);
  fake_stream_sync(s);
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(one);
  if (x->rank == 0) /* staged sends copy on the proxy's second stream */
    fake_stream_copy_delay(comm->cuda->down, 30000);
  if (x->result == rcollSuccess)
    send_messages(x, comm);
}

/* Rank 0 sends rank 1 msgs messages of `count` floats in a group, staged
 * through 4 slots of 4096 bytes; body wraps send_group_slowly. */
static void send_staged_slowly(int msgs, size_t count, void (*body)(rank_ctx_t *, rcollComm_t)) {
  setenv("RCOLL_P2P_DISABLE", "1", 1);
  setenv("RCOLL_CHUNK_SIZE", "4096", 1);
  setenv("RCOLL_NSLOTS", "4", 1);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  ctx[0].user = ctx[1].user = &msgs;
  cuda_ranks_run(2, count, body, ctx);
}

Test(cuda_proxy, staged_sends_of_a_group_queue_behind_each_other) {
  send_staged_slowly(3, 4096 / sizeof(float), send_group_slowly);
  cr_expect_geq(atomic_load(&fake_stats.copies_queued_most), 2, "the staging copies of 3 sends of a group "
                "to one peer never queued together: each waited for the one before to be sent");
}

/* A device send larger than a slot goes in parts of a slot, each a message
 * (algorithms/sendrecv.c), so through host memory the copies of one part
 * overlap the sending of another: a send of 4.5 slots from a rank whose
 * copies take 30 ms has copies queued together, and no pinned buffer as
 * large as the message is made on either side. Sent whole, it was one copy
 * into such a buffer, then the send, then one copy out. */
static void send_large_slowly(rank_ctx_t *x, rcollComm_t comm) {
  send_group_slowly(x, comm);
  const rcoll_cuda_peer_t *cp = &comm->cuda->peers[1 - x->rank];
  if (cp->send.big != NULL || cp->recv.big != NULL) {
    cr_log_error("rank %d: a pinned buffer of %zu bytes for one message", x->rank,
                 cp->send.big != NULL ? cp->send.big_bytes : cp->recv.big_bytes);
    x->wrong++;
  }
  /* The sender's copies down (6: the first exchange's and 5 parts) ran on
   * the proxy's second stream, the receiver's copies up on its first. */
  int down = fake_stream_copies(comm->cuda->down), main = fake_stream_copies(comm->cuda->stream);
  if (x->rank == 0 ? down != 6 || main != 0 : down != 0 || main != 6) {
    cr_log_error("rank %d: %d copies on the proxy's stream, %d on its stream for staged sends", x->rank, main,
                 down);
    x->wrong++;
  }
}

Test(cuda_proxy, staged_large_send_goes_in_slots) {
  send_staged_slowly(1, 9 * 4096 / 2 / sizeof(float), send_large_slowly);
  cr_expect_geq(atomic_load(&fake_stats.copies_queued_most), 2, "the staging copies of a send of 4.5 slots "
                "never queued together: it went as one message");
}

/* A device plan within a node moves whole slots (coll.c: each part costs
 * GPU round trips, so the shm chunk cap of host plans does not apply): an
 * 8 MiB all-reduce of 2 ranks sends at most 4 messages of the 4 MiB slot
 * (any algorithm moves at most twice the vector), over CUDA IPC or staged,
 * where 512 KiB chunks made 16 or more. */
static void whole_slots(rank_ctx_t *x, rcollComm_t comm) {
  size_t n = x->count;
  float *buf = cuda_ranks_dev_alloc(n * sizeof(float));
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  cuda_ranks_fill(buf, n, x->rank);
  x->result = rcollAllReduce(buf, buf, n, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  for (size_t i = 0; i < n; i++)
    x->wrong += buf[i] != cuda_ranks_sum_of(x->nranks, i);
  uint64_t sends = comm->peers[1 - x->rank].send_posted;
  if (sends < 1 || sends > 4) {
    cr_log_error("rank %d: %llu sends for an 8 MiB all-reduce", x->rank, (unsigned long long)sends);
    x->wrong++;
  }
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(buf);
}

Test(cuda_proxy, a_device_plan_within_a_node_moves_whole_slots) {
  setenv("RCOLL_P2P_DISABLE", "0", 1);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, (size_t)2 << 20, whole_slots, ctx);
  setenv("RCOLL_P2P_DISABLE", "1", 1);
  rank_ctx_t staged[MAX_RANKS] = {0};
  cuda_ranks_run(2, (size_t)2 << 20, whole_slots, staged);
}

/* PreMulSum runs on host buffers only: a device scalar or device buffers
 * are refused with a reason, and the communicator stays usable. */
static void premulsum_refused(rank_ctx_t *x, rcollComm_t comm) {
  float host_scalar = 2, *dev = cuda_ranks_dev_alloc(64 * 4), *dev_scalar = cuda_ranks_dev_alloc(4);
  rcollRedOp_t op;
  rcollResult_t r = rcollRedOpCreatePreMulSum(&op, dev_scalar, rcollFloat32, rcollScalarDevice, comm);
  x->wrong += r != rcollInvalidUsage || strstr(rcollGetLastError(NULL), "device memory") == NULL;
  x->result = rcollRedOpCreatePreMulSum(&op, &host_scalar, rcollFloat32, rcollScalarHostImmediate, comm);
  if (x->result != rcollSuccess)
    return;
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  r = rcollAllReduce(dev, dev, 64, rcollFloat32, op, comm, s);
  x->wrong += r != rcollInvalidUsage || strstr(rcollGetLastError(NULL), "host buffers only") == NULL;
  cuda_ranks_fill(dev, 64, x->rank);
  x->result = rcollAllReduce(dev, dev, 64, rcollFloat32, rcollSum, comm, s);
  fake_stream_sync(s);
  for (size_t i = 0; i < 64; i++)
    x->wrong += dev[i] != cuda_ranks_sum_of(x->nranks, i);
  if (x->result == rcollSuccess)
    x->result = rcollRedOpDestroy(op, comm);
  rcoll_cuda_api()->stream_destroy(s);
  fake_free(dev);
  fake_free(dev_scalar);
}

Test(cuda_proxy, premulsum_refuses_device_memory) {
  rank_ctx_t ctx[1] = {{0}};
  cuda_ranks_run(1, 64, premulsum_refused, ctx);
}

Test(cuda_proxy, wait_kernel_when_memops_are_refused) {
  atomic_store(&fake_stats.refuse_memop, 1);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 1000, cuda_colls_all, ctx);
  cr_expect_eq(atomic_load(&fake_stats.waits), 0);
  cr_expect_gt(atomic_load(&fake_stats.wait_kernels), 0, "streams must be held by the wait kernel");
}

Test(cuda_proxy, wait_kernel_by_setting) {
  setenv("RCOLL_CUDA_WAIT", "kernel", 1);
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 100, cuda_colls_all, ctx);
  cr_expect_eq(atomic_load(&fake_stats.waits), 0);
  cr_expect_gt(atomic_load(&fake_stats.wait_kernels), 0);
}


/* Lazy loading (CUDA 12.2+) loads a function at its first launch and may
 * synchronize the context to do it; the proxy's launches happen while user
 * streams wait for the proxy, so every kernel must be loaded before. */
Test(cuda_proxy, kernels_are_loaded_before_streams_wait) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 1000, cuda_colls_all, ctx);
  cr_expect_gt(atomic_load(&fake_stats.reduce_kernels), 0);
  cr_expect_eq(atomic_load(&fake_stats.lazy_loads), 0, "%d kernel launches loaded their function",
               atomic_load(&fake_stats.lazy_loads));
}
