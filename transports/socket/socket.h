/* The TCP socket transport: one control socket plus nthreads x nsocks data
 * sockets per connection. Small messages travel inline on the control socket,
 * moved by the calling thread; large ones are split over the data sockets and
 * moved by helper threads. The library sees it only through this ops table. */
#ifndef RCOLL_TRANSPORT_SOCKET_H
#define RCOLL_TRANSPORT_SOCKET_H

#include "net.h"

extern const rcoll_transport_ops_t socket_ops;

#endif
