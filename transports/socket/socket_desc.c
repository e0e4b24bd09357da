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
     * ones, about 100 us per extra message. Every message also costs its
     * system calls, and the sender's runs the receiver's side of the stack
     * too (loopback and veth deliver in the sender's context): over
     * loopback, a 64 KiB all-reduce took 37-39 us in one message each way
     * (recdbl) and 85-95 us by ring in 8 KiB chunks, 8 messages each way,
     * which a model of 2 us per message (the engine's alone) had predicted
     * faster. The latency is loopback's (an 8-byte all-reduce, one
     * message each way, takes 8 us in all); a link between hosts is
     * measured at init and replaces it when longer (lib/tuner_comm.c). */
    .link = {.alpha_us = 5.0, .gbps = 1.25, .msg_us = 60.0, .chunk_cap = 0, .each_us = 5.0},
    .bootstrap_latency = 1,
    .settings = socket_setting_descs,
    .nsettings = (int)(sizeof socket_setting_descs / sizeof socket_setting_descs[0]),
    .settings_size = sizeof(socket_settings_t),
};
