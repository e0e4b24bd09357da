# Configure checks of the verbs transport (InfiniBand and RoCE), included by
# configure.ac through RCOLL_TRANSPORTS_CONFIGURE. transports/ib/*.c compile
# to nothing without libibverbs (#if RCOLL_HAVE_IBVERBS), and lib/net.c then
# leaves the transport out of its table.
RCOLL_CHECK_DEP([verbs], [IBVERBS], [infiniband/verbs.h], [ibv_get_device_list], [-libverbs],
                [InfiniBand / RoCE verbs (libibverbs)], [linked])
# librdmacm is looked for and offered to the linker, but no object calls it
# yet (connections are set up over rcoll's own bootstrap), so --as-needed
# drops it and rcoll.pc does not list it.
RCOLL_CHECK_DEP([rdmacm], [RDMACM], [rdma/rdma_cma.h], [rdma_create_event_channel], [-lrdmacm],
                [RDMA connection manager (librdmacm)])
