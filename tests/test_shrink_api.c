/* rcollCommShrink and rcollCommRevoke with every rank alive, ranks as
 * threads of this process: a shrink that leaves the parent working, lists
 * in different orders, survivors that disagree on the list, a revoke that
 * stops a call in flight, and bad arguments. The dead-rank case, with
 * processes, is tests/test_shrink.c. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rcoll.h"

static void api_setup(void) { setenv("RCOLL_TIMEOUT", "20", 1); }

TestSuite(shrink_api, .init = api_setup, .timeout = 120);

#define MAXR 4

typedef struct job {
  rcollUniqueId id;
  int rank, nranks;
  rcollComm_t comm, sub;
  void (*body)(struct job *);
  rcollResult_t r1, r2, r3;
  int v1, v2, v3;
  char error[400];
} job_t;

static void *job_main(void *arg) {
  job_t *j = arg;
  if (rcollCommInitRank(&j->comm, j->nranks, j->id, j->rank) != rcollSuccess) {
    snprintf(j->error, sizeof j->error, "init: %s", rcollGetLastError(NULL));
    return NULL;
  }
  j->body(j);
  return NULL;
}

static void run_ranks(job_t *jobs, int n, void (*body)(job_t *)) {
  rcollUniqueId id;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess, "%s", rcollGetLastError(NULL));
  pthread_t th[MAXR];
  for (int r = 0; r < n; r++) {
    jobs[r] = (job_t){.id = id, .rank = r, .nranks = n, .body = body};
    cr_assert_eq(pthread_create(&th[r], NULL, job_main, &jobs[r]), 0);
  }
  for (int r = 0; r < n; r++)
    pthread_join(th[r], NULL);
  for (int r = 0; r < n; r++)
    cr_assert_not_null(jobs[r].comm, "rank %d: %s", r, jobs[r].error);
}

/* Ranks 1 and 3 are excluded; 0 and 2 list them in different orders. The
 * excluded ones call too, and get no communicator. Then all four use the
 * parent, which RCOLL_SHRINK_DEFAULT leaves working. */
static void exclude_live(job_t *j) {
  int a[2] = {3, 1}, b[2] = {1, 3};
  j->r1 = rcollCommShrink(j->comm, j->rank == 0 ? a : b, 2, &j->sub, NULL, RCOLL_SHRINK_DEFAULT);
  if (j->r1 != rcollSuccess)
    snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(NULL));
  if (j->sub != NULL) {
    rcollCommUserRank(j->sub, &j->v1);
    int x = j->rank + 1;
    j->r2 = rcollAllReduce(&x, &j->v2, 1, rcollInt32, rcollSum, j->sub, NULL);
    rcollCommDestroy(j->sub);
  }
  int x = j->rank + 1;
  j->r3 = rcollAllReduce(&x, &j->v3, 1, rcollInt32, rcollSum, j->comm, NULL);
  rcollCommDestroy(j->comm);
}

Test(shrink_api, exclude_live_ranks_and_keep_the_parent) {
  job_t jobs[4];
  run_ranks(jobs, 4, exclude_live);
  for (int r = 0; r < 4; r++) {
    cr_assert_eq(jobs[r].r1, rcollSuccess, "rank %d: %s", r, jobs[r].error);
    cr_expect_eq(jobs[r].sub != NULL, r % 2 == 0, "rank %d: a new comm only for the survivors", r);
    cr_expect_eq(jobs[r].r3, rcollSuccess, "rank %d: the parent after the shrink", r);
    cr_expect_eq(jobs[r].v3, 1 + 2 + 3 + 4, "rank %d: parent sum", r);
  }
  for (int r = 0; r < 4; r += 2) {
    cr_expect_eq(jobs[r].v1, r / 2, "rank %d: new rank", r);
    cr_expect_eq(jobs[r].r2, rcollSuccess, "rank %d: all-reduce on the new comm", r);
    cr_expect_eq(jobs[r].v2, 1 + 3, "rank %d: the new comm's sum has ranks 0 and 2 only", r);
  }
}

/* Ranks 0 and 1 exclude rank 3; rank 2 excludes 1 and 3. Nobody may hang:
 * the ranks that meet the other list say so, and no one waits out the
 * timeout. Rank 3 is excluded and does not call. */
static void disagree(job_t *j) {
  int a[1] = {3}, b[2] = {1, 3};
  if (j->rank != 3) {
    j->r1 = rcollCommShrink(j->comm, j->rank == 2 ? b : a, j->rank == 2 ? 2 : 1, &j->sub, NULL,
                            RCOLL_SHRINK_DEFAULT);
    snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(NULL));
  }
  if (j->sub != NULL)
    rcollCommDestroy(j->sub);
}

Test(shrink_api, survivors_with_different_lists_fail_clearly) {
  job_t jobs[4];
  run_ranks(jobs, 4, disagree);
  for (int r = 0; r < 3; r++) {
    cr_expect_neq(jobs[r].r1, rcollSuccess, "rank %d: a shrink with disagreeing lists succeeded", r);
    cr_expect_neq(jobs[r].r1, rcollTimeout, "rank %d waited out the timeout: %s", r, jobs[r].error);
    cr_expect_null(jobs[r].sub, "rank %d got a communicator", r);
  }
  cr_expect(strstr(jobs[0].error, "different exclude list") != NULL, "rank 0: %s", jobs[0].error);
  cr_expect(strstr(jobs[2].error, "different exclude list") != NULL, "rank 2: %s", jobs[2].error);
  for (int r = 0; r < 4; r++)
    cr_expect_eq(rcollCommDestroy(jobs[r].comm), rcollSuccess);
}

/* Rank 0 starts an all-reduce that rank 1 never joins; another thread of
 * rank 0 revokes the comm, which must end the call with "revoked" (not the
 * 20 s timeout). Then both ranks revoke and shrink with no one excluded,
 * which gives a working 2-rank communicator. */
static job_t *revoke_job;

static void *revoker(void *arg) {
  (void)arg;
  struct timespec ts = {0, 300 * 1000 * 1000};
  nanosleep(&ts, NULL);
  revoke_job->r2 = rcollCommRevoke(revoke_job->comm, RCOLL_REVOKE_DEFAULT);
  return NULL;
}

static void revoke_body(job_t *j) {
  float x[16] = {0};
  if (j->rank == 0) {
    pthread_t th;
    revoke_job = j;
    pthread_create(&th, NULL, revoker, NULL);
    j->r1 = rcollAllReduce(x, x, 16, rcollFloat32, rcollSum, j->comm, NULL);
    snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(NULL));
    pthread_join(th, NULL);
  } else {
    j->r2 = rcollCommRevoke(j->comm, RCOLL_REVOKE_DEFAULT);
  }
  j->v1 = rcollAllReduce(x, x, 16, rcollFloat32, rcollSum, j->comm, NULL) == rcollInvalidUsage &&
          strstr(rcollGetLastError(NULL), "revoked") != NULL;
  j->v2 = rcollCommFinalize(j->comm) == rcollInvalidUsage;
  j->r3 = rcollCommShrink(j->comm, NULL, 0, &j->sub, NULL, RCOLL_SHRINK_DEFAULT);
  if (j->sub != NULL) {
    int one = 1;
    if (rcollAllReduce(&one, &j->v3, 1, rcollInt32, rcollSum, j->sub, NULL) != rcollSuccess)
      j->v3 = -1;
    rcollCommDestroy(j->sub);
  }
  rcollCommDestroy(j->comm);
}

Test(shrink_api, revoke_stops_a_call_and_shrink_follows) {
  job_t jobs[2];
  run_ranks(jobs, 2, revoke_body);
  cr_expect_eq(jobs[0].r1, rcollInvalidUsage, "the call in flight: %s", jobs[0].error);
  cr_expect(strstr(jobs[0].error, "revoked") != NULL, "the call in flight: %s", jobs[0].error);
  for (int r = 0; r < 2; r++) {
    cr_expect_eq(jobs[r].r2, rcollSuccess, "rank %d: rcollCommRevoke", r);
    cr_expect(jobs[r].v1, "rank %d: a call after revoke was not refused as revoked", r);
    cr_expect(jobs[r].v2, "rank %d: rcollCommFinalize after revoke was not refused", r);
    cr_expect_eq(jobs[r].r3, rcollSuccess, "rank %d: shrink after revoke", r);
    cr_expect_eq(jobs[r].v3, 2, "rank %d: sum on the shrunk comm", r);
  }
}

static void expect_refused(rcollResult_t got, rcollResult_t want, const char *needle) {
  const char *msg = rcollGetLastError(NULL);
  cr_expect_eq(got, want, "got %d, want %d: %s", got, want, msg);
  cr_expect(strstr(msg, needle) != NULL, "\"%s\" does not name \"%s\"", msg, needle);
}

Test(shrink_api, bad_arguments_are_refused_by_name) {
  rcollUniqueId id;
  rcollComm_t comm = NULL, nc = (rcollComm_t)&id;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess);
  cr_assert_eq(rcollCommInitRank(&comm, 1, id, 0), rcollSuccess, "%s", rcollGetLastError(NULL));
  int out_of_range[1] = {1}, negative[1] = {-1}, self[1] = {0}, twice[2] = {0, 0};
  expect_refused(rcollCommShrink(NULL, self, 1, &nc, NULL, 0), rcollInvalidArgument, "comm");
  expect_refused(rcollCommShrink(comm, self, 1, NULL, NULL, 0), rcollInvalidArgument, "newcomm");
  expect_refused(rcollCommShrink(comm, out_of_range, 1, &nc, NULL, 0), rcollInvalidArgument,
                 "excludeRanksList[0] = 1");
  cr_expect_null(nc, "newcomm is set to NULL on failure");
  expect_refused(rcollCommShrink(comm, negative, 1, &nc, NULL, 0), rcollInvalidArgument,
                 "excludeRanksList[0] = -1");
  expect_refused(rcollCommShrink(comm, twice, 2, &nc, NULL, 0), rcollInvalidArgument, "twice");
  expect_refused(rcollCommShrink(comm, self, 1, &nc, NULL, 0), rcollInvalidArgument, "every rank");
  expect_refused(rcollCommShrink(comm, NULL, 1, &nc, NULL, 0), rcollInvalidArgument, "excludeRanksList is NULL");
  expect_refused(rcollCommShrink(comm, self, -1, &nc, NULL, 0), rcollInvalidArgument, "excludeRanksCount");
  expect_refused(rcollCommShrink(comm, NULL, 0, &nc, NULL, 4), rcollInvalidArgument, "shrinkFlags");
  rcollConfig_t bad = RCOLL_CONFIG_INITIALIZER;
  bad.magic = 0;
  expect_refused(rcollCommShrink(comm, NULL, 0, &nc, &bad, 0), rcollInvalidArgument, "config");
  expect_refused(rcollCommRevoke(comm, 1), rcollInvalidArgument, "revokeFlags");
  expect_refused(rcollCommRevoke(NULL, 0), rcollInvalidArgument, "comm");
  /* None of that harmed the comm: a one-rank shrink with nothing excluded works. */
  cr_expect_eq(rcollCommShrink(comm, NULL, 0, &nc, NULL, RCOLL_SHRINK_DEFAULT), rcollSuccess, "%s",
               rcollGetLastError(NULL));
  int n = 0;
  cr_expect_eq(rcollCommCount(nc, &n), rcollSuccess);
  cr_expect_eq(n, 1);
  cr_expect_eq(rcollCommDestroy(nc), rcollSuccess);
  cr_expect_eq(rcollCommDestroy(comm), rcollSuccess);
}

/* Rank 2 is alive but never calls rcollCommShrink, and nobody excluded it:
 * ranks 0 and 1 give up after RCOLL_TIMEOUT (3 s here) with an error that
 * names rank 2. Rank 0 waits for rank 2 to join (rcollTimeout); rank 1 has
 * joined rank 2's listener and waits for its answer, and either its own
 * timeout comes first (rcollTimeout) or rank 0's, which rank 1 then sees
 * give up (rcollRemoteError, still naming rank 2): under ASan both happen. */
static void one_stays_away(job_t *j) {
  if (j->rank != 2) {
    j->r1 = rcollCommShrink(j->comm, NULL, 0, &j->sub, NULL, RCOLL_SHRINK_DEFAULT);
    snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(NULL));
  }
}

Test(shrink_api, a_survivor_that_never_comes_is_named) {
  setenv("RCOLL_TIMEOUT", "3", 1);
  job_t jobs[3];
  run_ranks(jobs, 3, one_stays_away);
  cr_expect_eq(jobs[0].r1, rcollTimeout, "rank 0: %s", jobs[0].error);
  cr_expect(jobs[1].r1 == rcollTimeout || jobs[1].r1 == rcollRemoteError, "rank 1: %s", jobs[1].error);
  for (int r = 0; r < 2; r++) {
    cr_expect(strstr(jobs[r].error, "rank 2 (") != NULL, "rank %d: \"%s\" does not name rank 2", r,
              jobs[r].error);
    cr_expect_null(jobs[r].sub);
  }
  for (int r = 0; r < 3; r++)
    cr_expect_eq(rcollCommDestroy(jobs[r].comm), rcollSuccess);
}
