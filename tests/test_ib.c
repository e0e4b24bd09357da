/* The verbs transport's pure logic: RCOLL_IB_HCA parsing and matching,
 * address ranges, and GID choice over fake GID tables shaped like the ones
 * real ports show (Soft-RoCE, a ConnectX port with v1/v2 pairs, a port with
 * only link-local addresses). The data path needs an RDMA device and is
 * tested for real on Soft-RoCE in a VM (tests/check_rxe.sh). */
#include <criterion/criterion.h>

#if RCOLL_HAVE_IBVERBS
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include "../transports/ib/ib_select.h"

/* ---- RCOLL_IB_HCA ---- */

Test(ib_hca, empty_takes_everything) {
  ib_hca_spec_t s;
  cr_assert_eq(ib_hca_parse("", &s), rcollSuccess);
  cr_assert(ib_hca_match(&s, "mlx5_0", 1));
  cr_assert(ib_hca_match(&s, "rxe0", 2));
}

Test(ib_hca, list_with_ports_and_prefixes) {
  ib_hca_spec_t s;
  cr_assert_eq(ib_hca_parse("mlx5_0:1,mlx5_1", &s), rcollSuccess);
  cr_assert_eq(s.n, 2);
  cr_assert(!s.exclude && !s.exact);
  cr_assert_str_eq(s.e[0].name, "mlx5_0");
  cr_assert_eq(s.e[0].port, 1);
  cr_assert_eq(s.e[1].port, -1);
  cr_assert(ib_hca_match(&s, "mlx5_0", 1));
  cr_assert(!ib_hca_match(&s, "mlx5_0", 2), "port 2 of mlx5_0 was not listed");
  cr_assert(ib_hca_match(&s, "mlx5_1", 2), "mlx5_1 without a port takes every port");
  cr_assert(ib_hca_match(&s, "mlx5_10", 1), "names match as prefixes, as in NCCL");
  cr_assert(!ib_hca_match(&s, "rxe0", 1));
}

Test(ib_hca, exact_names) {
  ib_hca_spec_t s;
  cr_assert_eq(ib_hca_parse("=mlx5_1", &s), rcollSuccess);
  cr_assert(s.exact);
  cr_assert(ib_hca_match(&s, "mlx5_1", 1));
  cr_assert(!ib_hca_match(&s, "mlx5_10", 1));
}

Test(ib_hca, exclusions) {
  ib_hca_spec_t s;
  cr_assert_eq(ib_hca_parse("^mlx5_0", &s), rcollSuccess);
  cr_assert(s.exclude);
  cr_assert(!ib_hca_match(&s, "mlx5_0", 1));
  cr_assert(ib_hca_match(&s, "rxe0", 1));
  cr_assert_eq(ib_hca_parse("^=rxe0:1", &s), rcollSuccess);
  cr_assert(s.exclude && s.exact);
  cr_assert(!ib_hca_match(&s, "rxe0", 1));
  cr_assert(ib_hca_match(&s, "rxe0", 2), "only port 1 is excluded");
  cr_assert(ib_hca_match(&s, "rxe01", 1), "exact: rxe01 is another device");
}

Test(ib_hca, spaces_and_empty_items) {
  ib_hca_spec_t s;
  cr_assert_eq(ib_hca_parse(" mlx5_0 , ,rxe0:2 ", &s), rcollSuccess);
  cr_assert_eq(s.n, 2);
  cr_assert_str_eq(s.e[0].name, "mlx5_0");
  cr_assert_str_eq(s.e[1].name, "rxe0");
  cr_assert_eq(s.e[1].port, 2);
}

Test(ib_hca, malformed_values_are_errors) {
  static const char *bad[] = {"mlx5_0:x", ":1", "mlx5_0:0", "mlx5_0:", "^", "=", "mlx5_0:256"};
  ib_hca_spec_t s;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_expect_eq(ib_hca_parse(bad[i], &s), rcollInvalidArgument, "\"%s\" was accepted", bad[i]);
}

/* ---- address ranges and families ---- */

static void gid_v4(uint8_t raw[16], const char *ip) {
  memset(raw, 0, 16);
  raw[10] = raw[11] = 0xff;
  cr_assert_eq(inet_pton(AF_INET, ip, raw + 12), 1);
}

static void gid_v6(uint8_t raw[16], const char *ip) { cr_assert_eq(inet_pton(AF_INET6, ip, raw), 1); }

Test(ib_addr, ranges) {
  ib_addr_range_t r;
  uint8_t g[16];
  cr_assert_eq(ib_addr_range_parse("10.1.0.0/16", &r), rcollSuccess);
  cr_assert_eq(r.family, AF_INET);
  cr_assert_eq(r.prefix, 16);
  gid_v4(g, "10.1.200.3");
  cr_assert(ib_gid_in_range(g, &r));
  gid_v4(g, "10.2.0.1");
  cr_assert(!ib_gid_in_range(g, &r));
  gid_v6(g, "fd00::1");
  cr_assert(!ib_gid_in_range(g, &r), "an IPv6 GID is never inside an IPv4 range");
  cr_assert_eq(ib_addr_range_parse("fd00:0:0:1::/63", &r), rcollSuccess);
  gid_v6(g, "fd00::1:0:0:0:5");
  cr_assert(ib_gid_in_range(g, &r));
  gid_v6(g, "fd00::2:0:0:0:5");
  cr_assert(!ib_gid_in_range(g, &r), "fd00:0:0:2:: lies outside fd00:0:0:1::/63");
  cr_assert_eq(ib_addr_range_parse("192.168.7.9", &r), rcollSuccess);
  cr_assert_eq(r.prefix, 32);
}

Test(ib_addr, malformed_ranges_and_families) {
  static const char *bad[] = {"10.0.0.0/33", "nonsense/8", "/8", "10.0.0.0/x", "fd00::/129", ""};
  ib_addr_range_t r;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_expect_eq(ib_addr_range_parse(bad[i], &r), rcollInvalidArgument, "\"%s\" was accepted", bad[i]);
  int f = 0;
  cr_assert_eq(ib_addr_family_parse("AF_INET6", &f), rcollSuccess);
  cr_assert_eq(f, AF_INET6);
  cr_assert_eq(ib_addr_family_parse("", &f), rcollSuccess);
  cr_assert_eq(f, AF_INET);
  cr_assert_eq(ib_addr_family_parse("AF_UNIX", &f), rcollInvalidArgument);
}

Test(ib_addr, families_link_local_and_text) {
  uint8_t g[16];
  char s[64];
  gid_v4(g, "10.0.2.15");
  cr_assert_eq(ib_gid_family(g), AF_INET);
  cr_assert(!ib_gid_is_link_local(g));
  cr_assert_str_eq(ib_gid_str(g, s, sizeof s), "::ffff:10.0.2.15");
  gid_v4(g, "169.254.3.4");
  cr_assert(ib_gid_is_link_local(g));
  gid_v6(g, "fe80::5054:ff:fe12:3456");
  cr_assert_eq(ib_gid_family(g), AF_INET6);
  cr_assert(ib_gid_is_link_local(g));
  gid_v6(g, "febf::1");
  cr_assert(ib_gid_is_link_local(g), "fe80::/10 ends at febf");
  gid_v6(g, "fec0::1");
  cr_assert(!ib_gid_is_link_local(g));
}

/* ---- GID choice ---- */

typedef struct fake_gid {
  int index, type;
  const char *addr; /* dotted quad: IPv4-mapped */
} fake_gid_t;

static int fake_table(const fake_gid_t *f, int n, ib_gid_t *tab) {
  for (int i = 0; i < n; i++) {
    tab[i].index = f[i].index;
    tab[i].type = f[i].type;
    if (strchr(f[i].addr, ':'))
      gid_v6(tab[i].raw, f[i].addr);
    else
      gid_v4(tab[i].raw, f[i].addr);
  }
  return n;
}

#define V1 IB_GID_TYPE_ROCE_V1
#define V2 IB_GID_TYPE_ROCE_V2

/* What rxe0 showed in the VM: v2 entries only, link-local first. */
static const fake_gid_t rxe[] = {{0, V2, "fe80::5054:ff:fe12:3456"}, {1, V2, "10.0.2.15"}, {2, V2, "fec0::5054:ff:fe12:3456"}};
/* A ConnectX RoCE port: each address as a v1 and a v2 entry. */
static const fake_gid_t cx[] = {{0, V1, "fe80::ba59:9fff:fe12:1"}, {1, V2, "fe80::ba59:9fff:fe12:1"},
                                {2, V1, "192.168.1.5"},            {3, V2, "192.168.1.5"},
                                {4, V1, "2001:db8::5"},            {5, V2, "2001:db8::5"}};

static int pick(const fake_gid_t *f, int n, int family, const char *range, char *why, size_t len) {
  ib_gid_t tab[16];
  ib_gid_prefs_t p = {.family = family};
  if (range) {
    cr_assert_eq(ib_addr_range_parse(range, &p.range), rcollSuccess);
    p.have_range = 1;
  }
  int pos = ib_gid_pick(tab, fake_table(f, n, tab), &p, why, len);
  return pos < 0 ? -1 : tab[pos].index;
}

Test(ib_gid, soft_roce_table_prefers_routable_ipv4) {
  char why[512];
  cr_assert_eq(pick(rxe, 3, AF_INET, NULL, why, sizeof why), 1, "%s", why);
  cr_assert(strstr(why, "routable") && strstr(why, "RoCE v2") && strstr(why, "IPv4"), "%s", why);
  cr_assert_eq(pick(rxe, 3, AF_INET6, NULL, why, sizeof why), 2, "IPv6 asked: the routable fec0:: entry; %s", why);
}

Test(ib_gid, v2_beats_v1_and_family_decides) {
  char why[512];
  cr_assert_eq(pick(cx, 6, AF_INET, NULL, why, sizeof why), 3, "%s", why);
  cr_assert_eq(pick(cx, 6, AF_INET6, NULL, why, sizeof why), 5, "%s", why);
}

Test(ib_gid, link_local_only_when_nothing_else) {
  static const fake_gid_t ll[] = {{0, V1, "fe80::1"}, {1, V2, "fe80::1"}};
  char why[512];
  cr_assert_eq(pick(ll, 2, AF_INET, NULL, why, sizeof why), 1, "%s", why);
  cr_assert(strstr(why, "link-local, because no routable GID exists"), "%s", why);
  /* A routable v1 entry beats a link-local v2 one: link-local never crosses a router. */
  static const fake_gid_t mix[] = {{0, V2, "fe80::1"}, {1, V1, "10.0.0.1"}};
  cr_assert_eq(pick(mix, 2, AF_INET, NULL, why, sizeof why), 1, "%s", why);
  cr_assert(strstr(why, "RoCE v1, because no RoCE v2 GID qualifies"), "%s", why);
}

Test(ib_gid, range_restricts_the_choice) {
  static const fake_gid_t two[] = {{3, V2, "192.168.1.5"}, {5, V2, "10.1.2.3"}, {6, V2, "fe80::2"}};
  char why[512];
  cr_assert_eq(pick(two, 3, AF_INET, NULL, why, sizeof why), 3, "without a range the lower index wins");
  cr_assert_eq(pick(two, 3, AF_INET, "10.1.0.0/16", why, sizeof why), 5, "%s", why);
  cr_assert(strstr(why, "RCOLL_IB_ADDR_RANGE"), "%s", why);
  cr_assert_eq(pick(two, 3, AF_INET, "172.16.0.0/12", why, sizeof why), -1, "nothing inside the range");
  cr_assert(strstr(why, "RCOLL_IB_ADDR_RANGE"), "%s", why);
}

Test(ib_gid, zero_gids_and_empty_tables) {
  ib_gid_t tab[2] = {{0, V2, {0}}, {1, V2, {0}}};
  ib_gid_prefs_t p = {.family = AF_INET};
  char why[256];
  cr_assert_eq(ib_gid_pick(tab, 2, &p, why, sizeof why), -1, "all-zero GIDs are unused slots");
  cr_assert_eq(ib_gid_pick(tab, 0, &p, why, sizeof why), -1);
  gid_v4(tab[1].raw, "10.0.0.7");
  cr_assert_eq(ib_gid_pick(tab, 2, &p, why, sizeof why), 1);
}

/* ---- a configured RCOLL_IB_GID_INDEX ---- */

static int check(const fake_gid_t *f, int n, int index, int *warn, char *msg, size_t len) {
  ib_gid_t tab[16];
  int pos = ib_gid_check(tab, fake_table(f, n, tab), index, 1024, "rxe0:1", warn, msg, len);
  return pos < 0 ? -1 : tab[pos].index;
}

Test(ib_gid_index, good_index_is_taken_silently) {
  char msg[1024];
  int warn = -1;
  cr_assert_eq(check(rxe, 3, 1, &warn, msg, sizeof msg), 1);
  cr_assert_eq(warn, 0, "%s", msg);
}

Test(ib_gid_index, link_local_index_warns_and_names_the_better_one) {
  char msg[1024];
  int warn = 0;
  cr_assert_eq(check(rxe, 3, 0, &warn, msg, sizeof msg), 0, "a link-local index still works on one L2 segment");
  cr_assert_eq(warn, 1);
  cr_assert(strstr(msg, "link-local") && strstr(msg, "RCOLL_IB_GID_INDEX=1"), "%s", msg);
}

Test(ib_gid_index, roce_v1_index_warns) {
  char msg[1024];
  int warn = 0;
  cr_assert_eq(check(cx, 6, 2, &warn, msg, sizeof msg), 2);
  cr_assert_eq(warn, 1);
  cr_assert(strstr(msg, "RoCE v1") && strstr(msg, "index 3"), "%s", msg);
}

Test(ib_gid_index, empty_and_out_of_range_are_errors_listing_the_table) {
  char msg[1024];
  int warn = 0;
  cr_assert_eq(check(rxe, 3, 7, &warn, msg, sizeof msg), -1);
  cr_assert(strstr(msg, "empty") && strstr(msg, "[1] ::ffff:10.0.2.15 RoCEv2"), "%s", msg);
  cr_assert_eq(check(rxe, 3, 5000, &warn, msg, sizeof msg), -1);
  cr_assert(strstr(msg, "out of range") && strstr(msg, "1024"), "%s", msg);
}

#else
Test(ib, not_built) { cr_skip_test("built without libibverbs (RCOLL_HAVE_IBVERBS)"); }
#endif
