/* A home core for a waiting thread (home_core.c). */
#ifndef RCOLL_HOME_CORE_H
#define RCOLL_HOME_CORE_H

#include <sched.h>

/* The core that the index-th of n ranks on one machine calls home, given
 * the calling thread's affinity and the machine's online cores: the
 * index-th core of the mask, or -1 when the mask leaves out some online
 * core (the thread was bound by someone: that placement stands) or has
 * fewer cores than ranks. */
int rcoll_home_core_choose(int index, int n, const cpu_set_t *mask, int online);

/* Moves the calling thread to cpu when its affinity is still the whole
 * machine (cores_at_init of them), then gives the affinity back as it
 * was. Returns the core it ran on while held there, or -1 when it did
 * not move. */
int rcoll_home_core_go(int cpu, int cores_at_init);

/* Where the ranks of one machine outnumber its cores, every wait yields
 * and never leaves the run queue, so the kernel's balancer sees no idle
 * core to fill, and a split of 4 ranks on 2 cores as 3 and 1 can last a
 * whole short run: the lone rank's yields find nobody to run (18-20 passes
 * a call where the others took 1). Given the core each of the n ranks of
 * the machine last started a call on (cpus[j]; -1: not known yet), returns
 * the core of mask that rank me should move to, or -1. Only the
 * highest-numbered rank of a core holding 2 or more ranks more than the
 * emptiest core of mask moves: one rank per crowded core and check. */
int rcoll_home_core_rebalance(const int *cpus, int n, int me, const cpu_set_t *mask);

/* The calling thread's home: that of the first communicator it waited in
 * with one, -1 before. A thread keeps it: two communicators that gave it
 * different homes would otherwise move it at every call (a world group
 * and its subgroups, in PyTorch). RCOLL_HOME_CORE_NEVER: a thread of
 * rcoll's own that is never moved (the CUDA proxy: the home core is its
 * rank's user thread's). */
extern _Thread_local int rcoll_home_core_thread;
#define RCOLL_HOME_CORE_NEVER (-2)

/* The check made where a call starts and after every sleep, for a
 * communicator whose home for this rank is comm_home (-1: none): one read
 * of the current core (glibc's rseq area: about 1 ns here, no system
 * call). Returns 1 when it moved the thread. */
static inline int rcoll_home_core_return(int comm_home, int cores_at_init) {
  if (comm_home < 0 || rcoll_home_core_thread == RCOLL_HOME_CORE_NEVER)
    return 0;
  if (rcoll_home_core_thread < 0)
    rcoll_home_core_thread = comm_home;
  return sched_getcpu() != rcoll_home_core_thread &&
         rcoll_home_core_go(rcoll_home_core_thread, cores_at_init) >= 0;
}

#endif
