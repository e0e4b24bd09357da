/* The UCX transport's context (one UCP context and worker), device
 * properties and its ops table. Connection setup is in ucx_accept.c and
 * ucx_connect.c, comms and endpoints in ucx_conn.c, requests in ucx_io.c,
 * registration in ucx_mem.c, sleeping in ucx_wait.c. */
#if RCOLL_HAVE_UCX

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "sockutil.h"
#include "ucx.h"
#include "ucx_priv.h"

#define UCX_DEFAULT_SPEED_MBPS 10000
#define UCX_LATENCY_US 5.0f

const char *ucx_addr_str(const rcoll_sockaddr_t *a, char buf[UCX_ADDR_STR]) {
  return rcoll_sockaddr_str(a, buf, UCX_ADDR_STR);
}

static uint64_t ucx_fnv1a(uint64_t h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return h;
}

/* Tells processes on this host (this boot of this kernel, this network
 * namespace) from others: endpoints between them may use shared memory, see
 * ucx_priv.h. Network namespaces count as hosts of their own, as they do in
 * rcoll's multi-node tests: peers there get peer failure handling and the
 * network transports, as on separate machines. */
static uint64_t ucx_host_id(void) {
  char buf[128] = "";
  struct stat st;
  uint64_t h = 0xcbf29ce484222325ull;
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f != NULL) {
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    h = ucx_fnv1a(h, buf, n);
  }
  if (gethostname(buf, sizeof buf) == 0)
    h = ucx_fnv1a(h, buf, strnlen(buf, sizeof buf));
  if (stat("/proc/self/ns/net", &st) == 0)
    h = ucx_fnv1a(h, (const char *)&st.st_ino, sizeof st.st_ino);
  return h;
}

/* Whether UCX may use shared memory here (a posix, sysv, cma, xpmem or knem
 * resource in the context): such transports have no peer failure handling,
 * so endpoints to local peers then go without it (ucx_conn.c). The context
 * lists its resources only as text, one "resource N : ... tl/dev" a line. */
static int ucx_has_shm(ucp_context_h ucp) {
  static const char *const shm[] = {"posix/", "sysv/", "cma/", "xpmem/", "knem/"};
  char *text = NULL, *line, *save = NULL;
  size_t len = 0;
  int found = 0;
  FILE *f = open_memstream(&text, &len);
  if (f == NULL)
    return 1; /* cannot tell: keep local peers on shared memory */
  ucp_context_print_info(ucp, f);
  fclose(f);
  for (line = strtok_r(text, "\n", &save); line != NULL && !found; line = strtok_r(NULL, "\n", &save))
    for (size_t i = 0; i < sizeof shm / sizeof shm[0] && strstr(line, "resource"); i++)
      found |= strstr(line, shm[i]) != NULL;
  free(text);
  return found;
}

/* Whether the machine has an RDMA device (UCX could then reach other nodes
 * by verbs, whose zero-copy sends matter). */
static int ucx_machine_has_rdma(void) {
  DIR *d = opendir("/sys/class/infiniband");
  int found = 0;
  for (struct dirent *e; d != NULL && !found && (e = readdir(d)) != NULL;)
    found = e->d_name[0] != '.';
  if (d != NULL)
    closedir(d);
  return found;
}

/* UCX 1.13's tcp transport completes a zero-copy send twice when the peer
 * dies with it in flight, and then aborts this process on its own assertion
 * (uct_iface.h:884 "comp->count > 0", from uct_tcp_iface_progress): 12 of 80
 * runs of tests/bin/rank_death -m kill under UCX_TLS=tcp,self, 0 of 200 with
 * UCX_ZCOPY_THRESH=inf. Where UCX has only TCP to reach other nodes (no RDMA
 * device here), rcoll turns zero-copy off unless the user set
 * UCX_ZCOPY_THRESH: the kernel copies a TCP send either way, so the cost is
 * one copy into UCX's buffer (16 MiB all-reduce over ucx tcp: 30.2-31.1 ms
 * with zero-copy, 30.3 ms without, loaded machine). */
static void ucx_config_defaults(ucp_config_t *config) {
  if (getenv("UCX_ZCOPY_THRESH") != NULL || ucx_machine_has_rdma())
    return;
  ucs_status_t st = ucp_config_modify(config, "ZCOPY_THRESH", "inf");
  if (st != UCS_OK)
    RCOLL_INFO(RCOLL_SUB_NET, "ucx: cannot set ZCOPY_THRESH=inf: %s", ucs_status_string(st));
}

static rcollResult_t ucx_ucp_open(ucx_ctx_t *ctx) {
  ucp_config_t *config;
  /* NULL prefix and file: UCX reads its own UCX_* variables, nothing else. */
  ucs_status_t st = ucp_config_read(NULL, NULL, &config);
  if (st != UCS_OK)
    return rcoll_error(rcollSystemError, "ucx: reading UCX configuration failed: %s", ucs_status_string(st));
  ucx_config_defaults(config);
  ucp_params_t params = {
      .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME,
      .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP,
      .name = "rcoll",
  };
  st = ucp_init(&params, config, &ctx->ucp);
  ucp_config_release(config);
  if (st != UCS_OK)
    return rcoll_error(rcollSystemError, "ucx: ucp_init failed: %s", ucs_status_string(st));
  ucp_context_attr_t attr = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
  if (ucp_context_query(ctx->ucp, &attr) == UCS_OK)
    ctx->mem_types = attr.memory_types;
  ctx->has_shm = ucx_has_shm(ctx->ucp);
  /* SERIALIZED: one thread at a time, not always the same one (a
   * communicator may be driven by different threads over its life). */
  ucp_worker_params_t wparams = {
      .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
      .thread_mode = UCS_THREAD_MODE_SERIALIZED,
  };
  st = ucp_worker_create(ctx->ucp, &wparams, &ctx->worker);
  if (st != UCS_OK)
    return rcoll_error(rcollSystemError, "ucx: ucp_worker_create failed: %s", ucs_status_string(st));
  st = ucp_worker_get_address(ctx->worker, &ctx->waddr, &ctx->waddr_len);
  if (st != UCS_OK)
    return rcoll_error(rcollSystemError, "ucx: ucp_worker_get_address failed: %s", ucs_status_string(st));
  if (ucp_worker_get_efd(ctx->worker, &ctx->efd) != UCS_OK) {
    ctx->efd = -1; /* wait falls back to short sleeps */
    RCOLL_INFO(RCOLL_SUB_NET, "ucx: no event fd for the worker; idle waits will nap");
  }
  return rcollSuccess;
}

void ucx_orphan(ucx_ctx_t *ctx, void *req) {
  if (ucp_request_check_status(req) != UCS_INPROGRESS) {
    ucp_request_free(req);
    return;
  }
  if (ctx->norphans == ctx->orphans_cap) {
    int cap = ctx->orphans_cap ? 2 * ctx->orphans_cap : 16;
    void **o = realloc(ctx->orphans, (size_t)cap * sizeof *o);
    if (o == NULL) {
      ucp_request_free(req); /* UCX releases it when done; only the bookkeeping is lost */
      ctx->unclean = 1;
      return;
    }
    ctx->orphans = o;
    ctx->orphans_cap = cap;
  }
  ctx->orphans[ctx->norphans++] = req;
}

/* Progresses until every orphan has finished or the deadline passes;
 * returns how many are still running. */
static int ucx_orphans_settle(ucx_ctx_t *ctx, int64_t deadline_ms) {
  while (ctx->norphans > 0) {
    void *req = ctx->orphans[ctx->norphans - 1];
    if (ucx_progress_until(ctx->worker, req, deadline_ms) == UCS_INPROGRESS)
      break;
    ucp_request_free(req);
    ctx->norphans--;
  }
  return ctx->norphans;
}

/* UCX 1.13 (as Debian builds it, with assertions) aborts the process when a
 * worker is destroyed while an endpoint still has requests running or
 * operations queued, which happens after a close with transfers in flight
 * (an abort, a failed peer). So first the requests closed comms left behind
 * must finish, then the worker is flushed. After clean closes only UCX's own
 * acknowledgements can be outstanding, which are safe to drop after a short
 * wait; otherwise a worker that does not settle in time is left allocated
 * with its context: a leak on an error path, where the alternative is to
 * take the application down. Returns 0 for that case. */
static int ucx_worker_quiesce(ucx_ctx_t *ctx) {
  int unclean = ctx->unclean || ctx->norphans > 0;
  int64_t deadline = rcoll_now_ms() + (unclean ? UCX_CLOSE_UNCLEAN_MS : UCX_CLOSE_CLEAN_MS);
  int running = ucx_orphans_settle(ctx, deadline);
  ucs_status_t st = running ? UCS_OK : ucx_worker_flush(ctx->worker, deadline);
  if (running == 0 && (st != UCS_INPROGRESS || !unclean))
    return 1;
  RCOLL_WARN("ucx: rank %d: transfers still in flight %d ms after closing; leaving the UCX worker allocated",
             ctx->rank, unclean ? UCX_CLOSE_UNCLEAN_MS : UCX_CLOSE_CLEAN_MS);
  return 0;
}

static void ucx_ucp_close(ucx_ctx_t *ctx) {
  if (ctx->waddr != NULL)
    ucp_worker_release_address(ctx->worker, ctx->waddr);
  if (ctx->worker != NULL && !ucx_worker_quiesce(ctx))
    return;
  if (ctx->worker != NULL)
    ucp_worker_destroy(ctx->worker);
  if (ctx->ucp != NULL)
    ucp_cleanup(ctx->ucp);
}

static rcollResult_t ucx_init(const rcoll_net_config_t *cfg, void **out) {
  const rcoll_settings_t *s = cfg->settings;
  char abuf[UCX_ADDR_STR];
  if (s->timeout < 1)
    return rcoll_error(rcollInvalidArgument, "ucx: RCOLL_TIMEOUT=%lld must be at least 1 second",
                       (long long)s->timeout);
  ucx_ctx_t *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL)
    return rcoll_error(rcollSystemError, "ucx: out of memory for a context");
  ctx->efd = -1;
  /* The rendezvous socket follows the socket transport's interface choice. */
  rcollResult_t r = rcoll_socket_pick_addr(s->socket_ifname, s->socket_family, &ctx->addr, ctx->ifname);
  if (r == rcollSuccess)
    r = ucx_ucp_open(ctx);
  if (r != rcollSuccess) {
    ucx_ucp_close(ctx);
    free(ctx);
    return r;
  }
  if (ctx->addr.sa.sa_family == AF_INET6)
    ctx->addr.sin6.sin6_port = 0;
  else
    ctx->addr.sin.sin_port = 0;
  ctx->secret = cfg->secret;
  ctx->rank = cfg->rank;
  ctx->timeout_ms = s->timeout * 1000;
  ctx->host_id = ucx_host_id();
  ctx->next_conn_id = 1;
  const char *tls = getenv("UCX_TLS");
  RCOLL_INFO(RCOLL_SUB_NET, "ucx: rank %d: UCX %s, UCX_TLS=%s, worker address %zu bytes, memory %s%s, "
             "shared memory %s, rendezvous on %s (%s)", ctx->rank, ucp_get_version_string(),
             tls ? tls : "(default)", ctx->waddr_len, "host",
             (ctx->mem_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) ? "+cuda" : "", ctx->has_shm ? "yes" : "no",
             ctx->ifname, ucx_addr_str(&ctx->addr, abuf));
  *out = ctx;
  return rcollSuccess;
}

static rcollResult_t ucx_finalize(void *vctx) {
  ucx_ctx_t *ctx = vctx;
  if (ctx == NULL)
    return rcollSuccess;
  ucx_connects_free(ctx);
  ucx_ucp_close(ctx);
  ucx_zombies_free(ctx);
  free(ctx->orphans);
  free(ctx);
  return rcollSuccess;
}

static rcollResult_t ucx_devices(void *ctx, int *ndev) {
  (void)ctx;
  *ndev = 1;
  return rcollSuccess;
}

static rcollResult_t ucx_get_properties(void *vctx, int dev, rcoll_net_props_t *props) {
  ucx_ctx_t *ctx = vctx;
  if (dev != 0)
    return rcoll_error(rcollInvalidArgument, "ucx: device %d does not exist (1 device)", dev);
  memset(props, 0, sizeof *props);
  const char *tls = getenv("UCX_TLS");
  snprintf(props->name, sizeof props->name, "ucx%s%.58s", tls ? ":" : "", tls ? tls : "");
  props->ptr_support = RCOLL_PTR_HOST;
  if (ctx->mem_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA))
    props->ptr_support |= RCOLL_PTR_CUDA;
  props->speed_mbps = UCX_DEFAULT_SPEED_MBPS;
  props->latency_us = UCX_LATENCY_US;
  props->max_recvs = RCOLL_NET_MAX_RECVS;
  /* Registrations belong to the UCP context, which every comm shares. */
  props->reg_is_global = 1;
  return rcollSuccess;
}

const rcoll_transport_ops_t ucx_ops = {
    .size = sizeof(rcoll_transport_ops_t),
    .version = RCOLL_NET_OPS_VERSION,
    .name = "ucx",
    .desc = &ucx_desc,
    .init = ucx_init,
    .finalize = ucx_finalize,
    .devices = ucx_devices,
    .get_properties = ucx_get_properties,
    .listen = ucx_listen,
    .connect = ucx_connect,
    .accept = ucx_accept,
    .reg_mr = ucx_reg_mr,
    .dereg_mr = ucx_dereg_mr,
    .isend = ucx_isend,
    .irecv = ucx_irecv,
    .iflush = ucx_iflush,
    .test = ucx_test,
    .wait = ucx_wait,
    .close_send = ucx_close_comm,
    .close_recv = ucx_close_comm,
    .close_listen = ucx_close_listen,
};

#endif /* RCOLL_HAVE_UCX */
