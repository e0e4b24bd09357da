/* A write the receiver refuses: its registration released while its receive
 * was posted (a user's bug, through the ops table as NCCL would drive it).
 * Both ends must fail, never hang, and their errors must carry what tells a
 * stale credit from a provider's fault: the sender the buffer, size and key
 * its credit gave, the receiver the receives it had posted. That is how the
 * Soft-RoCE CI run's one 'remote access error' (2026-12-05) could not be
 * explained from its log: these say it the next time.
 *
 * Needs an RDMA device: inside the Soft-RoCE VM (tests/check_rxe.sh step
 * ib-access, RCOLL_TEST_REQUIRE_NET=ib), elsewhere it skips. */
#include <criterion/criterion.h>

#if RCOLL_HAVE_IBVERBS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../transports/ib/ib.h"
#include "../transports/ib/ib_priv.h"
#include "support/ib_pair.h"

#define WAIT_MS 10000
#define BYTES (64 * 1024) /* above the eager and bounce sizes: a registered rendezvous write */

static const rcoll_transport_ops_t *ops = &ib_ops;

/* Tests req until it fails (returns 1, the error in why) or WAIT_MS pass. */
static int fails(void *req, char *why, size_t len) {
  int64_t end = rcoll_now_ms() + WAIT_MS;
  while (rcoll_now_ms() < end) {
    int done = 0;
    size_t size = 0;
    if (ops->test(req, &done, &size) != rcollSuccess) {
      snprintf(why, len, "%s", rcoll_error_text());
      return 1;
    }
    cr_assert_eq(done, 0, "a write into a released registration completed");
  }
  return 0;
}

Test(ib_access, a_write_into_a_released_registration_fails_naming_both_ends) {
  th_pair_t p;
  ib_pair_open(&p, NULL, NULL, 0, 0, WAIT_MS);
  char *dst = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *src = malloc(BYTES);
  cr_assert(dst != MAP_FAILED && src != NULL);
  memset(src, 7, BYTES);
  void *mh = NULL, *rreq = NULL, *sreq = NULL, *buf = dst;
  size_t size = BYTES;
  int tag = 0;
  cr_assert_eq(ops->reg_mr(p.recv, dst, BYTES, RCOLL_MEM_HOST, &mh), rcollSuccess, "%s", rcoll_error_text());
  uint32_t rkey = ((ib_mr_t *)mh)->mr->rkey;
  cr_assert_eq(ops->irecv(p.recv, 1, &buf, &size, &tag, &mh, &rreq), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_not_null(rreq);
  /* The credit with the key is on its way; the key dies before the write. */
  cr_assert_eq(ops->dereg_mr(p.recv, mh), rcollSuccess);
  cr_assert_eq(ops->isend(p.send, src, BYTES, 0, NULL, &sreq), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_not_null(sreq);

  char sent[1024], recvd[1024], want[160];
  cr_assert(fails(sreq, sent, sizeof sent), "the send neither finished nor failed in %d ms", WAIT_MS);
  cr_log_info("sender: %s", sent);
  cr_expect(strstr(sent, "remote access error") != NULL, "%s", sent);
  snprintf(want, sizeof want, "message 0 of %d bytes into the peer's %p+%d, rkey 0x%x", BYTES, (void *)dst, BYTES,
           rkey);
  cr_expect(strstr(sent, want) != NULL, "the sender's error lacks \"%s\": %s", want, sent);

  cr_assert(fails(rreq, recvd, sizeof recvd), "the receive neither finished nor failed in %d ms", WAIT_MS);
  cr_log_info("receiver: %s", recvd);
  snprintf(want, sizeof want, "receives posted: message 0 into %p+%d rkey 0x%x", (void *)dst, BYTES, rkey);
  cr_expect(strstr(recvd, want) != NULL, "the receiver's error lacks \"%s\": %s", want, recvd);

  th_pair_close(&p);
  munmap(dst, BYTES);
  free(src);
}
#else
Test(ib_access, not_built) { cr_skip_test("built without libibverbs (RCOLL_HAVE_IBVERBS)"); }
#endif
