/* The shared-memory transport's context, device properties, memory
 * registration and its ops table. Segments are in shm_seg.c, connection
 * set-up in shm_setup.c and shm_connect.c, requests in shm_io.c, sleeping
 * and peer liveness in shm_wait.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "shm.h"
#include "shm_priv.h"

/* What the tuner reads: a copy through the ring moves ~10 GB/s per pair of
 * cores here, and a small message crosses in well under a microsecond. */
#define SHM_SPEED_MBPS 80000
#define SHM_LATENCY_US 0.5f

/* reg_mr of host memory has nothing to register; callers still want a
 * non-NULL handle to pass back. */
static const char shm_mr_token;

static rcollResult_t shm_check_settings(const rcoll_settings_t *core, const shm_settings_t *s) {
  if (s->shm_slots < SHM_MIN_SLOTS || s->shm_slots > SHM_MAX_SLOTS)
    return rcoll_error(rcollInvalidArgument, "shm: RCOLL_SHM_SLOTS=%lld is out of range %d..%d",
                       (long long)s->shm_slots, SHM_MIN_SLOTS, SHM_MAX_SLOTS);
  if (s->shm_slot_size < SHM_MIN_SLOT || s->shm_slot_size > SHM_MAX_SLOT || s->shm_slot_size % SHM_LINE)
    return rcoll_error(rcollInvalidArgument,
                       "shm: RCOLL_SHM_SLOT_SIZE=%lld must be a multiple of %d in %d..%lld",
                       (long long)s->shm_slot_size, SHM_LINE, SHM_MIN_SLOT, SHM_MAX_SLOT);
  if (s->shm_cma_threshold < 0 || s->shm_memcpy_threshold < 0 || s->shm_exchange_threshold < 0)
    return rcoll_error(rcollInvalidArgument, "shm: RCOLL_SHM_CMA_THRESHOLD, RCOLL_SHM_MEMCPY_THRESHOLD "
                       "and RCOLL_SHM_EXCHANGE_THRESHOLD must not be negative");
  if (core->timeout < 1)
    return rcoll_error(rcollInvalidArgument, "shm: RCOLL_TIMEOUT=%lld must be at least 1 second",
                       (long long)core->timeout);
  return rcollSuccess;
}

static size_t shm_threshold(int64_t v) { return v > 0 ? (size_t)v : SIZE_MAX; }

/* A missing, read-only or too small directory is "not usable here": the
 * communicator then reaches local peers through the next transport. */
static rcollResult_t shm_init(const rcoll_net_config_t *cfg, void **out) {
  const rcoll_settings_t *s = cfg->settings;
  const shm_settings_t *own = shm_settings(s);
  *out = NULL;
  RCOLL_CHECK(shm_check_settings(s, own));
  const char *dir = s->shm_dir[0] ? s->shm_dir : "/dev/shm";
  size_t ring = shm_seg_bytes((uint32_t)own->shm_slots, (size_t)own->shm_slot_size);
  /* First, so that what dead processes left does not count against room. */
  shm_seg_sweep(dir);
  RCOLL_CHECK(shm_dir_check(dir, 2 * ring));
  shm_ctx_t *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL)
    return rcoll_error(rcollSystemError, "shm: out of memory for a context");
  snprintf(ctx->dir, sizeof ctx->dir, "%s", dir);
  ctx->secret = cfg->secret;
  ctx->rank = cfg->rank;
  ctx->nslots = (uint32_t)own->shm_slots;
  ctx->slot_size = (size_t)own->shm_slot_size;
  ctx->cma_min = shm_threshold(own->shm_cma_threshold);
  ctx->memcpy_min = shm_threshold(own->shm_memcpy_threshold);
  ctx->exchange_min = shm_threshold(own->shm_exchange_threshold);
  ctx->pool_map = (int)own->shm_pool_map;
  ctx->timeout_ms = s->timeout * 1000;
  pthread_mutex_init(&ctx->lock, NULL);
  RCOLL_INFO(RCOLL_SUB_NET, "shm: rank %d: rings of %u x %zu bytes in %s; single copy from %lld bytes "
             "between processes (CMA), %lld between threads, %lld in exchanges (0: off)", ctx->rank,
             ctx->nslots, ctx->slot_size, ctx->dir, (long long)own->shm_cma_threshold,
             (long long)own->shm_memcpy_threshold, (long long)own->shm_exchange_threshold);
  *out = ctx;
  return rcollSuccess;
}

static rcollResult_t shm_finalize(void *vctx) {
  shm_ctx_t *ctx = vctx;
  if (ctx == NULL)
    return rcollSuccess;
  shm_connects_free(ctx);
  /* A communicator torn down after a rank died removes what that rank was
   * creating when it was killed (shm_sweep.c). */
  shm_seg_sweep(ctx->dir);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
  return rcollSuccess;
}

static rcollResult_t shm_devices(void *ctx, int *ndev) {
  (void)ctx;
  *ndev = 1;
  return rcollSuccess;
}

static rcollResult_t shm_get_properties(void *vctx, int dev, rcoll_net_props_t *props) {
  const shm_ctx_t *ctx = vctx;
  if (dev != 0)
    return rcoll_error(rcollInvalidArgument, "shm: device %d does not exist (1 device)", dev);
  memset(props, 0, sizeof *props);
  snprintf(props->name, sizeof props->name, "shm");
  snprintf(props->detail, sizeof props->detail, "%.95s", ctx->dir);
  props->ptr_support = RCOLL_PTR_HOST;
  props->speed_mbps = SHM_SPEED_MBPS;
  props->latency_us = SHM_LATENCY_US;
  props->max_recvs = 1;
  props->reg_is_global = 1;
  return rcollSuccess;
}

static rcollResult_t shm_reg_mr(void *comm, void *data, size_t size, int mem_type, void **mhandle) {
  (void)comm, (void)data, (void)size;
  if (mem_type == RCOLL_MEM_CUDA)
    return rcoll_error(rcollInvalidUsage, "shm transport cannot register device memory; stage through host");
  if (mem_type != RCOLL_MEM_HOST)
    return rcoll_error(rcollInvalidArgument, "shm: reg_mr with unknown memory type %d", mem_type);
  *mhandle = (void *)&shm_mr_token;
  return rcollSuccess;
}

static rcollResult_t shm_dereg_mr(void *comm, void *mhandle) {
  (void)comm, (void)mhandle;
  return rcollSuccess;
}

const rcoll_transport_ops_t shm_ops = {
    .size = sizeof(rcoll_transport_ops_t),
    .version = RCOLL_NET_OPS_VERSION,
    .name = "shm",
    .caps = RCOLL_NET_CAP_LOCAL_ONLY,
    .desc = &shm_desc,
    .init = shm_init,
    .finalize = shm_finalize,
    .devices = shm_devices,
    .get_properties = shm_get_properties,
    .listen = shm_listen,
    .connect = shm_connect,
    .accept = shm_accept,
    .reg_mr = shm_reg_mr,
    .dereg_mr = shm_dereg_mr,
    .isend = shm_isend,
    .isend_single = shm_isend_single,
    .irecv = shm_irecv,
    .iflush = shm_iflush,
    .irecv_reduce = shm_irecv_reduce,
    .test = shm_test,
    .wait = shm_wait,
    .close_send = shm_close_comm,
    .close_recv = shm_close_comm,
    .close_listen = shm_close_listen,
};
