/* Home cores (lib/home_core.h): which core a rank calls home, that a move
 * there leaves the thread's affinity as it was and leaves a bound thread
 * alone, and which communicators give their ranks one. Ranks are threads
 * over the socket transport (loopback: peers over the network, as ranks in
 * two network namespaces are) or shared memory. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "flat.h"
#include "home_core.h"
#include "rcoll.h"

static cpu_set_t cpus(int n, const int *list) {
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int i = 0; i < n; i++)
    CPU_SET(list[i], &s);
  return s;
}

Test(home_core, choose) {
  cpu_set_t all4 = cpus(4, (int[]){0, 1, 2, 3});
  for (int i = 0; i < 4; i++)
    cr_assert_eq(rcoll_home_core_choose(i, 4, &all4, 4), i);
  cr_assert_eq(rcoll_home_core_choose(1, 2, &all4, 4), 1);
  cpu_set_t sparse = cpus(3, (int[]){2, 5, 7}); /* cores 0, 1, 3, 4, 6 offline */
  cr_assert_eq(rcoll_home_core_choose(1, 3, &sparse, 3), 5);
  cr_assert_eq(rcoll_home_core_choose(2, 3, &sparse, 3), 7);
  cr_assert_eq(rcoll_home_core_choose(0, 2, &sparse, 4), -1, "bound to 3 of 4 online cores: left alone");
  cr_assert_eq(rcoll_home_core_choose(0, 5, &all4, 4), -1, "more ranks than cores");
  cr_assert_eq(rcoll_home_core_choose(2, 2, &all4, 4), -1, "index past the ranks");
  cr_assert_eq(rcoll_home_core_choose(-1, 2, &all4, 4), -1);
}

/* Where ranks outnumber cores: the highest-numbered rank of a core with 2
 * or more ranks than the emptiest moves there; nobody else, and nobody
 * while a rank's core is not known. */
Test(home_core, rebalance) {
  cpu_set_t two = cpus(2, (int[]){0, 1}), four = cpus(4, (int[]){0, 1, 2, 3});
  int three_one[] = {0, 0, 0, 1};
  for (int me = 0; me < 4; me++)
    cr_assert_eq(rcoll_home_core_rebalance(three_one, 4, me, &two), me == 2 ? 1 : -1, "3 and 1: rank %d", me);
  int all_on_one[] = {1, 1, 1, 1};
  for (int me = 0; me < 4; me++)
    cr_assert_eq(rcoll_home_core_rebalance(all_on_one, 4, me, &two), me == 3 ? 0 : -1, "4 and 0: rank %d", me);
  int even[] = {0, 1, 1, 0}, three_two[] = {0, 0, 0, 1, 1}, unknown[] = {0, 0, -1, 0};
  for (int me = 0; me < 4; me++) {
    cr_assert_eq(rcoll_home_core_rebalance(even, 4, me, &two), -1, "2 and 2: rank %d", me);
    cr_assert_eq(rcoll_home_core_rebalance(unknown, 4, me, &two), -1, "a core not known: rank %d", me);
  }
  for (int me = 0; me < 5; me++)
    cr_assert_eq(rcoll_home_core_rebalance(three_two, 5, me, &two), -1, "3 and 2: rank %d", me);
  /* Four cores: the emptiest (3) takes the top rank of each crowded one. */
  int spread[] = {0, 0, 0, 1, 1, 2};
  for (int me = 0; me < 6; me++)
    cr_assert_eq(rcoll_home_core_rebalance(spread, 6, me, &four), me == 2 || me == 4 ? 3 : -1, "rank %d", me);
  cpu_set_t only0 = cpus(1, (int[]){0});
  cr_assert_eq(rcoll_home_core_rebalance(three_one, 4, 2, &only0), -1, "no other core in the mask");
}

/* Two cores of the calling thread's mask, or a skip. */
static void two_cores(cpu_set_t *mask, int *a, int *b) {
  cr_assert_eq(sched_getaffinity(0, sizeof *mask, mask), 0);
  *a = *b = -1;
  for (int c = 0; c < CPU_SETSIZE && *b < 0; c++)
    if (CPU_ISSET(c, mask))
      *(*a < 0 ? a : b) = c;
  if (*b < 0)
    cr_skip_test("the thread may run on one core only");
}

static void run_on(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
  cr_assert_eq(sched_getcpu(), cpu);
}

Test(home_core, go_moves_and_gives_the_mask_back) {
  cpu_set_t mask, after;
  int a, b;
  two_cores(&mask, &a, &b);
  run_on(a);
  cr_assert_eq(sched_setaffinity(0, sizeof mask, &mask), 0);
  cr_assert_eq(rcoll_home_core_go(b, CPU_COUNT(&mask)), b, "held on the home core");
  cr_assert_eq(sched_getaffinity(0, sizeof after, &after), 0);
  cr_assert(CPU_EQUAL(&after, &mask), "the mask is the one the thread had");
  /* A thread bound since (its mask is no longer the whole one): untouched. */
  run_on(a);
  cr_assert_eq(rcoll_home_core_go(b, CPU_COUNT(&mask)), -1);
  cr_assert_eq(sched_getcpu(), a);
  cr_assert_eq(sched_getaffinity(0, sizeof after, &after), 0);
  cr_assert_eq(CPU_COUNT(&after), 1, "the binding stands");
  cr_assert_eq(sched_setaffinity(0, sizeof mask, &mask), 0);
}

#define N 1024

typedef struct job {
  rcollUniqueId id;
  int rank, nranks, homes_at;
  const char *net;
  int home, bad, tries;
  uint64_t moves;
  rcollResult_t fail;
  char error[512];
  cpu_set_t before, after;
} job_t;

/* A rank: its home; then, 20 times, it runs on a core that is not its
 * home, gets its whole mask back and makes a call whose result it checks
 * (the call's first look at the core should move it home: the kernel has
 * no reason to move a running thread in between, but may); the mask
 * afterwards. */
static void *rank_main(void *arg) {
  job_t *j = arg;
  rcollConfig_t cfg = RCOLL_CONFIG_INITIALIZER;
  cfg.netName = j->net;
  cfg.timeoutMs = 60000;
  sched_getaffinity(0, sizeof j->before, &j->before);
  rcollComm_t comm;
  if ((j->fail = rcollCommInitRankConfig(&comm, j->nranks, j->id, j->rank, &cfg)) != rcollSuccess) {
    snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(NULL));
    return NULL;
  }
  j->home = comm->home_cpu;
  static float buf[8][N];
  float *x = buf[j->rank];
  for (j->tries = 0; j->tries < 20 && j->fail == rcollSuccess; j->tries++) {
    if (j->home >= 0) { /* to the core that is not home (two cores: a, b) */
      cpu_set_t away = j->before;
      CPU_CLR(j->home, &away);
      sched_setaffinity(0, sizeof away, &away);
      sched_setaffinity(0, sizeof j->before, &j->before);
    }
    for (int i = 0; i < N; i++)
      x[i] = (float)(j->rank + i);
    if ((j->fail = rcollAllReduce(x, x, N, rcollFloat32, rcollSum, comm, NULL)) != rcollSuccess)
      snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(comm));
    for (int i = 0; i < N; i++)
      j->bad += x[i] != (float)(j->nranks * i + j->nranks * (j->nranks - 1) / 2);
  }
  j->moves = comm->home_moves;
  sched_getaffinity(0, sizeof j->after, &j->after);
  rcollResult_t r = rcollCommDestroy(comm);
  if (j->fail == rcollSuccess)
    j->fail = r;
  return NULL;
}

static void run(job_t *jobs, int n, const char *net) {
  rcollUniqueId id;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess, "%s", rcollGetLastError(NULL));
  pthread_t th[8];
  for (int r = 0; r < n; r++) {
    jobs[r] = (job_t){.id = id, .rank = r, .nranks = n, .net = net};
    cr_assert_eq(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
  }
  for (int r = 0; r < n; r++)
    pthread_join(th[r], NULL);
  for (int r = 0; r < n; r++) {
    cr_assert_eq(jobs[r].fail, rcollSuccess, "%s, rank %d: %s", net, r, jobs[r].error);
    cr_assert_eq(jobs[r].bad, 0, "%s, rank %d: %d wrong elements", net, r, jobs[r].bad);
    cr_assert(CPU_EQUAL(&jobs[r].after, &jobs[r].before), "%s, rank %d: the thread's mask changed", net, r);
  }
}

/* The machine's cores, when this process may use every one; else a skip. */
static int whole_machine(void) {
  cpu_set_t mask;
  cr_assert_eq(sched_getaffinity(0, sizeof mask, &mask), 0);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (CPU_COUNT(&mask) != online)
    cr_skip_test("this process is bound to %d of %ld cores: no home cores", CPU_COUNT(&mask), online);
  return (int)online;
}

Test(home_core, ranks_over_the_network_each_get_one_and_calls_go_there, .timeout = 120) {
  if (whole_machine() < 2)
    cr_skip_test("one core");
  job_t jobs[2];
  run(jobs, 2, "socket");
  cpu_set_t mask;
  sched_getaffinity(0, sizeof mask, &mask);
  cr_assert_eq(jobs[0].home, rcoll_home_core_choose(0, 2, &mask, CPU_COUNT(&mask)));
  cr_assert_eq(jobs[1].home, rcoll_home_core_choose(1, 2, &mask, CPU_COUNT(&mask)));
  cr_assert_neq(jobs[0].home, jobs[1].home);
  for (int r = 0; r < 2; r++)
    cr_assert_geq(jobs[r].moves, 1, "rank %d: no call moved its thread home in %d tries", r, jobs[r].tries);
}

Test(home_core, none_over_shared_memory_with_more_ranks_than_cores_or_when_off, .timeout = 120) {
  int cores = whole_machine();
  job_t jobs[8];
  run(jobs, 2, "shm");
  cr_assert(jobs[0].home == -1 && jobs[1].home == -1, "shm: %d %d", jobs[0].home, jobs[1].home);
  if (cores + 1 <= 8) {
    run(jobs, cores + 1, "socket");
    for (int r = 0; r < cores + 1; r++)
      cr_assert_eq(jobs[r].home, -1, "%d ranks on %d cores: rank %d", cores + 1, cores, r);
  }
  setenv("RCOLL_HOME_CORE", "0", 1);
  run(jobs, 2, "socket");
  unsetenv("RCOLL_HOME_CORE");
  cr_assert(jobs[0].home == -1 && jobs[1].home == -1, "RCOLL_HOME_CORE=0: %d %d", jobs[0].home, jobs[1].home);
}

/* Ranks outnumbering cores, over shared memory: cores + 2 rank threads
 * start their calls 3 on the mask's first core and 1 on each other core
 * (each narrows its mask there and gives it back), and the kernel has no
 * reason to move them within a few hundred short calls, so the check every
 * 64 calls moves the third rank of the first core. The kernel may still
 * move one first: up to 3 tries. */
typedef struct crowd {
  rcollUniqueId id;
  int rank, nranks, home_core, bad, cpu_first;
  pthread_barrier_t *lined_up;
  rcollResult_t fail;
  rcoll_flat_stats_t stats;
  char error[512];
  cpu_set_t before, after;
} crowd_t;

static void *crowd_rank(void *arg) {
  crowd_t *j = arg;
  rcollConfig_t cfg = RCOLL_CONFIG_INITIALIZER;
  cfg.netName = "shm";
  cfg.timeoutMs = 60000;
  sched_getaffinity(0, sizeof j->before, &j->before);
  rcollComm_t comm;
  if ((j->fail = rcollCommInitRankConfig(&comm, j->nranks, j->id, j->rank, &cfg)) != rcollSuccess) {
    snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(NULL));
    pthread_barrier_wait(j->lined_up);
    return NULL;
  }
  pthread_barrier_wait(j->lined_up); /* a sleep, whose wake-up may place it anywhere: before the move */
  float x[8];
  cpu_set_t there;
  CPU_ZERO(&there);
  CPU_SET(j->home_core, &there);
  sched_setaffinity(0, sizeof there, &there);
  j->cpu_first = sched_getcpu();
  sched_setaffinity(0, sizeof j->before, &j->before);
  for (int call = 0; call < 256 && j->fail == rcollSuccess; call++) {
    for (int i = 0; i < 8; i++)
      x[i] = (float)(j->rank + i + call);
    if ((j->fail = rcollAllReduce(x, x, 8, rcollFloat32, rcollSum, comm, NULL)) != rcollSuccess)
      snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(comm));
    for (int i = 0; i < 8; i++)
      j->bad += x[i] != (float)(j->nranks * (i + call) + j->nranks * (j->nranks - 1) / 2);
  }
  j->stats = rcoll_flat_stats(comm);
  sched_getaffinity(0, sizeof j->after, &j->after);
  rcollResult_t r = rcollCommDestroy(comm);
  if (j->fail == rcollSuccess)
    j->fail = r;
  return NULL;
}

/* Runs cores + 2 ranks placed as above; returns the moves of the rank
 * that should move, and in *others those of the rest, after checking every
 * rank's results and mask. */
static uint64_t crowd_run(crowd_t *jobs, int n, const int *core, uint64_t *others) {
  rcollUniqueId id;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess, "%s", rcollGetLastError(NULL));
  pthread_barrier_t lined_up;
  pthread_barrier_init(&lined_up, NULL, (unsigned)n);
  pthread_t th[8];
  for (int r = 0; r < n; r++) {
    jobs[r] = (crowd_t){.id = id, .rank = r, .nranks = n, .lined_up = &lined_up,
                        .home_core = core[r < 3 ? 0 : r - 2]};
    cr_assert_eq(pthread_create(&th[r], NULL, crowd_rank, &jobs[r]), 0);
  }
  for (int r = 0; r < n; r++)
    pthread_join(th[r], NULL);
  pthread_barrier_destroy(&lined_up);
  *others = 0;
  for (int r = 0; r < n; r++) {
    cr_assert_eq(jobs[r].fail, rcollSuccess, "rank %d: %s", r, jobs[r].error);
    cr_assert_eq(jobs[r].bad, 0, "rank %d: %d wrong elements", r, jobs[r].bad);
    cr_assert_eq(jobs[r].stats.calls, 256, "rank %d: %llu board calls", r, (unsigned long long)jobs[r].stats.calls);
    cr_assert(CPU_EQUAL(&jobs[r].after, &jobs[r].before), "rank %d: the thread's mask changed", r);
    cr_assert_eq(jobs[r].cpu_first, jobs[r].home_core, "rank %d: not on core %d", r, jobs[r].home_core);
    *others += r != 2 ? jobs[r].stats.moves : 0;
  }
  return jobs[2].stats.moves;
}

Test(home_core, more_ranks_than_cores_a_crowded_core_gives_one_up, .timeout = 120) {
  int cores = whole_machine();
  if (cores < 2 || cores + 2 > 8)
    cr_skip_test("%d cores: the test places cores + 2 <= 8 ranks on 2 or more", cores);
  cpu_set_t mask;
  sched_getaffinity(0, sizeof mask, &mask);
  int core[8], k = 0;
  for (int c = 0; c < CPU_SETSIZE && k < cores; c++)
    if (CPU_ISSET(c, &mask))
      core[k++] = c;
  crowd_t jobs[8];
  /* A try where the kernel moved ranks too may make the others move: it
   * counts as failed, not the test. */
  uint64_t moved = 0, others = 0;
  for (int try = 0; try < 3 && (moved == 0 || others > 3); try++)
    moved = crowd_run(jobs, cores + 2, core, &others);
  cr_assert_geq(moved, 1, "3 ranks on core %d, 1 on each other: the third never moved in 3 tries", core[0]);
  cr_assert_leq(others, 3, "ranks that should stay moved %llu times", (unsigned long long)others);
  setenv("RCOLL_HOME_CORE", "0", 1);
  moved = crowd_run(jobs, cores + 2, core, &others);
  unsetenv("RCOLL_HOME_CORE");
  for (int r = 0; r < cores + 2; r++)
    cr_assert_eq(jobs[r].stats.moves, 0, "RCOLL_HOME_CORE=0: rank %d moved", r);
}
