/* The shared-memory transport: ranks of one node exchange data through a
 * segment mapped once per connection, holding a single-producer /
 * single-consumer ring of slots. Small messages are copied through the ring;
 * large ones take a single-copy path when the two ends allow it: the sender
 * publishes its buffer's address in a slot and the receiver copies straight
 * from it (memcpy between threads of one process, process_vm_readv between
 * processes of the same user, or memcpy from its own mapping of the
 * sender's block when the buffer came from rcollMemAlloc's host pool:
 * shm_pool.c). The library sees it only through this table.
 *
 * Behaviour the contract in net.h leaves open:
 * - caps is RCOLL_NET_CAP_LOCAL_ONLY: the core uses it only for peers with
 *   the same host identity.
 * - irecv takes one buffer (max_recvs = 1); tags are neither carried nor
 *   matched (messages match in order).
 * - isend_single (a send of an exchange: the peer sends to us at the same
 *   time) goes single-copy from SHM_EXCHANGE_THRESHOLD bytes whenever the two
 *   ends can (CMA or memcpy), even where a plain isend would use the ring:
 *   there the ring costs each rank two copies per byte, CMA one. CMA's copy
 *   is slower than memcpy and has a system call's cost, so the threshold is
 *   where one thread's work through the ring (copy into a slot, out of it)
 *   meets CMA's, measured here best of 3000: 16 KiB 0.3 vs 1.1 us, 64 KiB
 *   3.6 vs 3.9, 128 KiB 7.2 vs 7.1, 512 KiB 48.9 vs 28.9 (the ring's copy
 *   out streams from 256 KiB). The ring's copy out also reads lines another
 *   core wrote, which that one-thread figure leaves out: 64 KiB.
 * - A send copied through the ring completes once it is in the ring; a
 *   single-copy send completes when the receiver has copied it, so it waits
 *   for the matching irecv.
 * - iflush returns a token that test reports done at once (host memory).
 * - irecv_reduce reduces each ring slot, or each cache-sized piece of a
 *   single-copy message, into the destination as it is read (shm_reduce.c).
 * - reg_mr of host memory returns a dummy handle; device memory is refused.
 *   A receive of 256 KiB or more posted without a handle is written with
 *   non-temporal stores (it does not stay in cache): pass a handle for
 *   buffers that are read again right away, as the engine does for staging.
 * - connect presents the context's secret, or the handle's when the context
 *   was opened with secret 0; a listener that refuses it makes connect fail.
 * - A peer that exits (or closes its end) fails the pending requests of the
 *   connection with rcollRemoteError; a peer that stops without exiting is
 *   left to the engine's RCOLL_TIMEOUT. */
#ifndef RCOLL_TRANSPORT_SHM_H
#define RCOLL_TRANSPORT_SHM_H

#include "net.h"

extern const rcoll_transport_ops_t shm_ops;
extern const rcoll_transport_desc_t shm_desc; /* shm_desc.c */

/* The shared-memory transport's own settings. RCOLL_SHM_DISABLE is the
 * core's (it decides whether any local-only transport is opened), and so is
 * RCOLL_SHM_DIR (lib/cuda/ipc.c exchanges CUDA IPC handles there too). */
#define SHM_SETTINGS(X)                                                                         \
  X(INT_IN(2, 4096), shm_slots, "SHM_SLOTS", NULL, "16",                                         \
    "Slots in each shared-memory ring (one ring per connection; 2..4096)")                       \
  X(INT_IN(256, 67108864), shm_slot_size, "SHM_SLOT_SIZE", NULL, "65536",                        \
    "Bytes per shared-memory ring slot, a 64-byte header line included (256..64M, x64)")         \
  X(INT_IN(0, INT64_MAX), shm_cma_threshold, "SHM_CMA_THRESHOLD", NULL, "0",                     \
    "Between processes, messages of this many bytes or more are read straight from the "         \
    "sender's memory (process_vm_readv) instead of through the ring; 0 disables (the default: "  \
    "on the VMs measured CMA ran at half the ring's speed at every size)")                       \
  X(INT_IN(0, INT64_MAX), shm_memcpy_threshold, "SHM_MEMCPY_THRESHOLD", NULL, "16384",           \
    "Between threads of one process, messages of this many bytes or more are copied straight "   \
    "from the sender's buffer instead of through the ring; 0 disables")                        \
  X(INT_IN(0, INT64_MAX), shm_exchange_threshold, "SHM_EXCHANGE_THRESHOLD", NULL, "65536",      \
    "Messages of an exchange (both ends send to each other at once: all-to-all) of this many "  \
    "bytes or more are read straight from the sender's buffer (CMA between processes, memcpy "  \
    "between threads) whatever the thresholds above; 0 disables")                               \
  X(INT_IN(0, 1), shm_pool_map, "SHM_POOL_MAP", NULL, "1",                                       \
    "1: a single-copy message between processes (see the thresholds above) from a buffer of "     \
    "rcollMemAlloc's host pool is read through the receiver's own mapping of the sender's block " \
    "(pidfd_getfd) instead of process_vm_readv; the sender's setting decides; 0 disables")

typedef struct shm_settings {
  SHM_SETTINGS(RCOLL_SETTING_FIELD)
} shm_settings_t;

/* The shared-memory settings in snapshot s. */
static inline shm_settings_t *shm_settings(const rcoll_settings_t *s) {
  return rcoll_net_settings(s, &shm_desc);
}

#endif
