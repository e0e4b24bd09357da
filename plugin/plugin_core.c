/* The plugin's process-wide state: which transport serves NCCL, its devices
 * and their properties, the logger, and the contexts handed to NCCL. The
 * transport is picked once per process, at the first init, and kept: NCCL
 * asks for devices and properties without a context, and a host may keep
 * pointers to the names it was given. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "log.h"
#include "plugin.h"

/* rcoll transports count no comms of their own; descriptors and threads run
 * out first, and connect then fails saying so. */
#define PLUGIN_MAX_COMMS 65536

struct rcoll_plugin_ctx {
  void *listen_tctx;  /* opened with a random secret, which listen handles carry */
  void *connect_tctx; /* opened with secret 0: presents the secret of the handle */
};

static struct {
  pthread_mutex_t lock; /* guards the first pick and the shared context */
  int picked;
  rcoll_settings_t settings;
  void *probe; /* transport context that answers devices and properties */
  int ndev;
  rcoll_net_props_t *props; /* ndev entries */
  rcoll_plugin_ctx_t *shared;
} plugin = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Read on every call without the lock: set once, before any context exists. */
static const rcoll_transport_ops_t *_Atomic plugin_transport;
static _Atomic(nccl_logger_t) plugin_logger;
static rcoll_plugin_ctx_t *_Atomic plugin_shared_ctx;

const rcoll_transport_ops_t *rcoll_plugin_ops(void) { return atomic_load(&plugin_transport); }

nccl_result_t rcoll_plugin_result(rcollResult_t r) {
  switch (r) {
  case rcollSuccess:
    return NCCL_ABI_SUCCESS;
  case rcollUnhandledCudaError:
    return NCCL_ABI_UNHANDLED_CUDA_ERROR;
  case rcollSystemError:
    return NCCL_ABI_SYSTEM_ERROR;
  case rcollInvalidArgument:
    return NCCL_ABI_INVALID_ARGUMENT;
  case rcollInvalidUsage:
    return NCCL_ABI_INVALID_USAGE;
  case rcollRemoteError:
  case rcollTimeout: /* NCCL has no timeout: a peer that never answered failed */
    return NCCL_ABI_REMOTE_ERROR;
  case rcollInProgress:
    return NCCL_ABI_IN_PROGRESS;
  default:
    return NCCL_ABI_INTERNAL_ERROR;
  }
}

/* rcoll's log lines, already filtered by RCOLL_DEBUG (NCCL_DEBUG), go to
 * NCCL's logger, which adds its own prefix and applies its own filter. */
static void plugin_log_sink(int level, const char *msg) {
  nccl_logger_t log = atomic_load(&plugin_logger);
  int nccl_level = level == RCOLL_LOG_WARN   ? NCCL_ABI_LOG_WARN
                   : level == RCOLL_LOG_INFO ? NCCL_ABI_LOG_INFO
                                             : NCCL_ABI_LOG_TRACE;
  if (log != NULL)
    log(nccl_level, NCCL_ABI_LOG_NET, "rcoll", 0, "%s", msg);
}

/* The first logger wins: NCCL passes the same one to every init. A host that
 * passes none keeps rcoll's own stderr lines. */
static void plugin_set_logger(nccl_logger_t logger) {
  nccl_logger_t none = NULL;
  if (logger != NULL && atomic_compare_exchange_strong(&plugin_logger, &none, logger))
    rcoll_log_set_sink(plugin_log_sink);
}

static rcollResult_t plugin_cache_props(const rcoll_transport_ops_t *ops, void *ctx, int ndev) {
  rcoll_net_props_t *p = calloc((size_t)ndev, sizeof *p);
  if (p == NULL)
    return rcoll_error(rcollSystemError, "NET/rcoll: out of memory for %d device descriptions", ndev);
  for (int d = 0; d < ndev; d++) {
    rcollResult_t r = ops->get_properties(ctx, d, &p[d]);
    if (r != rcollSuccess) {
      free(p);
      return r;
    }
  }
  plugin.props = p;
  plugin.ndev = ndev;
  return rcollSuccess;
}

/* Opens a context of this transport with no secret and asks for its devices:
 * that is what "usable here" means for NCCL. */
static rcollResult_t plugin_probe(const rcoll_transport_ops_t *ops) {
  rcoll_net_config_t cfg = {.settings = &plugin.settings, .secret = 0, .rank = -1};
  void *ctx = NULL;
  int ndev = 0;
  RCOLL_CHECK(ops->init(&cfg, &ctx));
  rcollResult_t r = ops->devices(ctx, &ndev);
  if (r == rcollSuccess && ndev < 1)
    r = rcoll_error_quiet(rcollSystemError, "%s: no devices", ops->name);
  if (r == rcollSuccess)
    r = plugin_cache_props(ops, ctx, ndev);
  if (r != rcollSuccess) {
    ops->finalize(ctx);
    return r;
  }
  plugin.probe = ctx;
  atomic_store(&plugin_transport, ops);
  return rcollSuccess;
}

static void plugin_transport_names(char *buf, size_t len) {
  buf[0] = '\0';
  for (int i = 0; i < rcoll_net_count(); i++)
    snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", i ? ", " : "", rcoll_net_at(i)->name);
}

static rcollResult_t plugin_pick_named(const char *want) {
  char names[256];
  const rcoll_transport_ops_t *ops = rcoll_net_find(want);
  if (ops == NULL) {
    plugin_transport_names(names, sizeof names);
    return rcoll_error(rcollInvalidArgument, "NET/rcoll: RCOLL_NET=%s names no transport of this build (%s)",
                       want, names);
  }
  if (ops->caps & RCOLL_NET_CAP_LOCAL_ONLY)
    return rcoll_error(rcollInvalidArgument,
                       "NET/rcoll: RCOLL_NET=%s reaches only this host; NCCL needs a network transport", want);
  rcollResult_t r = plugin_probe(ops);
  if (r != rcollSuccess)
    return rcoll_error(r, "NET/rcoll: transport %s (RCOLL_NET) cannot be used here: %s", want,
                       rcoll_error_text());
  return rcollSuccess;
}

/* RCOLL_NET names the transport. Its NCCL_NET fallback, which rcoll's
 * settings accept elsewhere, is not read here: inside NCCL, NCCL_NET names
 * NCCL's network (e.g. "rcoll" itself), not one of ours. Without RCOLL_NET
 * the table's order (socket first) decides, skipping host-only transports. */
static rcollResult_t plugin_pick(void) {
  int rc = rcoll_settings_load(&plugin.settings);
  if (rc != rcollSuccess)
    return (rcollResult_t)rc;
  const char *want = getenv("RCOLL_NET");
  if (want != NULL && *want != '\0')
    return plugin_pick_named(want);
  for (int i = 0; i < rcoll_net_count(); i++) {
    const rcoll_transport_ops_t *ops = rcoll_net_at(i);
    if (ops->caps & RCOLL_NET_CAP_LOCAL_ONLY)
      continue;
    if (plugin_probe(ops) == rcollSuccess)
      return rcollSuccess;
    RCOLL_INFO(RCOLL_SUB_NET, "NET/rcoll: transport %s is not usable here: %s", ops->name, rcoll_error_text());
  }
  return rcoll_error(rcollSystemError, "NET/rcoll: no rcoll transport works on this host");
}

static uint64_t plugin_random_secret(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
    v = (uint64_t)rcoll_now_us() * 0x9e3779b97f4a7c15ull ^ ((uint64_t)getpid() << 32);
  return v ? v : 1; /* 0 would mean "take the secret from the handle" */
}

static rcollResult_t plugin_ctx_new(rcoll_plugin_ctx_t **out) {
  const rcoll_transport_ops_t *ops = rcoll_plugin_ops();
  rcoll_plugin_ctx_t *c = calloc(1, sizeof *c);
  if (c == NULL)
    return rcoll_error(rcollSystemError, "NET/rcoll: out of memory for a context");
  rcoll_net_config_t lcfg = {.settings = &plugin.settings, .secret = plugin_random_secret(), .rank = -1};
  rcoll_net_config_t ccfg = {.settings = &plugin.settings, .secret = 0, .rank = -1};
  rcollResult_t r = ops->init(&lcfg, &c->listen_tctx);
  if (r == rcollSuccess) {
    r = ops->init(&ccfg, &c->connect_tctx);
    if (r != rcollSuccess)
      ops->finalize(c->listen_tctx);
  }
  if (r != rcollSuccess) {
    free(c);
    return r;
  }
  *out = c;
  return rcollSuccess;
}

static rcollResult_t plugin_init_locked(nccl_logger_t logger, rcoll_plugin_ctx_t **ctx) {
  plugin_set_logger(logger);
  if (!plugin.picked) {
    RCOLL_CHECK(plugin_pick());
    plugin.picked = 1;
    RCOLL_INFO(RCOLL_SUB_NET | RCOLL_SUB_INIT, "NET/rcoll: using transport %s, %d device(s), first %s",
               rcoll_plugin_ops()->name, plugin.ndev, plugin.props[0].name);
  }
  return plugin_ctx_new(ctx);
}

rcollResult_t rcoll_plugin_init(nccl_logger_t logger, rcoll_plugin_ctx_t **ctx) {
  pthread_mutex_lock(&plugin.lock);
  rcollResult_t r = plugin_init_locked(logger, ctx);
  pthread_mutex_unlock(&plugin.lock);
  return r;
}

rcollResult_t rcoll_plugin_init_shared(nccl_logger_t logger) {
  rcollResult_t r = rcollSuccess;
  pthread_mutex_lock(&plugin.lock);
  if (plugin.shared == NULL) {
    r = plugin_init_locked(logger, &plugin.shared);
    if (r == rcollSuccess)
      atomic_store(&plugin_shared_ctx, plugin.shared);
  }
  pthread_mutex_unlock(&plugin.lock);
  return r;
}

rcoll_plugin_ctx_t *rcoll_plugin_shared(void) { return atomic_load(&plugin_shared_ctx); }

/* The transport contexts go; the process-wide pick stays for later inits. */
rcollResult_t rcoll_plugin_finalize(rcoll_plugin_ctx_t *ctx) {
  if (ctx == NULL)
    return rcoll_error(rcollInvalidArgument, "NET/rcoll: finalize given a NULL context");
  if (ctx == rcoll_plugin_shared())
    return rcoll_error(rcollInvalidUsage, "NET/rcoll: finalize given the shared v8-v10 context");
  const rcoll_transport_ops_t *ops = rcoll_plugin_ops();
  rcollResult_t r1 = ops->finalize(ctx->listen_tctx);
  rcollResult_t r2 = ops->finalize(ctx->connect_tctx);
  free(ctx);
  return r1 != rcollSuccess ? r1 : r2;
}

static rcollResult_t plugin_check_dev(int dev, const char *what) {
  if (rcoll_plugin_ops() == NULL)
    return rcoll_error(rcollInvalidUsage, "NET/rcoll: %s called before init", what);
  if (dev < 0 || dev >= plugin.ndev)
    return rcoll_error(rcollInvalidArgument, "NET/rcoll: %s: device %d does not exist (%d devices)", what, dev,
                       plugin.ndev);
  return rcollSuccess;
}

rcollResult_t rcoll_plugin_devices(int *ndev) {
  if (ndev == NULL)
    return rcoll_error(rcollInvalidArgument, "NET/rcoll: devices given a NULL count");
  if (rcoll_plugin_ops() == NULL)
    return rcoll_error(rcollInvalidUsage, "NET/rcoll: devices called before init");
  *ndev = plugin.ndev;
  return rcollSuccess;
}

/* Only pointer kinds the plugin can register are reported: rcoll's transport
 * table has no DMA-BUF registration slot, so that bit never passes. */
static int plugin_ptr_support(int rcoll_bits) {
  return ((rcoll_bits & RCOLL_PTR_HOST) ? NCCL_ABI_PTR_HOST : 0) |
         ((rcoll_bits & RCOLL_PTR_CUDA) ? NCCL_ABI_PTR_CUDA : 0);
}

rcollResult_t rcoll_plugin_properties(int dev, rcoll_plugin_props_t *out) {
  RCOLL_CHECK(plugin_check_dev(dev, "getProperties"));
  if (out == NULL)
    return rcoll_error(rcollInvalidArgument, "NET/rcoll: getProperties given a NULL struct");
  rcoll_net_props_t *p = &plugin.props[dev];
  *out = (rcoll_plugin_props_t){
      .name = p->name,
      .pci_path = p->pci_path[0] ? p->pci_path : NULL,
      .ptr_support = plugin_ptr_support(p->ptr_support),
      .reg_is_global = 0, /* see rcoll_plugin_props_t */
      .speed_mbps = p->speed_mbps,
      .latency_us = p->latency_us,
      .max_recvs = p->max_recvs < 1 ? 1 : p->max_recvs,
      .max_comms = PLUGIN_MAX_COMMS,
      .max_bytes = RCOLL_PLUGIN_MAX_BYTES,
  };
  return rcollSuccess;
}

rcollResult_t rcoll_plugin_listen(rcoll_plugin_ctx_t *ctx, int dev, void *handle, void **listen_comm) {
  RCOLL_CHECK(plugin_check_dev(dev, "listen"));
  if (ctx == NULL || handle == NULL || listen_comm == NULL)
    return rcoll_error(rcollInvalidArgument, "NET/rcoll: listen given a NULL %s",
                       ctx == NULL ? "context (init not called?)" : handle == NULL ? "handle" : "comm pointer");
  return rcoll_plugin_ops()->listen(ctx->listen_tctx, dev, handle, listen_comm);
}

/* Failures of connect and accept are left quiet by the transports for the
 * caller to report: here NCCL's side begins, so they are logged here. */
rcollResult_t rcoll_plugin_connect(rcoll_plugin_ctx_t *ctx, int dev, const void *handle,
                                   rcoll_plugin_comm_t **send_comm) {
  RCOLL_CHECK(plugin_check_dev(dev, "connect"));
  if (ctx == NULL || handle == NULL || send_comm == NULL)
    return rcoll_error(rcollInvalidArgument, "NET/rcoll: connect given a NULL %s",
                       ctx == NULL ? "context (init not called?)" : handle == NULL ? "handle" : "comm pointer");
  void *tcomm = NULL;
  *send_comm = NULL;
  rcollResult_t r = rcoll_plugin_ops()->connect(ctx->connect_tctx, dev, handle, &tcomm);
  if (r != rcollSuccess)
    return rcoll_error(r, "NET/rcoll: connect failed: %s", rcoll_error_text());
  return tcomm == NULL ? rcollSuccess : rcoll_plugin_comm_wrap(tcomm, 1, send_comm);
}

rcollResult_t rcoll_plugin_accept(void *listen_comm, rcoll_plugin_comm_t **recv_comm) {
  if (listen_comm == NULL || recv_comm == NULL)
    return rcoll_error(rcollInvalidArgument, "NET/rcoll: accept given a NULL %s",
                       listen_comm == NULL ? "listen comm" : "comm pointer");
  if (rcoll_plugin_ops() == NULL)
    return rcoll_error(rcollInvalidUsage, "NET/rcoll: accept called before init");
  void *tcomm = NULL;
  *recv_comm = NULL;
  rcollResult_t r = rcoll_plugin_ops()->accept(listen_comm, &tcomm);
  if (r != rcollSuccess)
    return rcoll_error(r, "NET/rcoll: accept failed: %s", rcoll_error_text());
  return tcomm == NULL ? rcollSuccess : rcoll_plugin_comm_wrap(tcomm, 0, recv_comm);
}

rcollResult_t rcoll_plugin_close_listen(void *listen_comm) {
  if (listen_comm == NULL || rcoll_plugin_ops() == NULL)
    return rcollSuccess;
  return rcoll_plugin_ops()->close_listen(listen_comm);
}
