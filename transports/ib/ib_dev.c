/* Device and port discovery, GID choice, and asynchronous events.
 *
 * Discovery walks every device and port that RCOLL_IB_HCA admits and takes
 * the first ACTIVE one; each port passed over is named in the error when
 * none is usable, so "why is ib not used" has an answer in the log. */
#if RCOLL_HAVE_IBVERBS
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "error.h"
#include "ib_priv.h"
#include "log.h"

/* Per-lane Mb/s by ibv_port_attr.active_speed bit (SDR .. NDR). */
static int ib_lane_mbps(uint8_t speed) {
  static const int mbps[8] = {2500, 5000, 10000, 10312, 14062, 25781, 53125, 106250};
  for (int b = 0; b < 8; b++)
    if (speed == (1u << b))
      return mbps[b];
  return 10000;
}

static int ib_lanes(uint8_t width) {
  switch (width) {
  case 1: return 1;
  case 2: return 4;
  case 4: return 8;
  case 8: return 12;
  case 16: return 2;
  default: return 1;
  }
}

/* Appends "; <text>" to the list of ports passed over. */
__attribute__((format(printf, 3, 4))) static void ib_note(char *notes, size_t len, const char *fmt, ...) {
  va_list ap;
  size_t off = strlen(notes);
  if (off + 3 >= len)
    return;
  if (off > 0)
    off += (size_t)snprintf(notes + off, len - off, "; ");
  va_start(ap, fmt);
  vsnprintf(notes + off, len - off, fmt, ap);
  va_end(ap);
}

static int ib_gid_type_of(unsigned t) {
  return t == IBV_GID_TYPE_ROCE_V2 ? IB_GID_TYPE_ROCE_V2
         : t == IBV_GID_TYPE_ROCE_V1 ? IB_GID_TYPE_ROCE_V1 : IB_GID_TYPE_IB;
}

/* The valid GID entries of one port: ibv_query_gid_table in one call, or
 * entry by entry over the first slots where that call is missing. */
static int ib_gid_read(struct ibv_context *v, int port, int tbl_len, ib_gid_t *tab, int max) {
  int cap = tbl_len * 4 > 64 ? tbl_len * 4 : 64, n = 0;
  struct ibv_gid_entry *e = calloc((size_t)cap, sizeof *e);
  ssize_t got = e ? ibv_query_gid_table(v, e, (size_t)cap, 0) : -1;
  if (got >= 0) {
    for (ssize_t i = 0; i < got && n < max; i++) {
      if ((int)e[i].port_num != port)
        continue;
      tab[n] = (ib_gid_t){(int)e[i].gid_index, ib_gid_type_of(e[i].gid_type), {0}};
      memcpy(tab[n++].raw, e[i].gid.raw, 16);
    }
    free(e);
    return n;
  }
  free(e);
  struct ibv_gid_entry one;
  for (int i = 0; i < tbl_len && i < IB_GID_SCAN_MAX && n < max; i++)
    if (ibv_query_gid_ex(v, (uint32_t)port, (uint32_t)i, &one, 0) == 0) {
      tab[n] = (ib_gid_t){i, ib_gid_type_of(one.gid_type), {0}};
      memcpy(tab[n++].raw, one.gid.raw, 16);
    }
  return n;
}

static rcollResult_t ib_gid_prefs(const ib_settings_t *s, ib_gid_prefs_t *p) {
  memset(p, 0, sizeof *p);
  RCOLL_CHECK(ib_addr_family_parse(s->ib_addr_family, &p->family));
  if (s->ib_addr_range[0] != '\0') {
    RCOLL_CHECK(ib_addr_range_parse(s->ib_addr_range, &p->range));
    p->have_range = 1;
  }
  return rcollSuccess;
}

/* The position in tab of the entry to use, or -1 with the error set:
 * the configured index once checked (warning about doubtful ones), else
 * the automatic choice. `why` gets the reason, for the log. */
static int ib_gid_decide(const ib_ctx_t *ctx, const ib_gid_t *tab, int n, int want, const ib_gid_prefs_t *prefs,
                         char *why, size_t len) {
  char t[1024];
  int warn = 0, pos;
  if (want < 0) {
    pos = ib_gid_pick(tab, n, prefs, why, len);
    if (pos < 0)
      rcoll_error_quiet(rcollSystemError, "ib: %s has %s; GID table: %s", ctx->port.desc, why,
                        ib_gid_table_str(tab, n, t, sizeof t));
    return pos;
  }
  pos = ib_gid_check(tab, n, want, ctx->port.gid_tbl_len, ctx->port.desc, &warn, why, len);
  if (pos < 0) {
    rcoll_error_quiet(rcollInvalidArgument, "ib: %s", why);
    return -1;
  }
  if (warn)
    RCOLL_WARN("ib: %s", why);
  snprintf(why, len, "GID index %d as RCOLL_IB_GID_INDEX says%s", want, warn ? " (see the warning)" : "");
  return pos;
}

/* RoCE: reads the port's GID table and settles on one entry. */
static rcollResult_t ib_gid_choose(ib_ctx_t *ctx, const ib_settings_t *s) {
  enum { MAXG = 1024 };
  char why[1024], t[1024];
  ib_gid_prefs_t prefs;
  RCOLL_CHECK(ib_gid_prefs(s, &prefs));
  ib_gid_t *tab = calloc(MAXG, sizeof *tab);
  if (tab == NULL)
    return rcoll_error_quiet(rcollSystemError, "ib: out of memory reading a GID table");
  int n = ib_gid_read(ctx->verbs, ctx->port.port, ctx->port.gid_tbl_len, tab, MAXG);
  RCOLL_INFO(RCOLL_SUB_NET | RCOLL_SUB_INIT, "ib: %s GID table (%d slots): %s", ctx->port.desc,
             ctx->port.gid_tbl_len, ib_gid_table_str(tab, n, t, sizeof t));
  int pos = ib_gid_decide(ctx, tab, n, (int)s->ib_gid_index, &prefs, why, sizeof why);
  if (pos >= 0) {
    ctx->port.gid_index = tab[pos].index;
    memcpy(ctx->port.gid.raw, tab[pos].raw, 16);
    RCOLL_INFO(RCOLL_SUB_NET | RCOLL_SUB_INIT, "ib: rank %d uses %s %s", ctx->rank, ctx->port.desc, why);
  }
  free(tab);
  return pos >= 0 ? rcollSuccess : (rcollResult_t)(s->ib_gid_index >= 0 ? rcollInvalidArgument : rcollSystemError);
}

/* Fills ctx->port from an ACTIVE port. */
static void ib_port_fill(ib_ctx_t *ctx, const char *name, int port, const struct ibv_port_attr *pa) {
  char path[IB_HCA_NAME_MAX + 48];
  ib_port_t *p = &ctx->port;
  snprintf(p->dev, sizeof p->dev, "%s", name);
  snprintf(p->desc, sizeof p->desc, "%s:%d", name, port);
  p->port = port;
  p->link_layer = pa->link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET
                                                            : IBV_LINK_LAYER_INFINIBAND;
  p->mtu = pa->active_mtu;
  p->lid = pa->lid;
  p->gid_index = -1;
  p->gid_tbl_len = pa->gid_tbl_len;
  p->max_msg_sz = pa->max_msg_sz;
  p->speed_mbps = ib_lane_mbps(pa->active_speed) * ib_lanes(pa->active_width);
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/device", name);
  char *resolved = realpath(path, NULL); /* fortified glibc refuses short buffers */
  snprintf(p->pci_path, sizeof p->pci_path, "%s", resolved ? resolved : "");
  free(resolved);
}

/* Looks at every admitted port of one opened device. Returns 1 when this
 * device holds the port to use (ctx->port filled), 0 otherwise. */
static int ib_dev_scan(ib_ctx_t *ctx, const ib_hca_spec_t *spec, struct ibv_context *v, const char *name,
                       char *notes, size_t nlen) {
  struct ibv_device_attr da;
  int mine = 0;
  if (ibv_query_device(v, &da) != 0) {
    ib_note(notes, nlen, "%s: ibv_query_device failed: %s", name, strerror(errno));
    return 0;
  }
  for (int port = 1; port <= da.phys_port_cnt; port++) {
    struct ibv_port_attr pa;
    if (!ib_hca_match(spec, name, port))
      continue;
    if (ibv_query_port(v, (uint8_t)port, &pa) != 0) {
      ib_note(notes, nlen, "%s:%d: ibv_query_port failed: %s", name, port, strerror(errno));
      continue;
    }
    if (pa.state != IBV_PORT_ACTIVE) {
      ib_note(notes, nlen, "%s:%d is %s, not ACTIVE", name, port, ibv_port_state_str(pa.state));
      continue;
    }
    if (pa.link_layer != IBV_LINK_LAYER_ETHERNET && pa.lid == 0) {
      ib_note(notes, nlen, "%s:%d has no LID (is a subnet manager running?)", name, port);
      continue;
    }
    ctx->nports++;
    if (!mine && ctx->verbs == NULL) {
      ib_port_fill(ctx, name, port, &pa);
      mine = 1;
    }
  }
  return mine;
}

static rcollResult_t ib_no_port(const ib_settings_t *s, int ndev, const char *notes) {
  if (ndev == 0)
    return rcoll_error_quiet(rcollSystemError,
                             "ib: no RDMA devices found (no driver loaded, or no `rdma link add` for Soft-RoCE)");
  return rcoll_error_quiet(rcollSystemError, "ib: no usable RDMA port%s%s%s: %s",
                           s->ib_hca[0] ? " (RCOLL_IB_HCA=" : "", s->ib_hca, s->ib_hca[0] ? ")" : "",
                           notes[0] ? notes : "no device matches");
}

/* Opens the first usable port's device and chooses its GID. */
rcollResult_t ib_dev_open(ib_ctx_t *ctx, const ib_settings_t *s) {
  ib_hca_spec_t spec;
  char notes[1024] = "";
  RCOLL_CHECK(ib_hca_parse(s->ib_hca, &spec));
  int ndev = 0;
  struct ibv_device **list = ibv_get_device_list(&ndev);
  if (list == NULL)
    ndev = 0;
  for (int i = 0; i < ndev; i++) {
    const char *name = ibv_get_device_name(list[i]);
    struct ibv_context *v = ibv_open_device(list[i]);
    if (v == NULL) {
      ib_note(notes, sizeof notes, "%s could not be opened: %s", name, strerror(errno));
      continue;
    }
    if (ib_dev_scan(ctx, &spec, v, name, notes, sizeof notes))
      ctx->verbs = v;
    else
      ibv_close_device(v);
  }
  if (list != NULL)
    ibv_free_device_list(list);
  if (ctx->verbs == NULL)
    return ib_no_port(s, ndev, notes);
  if (notes[0])
    RCOLL_INFO(RCOLL_SUB_NET | RCOLL_SUB_INIT, "ib: passed over: %s", notes);
  if (ctx->port.link_layer == IBV_LINK_LAYER_ETHERNET)
    RCOLL_CHECK(ib_gid_choose(ctx, s));
  else
    RCOLL_INFO(RCOLL_SUB_NET | RCOLL_SUB_INIT, "ib: rank %d uses %s (InfiniBand, LID %u)", ctx->rank,
               ctx->port.desc, ctx->port.lid);
  int fl = fcntl(ctx->verbs->async_fd, F_GETFL);
  if (fl < 0 || fcntl(ctx->verbs->async_fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return rcoll_error_quiet(rcollSystemError, "ib: cannot make the async event fd non-blocking: %s",
                       strerror(errno));
  return rcollSuccess;
}

/* ---- asynchronous events ---- */

static void ib_dev_fatal(ib_ctx_t *ctx, const struct ibv_async_event *ev) {
  if (atomic_load(&ctx->fatal))
    return;
  snprintf(ctx->fatal_msg, sizeof ctx->fatal_msg, "ib: %s on %s: every connection over it failed",
           ibv_event_type_str(ev->event_type), ctx->port.desc);
  atomic_store(&ctx->fatal, 1);
  RCOLL_WARN("%s", ctx->fatal_msg);
}

static void ib_async_one(ib_ctx_t *ctx, const struct ibv_async_event *ev) {
  switch (ev->event_type) {
  case IBV_EVENT_QP_FATAL:
  case IBV_EVENT_QP_REQ_ERR:
  case IBV_EVENT_QP_ACCESS_ERR:
  case IBV_EVENT_PATH_MIG_ERR: {
    ib_comm_t *c = ev->element.qp->qp_context;
    char posted[200];
    ib_recvs_str(c, posted, sizeof posted);
    ib_comm_fail(c, rcollRemoteError, "ib: async event '%s' on a queue pair (QPN 0x%x) of the connection %s %s%s",
                 ibv_event_type_str(ev->event_type), ev->element.qp->qp_num, c->is_send ? "to" : "from",
                 c->peer, posted);
    break;
  }
  case IBV_EVENT_CQ_ERR: {
    ib_comm_t *c = ev->element.cq->cq_context;
    ib_comm_fail(c, rcollInternalError, "ib: completion queue overrun on the connection %s %s",
                 c->is_send ? "to" : "from", c->peer);
    break;
  }
  case IBV_EVENT_PORT_ERR:
    if (ev->element.port_num == ctx->port.port)
      ib_dev_fatal(ctx, ev);
    break;
  case IBV_EVENT_DEVICE_FATAL:
    ib_dev_fatal(ctx, ev);
    break;
  default:
    RCOLL_INFO(RCOLL_SUB_NET, "ib: async event '%s' on %s", ibv_event_type_str(ev->event_type),
               ctx->port.desc);
    break;
  }
}

/* Reads every pending async event (non-blocking). */
void ib_dev_async(ib_ctx_t *ctx) {
  struct ibv_async_event ev;
  pthread_mutex_lock(&ctx->lock);
  while (ibv_get_async_event(ctx->verbs, &ev) == 0) {
    ib_async_one(ctx, &ev);
    ibv_ack_async_event(&ev);
  }
  ctx->async_next_us = rcoll_now_us() + 100000;
  pthread_mutex_unlock(&ctx->lock);
}
#endif
