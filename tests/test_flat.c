/* The flat board (lib/flat.h): small all-reduces between ranks of one
 * machine over shared memory. Ranks are threads over the shm transport.
 * Every case checks every element exactly against a rank-order reference,
 * that every rank got the same bits, and that the calls really ran on the
 * board (the flight recorder's algorithm); and the ways a board call can go
 * wrong: a rank in a group meeting one outside it, board calls between
 * engine calls that let a rank run ahead (its slot is reused only once
 * read), a peer that leaves, and RCOLL_FLAT_MAX=0; and that each rank
 * counts its board calls and how they waited. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "flat.h"
#include "flight_recorder.h"
#include "rcoll.h"

#define MAXR 8
#define MAXC 64 /* elements: up to 512 B of float64, within the default RCOLL_FLAT_MAX */

typedef struct job {
  rcollUniqueId id;
  int rank, nranks, scenario;
  int bad, not_flat;
  rcollResult_t fail;
  double fail_s;
  char error[512];
  double out[MAXC]; /* the last result, widened, to compare across ranks */
  size_t board_max;
  rcoll_flat_stats_t stats; /* at the end, before destroy */
} job_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void failed(job_t *j, rcollResult_t r) {
  if (j->fail == rcollSuccess) {
    j->fail = r;
    snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(NULL));
  }
}

/* Whether the communicator's last recorded call ran on the board. */
static int last_on_board(rcollComm_t comm) {
  const rcoll_fr_t *fr = comm->fr;
  uint64_t id = atomic_load(&fr->next_id) - 1;
  const char *algo = atomic_load(&rcoll_fr_slot(fr, id)->algo);
  return algo != NULL && strcmp(algo, "flat") == 0;
}

/* Rank r's element i (small integers and halves: exact in every type). */
static double val(int r, int i, int call) { return (double)((r * 7 + i * 3 + call) % 13) - 4.0 + 0.5 * (i & 1); }

/* The rank-order result, computed in the call's type as the board does. */
static double ref(rcollRedOp_t op, int n, int i, int call, int dbl) {
  double acc = val(0, i, call);
  float facc = (float)acc;
  for (int r = 1; r < n; r++) {
    double v = val(r, i, call);
    float fv = (float)v;
    if (op == rcollSum || op == rcollAvg)
      acc += v, facc += fv;
    else if (op == rcollProd)
      acc *= v, facc *= fv;
    else if (op == rcollMax)
      acc = v > acc ? v : acc, facc = fv > facc ? fv : facc;
    else
      acc = v < acc ? v : acc, facc = fv < facc ? fv : facc;
  }
  if (op == rcollAvg)
    acc /= n, facc /= (float)n;
  return dbl ? acc : (double)facc;
}

/* One all-reduce of count elements of float32 or float64, checked. */
static void one(job_t *j, rcollComm_t comm, rcollDataType_t t, rcollRedOp_t op, int count, int call,
                int want_board) {
  float fs[MAXC], fr[MAXC];
  double ds[MAXC], dr[MAXC];
  for (int i = 0; i < count; i++)
    fs[i] = (float)val(j->rank, i, call), ds[i] = val(j->rank, i, call);
  int dbl = t == rcollFloat64;
  rcollResult_t r = rcollAllReduce(dbl ? (void *)ds : (void *)fs, dbl ? (void *)dr : (void *)fr,
                                   (size_t)count, t, op, comm, NULL);
  if (r != rcollSuccess) {
    failed(j, r);
    return;
  }
  for (int i = 0; i < count; i++) {
    double got = dbl ? dr[i] : fr[i];
    j->bad += got != ref(op, j->nranks, i, call, dbl);
    j->out[i] = got;
  }
  j->not_flat += want_board != last_on_board(comm);
}

static void *rank_main(void *arg) {
  job_t *j = arg;
  rcollConfig_t cfg = RCOLL_CONFIG_INITIALIZER;
  cfg.netName = "shm";
  cfg.timeoutMs = 60000;
  rcollComm_t comm;
  rcollResult_t r = rcollCommInitRankConfig(&comm, j->nranks, j->id, j->rank, &cfg);
  if (r != rcollSuccess) {
    failed(j, r);
    return NULL;
  }
  j->board_max = rcoll_flat_max(comm);
  /* The tuner puts these sizes on the board, unless RCOLL_ALGO leaves it out. */
  const char *algo = getenv("RCOLL_ALGO");
  int board = j->board_max > 0 && (algo == NULL || strstr(algo, "flat") != NULL);
  static const rcollRedOp_t ops[] = {rcollSum, rcollProd, rcollMax, rcollMin, rcollAvg};
  if (j->scenario == 0) { /* every op, both types, 1..64 elements */
    int call = 0;
    for (int o = 0; o < 5; o++)
      for (int count = 1; count <= MAXC; count = count * 3 + 1)
        one(j, comm, o & 1 ? rcollFloat64 : rcollFloat32, ops[o], count, call++,
            board && count * (o & 1 ? 8 : 4) <= (int)j->board_max);
  } else if (j->scenario == 1) { /* rank 0 groups what the others call one by one */
    static const int counts[3] = {4, 1024, 2};
    float bufs[3][1024];
    for (int round = 0; round < 50 && j->fail == rcollSuccess; round++) {
      if (j->rank == 0 && (r = rcollGroupStart()) != rcollSuccess)
        failed(j, r);
      for (int k = 0; k < 3; k++) {
        for (int i = 0; i < counts[k]; i++)
          bufs[k][i] = (float)(j->rank + i + k + round);
        if ((r = rcollAllReduce(bufs[k], bufs[k], (size_t)counts[k], rcollFloat32, rcollSum, comm, NULL)) !=
            rcollSuccess)
          failed(j, r);
      }
      if (j->rank == 0 && (r = rcollGroupEnd()) != rcollSuccess)
        failed(j, r);
      int sum = j->nranks * (j->nranks - 1) / 2;
      for (int k = 0; k < 3; k++)
        for (int i = 0; i < counts[k]; i++)
          j->bad += bufs[k][i] != (float)(sum + j->nranks * (i + k + round));
    }
  } else if (j->scenario == 2) { /* board calls between broadcasts, whose roots return early */
    float big[512];
    for (int call = 0; call < 600 && j->fail == rcollSuccess; call++) {
      int root = call % j->nranks;
      for (int i = 0; i < 512; i++)
        big[i] = j->rank == root ? (float)(call + i) : -1.0f;
      if ((r = rcollBroadcast(big, big, 512, rcollFloat32, root, comm, NULL)) != rcollSuccess)
        failed(j, r);
      for (int i = 0; i < 512; i++)
        j->bad += big[i] != (float)(call + i);
      one(j, comm, rcollFloat32, rcollSum, 2, call, board);
    }
  } else if (j->scenario == 3) { /* rank 1 leaves while rank 0 waits on the board */
    one(j, comm, rcollFloat32, rcollSum, 2, 0, board);
    if (j->rank == 1) {
      rcollCommDestroy(comm);
      return NULL;
    }
    float x[2] = {1, 2};
    double t0 = now_s();
    r = rcollAllReduce(x, x, 2, rcollFloat32, rcollSum, comm, NULL);
    j->fail_s = now_s() - t0;
    j->fail = r;
    snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(comm));
    rcollCommAbort(comm);
    return NULL;
  } else if (j->scenario == 4) { /* rank 1 comes 30 ms late to call 100 of 200 */
    for (int call = 0; call < 200 && j->fail == rcollSuccess; call++) {
      if (j->rank == 1 && call == 100)
        nanosleep(&(struct timespec){0, 30 * 1000 * 1000}, NULL);
      one(j, comm, rcollFloat32, rcollSum, 2, call, board);
    }
  }
  j->stats = rcoll_flat_stats(comm);
  if ((r = rcollCommDestroy(comm)) != rcollSuccess)
    failed(j, r);
  return NULL;
}

static void run(job_t *jobs, int n, int scenario) {
  rcollUniqueId id;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess, "%s", rcollGetLastError(NULL));
  pthread_t th[MAXR];
  for (int r = 0; r < n; r++) {
    jobs[r] = (job_t){.id = id, .rank = r, .nranks = n, .scenario = scenario};
    cr_assert_eq(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
  }
  for (int r = 0; r < n; r++)
    pthread_join(th[r], NULL);
}

static void expect_ok(const job_t *jobs, int n, const char *what) {
  for (int r = 0; r < n; r++) {
    cr_assert_eq(jobs[r].fail, rcollSuccess, "%s, %d ranks: rank %d: %s", what, n, r, jobs[r].error);
    cr_assert_eq(jobs[r].bad, 0, "%s, %d ranks: rank %d: %d wrong elements", what, n, r, jobs[r].bad);
    cr_assert_eq(jobs[r].not_flat, 0, "%s, %d ranks: rank %d: %d calls not where expected (board max %zu)",
                 what, n, r, jobs[r].not_flat, jobs[r].board_max);
    cr_assert(memcmp(jobs[r].out, jobs[0].out, sizeof jobs[0].out) == 0,
              "%s, %d ranks: rank %d's last result differs from rank 0's", what, n, r);
  }
}

/* Files this process left in the shm directory (the board's is unlinked
 * once every rank mapped it; these ranks make no connections). */
static int files_left(void) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "rcoll-shm-%d-", (int)getpid());
  DIR *d = opendir("/dev/shm");
  int n = 0;
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
    n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  if (d != NULL)
    closedir(d);
  return n;
}

TestSuite(flat, .timeout = 300);

Test(flat, results_every_op_and_rank_count) {
  job_t jobs[MAXR];
  for (int n = 2; n <= MAXR; n += n < 4 ? 1 : 4) {
    run(jobs, n, 0);
    cr_assert_eq(jobs[0].board_max, 2048, "%d ranks over shm have no board", n);
    expect_ok(jobs, n, "every op");
    cr_assert_eq(files_left(), 0, "%d ranks: the board's file is still in /dev/shm", n);
  }
}

Test(flat, group_meets_single_calls) {
  job_t jobs[MAXR];
  for (int n = 2; n <= 3; n++) {
    run(jobs, n, 1);
    expect_ok(jobs, n, "group");
  }
}

Test(flat, between_broadcasts) {
  job_t jobs[MAXR];
  run(jobs, 4, 2);
  expect_ok(jobs, 4, "between broadcasts");
}

Test(flat, peer_that_leaves_is_named) {
  job_t jobs[MAXR];
  run(jobs, 2, 3);
  cr_assert_eq(jobs[1].fail, rcollSuccess, "rank 1: %s", jobs[1].error);
  cr_assert_eq(jobs[0].fail, rcollRemoteError, "rank 0: result %d: %s", jobs[0].fail, jobs[0].error);
  cr_assert(strstr(jobs[0].error, "destroyed or aborted its communicator") != NULL, "%s", jobs[0].error);
  cr_assert_lt(jobs[0].fail_s, 10.0, "rank 0 took %.2f s to notice", jobs[0].fail_s);
}

Test(flat, off_with_flat_max_0) {
  setenv("RCOLL_FLAT_MAX", "0", 1);
  job_t jobs[MAXR];
  run(jobs, 3, 0);
  cr_assert_eq(jobs[0].board_max, 0);
  expect_ok(jobs, 3, "RCOLL_FLAT_MAX=0");
}

/* Each rank counts the board calls it ran and how their waits went: the
 * rank left waiting 30 ms spun, then slept; with RCOLL_ALGO leaving the
 * board out, nothing is counted. */
Test(flat, counts_calls_passes_and_sleeps) {
  job_t jobs[MAXR];
  run(jobs, 2, 4);
  expect_ok(jobs, 2, "a late rank");
  for (int r = 0; r < 2; r++)
    cr_assert_eq(jobs[r].stats.calls, 200, "rank %d: %llu board calls counted", r,
                 (unsigned long long)jobs[r].stats.calls);
  cr_assert_geq(jobs[0].stats.sleeps, 1, "rank 0 waited 30 ms without sleeping");
  cr_assert_geq(jobs[0].stats.long_waits, 1, "rank 0's wait of 30 ms is not counted long");
  cr_assert_geq(jobs[0].stats.passes, 8 * jobs[0].stats.long_waits, "rank 0: %llu passes, %llu long waits",
                (unsigned long long)jobs[0].stats.passes, (unsigned long long)jobs[0].stats.long_waits);
  setenv("RCOLL_ALGO", "ring,recdbl,tree,chain", 1);
  run(jobs, 2, 4);
  unsetenv("RCOLL_ALGO");
  expect_ok(jobs, 2, "RCOLL_ALGO without flat");
  for (int r = 0; r < 2; r++)
    cr_assert(jobs[r].stats.calls == 0 && jobs[r].stats.passes == 0 && jobs[r].stats.long_waits == 0 &&
                  jobs[r].stats.sleeps == 0,
              "rank %d: board counts without board calls", r);
}

/* The board is the all-reduce algorithm "flat": RCOLL_ALGO leaves it out
 * or forces it, as any other. */
Test(flat, rcoll_algo_leaves_it_out) {
  setenv("RCOLL_ALGO", "ring,recdbl,tree,chain", 1);
  job_t jobs[MAXR];
  run(jobs, 2, 0);
  cr_assert_eq(jobs[0].board_max, 2048);
  expect_ok(jobs, 2, "RCOLL_ALGO without flat");
}

Test(flat, rcoll_algo_forces_it) {
  setenv("RCOLL_ALGO", "flat", 1);
  job_t jobs[MAXR];
  run(jobs, 5, 0);
  expect_ok(jobs, 5, "RCOLL_ALGO=flat");
}
