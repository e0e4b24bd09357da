/* The UCX transport: UCP tagged messages over whatever UCX reaches (TCP,
 * shared memory, InfiniBand, RoCE; CUDA memory when UCX was built with it).
 * UCX's own variables (UCX_TLS, UCX_NET_DEVICES, ...) choose its transports;
 * rcoll never overrides them. The library sees it only through this ops
 * table, present when configure found UCX (RCOLL_HAVE_UCX).
 *
 * Behaviour the contract in net.h leaves open:
 * - irecv takes up to 8 buffers (max_recvs = RCOLL_NET_MAX_RECVS). With one,
 *   the tag is not checked: messages match in order. With several, each of
 *   the next n messages lands in the buffer posted with its tag, compared on
 *   the low 16 bits that UCX tags carry (besides the connection and the
 *   message number); a group whose distinct tags share those bits is
 *   refused, and a message whose tag fits no buffer fails the connection.
 * - iflush never returns a NULL request: it returns a token that test
 *   reports done at once (UCX makes host and device data visible itself).
 * - reg_mr maps memory with ucp_mem_map; device memory is accepted only when
 *   UCX reports CUDA support. The handle is passed to UCX with each request
 *   whose buffer lies inside it.
 * - connect presents the context's secret, or the handle's when the context
 *   was opened with secret 0.
 * - A peer found gone (process exit or crash) fails send requests at once and
 *   receive requests after a short grace for data already on its way. */
#ifndef RCOLL_TRANSPORT_UCX_H
#define RCOLL_TRANSPORT_UCX_H

#include "net.h"

/* Described even where UCX is missing; it has no settings of its own. */
extern const rcoll_transport_desc_t ucx_desc; /* ucx_desc.c */

#if RCOLL_HAVE_UCX
extern const rcoll_transport_ops_t ucx_ops;
#endif

#endif
