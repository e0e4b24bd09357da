/* An ib connection pair for the verbs tests that run inside the Soft-RoCE
 * VM (test_ib_flush.c, test_ib_eager.c, test_ib_multi.c). Outside it there
 * is no RDMA device and they skip, unless RCOLL_TEST_REQUIRE_NET=ib says the
 * device must be there (the VM sets it), which turns the skip into a
 * failure. Include after ib.h and ib_priv.h, inside RCOLL_HAVE_IBVERBS. */
#ifndef RCOLL_TESTS_IB_PAIR_H
#define RCOLL_TESTS_IB_PAIR_H

#include <stdlib.h>
#include <string.h>

#include "transport_harness.h"

static inline void ib_skip_unless_required(const char *why) {
  const char *req = getenv("RCOLL_TEST_REQUIRE_NET");
  if (req != NULL && strcmp(req, "ib") == 0)
    cr_assert_fail("RCOLL_TEST_REQUIRE_NET=ib, but %s", why);
  cr_skip_test("%s", why);
}

/* A connected pair with the environment variable `var` set to `mode` (NULL:
 * unset) when the settings are read. send_gdr / recv_gdr make that side's
 * context act as if it could register device memory (nvidia-peermem), the
 * receive side's before the accept, since its comm decides when made. */
static inline void ib_pair_open(th_pair_t *p, const char *var, const char *mode, int send_gdr, int recv_gdr,
                                int64_t wait_ms) {
  memset(p, 0, sizeof *p);
  if (mode != NULL)
    setenv(var, mode, 1);
  else
    unsetenv(var);
  cr_assert_eq(rcoll_settings_load(&p->set), rcollSuccess);
  p->set.timeout = 30;
  p->sctx = th_ctx_try(&ib_ops, &p->set, TH_SECRET);
  if (p->sctx == NULL)
    ib_skip_unless_required("no usable RDMA port (ib init failed)");
  if (send_gdr || recv_gdr)
    cr_assert_eq(((ib_ctx_t *)p->sctx)->gdr, IB_GDR_NONE, "this test expects a device without GPUDirect");
  if (send_gdr)
    ((ib_ctx_t *)p->sctx)->gdr = IB_GDR_PEERMEM;
  th_pair_listen(p, &ib_ops);
  if (recv_gdr)
    ((ib_ctx_t *)p->rctx)->gdr = IB_GDR_PEERMEM;
  th_pair_connect(p, wait_ms, 0, "ib");
}

#endif
