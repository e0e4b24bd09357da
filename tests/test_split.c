/* rcollCommSplit: groups by color, order by key, and a working collective in
 * every new communicator. Ranks are threads of this process. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "rcoll.h"

#define NR 5

static rcollUniqueId id;

typedef struct split_result {
  rcollResult_t init, split, reduce;
  int has_comm, rank, size;
  int sum;
} split_result_t;

static split_result_t res[NR];

/* Even ranks form one group ordered by descending rank; odd ranks another in
 * rank order; rank 4 stays out (NOCOLOR). */
static void *rank_main(void *arg) {
  int rank = (int)(long)arg;
  split_result_t *o = &res[rank];
  rcollComm_t comm = NULL, sub = NULL;
  o->init = rcollCommInitRank(&comm, NR, id, rank);
  if (o->init != rcollSuccess)
    return NULL;
  int color = rank == 4 ? RCOLL_SPLIT_NOCOLOR : rank % 2;
  int key = rank % 2 == 0 ? -rank : rank;
  o->split = rcollCommSplit(comm, color, key, &sub, NULL);
  o->has_comm = sub != NULL;
  if (sub != NULL) {
    rcollCommUserRank(sub, &o->rank);
    rcollCommCount(sub, &o->size);
    int x = rank + 1;
    o->reduce = rcollAllReduce(&x, &o->sum, 1, rcollInt32, rcollSum, sub, NULL);
    rcollCommDestroy(sub);
  }
  rcollCommDestroy(comm);
  return NULL;
}

Test(split, groups_by_color_ordered_by_key, .timeout = 60) {
  setenv("RCOLL_TIMEOUT", "20", 1);
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess);
  pthread_t t[NR];
  for (long i = 0; i < NR; i++)
    pthread_create(&t[i], NULL, rank_main, (void *)i);
  for (int i = 0; i < NR; i++)
    pthread_join(t[i], NULL);
  for (int r = 0; r < NR; r++) {
    cr_assert_eq(res[r].init, rcollSuccess, "rank %d init", r);
    cr_assert_eq(res[r].split, rcollSuccess, "rank %d split", r);
  }
  /* Group even = {0, 2}, key -rank: 2 first. Group odd = {1, 3} in order. */
  cr_expect(!res[4].has_comm, "NOCOLOR gets no communicator");
  int expect_rank[4] = {1, 0, 0, 1};
  for (int r = 0; r < 4; r++) {
    cr_assert(res[r].has_comm, "rank %d has a new communicator", r);
    cr_expect_eq(res[r].size, 2, "rank %d group size", r);
    cr_expect_eq(res[r].rank, expect_rank[r], "rank %d new rank", r);
    cr_expect_eq(res[r].reduce, rcollSuccess, "rank %d all-reduce", r);
    int want = r % 2 == 0 ? (0 + 1) + (2 + 1) : (1 + 1) + (3 + 1);
    cr_expect_eq(res[r].sum, want, "rank %d sum in its group", r);
  }
}

Test(split, rejects_bad_arguments) {
  cr_expect_eq(rcollCommSplit(NULL, 0, 0, NULL, NULL), rcollInvalidArgument);
}
