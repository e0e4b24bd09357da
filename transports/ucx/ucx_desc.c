/* What the core knows of the UCX transport besides its ops. Compiled
 * without UCX too, so that bench/rcoll_tune knows its figures everywhere. */
#include "ucx.h"

const rcoll_transport_desc_t ucx_desc = {
    .name = "ucx",
    /* Only when RCOLL_NET=ucx: UCX makes its own choice among shared memory,
     * RDMA and TCP, which would shadow the transports above. */
    .auto_priority = RCOLL_NET_BY_NAME_ONLY,
    .link = {.alpha_us = 5.0, .gbps = 1.25, .msg_us = 20.0, .chunk_cap = 0},
    /* Which network UCX uses is UCX's choice (UCX_TLS, UCX_NET_DEVICES). */
    .bootstrap_latency = 0,
    .settings = NULL,
    .nsettings = 0,
    .settings_size = 0,
};
