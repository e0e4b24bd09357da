/* The driver tests/test_nccl_plugin.c runs the plugin through: the logger
 * NCCL would pass to init, and one set of calls over the four ABI versions
 * (v8 sizes are int, v9+ size_t; v11 has a context per init). Kept apart
 * (nccl_plugin_drv.c) so that the test file holds the scenarios. The plugin
 * is dlopened from <exe>/../../lib, or $RCOLL_NCCL_PLUGIN; drv_open asserts
 * with Criterion. */
#ifndef RCOLL_TESTS_SUPPORT_NCCL_PLUGIN_DRV_H
#define RCOLL_TESTS_SUPPORT_NCCL_PLUGIN_DRV_H

#include <stddef.h>

#include "../../plugin/nccl_net_abi.h"

/* ---- the logger NCCL would pass: keeps the last 128 lines for the checks ---- */

extern char drv_log_lines[128][320];
extern int drv_log_count; /* lines logged so far; line i is drv_log_lines[i % 128] */

/* A line of this level containing needle, among lines since number `from`. */
int drv_logged_since(int from, int level, const char *needle);
#define drv_logged(level, needle) drv_logged_since(0, level, needle)

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

/* The version's own table, for the calls whose shape differs. */
#define T8(d) ((nccl_net_v8_t *)(d)->table)
#define T9(d) ((nccl_net_v9_t *)(d)->table)
#define T10(d) ((nccl_net_v10_t *)(d)->table)
#define T11(d) ((nccl_net_v11_t *)(d)->table)

/* Opens the plugin and takes ncclNetPlugin_v<version>, asserting both. */
void drv_open(drv_t *d, int version);
/* init with the logger; *ctx is v11's context (NULL before). */
nccl_result_t drv_init(drv_t *d, void **ctx);
/* v8-v10 have no finalize: NCCL's compatibility layer does nothing there. */
#define drv_finalize(d, ctx) ((d)->version == 11 ? T11(d)->finalize(ctx) : NCCL_ABI_SUCCESS)
/* Properties in v11's form; v8 lacks the later fields (left 0). */
nccl_result_t drv_props(drv_t *d, int dev, nccl_props_v11_t *p);
nccl_result_t drv_listen(drv_t *d, void *ctx, void *handle, void **l);
nccl_result_t drv_connect(drv_t *d, void *ctx, void *handle, void **s);
nccl_result_t drv_isend(drv_t *d, void *s, void *data, size_t size, int tag, void *mh, void **req);
/* NCCL may leave its optional-completion hint in *req; the plugin must
 * overwrite it, so the driver passes it every time. */
nccl_result_t drv_irecv(drv_t *d, void *r, int n, void **data, size_t *sizes, int *tags, void **mh, void **req);

#endif
