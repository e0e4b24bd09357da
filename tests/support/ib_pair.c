/* The verbs tests' pair set-up and skip rule (ib_pair.h). */
#include "ib_pair.h"

#if RCOLL_HAVE_IBVERBS
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../../transports/ib/ib.h"
#include "../../transports/ib/ib_priv.h"

/* Skips the running test for `why`, or fails it where the device must be
 * there. */
static void ib_skip_unless_required(const char *why) {
  const char *req = getenv("RCOLL_TEST_REQUIRE_NET");
  if (req != NULL && strcmp(req, "ib") == 0)
    cr_assert_fail("RCOLL_TEST_REQUIRE_NET=ib, but %s", why);
  cr_skip_test("%s", why);
}

void ib_pair_open(th_pair_t *p, const char *var, const char *mode, int send_gdr, int recv_gdr, int64_t wait_ms) {
  memset(p, 0, sizeof *p);
  if (var != NULL && mode != NULL)
    setenv(var, mode, 1);
  else if (var != NULL)
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
