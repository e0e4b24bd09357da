/* rcollCommSplit: the ranks laid out as a grid of two columns, with one
 * communicator per row and one per column, as a trainer mixing tensor
 * parallelism (within a row) and data parallelism (down a column) would.
 * Ranks are threads of one process.
 *
 *   make && examples/bin/comm_split [nranks]      (even, default 4)
 *
 *        column 0  column 1
 *   row 0  rank 0    rank 1
 *   row 1  rank 2    rank 3
 *   ...
 *
 * rcollCommSplit is collective over the parent: every rank calls it with
 * its color (which new communicator it joins) and key (its place there;
 * ties go by parent rank). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "rcoll.h"

#define COLUMNS 2

static rcollUniqueId id;
static int nranks = 4;

/* Joins the communicator of `color`, all-reduces this rank's number there,
 * and checks the sum and this rank's place against what the grid says. */
static int reduce_in(rcollComm_t world, int rank, int color, int want_rank, int want_size,
                     int want_sum, const char *what) {
  rcollComm_t sub;
  rcollResult_t r = rcollCommSplit(world, color, rank, &sub, NULL);
  if (r != rcollSuccess) {
    fprintf(stderr, "rank %d: split by %s: %s (%s)\n", rank, what, rcollGetErrorString(r),
            rcollGetLastError(world));
    return 1;
  }
  int sub_rank = -1, sub_size = -1, sum = -1;
  rcollCommUserRank(sub, &sub_rank);
  rcollCommCount(sub, &sub_size);
  int mine = rank; /* each rank contributes its world rank */
  r = rcollAllReduce(&mine, &sum, 1, rcollInt32, rcollSum, sub, NULL);
  int bad = r != rcollSuccess || sub_rank != want_rank || sub_size != want_size || sum != want_sum;
  if (bad)
    fprintf(stderr, "rank %d: %s %d: rank %d of %d, sum %d (%s); expected rank %d of %d, sum %d\n",
            rank, what, color, sub_rank, sub_size, sum, rcollGetErrorString(r), want_rank,
            want_size, want_sum);
  rcollCommDestroy(sub);
  return bad;
}

static void *rank_main(void *arg) {
  int rank = (int)(long)arg;
  int rows = nranks / COLUMNS, row = rank / COLUMNS, col = rank % COLUMNS;
  rcollComm_t world;
  if (rcollCommInitRank(&world, nranks, id, rank) != rcollSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", rank, rcollGetLastError(NULL));
    return (void *)1;
  }
  /* What each all-reduce must give: the sum of the world ranks in our row,
   * and in our column. */
  int row_sum = 0, col_sum = 0;
  for (int r = 0; r < nranks; r++) {
    row_sum += r / COLUMNS == row ? r : 0;
    col_sum += r % COLUMNS == col ? r : 0;
  }
  int bad = reduce_in(world, rank, row, col, COLUMNS, row_sum, "row");
  bad |= reduce_in(world, rank, col, row, rows, col_sum, "column");
  if (!bad && rank == 0)
    printf("%d ranks as %d rows x %d columns: every row and column communicator summed its "
           "ranks correctly\n", nranks, rows, COLUMNS);
  rcollCommDestroy(world);
  return (void *)(long)bad;
}

int main(int argc, char **argv) {
  if (argc > 1)
    nranks = atoi(argv[1]);
  if (nranks < 2 || nranks > 64 || nranks % COLUMNS != 0) {
    fprintf(stderr, "usage: %s [nranks: even, 2..64]\n", argv[0]);
    return 2;
  }
  if (rcollGetUniqueId(&id) != rcollSuccess) {
    fprintf(stderr, "rcollGetUniqueId: %s\n", rcollGetLastError(NULL));
    return 1;
  }
  pthread_t t[64];
  for (long i = 0; i < nranks; i++)
    pthread_create(&t[i], NULL, rank_main, (void *)i);
  int failed = 0;
  for (int i = 0; i < nranks; i++) {
    void *ret;
    pthread_join(t[i], &ret);
    failed |= ret != NULL;
  }
  return failed;
}
