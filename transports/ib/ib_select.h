/* Choosing what the verbs transport uses, as pure functions over plain data
 * (no verbs calls), so that tests can feed them fake device lists and GID
 * tables: the RCOLL_IB_HCA filter, address ranges, and GID selection.
 *
 * RCOLL_IB_HCA follows NCCL_IB_HCA: a comma-separated list of `name[:port]`;
 * names match as prefixes unless the list starts with `=` (exact names); a
 * leading `^` turns the list into exclusions (`^=mlx5_1` excludes exactly
 * mlx5_1). An empty list takes every device and port. */
#ifndef RCOLL_TRANSPORT_IB_SELECT_H
#define RCOLL_TRANSPORT_IB_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "rcoll.h"

#define IB_HCA_MAX 32
#define IB_HCA_NAME_MAX 64

typedef struct ib_hca_entry {
  char name[IB_HCA_NAME_MAX];
  int port; /* -1: any port */
} ib_hca_entry_t;

typedef struct ib_hca_spec {
  int exclude; /* leading ^ */
  int exact;   /* leading = */
  int n;
  ib_hca_entry_t e[IB_HCA_MAX];
} ib_hca_spec_t;

/* Parses an RCOLL_IB_HCA value; a malformed one is an error naming it. */
rcollResult_t ib_hca_parse(const char *text, ib_hca_spec_t *out);
/* Whether port `port` of device `dev` is selected by the spec. */
int ib_hca_match(const ib_hca_spec_t *s, const char *dev, int port);

/* ---- GIDs ---- */

enum ib_gid_type { IB_GID_TYPE_IB = 0, IB_GID_TYPE_ROCE_V1, IB_GID_TYPE_ROCE_V2 };

/* One valid entry of a port's GID table. */
typedef struct ib_gid {
  int index;
  int type; /* enum ib_gid_type */
  uint8_t raw[16];
} ib_gid_t;

typedef struct ib_addr_range {
  int family; /* AF_INET or AF_INET6 */
  uint8_t addr[16];
  int prefix; /* bits */
} ib_addr_range_t;

typedef struct ib_gid_prefs {
  int family;     /* AF_INET (default) or AF_INET6: RCOLL_IB_ADDR_FAMILY */
  int have_range; /* RCOLL_IB_ADDR_RANGE was given */
  ib_addr_range_t range;
} ib_gid_prefs_t;

/* "AF_INET", "AF_INET6" (or "" for AF_INET) into *family. */
rcollResult_t ib_addr_family_parse(const char *text, int *family);
/* "10.1.0.0/16" or "fd00::/64" (a bare address is a /32 or /128). */
rcollResult_t ib_addr_range_parse(const char *text, ib_addr_range_t *out);

/* AF_INET for an IPv4-mapped GID (::ffff:a.b.c.d), AF_INET6 otherwise. */
int ib_gid_family(const uint8_t raw[16]);
/* fe80::/10, or IPv4 169.254.0.0/16 when mapped. */
int ib_gid_is_link_local(const uint8_t raw[16]);
int ib_gid_in_range(const uint8_t raw[16], const ib_addr_range_t *r);
/* "::ffff:10.0.2.15" style text. Returns buf. */
const char *ib_gid_str(const uint8_t raw[16], char *buf, size_t len);
const char *ib_gid_type_str(int type);
/* "[0] fe80::1 RoCEv2, [1] ::ffff:10.0.0.1 RoCEv2" into buf. Returns buf. */
const char *ib_gid_table_str(const ib_gid_t *tab, int n, char *buf, size_t len);

/* Automatic choice over the valid entries of a RoCE port: entries outside
 * the range (when one is set) are never taken; among the rest a routable
 * GID beats a link-local one, then RoCE v2 beats v1, then the preferred
 * family wins, then the lower index. Returns the position in `tab` of the
 * chosen entry, or -1 (with the reason in why) when none qualifies. `why`
 * says in words why the entry was chosen. */
int ib_gid_pick(const ib_gid_t *tab, int n, const ib_gid_prefs_t *p, char *why, size_t len);

/* Checks a configured index (RCOLL_IB_GID_INDEX) against the table of a
 * port with `tbl_len` slots. Returns the position in `tab` (>= 0) when it
 * may be used, with *warn set and msg filled when it is a doubtful choice
 * (link-local while a routable GID exists, or RoCE v1); -1 with msg filled
 * when it is out of range or empty. `port_desc` names the port ("rxe0:1"). */
int ib_gid_check(const ib_gid_t *tab, int n, int index, int tbl_len, const char *port_desc,
                 int *warn, char *msg, size_t len);

#endif
