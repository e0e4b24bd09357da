/* The socket transport tests' common set-up (tests/test_socket.c,
 * test_socket_tcp.c): settings over loopback and a pair connected in one
 * process. */
#ifndef RCOLL_TESTS_SUPPORT_SOCKET_PAIR_H
#define RCOLL_TESTS_SUPPORT_SOCKET_PAIR_H

#include "../../transports/socket/socket.h"
#include "transport_harness.h"

#define SECRET TH_SECRET
#define INLINE 4096
#define MIB TH_MIB
static const rcoll_transport_ops_t *const ops = &socket_ops;
typedef th_pair_t pair_t;

/* Loopback ("lo"), the address family given, nt helper threads of ns data
 * sockets each, inline messages up to inl bytes, timeout in seconds. */
void socket_pair_settings(rcoll_settings_t *s, const char *family, int nt, int ns, int inl, int timeout);
/* Listen, then connect and accept in this process. */
void socket_pair_open(pair_t *p, const char *family, int nt, int ns, int inl, int timeout);
/* th_exchange with receives posted `extra` bytes larger than the sends. */
void socket_pair_exchange(pair_t *p, int n, const size_t *sizes, size_t extra);

#endif
