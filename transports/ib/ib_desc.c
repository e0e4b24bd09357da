/* What the core knows of the verbs transport besides its ops: its place
 * among the automatic transports, the tuner's figures and its settings.
 * Compiled without libibverbs too, so that RCOLL_IB_* are listed and
 * checked on every build, as they always were. */
#include "ib.h"

#define IB_SETTING_DESC(...) RCOLL_SETTING_DESC_IN(ib_settings_t, __VA_ARGS__)
static const rcoll_setting_desc_t ib_setting_descs[] = {IB_SETTINGS(IB_SETTING_DESC)};

_Static_assert(sizeof(ib_settings_t) <= RCOLL_NET_SETTINGS_BYTES,
               "ib settings must fit in rcoll_settings_t");

const rcoll_transport_desc_t ib_desc = {
    .name = "ib",
    /* After shared memory, before TCP: wherever a usable port exists. */
    .auto_priority = 1,
    .link = {.alpha_us = 3.0, .gbps = 12.5, .msg_us = 5.0, .chunk_cap = 0},
    /* Its queue pairs need not run over the bootstrap's network at all. */
    .bootstrap_latency = 0,
    .settings = ib_setting_descs,
    .nsettings = (int)(sizeof ib_setting_descs / sizeof ib_setting_descs[0]),
    .settings_size = sizeof(ib_settings_t),
};
