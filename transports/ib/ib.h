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
/* Described and its settings read even where libibverbs is missing. */
extern const rcoll_transport_desc_t ib_desc; /* ib_desc.c */

/* The verbs transport's own settings. */
#define IB_SETTINGS(X)                                                                          \
  X(STR, ib_hca, "IB_HCA", "NCCL_IB_HCA", "",                                                   \
    "RDMA devices and ports for ib: name[:port] list, ^ excludes, = exact (e.g. mlx5_0:1,mlx5_1)") \
  X(INT_IN(-1, 65535), ib_gid_index, "IB_GID_INDEX", "NCCL_IB_GID_INDEX", "-1",                  \
    "RoCE GID index; -1 chooses: routable over link-local, RoCE v2, IB_ADDR_FAMILY, IB_ADDR_RANGE") \
  X(STR_OF("AF_INET,AF_INET6,4,6"), ib_addr_family, "IB_ADDR_FAMILY", "NCCL_IB_ADDR_FAMILY", "AF_INET", \
    "Address family of the RoCE GID to prefer when choosing: AF_INET or AF_INET6")               \
  X(STR, ib_addr_range, "IB_ADDR_RANGE", "NCCL_IB_ADDR_RANGE", "",                               \
    "Only choose RoCE GIDs inside this prefix (e.g. 10.1.0.0/16 or fd00::/64); empty: any")      \
  X(INT_IN(1, 16), ib_qps_per_connection, "IB_QPS_PER_CONNECTION", "NCCL_IB_QPS_PER_CONNECTION", "1", \
    "RC queue pairs per ib connection; messages over 64 KiB are split across them (1..16)")      \
  X(INT_IN(0, 15), ib_sl, "IB_SL", "NCCL_IB_SL", "0", "InfiniBand service level of ib queue pairs (0..15)") \
  X(INT_IN(0, 255), ib_tc, "IB_TC", "NCCL_IB_TC", "0", "Traffic class (RoCE: DSCP << 2) of ib queue pairs (0..255)") \
  X(INT_IN(1, 31), ib_timeout, "IB_TIMEOUT", "NCCL_IB_TIMEOUT", "20",                            \
    "ib ack timeout exponent: 4.096 us x 2^N per retry (20 = 4.3 s, NCCL's default; 1..31)")     \
  X(INT_IN(0, 7), ib_retry_cnt, "IB_RETRY_CNT", "NCCL_IB_RETRY_CNT", "7",                        \
    "ib retransmissions before a send fails with 'retry exceeded' (0..7)")                       \
  X(INT_IN(0, 600000), ib_kick_ms, "IB_KICK_MS", NULL, "1000",                                  \
    "ib: a send connection with writes posted and no completion for this long (ms) posts an "    \
    "empty write on its queue pairs (Soft-RoCE's send queue can stop for good: the kick makes "  \
    "it fail at once instead of at RCOLL_TIMEOUT); 0: never")                                   \
  X(STR_OF("auto,0,off,force"), ib_flush, "IB_FLUSH", NULL, "auto",                              \
    "ib: after a receive into device memory, read it back (RDMA read) so the GPU sees it: auto, " \
    "0/off (never: rely on cuFlushGPUDirectRDMAWrites), force (every registered receive)")       \
  X(STR_OF("auto,0,off,1,on"), ib_eager, "IB_EAGER", NULL, "auto",                               \
    "ib messages up to 8 KiB sent eagerly through host buffers: auto (unless the receiving side " \
    "can register device memory), 0/off (never), 1/on (always)")

typedef struct ib_settings {
  IB_SETTINGS(RCOLL_SETTING_FIELD)
} ib_settings_t;

/* The ib settings in snapshot s. */
static inline ib_settings_t *ib_settings(const rcoll_settings_t *s) {
  return rcoll_net_settings(s, &ib_desc);
}

/* How device memory can be registered on the context's device:
 * 0 none, 1 nvidia-peermem, 2 dma-buf; `why` says so in words. */
int ib_gdr_support(void *ctx, char *why, size_t len);

#endif
