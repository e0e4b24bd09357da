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
