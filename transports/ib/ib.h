/* The verbs transport (InfiniBand and RoCE, over libibverbs): RC queue pairs
 * set up through a TCP handshake, data moved by RDMA write with immediate
 * into receiver-posted buffers, flow-controlled by receiver credits. The
 * library sees it only through this ops table; it exists when configure
 * found libibverbs (RCOLL_HAVE_IBVERBS).
 *
 * Behaviour the contract in net.h leaves open:
 * - init fails (and the transport is not used unless RCOLL_NET=ib) when no
 *   device and ACTIVE port pass RCOLL_IB_HCA, or when a configured
 *   RCOLL_IB_GID_INDEX is out of range or empty; the error lists what was
 *   passed over and why.
 * - One device: the first usable port. irecv takes up to RCOLL_NET_MAX_RECVS
 *   buffers (max_recvs 8). With one, tags are not matched: messages match in
 *   order. With n > 1 the receive takes the next n messages and each lands
 *   in a buffer posted with its tag, in any order (of several buffers with
 *   one tag, which one a message takes is unspecified); a tag matching no
 *   unfilled buffer fails the connection naming it (ib_group.c).
 * - reg_mr registrations are valid on every comm of the context
 *   (reg_is_global); unregistered buffers are copied through bounce slots
 *   (small) or registered for the life of the request (large).
 * - Device memory registers through dma-buf or nvidia-peermem
 *   (ib_gdr_support). iflush of a receive into registered device memory
 *   reads a few bytes of it back through the NIC (an RDMA read on a queue
 *   pair connected to itself) and is done when that read completes; host
 *   memory finishes at once. RCOLL_IB_FLUSH=auto|0|off|force chooses
 *   (force: every registered receive, host memory too).
 * - A send larger than the receive posted for it fails on both sides with
 *   a message; nothing is written past the posted buffer. */
#ifndef RCOLL_TRANSPORT_IB_H
#define RCOLL_TRANSPORT_IB_H

#include <stddef.h>

#include "net.h"

extern const rcoll_transport_ops_t ib_ops;

/* How device memory can be registered on the context's device:
 * 0 none, 1 nvidia-peermem, 2 dma-buf; `why` says so in words. */
int ib_gdr_support(void *ctx, char *why, size_t len);

#endif
