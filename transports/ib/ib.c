/* The verbs transport's context, device properties, memory registration and
 * its ops table. Discovery is in ib_dev.c, connection set-up in ib_conn.c
 * and ib_qp.c, requests in ib_io.c, sleeping in ib_wait.c, the registration
 * cache in ib_mr.c. */
#if RCOLL_HAVE_IBVERBS
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "ib.h"
#include "ib_priv.h"
#include "log.h"

#define IB_LATENCY_US 2.0f /* one RDMA write on a NIC; Soft-RoCE is far slower */

void ib_ctx_ref(ib_ctx_t *ctx) { atomic_fetch_add(&ctx->refs, 1); }

void ib_ctx_unref(ib_ctx_t *ctx) {
  if (atomic_fetch_sub(&ctx->refs, 1) != 1)
    return;
  ib_mr_cache_fini(&ctx->cache);
  if (ctx->pd != NULL)
    ibv_dealloc_pd(ctx->pd);
  if (ctx->verbs != NULL)
    ibv_close_device(ctx->verbs);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
}

static rcollResult_t ib_range(const char *name, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    return rcoll_error_quiet(rcollInvalidArgument, "ib: RCOLL_%s=%lld is out of range %lld..%lld", name, (long long)v,
                       (long long)lo, (long long)hi);
  return rcollSuccess;
}

static rcollResult_t ib_check_settings(const rcoll_settings_t *core, const ib_settings_t *s) {
  RCOLL_CHECK(ib_range("IB_QPS_PER_CONNECTION", s->ib_qps_per_connection, 1, IB_MAX_QPS));
  RCOLL_CHECK(ib_range("IB_SL", s->ib_sl, 0, 15));
  RCOLL_CHECK(ib_range("IB_TC", s->ib_tc, 0, 255));
  RCOLL_CHECK(ib_range("IB_TIMEOUT", s->ib_timeout, 1, 31));
  RCOLL_CHECK(ib_range("IB_RETRY_CNT", s->ib_retry_cnt, 0, 7));
  RCOLL_CHECK(ib_range("IB_GID_INDEX", s->ib_gid_index, -1, 65535));
  return ib_range("TIMEOUT", core->timeout, 1, INT32_MAX);
}

static ib_ctx_t *ib_ctx_new(const rcoll_net_config_t *cfg, int flush_mode, int eager_mode) {
  const ib_settings_t *s = ib_settings(cfg->settings);
  ib_ctx_t *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL)
    return NULL;
  ctx->flush_mode = flush_mode;
  ctx->eager_mode = eager_mode;
  atomic_store(&ctx->refs, 1);
  pthread_mutex_init(&ctx->lock, NULL);
  ib_mr_cache_init(&ctx->cache);
  ctx->secret = cfg->secret;
  ctx->rank = cfg->rank;
  ctx->nqps = (int)s->ib_qps_per_connection;
  ctx->sl = (int)s->ib_sl;
  ctx->tc = (int)s->ib_tc;
  ctx->timeout = (int)s->ib_timeout;
  ctx->retry_cnt = (int)s->ib_retry_cnt;
  ctx->kick_ms = (int)s->ib_kick_ms;
  ctx->timeout_ms = cfg->settings->timeout * 1000;
  return ctx;
}

static rcollResult_t ib_ctx_open(ib_ctx_t *ctx, const rcoll_settings_t *s) {
  RCOLL_CHECK(rcoll_socket_pick_addr(s->socket_ifname, s->socket_family, &ctx->addr, ctx->ifname));
  if (ctx->addr.sa.sa_family == AF_INET6)
    ctx->addr.sin6.sin6_port = 0;
  else
    ctx->addr.sin.sin_port = 0;
  RCOLL_CHECK(ib_dev_open(ctx, ib_settings(s)));
  ctx->pd = ibv_alloc_pd(ctx->verbs);
  if (ctx->pd == NULL)
    return rcoll_error_quiet(rcollSystemError, "ib: cannot allocate a protection domain on %s: %s", ctx->port.desc,
                       strerror(errno));
  ctx->gdr = ib_gdr_probe(ctx, ctx->gdr_why, sizeof ctx->gdr_why);
  return rcollSuccess;
}

static rcollResult_t ib_init(const rcoll_net_config_t *cfg, void **out) {
  char abuf[64];
  int flush_mode, eager_mode;
  const ib_settings_t *own = ib_settings(cfg->settings);
  RCOLL_CHECK(ib_check_settings(cfg->settings, own));
  RCOLL_CHECK(ib_flush_mode_parse(own->ib_flush, &flush_mode));
  RCOLL_CHECK(ib_eager_mode_parse(own->ib_eager, &eager_mode));
  ib_ctx_t *ctx = ib_ctx_new(cfg, flush_mode, eager_mode);
  if (ctx == NULL)
    return rcoll_error_quiet(rcollSystemError, "ib: out of memory for a context");
  rcollResult_t r = ib_ctx_open(ctx, cfg->settings);
  if (r != rcollSuccess) { /* the core logs why, and goes on without ib unless asked for it */
    ib_ctx_unref(ctx);
    return r;
  }
  const void *ip = ctx->addr.sa.sa_family == AF_INET6 ? (const void *)&ctx->addr.sin6.sin6_addr
                                                      : (const void *)&ctx->addr.sin.sin_addr;
  if (inet_ntop(ctx->addr.sa.sa_family, ip, abuf, sizeof abuf) == NULL)
    snprintf(abuf, sizeof abuf, "?");
  RCOLL_INFO(RCOLL_SUB_NET | RCOLL_SUB_INIT,
             "ib: rank %d on %s (%s, MTU %d, %d Mb/s), handshake via %s (%s), %d QP(s) per connection, "
             "timeout %d retry %d sl %d tc %d; device memory: %s; flush: %s; eager receives: %s",
             ctx->rank, ctx->port.desc, ctx->port.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
             128 << ctx->port.mtu, ctx->port.speed_mbps, ctx->ifname, abuf, ctx->nqps, ctx->timeout, ctx->retry_cnt, ctx->sl,
             ctx->tc, ctx->gdr_why,
             ctx->flush_mode == IB_FLUSH_OFF ? "off" : ctx->flush_mode == IB_FLUSH_FORCE ? "every receive" : "device memory",
             ib_eager_refused(ctx) ? "refused" : "accepted");
  *out = ctx;
  return rcollSuccess;
}

static rcollResult_t ib_finalize(void *vctx) {
  ib_ctx_t *ctx = vctx;
  if (ctx == NULL)
    return rcollSuccess;
  pthread_mutex_lock(&ctx->lock);
  ib_connects_free(ctx);
  pthread_mutex_unlock(&ctx->lock);
  ib_ctx_unref(ctx);
  return rcollSuccess;
}

static rcollResult_t ib_devices(void *ctx, int *ndev) {
  (void)ctx;
  *ndev = 1;
  return rcollSuccess;
}

/* RoCE: the GID in use, the first thing to check when peers cannot connect;
 * InfiniBand: the LID. */
static void ib_port_detail(const ib_port_t *p, char *buf, size_t len) {
  char g[INET6_ADDRSTRLEN];
  if (p->gid_index >= 0)
    snprintf(buf, len, "GID %d %s", p->gid_index, ib_gid_str(p->gid.raw, g, sizeof g));
  else
    snprintf(buf, len, "LID %u", (unsigned)p->lid);
}

static rcollResult_t ib_get_properties(void *vctx, int dev, rcoll_net_props_t *props) {
  ib_ctx_t *ctx = vctx;
  if (dev != 0)
    return rcoll_error_quiet(rcollInvalidArgument, "ib: device %d does not exist (1 device)", dev);
  memset(props, 0, sizeof *props);
  snprintf(props->name, sizeof props->name, "%.63s", ctx->port.desc);
  snprintf(props->pci_path, sizeof props->pci_path, "%s", ctx->port.pci_path);
  ib_port_detail(&ctx->port, props->detail, sizeof props->detail);
  props->ptr_support = RCOLL_PTR_HOST | (ctx->gdr != IB_GDR_NONE ? RCOLL_PTR_CUDA : 0) |
                       (ctx->gdr == IB_GDR_DMABUF ? RCOLL_PTR_DMABUF : 0);
  props->speed_mbps = ctx->port.speed_mbps;
  props->latency_us = IB_LATENCY_US;
  props->max_recvs = RCOLL_NET_MAX_RECVS;
  props->reg_is_global = 1;
  return rcollSuccess;
}

static rcollResult_t ib_reg_mr(void *comm, void *data, size_t size, int mem_type, void **mhandle) {
  ib_comm_t *c = comm;
  ib_mr_t *m = NULL;
  if (mem_type != RCOLL_MEM_HOST && mem_type != RCOLL_MEM_CUDA)
    return rcoll_error(rcollInvalidArgument, "ib: reg_mr with unknown memory type %d", mem_type);
  if (mem_type == RCOLL_MEM_CUDA && c->ctx->gdr == IB_GDR_NONE)
    return rcoll_error(rcollInvalidUsage, "ib: %s cannot register device memory (%s); stage through host",
                       c->ctx->port.desc, c->ctx->gdr_why);
  /* Remote read: iflush reads received data back through the same NIC. */
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  rcollResult_t r = ib_mr_get(c->ctx, data, size, access, mem_type, &m);
  /* Read-only host memory can still be sent from. */
  if (r != rcollSuccess && mem_type == RCOLL_MEM_HOST)
    r = ib_mr_get(c->ctx, data, size, 0, mem_type, &m);
  if (r != rcollSuccess)
    return rcoll_error(r, "%s", rcoll_error_text());
  *mhandle = m;
  return rcollSuccess;
}

static rcollResult_t ib_dereg_mr(void *comm, void *mhandle) {
  ib_comm_t *c = comm;
  if (mhandle != NULL)
    ib_mr_put(c->ctx, mhandle);
  return rcollSuccess;
}

int ib_gdr_support(void *vctx, char *why, size_t len) {
  ib_ctx_t *ctx = vctx;
  snprintf(why, len, "%s", ctx->gdr_why);
  return ctx->gdr;
}

const rcoll_transport_ops_t ib_ops = {
    .size = sizeof(rcoll_transport_ops_t),
    .version = RCOLL_NET_OPS_VERSION,
    .name = "ib",
    .desc = &ib_desc,
    .init = ib_init,
    .finalize = ib_finalize,
    .devices = ib_devices,
    .get_properties = ib_get_properties,
    .listen = ib_listen,
    .connect = ib_connect,
    .accept = ib_accept,
    .reg_mr = ib_reg_mr,
    .dereg_mr = ib_dereg_mr,
    .isend = ib_isend,
    .irecv = ib_irecv,
    .iflush = ib_iflush,
    .test = ib_test,
    .wait = ib_wait,
    .close_send = ib_close_comm,
    .close_recv = ib_close_comm,
    .close_listen = ib_close_listen,
};
#endif
