/* rcollCommInitRankScalable (lib/init.c, lib/bootstrap.c): ranks as threads
 * of this process meet through several unique ids, each root serving its
 * block of ranks; the communicator they make works (an all-reduce); the
 * blocks are NCCL's; every rank of a block uses that block's id (a block
 * whose root is gone cannot form); bad arguments are refused. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "rcoll.h"

static void setup(void) { setenv("RCOLL_TIMEOUT", "30", 1); }
TestSuite(scalable, .init = setup, .timeout = 180);

#define MAX_RANKS 8

typedef struct job {
  int nranks, nid;
  rcollUniqueId *ids;
  rcollResult_t result[MAX_RANKS];
  double sum[MAX_RANKS];
  char error[MAX_RANKS][256];
} job_t;

/* Set: after the all-reduce, every rank but the last shrinks the
 * communicator without the last one and all-reduces on the result. */
static int shrink_after;

typedef struct rank_arg {
  job_t *job;
  int rank;
} rank_arg_t;

static void *rank_main(void *p) {
  rank_arg_t *a = p;
  job_t *j = a->job;
  rcollComm_t comm;
  rcollResult_t r = rcollCommInitRankScalable(&comm, j->nranks, a->rank, j->nid, j->ids, NULL);
  if (r == rcollSuccess) {
    double v = a->rank + 1;
    r = rcollAllReduce(&v, &j->sum[a->rank], 1, rcollFloat64, rcollSum, comm, NULL);
    int last = j->nranks - 1;
    if (r == rcollSuccess && shrink_after && a->rank != last) {
      /* A communicator made through several ids keeps what rcollCommShrink
       * needs (every rank's listener), as one made through one id does. */
      rcollComm_t small;
      r = rcollCommShrink(comm, &last, 1, &small, NULL, RCOLL_SHRINK_DEFAULT);
      if (r == rcollSuccess) {
        r = rcollAllReduce(&v, &j->sum[a->rank], 1, rcollFloat64, rcollSum, small, NULL);
        rcollCommDestroy(small);
      }
    }
    rcollCommDestroy(comm);
  }
  j->result[a->rank] = r;
  snprintf(j->error[a->rank], sizeof j->error[a->rank], "%s", rcollGetLastError(NULL));
  return NULL;
}

static void run_job(job_t *j) {
  pthread_t t[MAX_RANKS];
  rank_arg_t args[MAX_RANKS];
  for (int r = 0; r < j->nranks; r++) {
    args[r] = (rank_arg_t){j, r};
    cr_assert_eq(pthread_create(&t[r], NULL, rank_main, &args[r]), 0);
  }
  for (int r = 0; r < j->nranks; r++)
    pthread_join(t[r], NULL);
}

Test(scalable, two_ids_over_4_to_8_ranks) {
  for (int n = 4; n <= MAX_RANKS; n++) {
    rcollUniqueId ids[2];
    for (int i = 0; i < 2; i++)
      cr_assert_eq(rcollGetUniqueId(&ids[i]), rcollSuccess);
    job_t j = {.nranks = n, .nid = 2, .ids = ids};
    run_job(&j);
    for (int r = 0; r < n; r++) {
      cr_assert_eq(j.result[r], rcollSuccess, "%d ranks, rank %d: %s", n, r, j.error[r]);
      cr_expect_eq(j.sum[r], n * (n + 1) / 2.0, "%d ranks, rank %d: sum %g", n, r, j.sum[r]);
    }
  }
}

/* One id per rank, and three ids over 7 ranks (blocks of 3, 2, 2). */
Test(scalable, one_id_per_rank_and_uneven_blocks) {
  static const int shapes[][2] = {{5, 5}, {7, 3}, {3, 1}};
  for (int s = 0; s < 3; s++) {
    rcollUniqueId ids[MAX_RANKS];
    for (int i = 0; i < shapes[s][1]; i++)
      cr_assert_eq(rcollGetUniqueId(&ids[i]), rcollSuccess);
    job_t j = {.nranks = shapes[s][0], .nid = shapes[s][1], .ids = ids};
    run_job(&j);
    for (int r = 0; r < j.nranks; r++)
      cr_assert_eq(j.result[r], rcollSuccess, "%d ranks, %d ids, rank %d: %s", j.nranks, j.nid, r, j.error[r]);
  }
}

Test(scalable, blocks_follow_nccl_rule) {
  /* 7 ranks, 3 ids: blocks {0,1,2} {3,4} {5,6}. */
  static const int want[7] = {0, 0, 0, 1, 1, 2, 2};
  for (int r = 0; r < 7; r++)
    cr_expect_eq(rcoll_bootstrap_block_of(r, 7, 3), want[r], "rank %d", r);
  int first, count;
  rcoll_bootstrap_block(7, 3, 1, &first, &count);
  cr_expect(first == 3 && count == 2);
  for (int n = 1; n <= 40; n++)
    for (int nid = 1; nid <= n; nid++)
      for (int k = 0; k < nid; k++) {
        rcoll_bootstrap_block(n, nid, k, &first, &count);
        for (int r = first; r < first + count; r++)
          cr_assert_eq(rcoll_bootstrap_block_of(r, n, nid), k, "n %d nid %d rank %d", n, nid, r);
      }
}

/* The second block meets at ids[1]: when that root is gone (its id is a
 * root that already served a finished job), the second block's ranks fail,
 * naming the root, while nothing hangs. */
Test(scalable, each_block_uses_its_own_id) {
  setenv("RCOLL_TIMEOUT", "3", 1);
  rcollUniqueId ids[2], used;
  cr_assert_eq(rcollGetUniqueId(&ids[0]), rcollSuccess);
  cr_assert_eq(rcollGetUniqueId(&used), rcollSuccess);
  rcollComm_t one;
  cr_assert_eq(rcollCommInitRank(&one, 1, used, 0), rcollSuccess);
  rcollCommDestroy(one);
  ids[1] = used; /* its root answered its one rank and is gone */
  job_t j = {.nranks = 4, .nid = 2, .ids = ids};
  run_job(&j);
  int failed = 0;
  for (int r = 0; r < 4; r++)
    failed += j.result[r] != rcollSuccess;
  cr_expect_gt(failed, 0, "ranks 2 and 3 (and the ring through them) cannot form");
  cr_expect_neq(j.result[2], rcollSuccess, "rank 2 meets at ids[1]: %s", j.error[2]);
  cr_expect(strstr(j.error[2], "root") != NULL, "the error names the root: %s", j.error[2]);
}

Test(scalable, bad_arguments) {
  rcollUniqueId ids[2];
  rcollComm_t comm;
  cr_assert_eq(rcollGetUniqueId(&ids[0]), rcollSuccess);
  ids[1] = ids[0];
  cr_expect_eq(rcollCommInitRankScalable(&comm, 2, 0, 0, ids, NULL), rcollInvalidArgument);
  cr_expect(strstr(rcollGetLastError(NULL), "nId 0") != NULL, "%s", rcollGetLastError(NULL));
  cr_expect_eq(rcollCommInitRankScalable(&comm, 2, 0, 3, ids, NULL), rcollInvalidArgument);
  cr_expect_eq(rcollCommInitRankScalable(&comm, 2, 0, 2, NULL, NULL), rcollInvalidArgument);
  cr_expect(strstr(rcollGetLastError(NULL), "commIds is NULL") != NULL);
  cr_expect_eq(rcollCommInitRankScalable(NULL, 2, 0, 2, ids, NULL), rcollInvalidArgument);
  cr_expect_eq(rcollCommInitRankScalable(&comm, 2, 2, 2, ids, NULL), rcollInvalidArgument);
  rcollUniqueId junk[2];
  memset(junk, 0x42, sizeof junk);
  cr_expect_eq(rcollCommInitRankScalable(&comm, 2, 0, 2, junk, NULL), rcollInvalidArgument);
  cr_expect(strstr(rcollGetLastError(NULL), "unique id 0 of 2") != NULL, "%s", rcollGetLastError(NULL));
}

Test(scalable, shrink_works_on_a_scalable_communicator) {
  rcollUniqueId ids[2];
  for (int i = 0; i < 2; i++)
    cr_assert_eq(rcollGetUniqueId(&ids[i]), rcollSuccess);
  shrink_after = 1;
  job_t j = {.nranks = 5, .nid = 2, .ids = ids};
  run_job(&j);
  for (int r = 0; r < 5; r++)
    cr_assert_eq(j.result[r], rcollSuccess, "rank %d: %s", r, j.error[r]);
  for (int r = 0; r < 4; r++)
    cr_expect_eq(j.sum[r], 1 + 2 + 3 + 4, "rank %d after the shrink: %g", r, j.sum[r]);
  cr_expect_eq(j.sum[4], 15, "the excluded rank kept its first sum");
}
