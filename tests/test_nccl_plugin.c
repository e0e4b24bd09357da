/* lib/libnccl-net-rcoll.so, driven through every exported ABI version the way
 * NCCL's proxy drives a net plugin: init with a logger, devices,
 * getProperties, listen, the handle carried to a second process, connect and
 * accept polled until ready, regMr, tagged isend/irecv with receives posted
 * larger than the sends, test polled until done with sizes checked, data
 * verified byte by byte with guard bytes behind it, iflush, deregMr, closes,
 * finalize. Over socket, ucx and ib when this build has them and they start
 * here (exports are checked by tests/check_nccl_plugin.sh, with NCCL
 * itself). The declarations come from plugin/nccl_net_abi.h, as NCCL's
 * would; the plugin is dlopened from <exe>/../../lib (or $RCOLL_NCCL_PLUGIN).
 *
 * The logger and the per-version dispatch are in tests/support/nccl_plugin_drv.c.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../plugin/nccl_net_abi.h"
#include "net.h"
#include "support/nccl_plugin_drv.h"

#define MIB (1024 * 1024)
#define GUARD 0xA5
#define SLOP 64 /* guard bytes after every receive buffer */

/* Under LeakSanitizer: UCX keeps memory-pool chunks that only pointers in
 * its shared-memory segments refer to, and LSan does not scan those. The
 * plugin keeps the UCX context that answers devices/getProperties for the
 * life of the process, so they would read as leaks at exit. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libuct.so\nleak:libucs.so\n"; }

/* ---- the two processes ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A message of the schedule: what is sent, and how large the receive is. */
typedef struct msg {
  size_t send, post;
  int tag;
} msg_t;

static const msg_t schedule[] = {
    {0, 64, 1},      {1, 1, 2},           {4096, 4096, 3}, {4096 - 7, 65536, 4}, {4 * MIB + 3, 4 * MIB + 3, 5},
    {1, 4096, 6},    {4 * MIB + 3, 8 * MIB, 7}, {65537, 65537, 8}, {0, 0, 9},
};
#define NMSG (int)(sizeof schedule / sizeof schedule[0])
#define NSTREAM 80 /* small messages posted at once: more than the transport's slots */

static unsigned char pattern(int tag, size_t i) { return (unsigned char)(i * 131 + (i >> 11) + tag * 37 + 1); }

typedef struct side {
  drv_t d;
  void *ctx, *comm, *listen;
  nccl_props_v11_t props; /* device 0, as getProperties gave it */
  char err[512];
} side_t;

static int fail(side_t *s, const char *fmt, ...) {
  if (s->err[0] == '\0') {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* Tests a request until done; returns 0, or -1 with the reason recorded. */
static int wait_req(side_t *s, void *req, int *sizes, const char *what) {
  double end = now_s() + 30;
  int done = 0;
  for (unsigned spin = 0; !done; spin++) {
    nccl_result_t r = s->d.test(req, &done, sizes);
    if (r != NCCL_ABI_SUCCESS)
      return fail(s, "%s: test returned %d", what, r);
    if (now_s() > end)
      return fail(s, "%s: not done within 30 s", what);
    if (spin > 100)
      usleep(50);
  }
  return 0;
}

static int side_init(side_t *s, int version) {
  drv_open(&s->d, version);
  if (strcmp(s->d.name, "rcoll") != 0)
    return fail(s, "the v%d table is named %s", version, s->d.name);
  nccl_result_t r = drv_init(&s->d, &s->ctx);
  if (r != NCCL_ABI_SUCCESS)
    return fail(s, "init returned %d", r);
  if (version == 11 && s->ctx == NULL)
    return fail(s, "v11 init gave no context");
  return 0;
}

static int check_props(side_t *s, const char *net, nccl_props_v11_t *p) {
  int ndev = 0;
  if (s->d.devices(&ndev) != NCCL_ABI_SUCCESS || ndev < 1)
    return fail(s, "devices: %d", ndev);
  if (drv_props(&s->d, 0, p) != NCCL_ABI_SUCCESS)
    return fail(s, "getProperties(0) failed");
  if (p->name == NULL || p->name[0] == '\0' || p->speed <= 0 || p->latency <= 0 || p->max_recvs < 1 ||
      p->max_comms < 1)
    return fail(s, "implausible properties: name %s speed %d latency %f maxRecvs %d", p->name, p->speed,
                (double)p->latency, p->max_recvs);
  if (!(p->ptr_support & NCCL_ABI_PTR_HOST) || (p->ptr_support & NCCL_ABI_PTR_DMABUF))
    return fail(s, "ptrSupport %#x: host expected, DMA-BUF never offered", p->ptr_support);
  if (p->net_device_type != NCCL_ABI_NET_DEVICE_HOST)
    return fail(s, "netDeviceType %d, host expected", p->net_device_type);
  if (s->d.version >= 9 && (p->vprops.ndevs != 1 || p->max_p2p_bytes < 4 * MIB || p->max_p2p_bytes > INT_MAX))
    return fail(s, "vProps.ndevs %d, maxP2pBytes %zu", p->vprops.ndevs, p->max_p2p_bytes);
  if (s->d.version == 11 && p->max_multi_request_size != 1)
    return fail(s, "maxMultiRequestSize %d", p->max_multi_request_size);
  nccl_props_v11_t bad;
  if (drv_props(&s->d, ndev, &bad) == NCCL_ABI_SUCCESS)
    return fail(s, "getProperties accepted device %d of %d", ndev, ndev);
  if (!drv_logged(NCCL_ABI_LOG_INFO, "using transport") || !drv_logged(NCCL_ABI_LOG_INFO, net))
    return fail(s, "the logger got no INFO line naming transport %s", net);
  s->props = *p; /* for the report after the exchange */
  return 0;
}

/* Calls connect or accept until it gives a comm; each call must return at
 * once (NCCL's proxy thread polls them between other work). */
static int poll_comm(side_t *s, int is_send, void *handle) {
  double end = now_s() + 20, slowest = 0;
  while (s->comm == NULL) {
    double t0 = now_s();
    nccl_result_t r = is_send ? drv_connect(&s->d, s->ctx, handle, &s->comm)
                              : s->d.accept(s->listen, &s->comm, NULL);
    double took = now_s() - t0;
    slowest = took > slowest ? took : slowest;
    if (r != NCCL_ABI_SUCCESS)
      return fail(s, "%s returned %d", is_send ? "connect" : "accept", r);
    if (now_s() > end)
      return fail(s, "%s: no comm within 20 s", is_send ? "connect" : "accept");
    if (s->comm == NULL)
      usleep(1000);
  }
  return slowest > 0.5 ? fail(s, "a %s call blocked for %.3f s", is_send ? "connect" : "accept", slowest) : 0;
}

/* Posts requests in order; a NULL request (no slot) completes the oldest
 * one first, as NCCL's proxy does. post() returns 0 or -1; done() checks. */
typedef int (*post_fn)(side_t *s, int i, void **req);
typedef int (*done_fn)(side_t *s, int i, const int *sizes);

static int run_window(side_t *s, int n, post_fn post, done_fn done) {
  int nulls = 0;
  void *reqs[NSTREAM + NMSG];
  int posted = 0, completed = 0, sizes[RCOLL_NET_MAX_RECVS];
  while (completed < n) {
    if (posted < n) {
      if (post(s, posted, &reqs[posted]) < 0)
        return -1;
      if (reqs[posted] != NULL) {
        posted++;
        continue;
      }
      nulls++;
      if (posted == completed)
        return fail(s, "no request slot with nothing in flight");
    }
    memset(sizes, 0xff, sizeof sizes);
    if (wait_req(s, reqs[completed], sizes, "request") < 0 || done(s, completed, sizes) < 0)
      return -1;
    completed++;
  }
  /* More than NCCL_NET_MAX_REQUESTS were posted without a test: the plugin
   * (or the transport) must have answered "no slot" at least once. */
  return nulls > 0 ? 0 : fail(s, "%d requests posted, never a NULL request", n);
}

static char **bufs;
static void **mhs;

static const msg_t *msg_at(int i) {
  static msg_t m;
  if (i < NMSG)
    return &schedule[i];
  m = (msg_t){.send = (size_t)((i * 997) % 9000), .post = 9000, .tag = 100 + i};
  return &m;
}

static int send_post(side_t *s, int i, void **req) {
  const msg_t *m = msg_at(i);
  return drv_isend(&s->d, s->comm, bufs[i], m->send, m->tag, mhs[i], req) == NCCL_ABI_SUCCESS
             ? 0
             : fail(s, "isend %d failed", i);
}

static int send_done(side_t *s, int i, const int *sizes) {
  return (size_t)sizes[0] == msg_at(i)->send ? 0 : fail(s, "send %d: test reported %d bytes", i, sizes[0]);
}

static int recv_post(side_t *s, int i, void **req) {
  msg_t m = *msg_at(i);
  return drv_irecv(&s->d, s->comm, 1, (void **)&bufs[i], &m.post, &m.tag, &mhs[i], req) == NCCL_ABI_SUCCESS
             ? 0
             : fail(s, "irecv %d failed", i);
}

static int recv_done(side_t *s, int i, const int *sizes) {
  const msg_t *m = msg_at(i);
  const unsigned char *b = (const unsigned char *)bufs[i];
  if ((size_t)sizes[0] != m->send)
    return fail(s, "receive %d (tag %d): test reported %d bytes, %zu sent", i, m->tag, sizes[0], m->send);
  for (size_t k = 0; k < m->send; k++)
    if (b[k] != pattern(m->tag, k))
      return fail(s, "receive %d (tag %d, %zu bytes): wrong byte at %zu", i, m->tag, m->send, k);
  for (size_t k = m->send; k < m->post + SLOP; k++)
    if (b[k] != GUARD)
      return fail(s, "receive %d: byte %zu past the %zu received was written", i, k, m->send);
  return 0;
}

static int bufs_alloc(side_t *s, int n, int is_send) {
  bufs = calloc((size_t)n, sizeof *bufs);
  mhs = calloc((size_t)n, sizeof *mhs);
  for (int i = 0; i < n; i++) {
    const msg_t *m = msg_at(i);
    size_t len = (is_send ? m->send : m->post) + SLOP;
    bufs[i] = malloc(len);
    if (is_send)
      for (size_t k = 0; k < m->send; k++)
        bufs[i][k] = (char)pattern(m->tag, k);
    else
      memset(bufs[i], GUARD, len);
    if (s->d.reg_mr(s->comm, bufs[i], len, NCCL_ABI_PTR_HOST, &mhs[i]) != NCCL_ABI_SUCCESS)
      return fail(s, "regMr of %zu host bytes failed", len);
  }
  return 0;
}

static int bufs_free(side_t *s, int n) {
  for (int i = 0; i < n; i++) {
    if (s->d.dereg_mr(s->comm, mhs[i]) != NCCL_ABI_SUCCESS)
      return fail(s, "deregMr %d failed", i);
    free(bufs[i]);
  }
  free(bufs);
  free(mhs);
  return 0;
}

/* A flush is a no-op on host memory, but its request must complete. */
static int flush_one(side_t *s) {
  void *req = NULL;
  int size = 16;
  if (s->d.iflush(s->comm, 1, (void **)&bufs[2], &size, &mhs[2], &req) != NCCL_ABI_SUCCESS || req == NULL)
    return fail(s, "iflush gave no request");
  return wait_req(s, req, NULL, "iflush");
}

/* A transport without device memory support must refuse a CUDA registration
 * and say so through the logger. */
static int refuse_cuda(side_t *s, const nccl_props_v11_t *p) {
  char buf[64];
  void *mh = NULL;
  int from = drv_log_count;
  if (p->ptr_support & NCCL_ABI_PTR_CUDA)
    return 0;
  if (s->d.reg_mr(s->comm, buf, sizeof buf, NCCL_ABI_PTR_CUDA, &mh) == NCCL_ABI_SUCCESS)
    return fail(s, "regMr accepted CUDA memory although ptrSupport is %#x", p->ptr_support);
  return drv_logged_since(from, NCCL_ABI_LOG_WARN, "") ? 0 : fail(s, "the refused regMr logged no WARN line");
}

/* Grouped receive (maxRecvs > 1): one irecv of up to 3 tagged buffers; the
 * sends come in reverse tag order and must still land by tag. */
#define MULTI_TAG 500
#define multi_n(max_recvs) ((max_recvs) < 3 ? (max_recvs) : 3)

static int multi_send(side_t *s, int max_recvs) {
  static char b[3][3000];
  for (int k = multi_n(max_recvs) - 1; k >= 0; k--) {
    void *req = NULL;
    for (int i = 0; i < 1000 + k; i++)
      b[k][i] = (char)pattern(MULTI_TAG + k, (size_t)i);
    while (req == NULL)
      if (drv_isend(&s->d, s->comm, b[k], 1000 + (size_t)k, MULTI_TAG + k, NULL, &req) != NCCL_ABI_SUCCESS)
        return fail(s, "grouped isend failed");
    if (wait_req(s, req, NULL, "grouped send") < 0)
      return -1;
  }
  return 0;
}

static int multi_recv(side_t *s, int max_recvs) {
  static char b[3][3000];
  void *data[3] = {b[0], b[1], b[2]}, *req = NULL;
  size_t sizes[3] = {3000, 3000, 3000};
  int tags[3] = {MULTI_TAG, MULTI_TAG + 1, MULTI_TAG + 2}, got[RCOLL_NET_MAX_RECVS], n = multi_n(max_recvs);
  while (req == NULL)
    if (drv_irecv(&s->d, s->comm, n, data, sizes, tags, NULL, &req) != NCCL_ABI_SUCCESS)
      return fail(s, "grouped irecv of %d failed", n);
  if (wait_req(s, req, got, "grouped receive") < 0)
    return -1;
  for (int k = 0; k < n; k++) {
    if (got[k] != 1000 + k)
      return fail(s, "grouped buffer %d (tag %d): %d bytes, %d sent", k, tags[k], got[k], 1000 + k);
    for (int i = 0; i < got[k]; i++)
      if ((unsigned char)b[k][i] != pattern(tags[k], (size_t)i))
        return fail(s, "grouped buffer %d: wrong byte at %d", k, i);
  }
  return 0;
}

/* The receiver: listens, hands its handle over, accepts, receives. */
static int receiver(side_t *s, const char *net, int hpipe) {
  char handle[NCCL_ABI_HANDLE_MAXSIZE];
  nccl_props_v11_t p;
  if (check_props(s, net, &p) < 0)
    return -1;
  memset(handle, 0x5a, sizeof handle);
  if (drv_listen(&s->d, s->ctx, handle, &s->listen) != NCCL_ABI_SUCCESS || s->listen == NULL)
    return fail(s, "listen failed");
  if (write(hpipe, handle, sizeof handle) != (ssize_t)sizeof handle)
    return fail(s, "handle not written");
  if (poll_comm(s, 0, NULL) < 0 || bufs_alloc(s, NMSG + NSTREAM, 0) < 0)
    return -1;
  if (run_window(s, NMSG + NSTREAM, recv_post, recv_done) < 0 || flush_one(s) < 0)
    return -1;
  if (p.max_recvs > 1 && multi_recv(s, p.max_recvs) < 0)
    return -1;
  if (bufs_free(s, NMSG + NSTREAM) < 0)
    return -1;
  if (s->d.close_recv(s->comm) != NCCL_ABI_SUCCESS || s->d.close_listen(s->listen) != NCCL_ABI_SUCCESS)
    return fail(s, "close failed");
  return drv_finalize(&s->d, s->ctx) == NCCL_ABI_SUCCESS ? 0 : fail(s, "finalize failed");
}

static int sender(side_t *s, const char *net, int hpipe) {
  char handle[NCCL_ABI_HANDLE_MAXSIZE];
  nccl_props_v11_t p;
  if (check_props(s, net, &p) < 0)
    return -1;
  if (read(hpipe, handle, sizeof handle) != (ssize_t)sizeof handle)
    return fail(s, "no handle from the receiver");
  if (poll_comm(s, 1, handle) < 0 || refuse_cuda(s, &p) < 0 || bufs_alloc(s, NMSG + NSTREAM, 1) < 0)
    return -1;
  if (run_window(s, NMSG + NSTREAM, send_post, send_done) < 0 || bufs_free(s, NMSG + NSTREAM) < 0)
    return -1;
  if (p.max_recvs > 1 && multi_send(s, p.max_recvs) < 0)
    return -1;
  if (s->d.close_send(s->comm) != NCCL_ABI_SUCCESS)
    return fail(s, "closeSend failed");
  return drv_finalize(&s->d, s->ctx) == NCCL_ABI_SUCCESS ? 0 : fail(s, "finalize failed");
}

/* A transport that cannot run here skips, unless RCOLL_TEST_REQUIRE_NET
 * names it: inside the Soft-RoCE VM a skipped ib case would hide a broken
 * device path behind a passing run. */
static void skip_unless_required(const char *net, const char *why) {
  const char *req = getenv("RCOLL_TEST_REQUIRE_NET");
  if (req && strcmp(req, net) == 0)
    cr_assert_fail("RCOLL_TEST_REQUIRE_NET=%s, but %s", req, why);
  cr_skip_test("%s", why);
}

/* What the run moved and what the device said, shown with --verbose. */
static void report(int version, const char *net, const nccl_props_v11_t *p) {
  size_t largest = 0;
  char sizes[160] = "";
  for (int i = 0; i < NMSG; i++) {
    size_t len = strlen(sizes);
    largest = schedule[i].send > largest ? schedule[i].send : largest;
    snprintf(sizes + len, sizeof sizes - len, "%s%zu", i ? "," : "", schedule[i].send);
  }
  cr_log_info("v%d over %s: device %s speed %d Mbps latency %.1f us ptrSupport %#x maxRecvs %d "
              "regIsGlobal %d maxComms %d", version, net, p->name ? p->name : "?", p->speed,
              (double)p->latency, p->ptr_support, p->max_recvs, p->reg_is_global, p->max_comms);
  cr_log_info("v%d over %s: %d registered host buffers checked byte by byte (sizes %s, then %d of "
              "0..8999 streamed; largest %zu bytes)", version, net, NMSG + NSTREAM, sizes, NSTREAM, largest);
}

/* Forks the receiver, runs the sender here, and reports either side's
 * first failure. A transport other than socket that cannot start here (no
 * UCX device) skips rather than fails. */
static void exchange(int version, const char *net) {
  int hp[2], rp[2], st = 0;
  char child_err[512] = "", why[600];
  if (rcoll_net_find(net) == NULL) {
    snprintf(why, sizeof why, "transport %s is not in this build", net);
    skip_unless_required(net, why);
  }
  setenv("RCOLL_NET", net, 1);
  setenv("RCOLL_DEBUG", "INFO", 1);
  setenv("RCOLL_SOCKET_IFNAME", "lo", 1);
  setenv("RCOLL_TIMEOUT", "20", 1);
  cr_assert(pipe(hp) == 0 && pipe(rp) == 0);
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    side_t c = {0};
    close(hp[0]), close(rp[0]);
    if (side_init(&c, version) == 0)
      receiver(&c, net, hp[1]);
    ssize_t w = write(rp[1], c.err, strlen(c.err));
    _exit(w >= 0 && c.err[0] == '\0' ? 0 : 1);
  }
  close(hp[1]), close(rp[1]);
  side_t s = {0};
  int init_failed = side_init(&s, version) < 0;
  if (!init_failed)
    sender(&s, net, hp[0]);
  if (s.err[0])
    kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  ssize_t n = read(rp[0], child_err, sizeof child_err - 1);
  child_err[n > 0 ? n : 0] = '\0';
  if (init_failed && strcmp(net, "socket") != 0) {
    snprintf(why, sizeof why, "transport %s cannot start here: %s", net,
             drv_log_count ? drv_log_lines[(drv_log_count - 1) % 128] : s.err);
    skip_unless_required(net, why);
  }
  int child_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  cr_assert(s.err[0] == '\0' && child_ok, "v%d over %s: sender: %s; receiver: %s", version, net,
            s.err[0] ? s.err : "ok", child_ok ? "ok" : child_err[0] ? child_err : "died");
  report(version, net, &s.props);
}

Test(socket, v8, .timeout = 120) { exchange(8, "socket"); }
Test(socket, v9, .timeout = 120) { exchange(9, "socket"); }
Test(socket, v10, .timeout = 120) { exchange(10, "socket"); }
Test(socket, v11, .timeout = 120) { exchange(11, "socket"); }
Test(ucx, v8, .timeout = 120) { exchange(8, "ucx"); }
Test(ucx, v9, .timeout = 120) { exchange(9, "ucx"); }
Test(ucx, v10, .timeout = 120) { exchange(10, "ucx"); }
Test(ucx, v11, .timeout = 120) { exchange(11, "ucx"); }
/* ib skips where no RDMA device works (run inside the Soft-RoCE VM). */
Test(ib, v8, .timeout = 120) { exchange(8, "ib"); }
Test(ib, v9, .timeout = 120) { exchange(9, "ib"); }
Test(ib, v10, .timeout = 120) { exchange(10, "ib"); }
Test(ib, v11, .timeout = 120) { exchange(11, "ib"); }

/* ---- argument and environment errors, in one process ---- */

#define use_socket() (setenv("RCOLL_NET", "socket", 1), setenv("RCOLL_SOCKET_IFNAME", "lo", 1))

Test(errors, unknown_transport_named) {
  drv_t d;
  void *ctx;
  setenv("RCOLL_NET", "nosuch", 1);
  drv_open(&d, 11);
  cr_assert_neq(drv_init(&d, &ctx), NCCL_ABI_SUCCESS);
  cr_assert(drv_logged(NCCL_ABI_LOG_WARN, "RCOLL_NET=nosuch"), "no WARN line through the logger");
  cr_assert(drv_logged(NCCL_ABI_LOG_WARN, "socket"), "the WARN line does not list the transports");
}

Test(errors, bad_handle_device_and_comm) {
  drv_t d;
  void *ctx, *comm = NULL, *req = NULL;
  char handle[NCCL_ABI_HANDLE_MAXSIZE] = {0};
  nccl_props_v11_t p;
  use_socket();
  drv_open(&d, 11);
  cr_assert_eq(drv_init(&d, &ctx), NCCL_ABI_SUCCESS);
  cr_assert_neq(drv_connect(&d, ctx, handle, &comm), NCCL_ABI_SUCCESS, "connect took a zeroed handle");
  cr_assert_null(comm);
  cr_assert(drv_logged(NCCL_ABI_LOG_WARN, "connect"), "the failed connect logged no WARN line");
  cr_assert_neq(drv_props(&d, -1, &p), NCCL_ABI_SUCCESS);
  cr_assert_eq(drv_isend(&d, NULL, handle, 1, 0, NULL, &req), NCCL_ABI_INVALID_ARGUMENT);
  cr_assert_eq(T11(&d)->finalize(ctx), NCCL_ABI_SUCCESS);
}

Test(errors, one_context_per_init_and_idempotent_legacy_init) {
  drv_t d11, d8;
  void *a, *b, *la, *lb, *none;
  char ha[NCCL_ABI_HANDLE_MAXSIZE], hb[NCCL_ABI_HANDLE_MAXSIZE];
  use_socket();
  drv_open(&d11, 11);
  cr_assert_eq(drv_init(&d11, &a), NCCL_ABI_SUCCESS);
  cr_assert_eq(drv_init(&d11, &b), NCCL_ABI_SUCCESS);
  cr_assert(a != NULL && b != NULL && a != b, "two communicators share a context");
  cr_assert(drv_listen(&d11, a, ha, &la) == NCCL_ABI_SUCCESS && drv_listen(&d11, b, hb, &lb) == NCCL_ABI_SUCCESS);
  cr_assert(memcmp(ha, hb, sizeof ha) != 0, "two listens gave the same handle");
  cr_assert(d11.close_listen(la) == NCCL_ABI_SUCCESS && d11.close_listen(lb) == NCCL_ABI_SUCCESS);
  cr_assert(T11(&d11)->finalize(a) == NCCL_ABI_SUCCESS && T11(&d11)->finalize(b) == NCCL_ABI_SUCCESS);
  drv_open(&d8, 8);
  cr_assert_eq(drv_init(&d8, &none), NCCL_ABI_SUCCESS);
  cr_assert_eq(drv_init(&d8, &none), NCCL_ABI_SUCCESS, "a second v8 init must be harmless");
  cr_assert_eq(drv_listen(&d8, NULL, ha, &la), NCCL_ABI_SUCCESS);
  cr_assert_eq(d8.close_listen(la), NCCL_ABI_SUCCESS);
}
