/* The driver tests/test_nccl_plugin.c runs the plugin through: the logger
 * NCCL would pass to init, and one set of calls over the four ABI versions
 * (v8 sizes are int, v9+ size_t; v11 has a context per init). Static
 * helpers for that one test file, kept apart so that the file holds the
 * scenarios. */
#ifndef RCOLL_TESTS_NCCL_PLUGIN_DRV_H
#define RCOLL_TESTS_NCCL_PLUGIN_DRV_H

#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../plugin/nccl_net_abi.h"
#include "net.h"

/* ---- the logger NCCL would pass: keeps the lines for the checks ---- */

static char log_lines[128][320];
static int log_count;

static void test_logger(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  (void)file, (void)line;
  snprintf(log_lines[log_count % 128], sizeof log_lines[0], "%d %lx %s", level, flags, msg);
  log_count++;
}

/* A line of this level containing needle, among lines since number `from`. */
static int logged_since(int from, int level, const char *needle) {
  for (int i = from; i < log_count && i - from < 128; i++)
    if (atoi(log_lines[i % 128]) == level && strstr(log_lines[i % 128], needle))
      return 1;
  return 0;
}
#define logged(level, needle) logged_since(0, level, needle)

/* ---- one driver over the four versions ---- */

typedef struct drv {
  int version;
  void *lib, *table;
  const char *name;
  nccl_devices_fn devices;
  nccl_accept_fn accept;
  nccl_reg_mr_fn reg_mr;
  nccl_dereg_mr_fn dereg_mr;
  nccl_iflush_fn iflush;
  nccl_test_fn test;
  nccl_close_fn close_send, close_recv, close_listen;
} drv_t;

#define T8(d) ((nccl_net_v8_t *)(d)->table)
#define T9(d) ((nccl_net_v9_t *)(d)->table)
#define T10(d) ((nccl_net_v10_t *)(d)->table)
#define T11(d) ((nccl_net_v11_t *)(d)->table)
#define COPY_COMMON(d, t)                                                                              \
  ((d)->name = (t)->name, (d)->devices = (t)->devices, (d)->accept = (t)->accept,                      \
   (d)->reg_mr = (t)->reg_mr, (d)->dereg_mr = (t)->dereg_mr, (d)->iflush = (t)->iflush,                \
   (d)->test = (t)->test, (d)->close_send = (t)->close_send, (d)->close_recv = (t)->close_recv,        \
   (d)->close_listen = (t)->close_listen)

static void plugin_path(char *buf, size_t len) {
  const char *env = getenv("RCOLL_NCCL_PLUGIN");
  char exe[PATH_MAX] = "";
  if (env && *env) {
    snprintf(buf, len, "%s", env);
    return;
  }
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash)
    *slash = '\0';
  snprintf(buf, len, "%s/../../lib/libnccl-net-rcoll.so", exe);
}

static void *plugin_open(void) {
  char path[PATH_MAX + 64];
  plugin_path(path, sizeof path);
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(lib, "dlopen %s: %s (run make first)", path, dlerror());
  return lib;
}

static void drv_open(drv_t *d, int version) {
  char sym[32];
  memset(d, 0, sizeof *d);
  d->version = version;
  d->lib = plugin_open();
  snprintf(sym, sizeof sym, "ncclNetPlugin_v%d", version);
  d->table = dlsym(d->lib, sym);
  cr_assert_not_null(d->table, "%s not exported", sym);
  switch (version) {
  case 8: COPY_COMMON(d, T8(d)); break;
  case 9: COPY_COMMON(d, T9(d)); break;
  case 10: COPY_COMMON(d, T10(d)); break;
  default: COPY_COMMON(d, T11(d)); break;
  }
}

static nccl_result_t drv_init(drv_t *d, void **ctx) {
  nccl_comm_config_t cfg = {.traffic_class = NCCL_ABI_TRAFFIC_CLASS_UNDEF};
  *ctx = NULL;
  switch (d->version) {
  case 8: return T8(d)->init(test_logger);
  case 9: return T9(d)->init(test_logger);
  case 10: return T10(d)->init(test_logger, NULL);
  default: return T11(d)->init(ctx, 0x1234, &cfg, test_logger, NULL);
  }
}

/* v8-v10 have no finalize: NCCL's compatibility layer does nothing there. */
#define drv_finalize(d, ctx) ((d)->version == 11 ? T11(d)->finalize(ctx) : NCCL_ABI_SUCCESS)

/* Properties in v11's form; v8 lacks the later fields (left 0). */
static nccl_result_t drv_props(drv_t *d, int dev, nccl_props_v11_t *p) {
  memset(p, 0, sizeof *p);
  if (d->version == 8) {
    nccl_props_v8_t p8;
    nccl_result_t r = T8(d)->get_properties(dev, &p8);
    *p = (nccl_props_v11_t){.name = p8.name, .pci_path = p8.pci_path, .ptr_support = p8.ptr_support,
                            .reg_is_global = p8.reg_is_global, .speed = p8.speed, .latency = p8.latency,
                            .max_comms = p8.max_comms, .max_recvs = p8.max_recvs,
                            .net_device_type = p8.net_device_type};
    return r;
  }
  if (d->version == 11)
    return T11(d)->get_properties(dev, p);
  return (d->version == 9 ? T9(d)->get_properties : T10(d)->get_properties)(dev, (nccl_props_v9_t *)p);
}

/* v8-v10 listen alike, and v8-v9 connect alike. */
static nccl_result_t drv_listen(drv_t *d, void *ctx, void *handle, void **l) {
  if (d->version == 11)
    return T11(d)->listen(ctx, 0, handle, l);
  return (d->version == 8 ? T8(d)->listen : d->version == 9 ? T9(d)->listen : T10(d)->listen)(0, handle, l);
}

static nccl_result_t drv_connect(drv_t *d, void *ctx, void *handle, void **s) {
  nccl_comm_config_t cfg = {.traffic_class = NCCL_ABI_TRAFFIC_CLASS_UNDEF};
  nccl_net_device_handle_t *dev_comm = NULL;
  if (d->version >= 10)
    return d->version == 10 ? T10(d)->connect(0, &cfg, handle, s, &dev_comm)
                            : T11(d)->connect(ctx, 0, handle, s, &dev_comm);
  return (d->version == 8 ? T8(d)->connect : T9(d)->connect)(0, handle, s, &dev_comm);
}

static nccl_result_t drv_isend(drv_t *d, void *s, void *data, size_t size, int tag, void *mh, void **req) {
  switch (d->version) {
  case 8: return T8(d)->isend(s, data, (int)size, tag, mh, req);
  case 9: return T9(d)->isend(s, data, size, tag, mh, req);
  case 10: return T10(d)->isend(s, data, size, tag, mh, NULL, req);
  default: return T11(d)->isend(s, data, size, tag, mh, NULL, req);
  }
}

/* NCCL may leave its optional-completion hint in *req; the plugin must
 * overwrite it, so the driver passes it every time. */
static nccl_result_t drv_irecv(drv_t *d, void *r, int n, void **data, size_t *sizes, int *tags, void **mh,
                               void **req) {
  int isz[RCOLL_NET_MAX_RECVS];
  *req = NCCL_ABI_OPTIONAL_RECV_COMPLETION;
  switch (d->version) {
  case 8:
    for (int i = 0; i < n; i++)
      isz[i] = (int)sizes[i];
    return T8(d)->irecv(r, n, data, isz, tags, mh, req);
  case 9: return T9(d)->irecv(r, n, data, sizes, tags, mh, req);
  case 10: return T10(d)->irecv(r, n, data, sizes, tags, mh, NULL, req);
  default: return T11(d)->irecv(r, n, data, sizes, tags, mh, NULL, req);
  }
}

#endif
