/* An ib connection pair for the verbs tests that run inside the Soft-RoCE
 * VM (test_ib_flush.c, test_ib_eager.c, test_ib_multi.c). Outside it there
 * is no RDMA device and they skip, unless RCOLL_TEST_REQUIRE_NET=ib says the
 * device must be there (the VM sets it), which turns the skip into a
 * failure. ib_pair.c is empty in a build without verbs (RCOLL_HAVE_IBVERBS). */
#ifndef RCOLL_TESTS_SUPPORT_IB_PAIR_H
#define RCOLL_TESTS_SUPPORT_IB_PAIR_H

#include "transport_harness.h"

/* A connected pair with the environment variable `var` (NULL: none) set to
 * `mode` (NULL: unset) when the settings are read. send_gdr / recv_gdr make that side's
 * context act as if it could register device memory (nvidia-peermem), the
 * receive side's before the accept, since its comm decides when made. */
void ib_pair_open(th_pair_t *p, const char *var, const char *mode, int send_gdr, int recv_gdr, int64_t wait_ms);

#endif
