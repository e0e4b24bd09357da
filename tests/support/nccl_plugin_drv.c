/* The plugin driver of tests/test_nccl_plugin.c (nccl_plugin_drv.h): the
 * logger, and each call dispatched to the shape of its ABI version. */
#include "nccl_plugin_drv.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net.h"

/* ---- the logger NCCL would pass: keeps the lines for the checks ---- */

char drv_log_lines[128][320];
int drv_log_count;

static void drv_logger(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  (void)file, (void)line;
  snprintf(drv_log_lines[drv_log_count % 128], sizeof drv_log_lines[0], "%d %lx %s", level, flags, msg);
  drv_log_count++;
}

int drv_logged_since(int from, int level, const char *needle) {
  for (int i = from; i < drv_log_count && i - from < 128; i++)
    if (atoi(drv_log_lines[i % 128]) == level && strstr(drv_log_lines[i % 128], needle))
      return 1;
  return 0;
}

/* ---- one driver over the four versions ---- */

/* The slots every version has in the same shape. */
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

void drv_open(drv_t *d, int version) {
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

nccl_result_t drv_init(drv_t *d, void **ctx) {
  nccl_comm_config_t cfg = {.traffic_class = NCCL_ABI_TRAFFIC_CLASS_UNDEF};
  *ctx = NULL;
  switch (d->version) {
  case 8: return T8(d)->init(drv_logger);
  case 9: return T9(d)->init(drv_logger);
  case 10: return T10(d)->init(drv_logger, NULL);
  default: return T11(d)->init(ctx, 0x1234, &cfg, drv_logger, NULL);
  }
}

nccl_result_t drv_props(drv_t *d, int dev, nccl_props_v11_t *p) {
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
nccl_result_t drv_listen(drv_t *d, void *ctx, void *handle, void **l) {
  if (d->version == 11)
    return T11(d)->listen(ctx, 0, handle, l);
  return (d->version == 8 ? T8(d)->listen : d->version == 9 ? T9(d)->listen : T10(d)->listen)(0, handle, l);
}

nccl_result_t drv_connect(drv_t *d, void *ctx, void *handle, void **s) {
  nccl_comm_config_t cfg = {.traffic_class = NCCL_ABI_TRAFFIC_CLASS_UNDEF};
  nccl_net_device_handle_t *dev_comm = NULL;
  if (d->version >= 10)
    return d->version == 10 ? T10(d)->connect(0, &cfg, handle, s, &dev_comm)
                            : T11(d)->connect(ctx, 0, handle, s, &dev_comm);
  return (d->version == 8 ? T8(d)->connect : T9(d)->connect)(0, handle, s, &dev_comm);
}

nccl_result_t drv_isend(drv_t *d, void *s, void *data, size_t size, int tag, void *mh, void **req) {
  switch (d->version) {
  case 8: return T8(d)->isend(s, data, (int)size, tag, mh, req);
  case 9: return T9(d)->isend(s, data, size, tag, mh, req);
  case 10: return T10(d)->isend(s, data, size, tag, mh, NULL, req);
  default: return T11(d)->isend(s, data, size, tag, mh, NULL, req);
  }
}

nccl_result_t drv_irecv(drv_t *d, void *r, int n, void **data, size_t *sizes, int *tags, void **mh,
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
