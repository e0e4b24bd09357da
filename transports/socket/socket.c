/* The socket transport's context, device properties, memory registration and
 * its ops table. Connection setup is in socket_accept.c and socket_connect.c,
 * requests in socket_io.c, helper threads in socket_helper.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "socket.h"
#include "socket_priv.h"

#define SOCKET_DEFAULT_SPEED_MBPS 10000

/* reg_mr of host memory has nothing to register; callers still want a
 * non-NULL handle to pass back. */
static const char socket_mr_token;

const char *socket_addr_str(const rcoll_sockaddr_t *a, char buf[SOCKET_ADDR_STR]) {
  return rcoll_sockaddr_str(a, buf, SOCKET_ADDR_STR);
}

void socket_log_conn(const char *verb, int fd, const char *peer, const socket_hello_t *h) {
  rcoll_sockaddr_t local;
  socklen_t len = sizeof local;
  char lbuf[SOCKET_ADDR_STR] = "?";
  if (!rcoll_log_enabled(RCOLL_LOG_INFO, RCOLL_SUB_NET))
    return;
  char cc[SOCKET_CC_MAX] = "?";
  socklen_t cl = sizeof cc;
  if (getsockname(fd, &local.sa, &len) == 0)
    socket_addr_str(&local, lbuf);
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &cl) != 0)
    snprintf(cc, sizeof cc, "?");
  cc[sizeof cc - 1] = '\0';
  RCOLL_INFO(RCOLL_SUB_NET, "socket: %s %s <-> %s, %u threads x %u sockets, inline <= %llu bytes, %s", verb,
             lbuf, peer, h->nthreads, h->nsocks_per, (unsigned long long)h->inline_max, cc);
}

/* Sending sockets keep small buffers (RCOLL_SOCKET_SNDBUF; the control
 * socket's holds one inline message): a full 4 MiB buffer left as one burst
 * whose segments arrived out of order over veth and loopback, and the
 * spurious recoveries stalled flows for milliseconds (2 namespaces, 2 MiB
 * all-reduce: 2.4 ms before, 0.87 after; docs/execution.md, "Send
 * buffers", has the measurements and the price on long fat links). */
void socket_set_sndbuf(int fd, int bytes) {
  if (bytes > 0)
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}

int socket_set_congestion(int fd, const char *name) {
  if (name[0] == '\0')
    return 0;
  return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name)) == 0 ? 0 : errno;
}

/* The first line of a /proc/sys file, for messages; "?" when unreadable. */
static void socket_read_sysctl(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  if (f == NULL || fgets(buf, (int)len, f) == NULL)
    snprintf(buf, len, "?");
  buf[strcspn(buf, "\n")] = '\0';
  if (f != NULL)
    fclose(f);
}

/* RCOLL_SOCKET_CONGESTION is tried on a socket of its own at init, so that a
 * name the kernel lacks or does not allow fails here, naming what it does
 * allow, and not later at a connect. Why a user would set it: with bbr (a
 * system default on some machines) a sender over veth stalled 6-12 ms at a
 * time, its queue full and its window open, until its loss-probe timer
 * fired; reno and cubic did not (docs/execution.md, "TCP congestion
 * control"). */
static rcollResult_t socket_check_congestion(const char *name) {
  char allowed[256], avail[256];
  if (name[0] == '\0')
    return rcollSuccess;
  if (strlen(name) >= SOCKET_CC_MAX)
    return rcoll_error(rcollInvalidArgument, "socket: RCOLL_SOCKET_CONGESTION=%s is longer than %d characters",
                       name, SOCKET_CC_MAX - 1);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int e = fd < 0 ? errno : socket_set_congestion(fd, name);
  if (fd >= 0)
    close(fd);
  if (e == 0)
    return rcollSuccess;
  socket_read_sysctl("/proc/sys/net/ipv4/tcp_allowed_congestion_control", allowed, sizeof allowed);
  socket_read_sysctl("/proc/sys/net/ipv4/tcp_available_congestion_control", avail, sizeof avail);
  return rcoll_error(rcollInvalidArgument,
                     "socket: RCOLL_SOCKET_CONGESTION=%s cannot be used: %s (allowed here: %s; available, "
                     "with CAP_NET_ADMIN: %s)",
                     name, strerror(e), allowed, avail);
}

static rcollResult_t socket_check_settings(const rcoll_settings_t *core, const socket_settings_t *s) {
  if (s->socket_nthreads < 1 || s->socket_nthreads > SOCKET_MAX_THREADS)
    return rcoll_error(rcollInvalidArgument, "socket: RCOLL_SOCKET_NTHREADS=%lld is out of range 1..%d",
                       (long long)s->socket_nthreads, SOCKET_MAX_THREADS);
  if (s->nsocks_perthread < 1 || s->socket_nthreads * s->nsocks_perthread > SOCKET_MAX_DATA)
    return rcoll_error(rcollInvalidArgument,
                       "socket: RCOLL_NSOCKS_PERTHREAD=%lld gives %lld data sockets; allowed 1..%d in all",
                       (long long)s->nsocks_perthread, (long long)(s->socket_nthreads * s->nsocks_perthread),
                       SOCKET_MAX_DATA);
  if (s->socket_inline < 0 || s->socket_inline > INT_MAX)
    return rcoll_error(rcollInvalidArgument, "socket: RCOLL_SOCKET_INLINE=%lld is out of range 0..%d",
                       (long long)s->socket_inline, INT_MAX);
  if (s->socket_sndbuf < 0 || s->socket_sndbuf > SOCKET_SNDBUF_MAX)
    return rcoll_error(rcollInvalidArgument, "socket: RCOLL_SOCKET_SNDBUF=%lld is out of range 0..%d",
                       (long long)s->socket_sndbuf, SOCKET_SNDBUF_MAX);
  if (core->timeout < 1)
    return rcoll_error(rcollInvalidArgument, "socket: RCOLL_TIMEOUT=%lld must be at least 1 second",
                       (long long)core->timeout);
  return socket_check_congestion(s->socket_congestion);
}

static rcollResult_t socket_init(const rcoll_net_config_t *cfg, void **out) {
  char abuf[SOCKET_ADDR_STR];
  const rcoll_settings_t *s = cfg->settings;
  const socket_settings_t *own = socket_settings(s);
  RCOLL_CHECK(socket_check_settings(s, own));
  socket_ctx_t *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL)
    return rcoll_error(rcollSystemError, "socket: out of memory for a context");
  rcollResult_t r = rcoll_socket_pick_addr(s->socket_ifname, s->socket_family, &ctx->addr, ctx->ifname);
  if (r != rcollSuccess) {
    free(ctx);
    return r;
  }
  if (ctx->addr.sa.sa_family == AF_INET6)
    ctx->addr.sin6.sin6_port = 0;
  else
    ctx->addr.sin.sin_port = 0;
  ctx->secret = cfg->secret;
  ctx->rank = cfg->rank;
  ctx->nthreads = (int)own->socket_nthreads;
  ctx->nsocks_per = (int)own->nsocks_perthread;
  ctx->inline_max = (size_t)own->socket_inline;
  ctx->sndbuf = (int)own->socket_sndbuf;
  ctx->lane_max = (size_t)own->socket_lane;
  ctx->timeout_ms = s->timeout * 1000;
  memcpy(ctx->congestion, own->socket_congestion, strlen(own->socket_congestion) + 1); /* checked: fits */
  pthread_mutex_init(&ctx->lock, NULL);
  char cc[64] = "";
  if (ctx->congestion[0] == '\0' && rcoll_log_enabled(RCOLL_LOG_INFO, RCOLL_SUB_NET)) /* only for this line */
    socket_read_sysctl("/proc/sys/net/ipv4/tcp_congestion_control", cc, sizeof cc);
  RCOLL_INFO(RCOLL_SUB_NET,
             "socket: rank %d uses %s (%s), %d threads x %d sockets, inline <= %zu bytes, lane <= %zu bytes, "
             "send buffers %d bytes%s, congestion control %s%s",
             ctx->rank, ctx->ifname, socket_addr_str(&ctx->addr, abuf), ctx->nthreads, ctx->nsocks_per,
             ctx->inline_max, ctx->lane_max, ctx->sndbuf, ctx->sndbuf ? "" : " (autotuned)", ctx->congestion[0] ? ctx->congestion : cc,
             ctx->congestion[0] ? " (RCOLL_SOCKET_CONGESTION)" : " (the system's)");
  *out = ctx;
  return rcollSuccess;
}

static rcollResult_t socket_finalize(void *vctx) {
  socket_ctx_t *ctx = vctx;
  if (ctx == NULL)
    return rcollSuccess;
  socket_connects_free(ctx);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
  return rcollSuccess;
}

static rcollResult_t socket_devices(void *ctx, int *ndev) {
  (void)ctx;
  *ndev = 1;
  return rcollSuccess;
}

/* Link speed from sysfs; virtual and loopback links report none (or -1). */
static int socket_link_speed(const char *ifname) {
  char path[128];
  int mbps = -1;
  snprintf(path, sizeof path, "/sys/class/net/%s/speed", ifname);
  FILE *f = fopen(path, "r");
  if (f != NULL) {
    if (fscanf(f, "%d", &mbps) != 1)
      mbps = -1;
    fclose(f);
  }
  return mbps > 0 ? mbps : SOCKET_DEFAULT_SPEED_MBPS;
}

static rcollResult_t socket_get_properties(void *vctx, int dev, rcoll_net_props_t *props) {
  socket_ctx_t *ctx = vctx;
  char path[128];
  if (dev != 0)
    return rcoll_error(rcollInvalidArgument, "socket: device %d does not exist (1 device)", dev);
  memset(props, 0, sizeof *props);
  snprintf(props->name, sizeof props->name, "%s", ctx->ifname);
  snprintf(path, sizeof path, "/sys/class/net/%s/device", ctx->ifname);
  /* realpath into a buffer shorter than PATH_MAX is refused by fortified
   * glibc builds, so let it allocate. */
  char *resolved = realpath(path, NULL);
  snprintf(props->pci_path, sizeof props->pci_path, "%s", resolved ? resolved : "");
  free(resolved);
  /* The address alone: connections listen on ports of their own. */
  const void *ip = ctx->addr.sa.sa_family == AF_INET6 ? (const void *)&ctx->addr.sin6.sin6_addr
                                                      : (const void *)&ctx->addr.sin.sin_addr;
  if (inet_ntop(ctx->addr.sa.sa_family, ip, props->detail, sizeof props->detail) == NULL)
    props->detail[0] = '\0';
  props->ptr_support = RCOLL_PTR_HOST;
  props->speed_mbps = socket_link_speed(ctx->ifname);
  props->latency_us = (float)socket_desc.link.alpha_us;
  props->max_recvs = RCOLL_NET_MAX_RECVS;
  props->reg_is_global = 1;
  return rcollSuccess;
}

static rcollResult_t socket_reg_mr(void *comm, void *data, size_t size, int mem_type, void **mhandle) {
  (void)comm, (void)data, (void)size;
  if (mem_type == RCOLL_MEM_CUDA)
    return rcoll_error(rcollInvalidUsage, "socket transport cannot register device memory; stage through host");
  if (mem_type != RCOLL_MEM_HOST)
    return rcoll_error(rcollInvalidArgument, "socket: reg_mr with unknown memory type %d", mem_type);
  *mhandle = (void *)&socket_mr_token;
  return rcollSuccess;
}

static rcollResult_t socket_dereg_mr(void *comm, void *mhandle) {
  (void)comm, (void)mhandle;
  return rcollSuccess;
}

const rcoll_transport_ops_t socket_ops = {
    .size = sizeof(rcoll_transport_ops_t),
    .version = RCOLL_NET_OPS_VERSION,
    .name = "socket",
    .desc = &socket_desc,
    .init = socket_init,
    .finalize = socket_finalize,
    .devices = socket_devices,
    .get_properties = socket_get_properties,
    .listen = socket_listen,
    .connect = socket_connect,
    .accept = socket_accept,
    .pair = socket_pair,
    .reg_mr = socket_reg_mr,
    .dereg_mr = socket_dereg_mr,
    .isend = socket_isend,
    .irecv = socket_irecv,
    .iflush = socket_iflush,
    .test = socket_test,
    .wait = socket_wait,
    .close_send = socket_close_comm,
    .close_recv = socket_close_comm,
    .close_listen = socket_close_listen,
};
