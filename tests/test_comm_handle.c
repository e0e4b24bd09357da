/* Communicator handles after their end: a handle passed again after
 * rcollCommDestroy or rcollCommAbort is refused with rcollInvalidUsage and
 * "already destroyed", without reading the freed communicator (the ASan
 * build of this test reports any such read as heap-use-after-free). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "rcoll.h"

static void handle_setup(void) { setenv("RCOLL_TIMEOUT", "5", 1); }

TestSuite(comm_handle, .init = handle_setup, .timeout = 60);

static rcollComm_t one_rank_comm(void) {
  rcollUniqueId id;
  rcollComm_t comm = NULL;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_assert_eq(rcollCommInitRank(&comm, 1, id, 0), rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_assert_not_null(comm);
  return comm;
}

static void expect_destroyed(rcollResult_t got, const char *fn) {
  const char *msg = rcollGetLastError(NULL);
  cr_assert_eq(got, rcollInvalidUsage, "%s on a destroyed comm: got %d (%s), want rcollInvalidUsage; "
               "last error: %s", fn, got, rcollGetErrorString(got), msg);
  cr_assert(strstr(msg, "already destroyed") != NULL && strstr(msg, fn) != NULL,
            "the message \"%s\" should say %s was given a destroyed comm", msg, fn);
}

/* Every kind of call on the stale handle, and the stale handle's last
 * error, which must come from the thread (this refusal), not the comm. */
static void expect_every_call_refused(rcollComm_t stale) {
  float b[4] = {1, 2, 3, 4};
  int x = -7;
  rcollResult_t e = rcollInternalError;
  expect_destroyed(rcollAllReduce(b, b, 4, rcollFloat32, rcollSum, stale, NULL), "rcollAllReduce");
  expect_destroyed(rcollCommCount(stale, &x), "rcollCommCount");
  cr_assert_eq(x, -7, "an output was written on failure");
  expect_destroyed(rcollCommUserRank(stale, &x), "rcollCommUserRank");
  expect_destroyed(rcollCommGetAsyncError(stale, &e), "rcollCommGetAsyncError");
  cr_assert_eq(e, rcollInternalError, "an output was written on failure");
  expect_destroyed(rcollCommFinalize(stale), "rcollCommFinalize");
  expect_destroyed(rcollCommDestroy(stale), "rcollCommDestroy");
  expect_destroyed(rcollCommAbort(stale), "rcollCommAbort");
  const char *last = rcollGetLastError(stale);
  cr_assert(last != NULL && strstr(last, "already destroyed") != NULL,
            "rcollGetLastError(stale) should give this thread's text, got \"%s\"", last ? last : "(null)");
}

Test(comm_handle, destroyed_comm_is_refused_by_every_call) {
  rcollComm_t comm = one_rank_comm();
  cr_assert_eq(rcollCommDestroy(comm), rcollSuccess, "%s", rcollGetLastError(NULL));
  expect_every_call_refused(comm);
}

Test(comm_handle, aborted_comm_is_refused_by_every_call) {
  rcollComm_t comm = one_rank_comm();
  cr_assert_eq(rcollCommAbort(comm), rcollSuccess, "%s", rcollGetLastError(NULL));
  expect_every_call_refused(comm);
}

/* Many communicators made and destroyed: the stale ones stay refused, and
 * a live one (which may reuse a stale one's memory) works. */
Test(comm_handle, live_comms_work_among_stale_ones) {
  rcollComm_t stale[8];
  for (int i = 0; i < 8; i++) {
    stale[i] = one_rank_comm();
    cr_assert_eq(rcollCommDestroy(stale[i]), rcollSuccess);
  }
  rcollComm_t live = one_rank_comm();
  int n = 0;
  cr_assert_eq(rcollCommCount(live, &n), rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_assert_eq(n, 1);
  float x = 3.0f, y = 0.0f;
  cr_assert_eq(rcollAllReduce(&x, &y, 1, rcollFloat32, rcollSum, live, NULL), rcollSuccess);
  cr_assert_eq(y, 3.0f);
  for (int i = 0; i < 8; i++)
    if (stale[i] != live)
      expect_destroyed(rcollCommCount(stale[i], &n), "rcollCommCount");
  cr_assert_eq(rcollCommDestroy(live), rcollSuccess);
}
