/* Bandwidth of the NCCL net plugin against the same rcoll transport driven
 * directly through its ops table, in the same run: two processes, a stream
 * of messages (4 MiB by default) with a window of requests in flight, polled
 * the way NCCL's proxy polls (test the oldest; yield the core after a short
 * spin). Buffers are registered on each connection, as NCCL registers its
 * own. Rounds alternate direct and plugin so that drift in the machine's
 * load hits both alike; the medians are compared, and the median of the
 * per-round ratios. After each round the receiver checks that every buffer
 * of its window holds the bytes the sender wrote there, so a path that
 * moves nothing cannot post a number.
 *
 *   tests/bin/bench_nccl_plugin [-s bytes] [-n messages] [-w window] [-r rounds]
 *
 * RCOLL_NET picks the transport (default socket; ib inside the Soft-RoCE VM
 * of tests/check_rxe.sh). The plugin is lib/libnccl-net-rcoll.so next to
 * this binary's ../../lib (or $RCOLL_NCCL_PLUGIN); both paths read the same
 * settings (RCOLL_SOCKET_IFNAME, default lo, and the transport's own). */
#include <dlfcn.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../plugin/nccl_net_abi.h"
#include "error.h"
#include "net.h"

#define SECRET 0x6265ull

typedef struct path {
  const char *name;
  int (*init)(void);
  int (*listen)(void *handle, void **listen);
  int (*connect)(void *handle, void **comm);
  int (*accept)(void *listen, void **comm);
  int (*reg)(void *comm, void *buf, size_t n, void **mh);
  int (*dereg)(void *comm, void *mh);
  int (*isend)(void *comm, void *buf, size_t n, void *mh, void **req);
  int (*irecv)(void *comm, void *buf, size_t n, void *mh, void **req);
  int (*test)(void *req, int *done);
  void (*close)(void *comm, void *listen, int is_send);
} path_t;

/* ---- the rcoll transport named by RCOLL_NET, through its ops table ---- */

static rcoll_settings_t direct_set;
static const rcoll_transport_ops_t *ops;
static void *direct_ctx;
static char direct_name[48];

static int direct_init(void) {
  rcoll_net_config_t cfg = {.settings = &direct_set, .secret = SECRET, .rank = 0};
  if (rcoll_settings_load(&direct_set) != rcollSuccess || (ops = rcoll_net_find(getenv("RCOLL_NET"))) == NULL)
    return -1;
  snprintf(direct_name, sizeof direct_name, "%s_ops", ops->name);
  return ops->init(&cfg, &direct_ctx) == rcollSuccess ? 0 : -1;
}
static int direct_listen(void *h, void **l) { return ops->listen(direct_ctx, 0, h, l) ? -1 : 0; }
static int direct_connect(void *h, void **c) { return ops->connect(direct_ctx, 0, h, c) ? -1 : 0; }
static int direct_accept(void *l, void **c) { return ops->accept(l, c) ? -1 : 0; }
static int direct_reg(void *c, void *b, size_t n, void **mh) {
  return ops->reg_mr(c, b, n, RCOLL_MEM_HOST, mh) ? -1 : 0;
}
static int direct_dereg(void *c, void *mh) { return ops->dereg_mr(c, mh) ? -1 : 0; }
static int direct_isend(void *c, void *b, size_t n, void *mh, void **r) {
  return ops->isend(c, b, n, 0, mh, r) ? -1 : 0;
}
static int direct_irecv(void *c, void *b, size_t n, void *mh, void **r) {
  int tag = 0;
  return ops->irecv(c, 1, &b, &n, &tag, &mh, r) ? -1 : 0;
}
static int direct_test(void *r, int *done) { return ops->test(r, done, NULL) ? -1 : 0; }
static void direct_close(void *c, void *l, int is_send) {
  (is_send ? ops->close_send : ops->close_recv)(c);
  if (l)
    ops->close_listen(l);
}

static const path_t direct_path = {direct_name, direct_init, direct_listen, direct_connect, direct_accept,
                                   direct_reg, direct_dereg, direct_isend, direct_irecv, direct_test,
                                   direct_close};

/* ---- the plugin, through ncclNetPlugin_v11 ---- */

static nccl_net_v11_t *net;
static void *net_ctx;

static void quiet_logger(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  (void)level, (void)flags, (void)file, (void)line, (void)fmt;
}

static int plugin_init(void) {
  char exe[PATH_MAX] = "", path[PATH_MAX + 64];
  const char *env = getenv("RCOLL_NCCL_PLUGIN");
  ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[k > 0 ? k : 0] = '\0';
  if (strrchr(exe, '/'))
    *strrchr(exe, '/') = '\0';
  snprintf(path, sizeof path, "%s/../../lib/libnccl-net-rcoll.so", exe);
  void *lib = dlopen(env && *env ? env : path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL || (net = dlsym(lib, "ncclNetPlugin_v11")) == NULL) {
    fprintf(stderr, "cannot load the plugin: %s\n", dlerror());
    return -1;
  }
  nccl_comm_config_t cfg = {.traffic_class = NCCL_ABI_TRAFFIC_CLASS_UNDEF};
  return net->init(&net_ctx, 1, &cfg, quiet_logger, NULL) ? -1 : 0;
}
static int plugin_listen(void *h, void **l) { return net->listen(net_ctx, 0, h, l) ? -1 : 0; }
static int plugin_connect(void *h, void **c) { return net->connect(net_ctx, 0, h, c, NULL) ? -1 : 0; }
static int plugin_accept(void *l, void **c) { return net->accept(l, c, NULL) ? -1 : 0; }
static int plugin_reg(void *c, void *b, size_t n, void **mh) {
  return net->reg_mr(c, b, n, NCCL_ABI_PTR_HOST, mh) ? -1 : 0;
}
static int plugin_dereg(void *c, void *mh) { return net->dereg_mr(c, mh) ? -1 : 0; }
static int plugin_isend(void *c, void *b, size_t n, void *mh, void **r) {
  return net->isend(c, b, n, 0, mh, NULL, r) ? -1 : 0;
}
static int plugin_irecv(void *c, void *b, size_t n, void *mh, void **r) {
  int tag = 0;
  return net->irecv(c, 1, &b, &n, &tag, &mh, NULL, r) ? -1 : 0;
}
static int plugin_test(void *r, int *done) { return net->test(r, done, NULL) ? -1 : 0; }
static void plugin_close(void *c, void *l, int is_send) {
  (is_send ? net->close_send : net->close_recv)(c);
  if (l)
    net->close_listen(l);
}

static const path_t plugin_path = {"plugin v11", plugin_init, plugin_listen, plugin_connect, plugin_accept,
                                   plugin_reg, plugin_dereg, plugin_isend, plugin_irecv, plugin_test,
                                   plugin_close};

/* ---- the stream ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int wait_req(const path_t *p, void *req) {
  int done = 0;
  double end = now_s() + 60;
  for (unsigned spin = 0; !done; spin++) {
    if (p->test(req, &done) < 0 || now_s() > end)
      return -1;
    if (!done && spin > 64)
      sched_yield();
  }
  return 0;
}

/* The window's buffers and their registrations on one connection. Message
 * m uses buffer m % w on both sides. */
typedef struct win {
  char **bufs;
  void *mhs[64];
  int w;
} win_t;

/* Moves n messages with up to w in flight; returns seconds from the end of
 * the first window (warm-up excluded) to the end, or -1. */
static double stream(const path_t *p, void *comm, int is_send, const win_t *win, size_t size, int n) {
  void *reqs[64];
  double t0 = 0;
  int posted = 0, completed = 0, w = win->w;
  while (completed < n) {
    if (posted < n && posted - completed < w) {
      void *req = NULL, *mh = win->mhs[posted % w];
      char *b = win->bufs[posted % w];
      if ((is_send ? p->isend(comm, b, size, mh, &req) : p->irecv(comm, b, size, mh, &req)) < 0)
        return -1;
      if (req != NULL) {
        reqs[posted++ % w] = req;
        continue;
      }
      if (posted == completed)
        return -1; /* no request slot with nothing in flight */
    }
    if (wait_req(p, reqs[completed % w]) < 0)
      return -1;
    if (++completed == w)
      t0 = now_s();
  }
  return now_s() - t0;
}

static int poll_comm(const path_t *p, void *listen, void *handle, void **comm) {
  double end = now_s() + 30;
  *comm = NULL;
  while (*comm == NULL && now_s() < end) {
    if ((handle ? p->connect(handle, comm) : p->accept(listen, comm)) < 0)
      return -1;
    if (*comm == NULL)
      usleep(500);
  }
  return *comm ? 0 : -1;
}

static int win_reg(const path_t *p, void *comm, win_t *win, size_t size) {
  for (int i = 0; i < win->w; i++)
    if (p->reg(comm, win->bufs[i], size, &win->mhs[i]) < 0)
      return -1;
  return 0;
}

static void win_dereg(const path_t *p, void *comm, win_t *win) {
  for (int i = 0; i < win->w; i++)
    p->dereg(comm, win->mhs[i]);
}

typedef struct opts {
  size_t size;
  int n, w, rounds;
} opts_t;

static char fill(int buf, size_t k) { return (char)(k * 7 + (k >> 12) + (size_t)buf * 61 + 1); }

/* The sender's buffers hold a pattern per buffer; the receiver's are
 * cleared before each round. */
static void win_new(win_t *win, const opts_t *o, int is_send) {
  win->w = o->w;
  win->bufs = calloc((size_t)o->w, sizeof *win->bufs);
  for (int i = 0; i < o->w; i++) {
    win->bufs[i] = malloc(o->size);
    for (size_t k = 0; k < o->size; k++)
      win->bufs[i][k] = is_send ? fill(i, k) : 0;
  }
}

static void win_free(win_t *win) {
  for (int i = 0; i < win->w; i++)
    free(win->bufs[i]);
  free(win->bufs);
  win->bufs = NULL;
}

/* Buffer i received the last message sent from the sender's buffer i. */
static int win_check(const win_t *win, size_t size) {
  for (int i = 0; i < win->w; i++)
    for (size_t k = 0; k < size; k++)
      if (win->bufs[i][k] != fill(i, k)) {
        fprintf(stderr, "receive buffer %d: wrong byte at %zu\n", i, k);
        return -1;
      }
  return 0;
}

/* One connection: the receiver listens and reports GB/s through the pipe
 * (negative when the data came wrong). */
static int receive_round(const path_t *p, const opts_t *o, win_t *win, int hfd, int rfd) {
  char handle[NCCL_ABI_HANDLE_MAXSIZE];
  void *listen = NULL, *comm = NULL;
  if (p->listen(handle, &listen) < 0 || write(hfd, handle, sizeof handle) != (ssize_t)sizeof handle ||
      poll_comm(p, listen, NULL, &comm) < 0 || win_reg(p, comm, win, o->size) < 0)
    return -1;
  for (int i = 0; i < win->w; i++)
    memset(win->bufs[i], 0, o->size);
  double t = stream(p, comm, 0, win, o->size, o->n);
  double gbps = t > 0 && win_check(win, o->size) == 0 ? (double)o->size * (o->n - o->w) / t / 1e9 : -1;
  win_dereg(p, comm, win);
  p->close(comm, listen, 0);
  return write(rfd, &gbps, sizeof gbps) == (ssize_t)sizeof gbps && gbps > 0 ? 0 : -1;
}

static double send_round(const path_t *p, const opts_t *o, win_t *win, int hfd, int rfd) {
  char handle[NCCL_ABI_HANDLE_MAXSIZE];
  void *comm = NULL;
  double gbps = -1;
  if (read(hfd, handle, sizeof handle) != (ssize_t)sizeof handle || poll_comm(p, NULL, handle, &comm) < 0 ||
      win_reg(p, comm, win, o->size) < 0)
    return -1;
  if (stream(p, comm, 1, win, o->size, o->n) < 0)
    return -1;
  if (read(rfd, &gbps, sizeof gbps) != (ssize_t)sizeof gbps)
    gbps = -1;
  win_dereg(p, comm, win);
  p->close(comm, NULL, 1);
  return gbps;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void parse(int argc, char **argv, opts_t *o) {
  *o = (opts_t){.size = 4u << 20, .n = 200, .w = 4, .rounds = 5};
  for (int c; (c = getopt(argc, argv, "s:n:w:r:")) != -1;) {
    if (c == 's')
      o->size = strtoull(optarg, NULL, 0);
    else if (c == 'n')
      o->n = atoi(optarg);
    else if (c == 'w')
      o->w = atoi(optarg);
    else if (c == 'r')
      o->rounds = atoi(optarg);
    else
      exit(2);
  }
  if (o->w < 1 || o->w > 64 || o->n <= o->w || o->rounds < 1 || o->rounds > 32 || o->size == 0) {
    fprintf(stderr, "need 1 <= -w <= 64, -n > -w, 1 <= -r <= 32, -s > 0\n");
    exit(2);
  }
}

int main(int argc, char **argv) {
  opts_t o;
  int hp[2], rp[2];
  const path_t *paths[2] = {&direct_path, &plugin_path};
  double res[2][32];
  parse(argc, argv, &o);
  setenv("RCOLL_SOCKET_IFNAME", getenv("RCOLL_SOCKET_IFNAME") ? getenv("RCOLL_SOCKET_IFNAME") : "lo", 1);
  setenv("RCOLL_NET", getenv("RCOLL_NET") && *getenv("RCOLL_NET") ? getenv("RCOLL_NET") : "socket", 1);
  if (pipe(hp) != 0 || pipe(rp) != 0)
    return 1;
  pid_t pid = fork();
  int is_recv = pid == 0;
  if (direct_init() < 0 || plugin_init() < 0) {
    fprintf(stderr, "init failed: %s\n", rcoll_error_text());
    return 1;
  }
  win_t win;
  win_new(&win, &o, !is_recv);
  for (int r = 0; r < o.rounds; r++)
    for (int k = 0; k < 2; k++) {
      const path_t *p = paths[(r + k) % 2]; /* alternate which goes first */
      if (is_recv) {
        if (receive_round(p, &o, &win, hp[1], rp[1]) < 0)
          _exit(1);
      } else if ((res[p == &plugin_path][r] = send_round(p, &o, &win, hp[0], rp[0])) < 0) {
        fprintf(stderr, "round %d over %s failed: %s\n", r, p->name, rcoll_error_text());
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        win_free(&win);
        return 1;
      }
    }
  win_free(&win);
  if (is_recv)
    _exit(0);
  waitpid(pid, NULL, 0);
  printf("# %s: %zu-byte registered messages, %d per round (first %d not timed), window %d, data checked\n",
         ops->name, o.size, o.n, o.w, o.w);
  printf("%-6s %14s %14s\n", "round", direct_name, "plugin v11");
  for (int r = 0; r < o.rounds; r++)
    printf("%-6d %10.4f GB/s %9.4f GB/s\n", r, res[0][r], res[1][r]);
  /* The two runs of a round are adjacent in time: their ratio cancels most
   * of the drift that other load on the machine brings. */
  double ratio[32];
  for (int r = 0; r < o.rounds; r++)
    ratio[r] = res[1][r] / res[0][r];
  qsort(res[0], (size_t)o.rounds, sizeof(double), cmp_double);
  qsort(res[1], (size_t)o.rounds, sizeof(double), cmp_double);
  qsort(ratio, (size_t)o.rounds, sizeof(double), cmp_double);
  double d = res[0][o.rounds / 2], pl = res[1][o.rounds / 2];
  printf("%-6s %10.4f GB/s %9.4f GB/s   plugin/direct %.1f%% (medians), %.1f%% (median of round ratios)\n",
         "median", d, pl, 100 * pl / d, 100 * ratio[o.rounds / 2]);
  return 0;
}
