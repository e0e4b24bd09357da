/* The transport tables (lib/net.c): ops tables are checked before use, the
 * core's choices and the tuner's figures come from each transport's
 * description, and every transport's settings are read and listed. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "error.h"
#include "net.h"
#include "tuner.h"

#include "../transports/ib/ib.h"
#include "../transports/shm/shm.h"
#include "../transports/socket/socket.h"

/* The test's copy of the socket table, changed one field at a time. */
static rcoll_transport_ops_t wrapped;

static void wrap_socket(void) {
  wrapped = socket_ops;
  wrapped.name = "wrapped";
}

static void refused(const char *what) {
  int before = rcoll_net_count();
  cr_assert_eq(rcoll_net_add_for_tests(&wrapped), rcollInvalidArgument, "%s was accepted", what);
  cr_assert(strstr(rcoll_error_text(), what) != NULL, "error for %s: %s", what, rcoll_error_text());
  cr_assert_eq(rcoll_net_count(), before, "a refused table (%s) was added", what);
  cr_assert_null(rcoll_net_find("wrapped"));
}

Test(net, ops_of_another_size_or_version_are_refused) {
  wrap_socket();
  wrapped.size = sizeof wrapped - sizeof(void *);
  refused("size");
  wrap_socket();
  wrapped.version = RCOLL_NET_OPS_VERSION - 1;
  refused("version");
  cr_assert(strstr(rcoll_error_text(), "wrapped") != NULL, "%s", rcoll_error_text());
}

Test(net, ops_with_a_null_slot_or_no_description_are_refused) {
  wrap_socket();
  wrapped.test = NULL;
  refused("slot test");
  wrap_socket();
  wrapped.desc = NULL;
  refused("description");
  wrap_socket();
  wrapped.name = NULL;
  refused("no name");
  /* irecv_reduce and isend_single are the optional slots. */
  wrap_socket();
  wrapped.irecv_reduce = NULL;
  wrapped.isend_single = NULL;
  cr_assert_eq(rcoll_net_add_for_tests(&wrapped), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_eq(rcoll_net_add_for_tests(NULL), rcollSuccess);
}

/* ...and is described, under its own name, in the table of descriptions. */
Test(net, every_builtin_table_passes_the_check) {
  for (int t = 0; t < rcoll_net_count(); t++) {
    const rcoll_transport_ops_t *ops = rcoll_net_at(t);
    cr_assert_eq(rcoll_net_check_ops(ops), rcollSuccess, "%s", rcoll_error_text());
    cr_assert_str_eq(ops->desc->name, ops->name);
    cr_assert_eq(rcoll_net_desc_find(ops->name), ops->desc, "%s", ops->name);
  }
}

/* Shared memory, then RDMA, then TCP; UCX only by name (as before the
 * priorities moved into the transports' descriptions). */
Test(net, priorities_come_from_the_descriptions) {
  cr_assert_eq(shm_desc.auto_priority, 0);
  cr_assert_eq(ib_desc.auto_priority, 1);
  cr_assert_eq(socket_desc.auto_priority, 2);
  cr_assert_eq(rcoll_net_desc_find("ucx")->auto_priority, RCOLL_NET_BY_NAME_ONLY);
  for (int t = 0; t < rcoll_net_count(); t++) {
    const rcoll_transport_ops_t *ops = rcoll_net_at(t);
    cr_assert_eq(rcoll_net_auto_priority(ops), ops->desc->auto_priority, "%s", ops->name);
  }
  int sock = rcoll_net_index("socket"), shm = rcoll_net_index("shm");
  uint32_t both = 1u << sock | 1u << shm;
  cr_assert_eq(rcoll_net_best(both, 1), shm);
  cr_assert_eq(rcoll_net_best(both, 0), sock, "shared memory chosen across nodes");
  cr_assert_eq(rcoll_net_best(1u << shm, 0), -1);
}

/* A test's extra transport is found by name but never opened on its own
 * (priority "by name only"), even when it copies the description of an
 * automatic one. */
Test(net, the_tests_extra_transport_is_only_used_by_name) {
  wrap_socket();
  cr_assert_eq(rcoll_net_add_for_tests(&wrapped), rcollSuccess, "%s", rcoll_error_text());
  int w = rcoll_net_index("wrapped");
  cr_assert_geq(w, 0);
  cr_assert_eq(rcoll_net_find("wrapped"), &wrapped);
  cr_assert_eq(rcoll_net_auto_priority(&wrapped), RCOLL_NET_BY_NAME_ONLY);
  /* Opened by name, it is the only one open, and then it serves. */
  cr_assert_eq(rcoll_net_best(1u << w, 0), w);
  cr_assert_eq(rcoll_net_add_for_tests(NULL), rcollSuccess);
  cr_assert_lt(rcoll_net_index("wrapped"), 0);
}

static void assert_link(const char *net, double alpha, double gbps, double msg, size_t cap, double each) {
  rcoll_tune_link_t l = rcoll_tune_default_link(net);
  cr_assert_float_eq(l.alpha_us, alpha, 1e-12, "%s", net);
  cr_assert_float_eq(l.gbps, gbps, 1e-12, "%s", net);
  cr_assert_float_eq(l.msg_us, msg, 1e-12, "%s", net);
  cr_assert_eq(l.chunk_cap, cap, "%s", net);
  cr_assert_float_eq(l.each_us, each, 1e-12, "%s", net);
}

/* Every transport's figures are found by name, whether built here or not,
 * and TCP's serve a name nobody describes. */
Test(net, tuner_figures_by_name) {
  assert_link("shm", 0.5, 10.0, 2.0, 512 << 10, 0);
  assert_link("ib", 3.0, 12.5, 5.0, 0, 0);
  assert_link("UCX", 5.0, 1.25, 20.0, 0, 0);
  assert_link("socket", 5.0, 1.25, 60.0, 0, 5.0);
  assert_link("carrier-pigeon", 5.0, 1.25, 60.0, 0, 5.0);
  assert_link(NULL, 5.0, 1.25, 60.0, 0, 5.0);
  cr_assert(socket_desc.bootstrap_latency);
  cr_assert(!shm_desc.bootstrap_latency && !ib_desc.bootstrap_latency);
  cr_assert(!rcoll_net_desc_find("ucx")->bootstrap_latency);
}

Test(net, every_transports_settings_are_read) {
  rcoll_settings_t s;
  setenv("NCCL_SOCKET_NTHREADS", "5", 1);
  setenv("RCOLL_SHM_SLOTS", "1K", 1);
  setenv("RCOLL_IB_HCA", "mlx5_0:1", 1);
  cr_assert_eq(rcoll_settings_load(&s), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_eq(socket_settings(&s)->socket_nthreads, 5);
  cr_assert_eq(socket_settings(&s)->socket_inline, 65536);
  cr_assert_eq(shm_settings(&s)->shm_slots, 1024);
  cr_assert_eq(shm_settings(&s)->shm_memcpy_threshold, 16384);
  cr_assert_str_eq(ib_settings(&s)->ib_hca, "mlx5_0:1");
  cr_assert_eq(ib_settings(&s)->ib_timeout, 20);
  cr_assert_str_eq(ib_settings(&s)->ib_addr_family, "AF_INET");
  cr_assert_eq(ib_settings(&s)->ib_gid_index, -1);
}

/* Whether or not ib is built or chosen, its malformed setting fails the
 * load, naming it. */
Test(net, a_malformed_transport_setting_is_an_error_naming_it) {
  rcoll_settings_t s;
  setenv("RCOLL_NET", "socket", 1);
  setenv("RCOLL_IB_SL", "high", 1);
  cr_assert_eq(rcoll_settings_load(&s), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "RCOLL_IB_SL") != NULL, "%s", rcoll_error_text());
  unsetenv("RCOLL_IB_SL");
  setenv("NCCL_NSOCKS_PERTHREAD", "2x", 1);
  cr_assert_eq(rcoll_settings_load(&s), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "NCCL_NSOCKS_PERTHREAD") != NULL, "%s", rcoll_error_text());
}

/* The listing holds the core's settings and then every transport's, each
 * name once, each transport's under its name. */
Test(net, every_setting_is_listed_once_with_its_owner) {
  int n = rcoll_settings_count(), owned = 0;
  for (int t = 0; t < rcoll_net_desc_count(); t++)
    owned += rcoll_net_desc_at(t)->nsettings;
  cr_assert_gt(owned, 0);
  for (int i = 0; i < n; i++) {
    rcoll_setting_info_t a;
    rcoll_settings_describe(i, &a);
    cr_assert_not_null(a.name, "setting %d of %d", i, n);
    cr_assert_not_null(a.help, "%s", a.name);
    for (int j = i + 1; j < n; j++) {
      rcoll_setting_info_t b;
      rcoll_settings_describe(j, &b);
      cr_assert_str_neq(a.name, b.name, "RCOLL_%s is declared twice", a.name);
    }
    owned -= a.owner != NULL;
  }
  cr_assert_eq(owned, 0, "the listing and the descriptions disagree");
  rcoll_setting_info_t info;
  for (int i = 0; i < n; i++) {
    rcoll_settings_describe(i, &info);
    if (strcmp(info.name, "IB_SL") == 0)
      break;
  }
  cr_assert_str_eq(info.name, "IB_SL");
  cr_assert_str_eq(info.owner, "ib");
  cr_assert_str_eq(info.nccl, "NCCL_IB_SL");
  cr_assert_str_eq(info.def, "0");
  rcoll_settings_describe(n, &info);
  cr_assert_null(info.name);
}
