/* wake_place [N]: where the kernel puts a woken thread when its own core
 * idles and the waker's core is busy.
 *
 * A sleeper process last ran on core 0 and may run on cores 0 and 1; a
 * waker on core 1 wakes it through a futex (not a "sync" wake-up: the
 * waker keeps its core busy for 100 us more, then sleeps until the sleeper
 * answers, as a rank waiting for its peer does). Upstream Linux puts the
 * sleeper back on idle core 0. A kernel that packs tasks onto few virtual
 * CPUs (this VM's kernel has "sched_vcpu_pack=15" on its command line) puts
 * it beside the waker on core 1 instead, where it waits for the core: that
 * is how two ranks in two network namespaces end up sharing one core while
 * the other idles (docs/execution.md, "Two ranks on one core"). A waker
 * that never sleeps (a core busy all the time) was not packed beside (0-15
 * of 300), nor was anything while a CI run kept both cores busy (0 of 50):
 * what the kernel packs onto is a core with room to spare, so run this on a
 * quiet machine.
 *
 * Prints how many of N wake-ups put the sleeper on the waker's busy core;
 * exit 0, or 77 with fewer than 2 cores. Not run on another kernel here:
 * "upstream returns it to the idle core" is read from its source
 * (select_idle_sibling), not measured. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int on_cores(int a, int b) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(a, &s);
  CPU_SET(b, &s);
  return sched_setaffinity(0, sizeof s, &s);
}

static void futex(atomic_int *a, int op, int v) { syscall(SYS_futex, a, op, v, NULL, NULL, 0); }

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 300;
  if (n < 1 || sysconf(_SC_NPROCESSORS_ONLN) < 2) {
    fprintf(stderr, "wake_place: needs N >= 1 and 2 cores\n");
    return 77;
  }
  /* [0]: wakes of the sleeper, [1]: its replies, [2]: times on core 1 */
  atomic_int *f = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (f == MAP_FAILED) {
    perror("wake_place: mmap");
    return 1;
  }
  pid_t child = fork();
  if (child < 0) {
    perror("wake_place: fork");
    return 1;
  }
  if (child == 0) { /* the sleeper */
    for (int i = 1; i <= n; i++) {
      /* last ran on core 0, and may run on either */
      if (on_cores(0, 0) != 0 || on_cores(0, 1) != 0)
        return 77;
      while (atomic_load(&f[0]) < i)
        futex(&f[0], FUTEX_WAIT, atomic_load(&f[0]));
      atomic_fetch_add(&f[2], sched_getcpu() == 1);
      atomic_store(&f[1], i);
      futex(&f[1], FUTEX_WAKE, 1);
    }
    return 0;
  }
  if (on_cores(1, 1) != 0) {
    perror("wake_place: cannot run on core 1");
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return 77;
  }
  for (int i = 1; i <= n; i++) {
    struct timespec gap = {0, 200000}; /* the sleeper is asleep by then */
    nanosleep(&gap, NULL);
    atomic_store(&f[0], i);
    futex(&f[0], FUTEX_WAKE, 1);
    for (long long t = now_ns(); now_ns() - t < 100000;)
      ;
    while (atomic_load(&f[1]) < i)
      futex(&f[1], FUTEX_WAIT, atomic_load(&f[1]));
  }
  int status;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "wake_place: the sleeper could not run on cores 0 and 1 (status %d)\n", status);
    return 77;
  }
  printf("wake_place: a sleeper whose core idled was woken on the waker's busy core %d of %d times "
         "(upstream Linux returns it to its idle core: select_idle_sibling)\n", atomic_load(&f[2]), n);
  return 0;
}
