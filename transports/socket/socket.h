/* The TCP socket transport: one control socket plus nthreads x nsocks data
 * sockets per connection. Small messages travel inline on the control socket,
 * moved by the calling thread; large ones are split over the data sockets and
 * moved by helper threads. The library sees it only through this ops table.
 *
 * Behaviour the contract in net.h leaves open:
 * - irecv takes up to RCOLL_NET_MAX_RECVS buffers. With one, tags are carried
 *   but not matched (messages match in order). With n > 1 the receive takes
 *   the next n messages and each lands in the buffer posted with its tag, in
 *   any order; a tag matching no unfilled buffer fails the connection.
 * - iflush never returns a NULL request (that would read as "out of slots"):
 *   it returns a token that test reports done at once.
 * - reg_mr of host memory returns a dummy handle; device memory is refused.
 * - connect presents the context's secret, or the handle's when the context
 *   was opened with secret 0.
 * - Only a receive whose header has arrived times out (RCOLL_TIMEOUT without
 *   progress); a sender may wait for a receiver that has not posted yet. */
#ifndef RCOLL_TRANSPORT_SOCKET_H
#define RCOLL_TRANSPORT_SOCKET_H

#include "net.h"

extern const rcoll_transport_ops_t socket_ops;
extern const rcoll_transport_desc_t socket_desc; /* socket_desc.c */

/* The socket transport's own settings (RCOLL_SOCKET_IFNAME and
 * RCOLL_SOCKET_FAMILY are the core's: the bootstrap reads them too). */
#define SOCKET_SETTINGS(X)                                                                      \
  X(INT_IN(1, 16), socket_nthreads, "SOCKET_NTHREADS", "NCCL_SOCKET_NTHREADS", "2",              \
    "Helper threads per socket connection that move large messages (1..16)")                     \
  X(INT_IN(1, 64), nsocks_perthread, "NSOCKS_PERTHREAD", "NCCL_NSOCKS_PERTHREAD", "1",           \
    "Data sockets per helper thread (threads x sockets <= 64)")                                  \
  X(INT_IN(0, 2147483647), socket_inline, "SOCKET_INLINE", NULL, "65536",                        \
    "Messages up to this many bytes travel on the control socket, moved by the calling thread")    \
  X(INT_IN(0, 67108864), socket_sndbuf, "SOCKET_SNDBUF", NULL, "262144",                          \
    "SO_SNDBUF of each data socket in bytes (the control socket's holds one inline message); "    \
    "0: the kernel's autotuning. Raise it where bandwidth x round trip is larger")              \
  X(STR, socket_congestion, "SOCKET_CONGESTION", NULL, "",                                        \
    "TCP congestion control of the sending sockets (e.g. reno, cubic); empty: the system's")      \
  X(INT_IN(0, 65536), socket_lane, "SOCKET_LANE", NULL, "1024",                                    \
    "Between two ranks that send both ways, messages up to this many bytes share one TCP "        \
    "connection so that acknowledgements ride on them; 0: each direction on its own")

typedef struct socket_settings {
  SOCKET_SETTINGS(RCOLL_SETTING_FIELD)
} socket_settings_t;

/* The socket settings in snapshot s. */
static inline socket_settings_t *socket_settings(const rcoll_settings_t *s) {
  return rcoll_net_settings(s, &socket_desc);
}

#endif
