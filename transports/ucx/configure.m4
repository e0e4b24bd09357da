# Configure checks of the UCX transport, included by configure.ac through
# RCOLL_TRANSPORTS_CONFIGURE. transports/ucx/*.c compile to nothing without
# UCX (#if RCOLL_HAVE_UCX), and lib/net.c then leaves the transport out of its
# table.
RCOLL_CHECK_DEP([ucx], [UCX], [ucp/api/ucp.h], [ucp_cleanup], [-lucp -lucs],
                [UCX (libucp, libucs)], [linked])
