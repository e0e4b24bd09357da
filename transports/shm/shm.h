/* The shared-memory transport: ranks of one node exchange data through a
 * segment mapped once per connection, holding a single-producer /
 * single-consumer ring of slots. Small messages are copied through the ring;
 * large ones take a single-copy path when the two ends allow it: the sender
 * publishes its buffer's address in a slot and the receiver copies straight
 * from it (memcpy between threads of one process, process_vm_readv between
 * processes of the same user). The library sees it only through this table.
 *
 * Behaviour the contract in net.h leaves open:
 * - caps is RCOLL_NET_CAP_LOCAL_ONLY: the core uses it only for peers with
 *   the same host identity.
 * - irecv takes one buffer (max_recvs = 1); tags are neither carried nor
 *   matched (messages match in order).
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

#endif
