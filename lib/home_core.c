/* Two ranks of one machine that talk over the network (each in its own
 * network namespace, as containers are joined) can end up on one core while
 * another idles. Their waiting threads sleep during large calls while helper
 * threads move the data, and some kernels place a woken thread beside its
 * waker: the 2-core test VMs' (sched_vcpu_pack) did it 232-297 times in 300
 * (tests/netns/wake_place.c). Once there, the spinning rank holds the core
 * the other needs, and every small call costs the whole spin, until the load
 * balancer moves one of them at a tick: 8-byte all-reduce 62-71 us instead
 * of 5 in 12 of 24 sweeps (docs/execution.md, "Two ranks on one core").
 *
 * The remedy is the binding Open MPI makes by default, applied only while
 * rcoll holds the thread: each such rank has a home core, and where a call
 * starts or a sleep ends and the thread is elsewhere, it moves itself home
 * by narrowing its affinity to that core for a moment (the kernel migrates
 * it at once) and then restores the mask it had. Between calls the kernel
 * places the thread as it likes, and threads the caller creates inherit the
 * mask it set, never ours. A hop away from a shared core, tried first, did
 * not hold: both ranks must know which core is theirs, or the next wake-up
 * packs them again (branch exp/core-hop-s12).
 *
 * Where ranks outnumber cores the same move evens out how many share each
 * core (rcoll_home_core_rebalance; the flat board publishes each rank's
 * core and checks every FLAT_BALANCE_EVERY calls). */
#include "home_core.h"

#include "log.h"

_Thread_local int rcoll_home_core_thread = -1;

int rcoll_home_core_choose(int index, int n, const cpu_set_t *mask, int online) {
  int cores = CPU_COUNT(mask);
  if (index < 0 || index >= n || cores < online || cores < n)
    return -1;
  for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, mask) && seen++ == index)
      return cpu;
  return -1;
}

int rcoll_home_core_rebalance(const int *cpus, int n, int me, const cpu_set_t *mask) {
  int mine = cpus[me], crowd = 0;
  for (int j = 0; j < n && mine >= 0; j++) {
    if (cpus[j] < 0 || (cpus[j] == mine && j > me))
      return -1; /* the picture is not complete, or a higher rank here moves */
    crowd += cpus[j] == mine;
  }
  int least = -1, fewest = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && mine >= 0 && (least < 0 || fewest > 0); cpu++) {
    if (!CPU_ISSET(cpu, mask) || cpu == mine)
      continue;
    int k = 0;
    for (int j = 0; j < n; j++)
      k += cpus[j] == cpu;
    if (least < 0 || k < fewest)
      least = cpu, fewest = k;
  }
  return least >= 0 && crowd - fewest >= 2 ? least : -1;
}

int rcoll_home_core_go(int cpu, int cores_at_init) {
  cpu_set_t mask, home;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0 || CPU_COUNT(&mask) != cores_at_init ||
      !CPU_ISSET(cpu, &mask))
    return -1; /* bound since (by the caller or a library it uses): leave it */
  CPU_ZERO(&home);
  CPU_SET(cpu, &home);
  if (sched_setaffinity(0, sizeof home, &home) != 0)
    return -1;
  int there = sched_getcpu();
  if (sched_setaffinity(0, sizeof mask, &mask) != 0) /* a cpuset changed under us */
    RCOLL_WARN("could not give the calling thread back its %d cores after moving it to core %d",
               cores_at_init, cpu);
  return there;
}
