/* Where a communicator's ranks outnumber the machine's cores, they spread
 * evenly over them (flat.h: rcoll_flat_balance): each call start publishes
 * the core the rank runs on in its control area, and every
 * FLAT_BALANCE_EVERY calls the top rank of a crowded core moves
 * (home_core.c decides who and where, and moves it). docs/execution.md,
 * "More ranks than cores", has the measurements. */
#include <sched.h>

#include "comm.h"
#include "flat_priv.h"
#include "home_core.h"

/* Calls between two looks at every rank's core (rcoll_flat_balance): n
 * lines read from other cores and a system call, a few ns a call here. */
#define FLAT_BALANCE_EVERY 64

void rcoll_flat_balance(struct rcollComm *c) {
  if (rcoll_home_core_thread == RCOLL_HOME_CORE_NEVER)
    return;
  struct rcoll_flat *f = c->flat;
  flat_ctl_t *ctl = flat_ctl(f, c->rank);
  int cpu = sched_getcpu(); /* glibc's rseq area: no system call */
  if (cpu >= 0 && atomic_load_explicit(&ctl->cpu, memory_order_relaxed) != cpu + 1)
    atomic_store_explicit(&ctl->cpu, cpu + 1, memory_order_relaxed);
  cpu_set_t mask;
  if (cpu < 0 || ++f->balance_tick % FLAT_BALANCE_EVERY != 0 || sched_getaffinity(0, sizeof mask, &mask) != 0)
    return;
  for (int j = 0; j < c->nranks; j++)
    f->cpus[j] = (int)atomic_load_explicit(&flat_ctl(f, j)->cpu, memory_order_relaxed) - 1;
  int to = rcoll_home_core_rebalance(f->cpus, c->nranks, c->rank, &mask);
  if (to >= 0 && (cpu = rcoll_home_core_go(to, c->home_cores)) >= 0) {
    atomic_store_explicit(&ctl->cpu, cpu + 1, memory_order_relaxed);
    f->stats.moves++;
  }
}
