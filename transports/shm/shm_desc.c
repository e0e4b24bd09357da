/* What the core knows of the shared-memory transport besides its ops: its
 * place among the automatic transports, the tuner's figures and its
 * settings. */
#include "shm.h"

#define SHM_SETTING_DESC(...) RCOLL_SETTING_DESC_IN(shm_settings_t, __VA_ARGS__)
static const rcoll_setting_desc_t shm_setting_descs[] = {SHM_SETTINGS(SHM_SETTING_DESC)};

_Static_assert(sizeof(shm_settings_t) <= RCOLL_NET_SETTINGS_BYTES,
               "shm settings must fit in rcoll_settings_t");

const rcoll_transport_desc_t shm_desc = {
    .name = "shm",
    /* First within a node: nothing local is faster. */
    .auto_priority = 0,
    /* Chunks beyond 512 KiB get slower: with 2 ranks, 8 MiB took 1.5 ms in
     * 1 MiB chunks and 6 ms in 4 MiB ones, as chunks fall out of the cache
     * between copy and reduction; and 512 KiB chunks beat 1 MiB ones by
     * 0.5-1.5 GB/s at 16-128 MiB. */
    .link = {.alpha_us = 0.5, .gbps = 10.0, .msg_us = 2.0, .chunk_cap = 512 << 10},
    .bootstrap_latency = 0,
    .settings = shm_setting_descs,
    .nsettings = (int)(sizeof shm_setting_descs / sizeof shm_setting_descs[0]),
    .settings_size = sizeof(shm_settings_t),
};
