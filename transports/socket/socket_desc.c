/* What the core knows of the socket transport besides its ops: its place
 * among the automatic transports, the tuner's figures and its settings. */
#include "socket.h"

#define SOCKET_SETTING_DESC(...) RCOLL_SETTING_DESC_IN(socket_settings_t, __VA_ARGS__)
static const rcoll_setting_desc_t socket_setting_descs[] = {SOCKET_SETTINGS(SOCKET_SETTING_DESC)};

_Static_assert(sizeof(socket_settings_t) <= RCOLL_NET_SETTINGS_BYTES,
               "socket settings must fit in rcoll_settings_t");

const rcoll_transport_desc_t socket_desc = {
    .name = "socket",
    /* Last of the automatic ones: it reaches every peer, at TCP's cost. */
    .auto_priority = 2,
    /* The overhead of a large message was measured here: a socket ring
     * all-reduce of 32 MiB runs 1.5x longer in 256 KiB chunks than in 4 MiB
     * ones, about 100 us per extra message. */
    .link = {.alpha_us = 20.0, .gbps = 1.25, .msg_us = 60.0, .chunk_cap = 0},
    .bootstrap_latency = 1,
    .settings = socket_setting_descs,
    .nsettings = (int)(sizeof socket_setting_descs / sizeof socket_setting_descs[0]),
    .settings_size = sizeof(socket_settings_t),
};
