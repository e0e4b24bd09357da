/* GID selection for RoCE ports, over a plain table (see ib_select.h).
 *
 * Why this matters: a RoCE port's GID table holds one entry per IP address
 * of the netdev and per RoCE version. Picking a link-local entry works on one
 * L2 segment and fails as soon as a router sits between hosts; picking a
 * RoCE v1 entry fails whenever the peer picked v2. Both are the most common
 * RoCE misconfigurations, so the automatic choice avoids them and a
 * configured index that makes them is warned about. */
#if RCOLL_HAVE_IBVERBS
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "error.h"
#include "ib_select.h"

static const uint8_t ib_v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

rcollResult_t ib_addr_family_parse(const char *text, int *family) {
  if (text == NULL || *text == '\0' || !strcasecmp(text, "AF_INET") || !strcmp(text, "4"))
    *family = AF_INET;
  else if (!strcasecmp(text, "AF_INET6") || !strcmp(text, "6"))
    *family = AF_INET6;
  else
    return rcoll_error_quiet(rcollInvalidArgument,
                       "RCOLL_IB_ADDR_FAMILY=\"%s\": expected AF_INET or AF_INET6", text);
  return rcollSuccess;
}

rcollResult_t ib_addr_range_parse(const char *text, ib_addr_range_t *out) {
  char addr[INET6_ADDRSTRLEN + 8];
  memset(out, 0, sizeof *out);
  size_t len = strcspn(text, "/");
  if (len == 0 || len >= sizeof addr)
    return rcoll_error_quiet(rcollInvalidArgument, "RCOLL_IB_ADDR_RANGE=\"%s\": expected ADDRESS/BITS",
                       text);
  memcpy(addr, text, len);
  addr[len] = '\0';
  if (inet_pton(AF_INET, addr, out->addr) == 1)
    out->family = AF_INET;
  else if (inet_pton(AF_INET6, addr, out->addr) == 1)
    out->family = AF_INET6;
  else
    return rcoll_error_quiet(rcollInvalidArgument, "RCOLL_IB_ADDR_RANGE=\"%s\": \"%s\" is not an IP address",
                       text, addr);
  int max = out->family == AF_INET ? 32 : 128;
  out->prefix = max;
  if (text[len] == '/') {
    char *end = NULL;
    long bits = strtol(text + len + 1, &end, 10);
    if (end == text + len + 1 || *end != '\0' || bits < 0 || bits > max)
      return rcoll_error_quiet(rcollInvalidArgument,
                         "RCOLL_IB_ADDR_RANGE=\"%s\": prefix length must be 0..%d", text, max);
    out->prefix = (int)bits;
  }
  return rcollSuccess;
}

int ib_gid_family(const uint8_t raw[16]) {
  return memcmp(raw, ib_v4_mapped, sizeof ib_v4_mapped) == 0 ? AF_INET : AF_INET6;
}

int ib_gid_is_link_local(const uint8_t raw[16]) {
  if (ib_gid_family(raw) == AF_INET)
    return raw[12] == 169 && raw[13] == 254;
  return raw[0] == 0xfe && (raw[1] & 0xc0) == 0x80;
}

/* Whether the first `bits` bits of a and b agree. */
static int ib_prefix_equal(const uint8_t *a, const uint8_t *b, int bits) {
  int bytes = bits / 8, rest = bits % 8;
  if (memcmp(a, b, (size_t)bytes) != 0)
    return 0;
  if (rest == 0)
    return 1;
  uint8_t mask = (uint8_t)(0xff << (8 - rest));
  return (a[bytes] & mask) == (b[bytes] & mask);
}

int ib_gid_in_range(const uint8_t raw[16], const ib_addr_range_t *r) {
  if (ib_gid_family(raw) != r->family)
    return 0;
  const uint8_t *addr = r->family == AF_INET ? raw + 12 : raw;
  return ib_prefix_equal(addr, r->addr, r->prefix);
}

const char *ib_gid_str(const uint8_t raw[16], char *buf, size_t len) {
  char tmp[INET6_ADDRSTRLEN];
  if (inet_ntop(AF_INET6, raw, tmp, sizeof tmp) == NULL)
    snprintf(tmp, sizeof tmp, "?");
  snprintf(buf, len, "%s", tmp);
  return buf;
}

const char *ib_gid_type_str(int type) {
  switch (type) {
  case IB_GID_TYPE_ROCE_V1: return "RoCEv1";
  case IB_GID_TYPE_ROCE_V2: return "RoCEv2";
  default: return "IB";
  }
}

const char *ib_gid_table_str(const ib_gid_t *tab, int n, char *buf, size_t len) {
  char g[INET6_ADDRSTRLEN];
  size_t off = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && off < len; i++) {
    int k = snprintf(buf + off, len - off, "%s[%d] %s %s%s", i ? ", " : "", tab[i].index,
                     ib_gid_str(tab[i].raw, g, sizeof g), ib_gid_type_str(tab[i].type),
                     ib_gid_is_link_local(tab[i].raw) ? " link-local" : "");
    if (k < 0)
      break;
    off += (size_t)k;
  }
  if (n == 0)
    snprintf(buf, len, "(no valid entries)");
  return buf;
}

/* Higher is better; -1 for an entry that must not be taken. */
static int ib_gid_score(const ib_gid_t *g, const ib_gid_prefs_t *p) {
  static const uint8_t zero[16];
  if (memcmp(g->raw, zero, sizeof zero) == 0)
    return -1;
  if (p->have_range && !ib_gid_in_range(g->raw, &p->range))
    return -1;
  return (!ib_gid_is_link_local(g->raw)) * 4 + (g->type == IB_GID_TYPE_ROCE_V2) * 2 +
         (ib_gid_family(g->raw) == p->family);
}

static void ib_gid_explain(const ib_gid_t *g, int score, const ib_gid_prefs_t *p, int nskipped,
                           char *why, size_t len) {
  char s[INET6_ADDRSTRLEN];
  snprintf(why, len, "GID index %d (%s, %s): %s; %s; %s%s", g->index, ib_gid_str(g->raw, s, sizeof s),
           ib_gid_type_str(g->type),
           (score & 4) ? "routable" : "link-local, because no routable GID exists",
           (score & 2) ? "RoCE v2" : "RoCE v1, because no RoCE v2 GID qualifies",
           (score & 1) ? (p->family == AF_INET ? "IPv4 as RCOLL_IB_ADDR_FAMILY=AF_INET asks"
                                               : "IPv6 as RCOLL_IB_ADDR_FAMILY=AF_INET6 asks")
                       : "not the preferred address family (none of it qualifies)",
           p->have_range ? ", inside RCOLL_IB_ADDR_RANGE" : "");
  if (nskipped > 0) {
    size_t off = strlen(why);
    snprintf(why + off, len - off, " (%d other entr%s ranked lower or excluded)", nskipped,
             nskipped == 1 ? "y" : "ies");
  }
}

int ib_gid_pick(const ib_gid_t *tab, int n, const ib_gid_prefs_t *p, char *why, size_t len) {
  int best = -1, best_score = -1;
  for (int i = 0; i < n; i++) {
    int s = ib_gid_score(&tab[i], p);
    if (s > best_score) {
      best = i;
      best_score = s;
    }
  }
  if (best < 0) {
    snprintf(why, len, "no valid GID%s", p->have_range ? " inside RCOLL_IB_ADDR_RANGE" : "");
    return -1;
  }
  ib_gid_explain(&tab[best], best_score, p, n - 1, why, len);
  return best;
}

static int ib_gid_find(const ib_gid_t *tab, int n, int index) {
  for (int i = 0; i < n; i++)
    if (tab[i].index == index)
      return i;
  return -1;
}

/* The first routable RoCE v2 entry, the one to suggest instead. */
static int ib_gid_suggest(const ib_gid_t *tab, int n) {
  for (int i = 0; i < n; i++)
    if (tab[i].type == IB_GID_TYPE_ROCE_V2 && !ib_gid_is_link_local(tab[i].raw))
      return i;
  return -1;
}

int ib_gid_check(const ib_gid_t *tab, int n, int index, int tbl_len, const char *port_desc,
                 int *warn, char *msg, size_t len) {
  char g[INET6_ADDRSTRLEN], t[1024], s[INET6_ADDRSTRLEN];
  *warn = 0;
  msg[0] = '\0';
  ib_gid_table_str(tab, n, t, sizeof t);
  if (index < 0 || index >= tbl_len) {
    snprintf(msg, len, "RCOLL_IB_GID_INDEX=%d is out of range: %s has %d GID slots (0..%d); valid entries: %s",
             index, port_desc, tbl_len, tbl_len - 1, t);
    return -1;
  }
  int pos = ib_gid_find(tab, n, index);
  if (pos < 0) {
    snprintf(msg, len, "RCOLL_IB_GID_INDEX=%d: GID slot %d of %s is empty (no address); valid entries: %s",
             index, index, port_desc, t);
    return -1;
  }
  int sug = ib_gid_suggest(tab, n);
  const ib_gid_t *e = &tab[pos];
  if (ib_gid_is_link_local(e->raw) && sug >= 0) {
    *warn = 1;
    snprintf(msg, len, "RCOLL_IB_GID_INDEX=%d selects the link-local GID %s of %s, which routers do not "
             "forward; index %d (%s, %s) is routable: set RCOLL_IB_GID_INDEX=%d or leave it unset",
             index, ib_gid_str(e->raw, g, sizeof g), port_desc, tab[sug].index,
             ib_gid_str(tab[sug].raw, s, sizeof s), ib_gid_type_str(tab[sug].type), tab[sug].index);
  } else if (e->type == IB_GID_TYPE_ROCE_V1) {
    *warn = 1;
    snprintf(msg, len, "RCOLL_IB_GID_INDEX=%d selects a RoCE v1 GID (%s) of %s: v1 does not cross IP "
             "routers and fails against peers using v2%s%s",
             index, ib_gid_str(e->raw, g, sizeof g), port_desc,
             sug >= 0 ? "; the RoCE v2 GID at index " : "",
             sug >= 0 ? (snprintf(s, sizeof s, "%d is the usual choice", tab[sug].index), s) : "");
  }
  return pos;
}
#endif
