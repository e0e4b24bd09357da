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

/* The calling thread's home: that of the first communicator it waited in
 * with one, -1 before. A thread keeps it: two communicators that gave it
 * different homes would otherwise move it at every call (a world group
 * and its subgroups, in PyTorch). */
extern _Thread_local int rcoll_home_core_thread;

/* The check made where a call starts and after every sleep, for a
 * communicator whose home for this rank is comm_home (-1: none): one read
 * of the current core (glibc's rseq area: about 1 ns here, no system
 * call). Returns 1 when it moved the thread. */
static inline int rcoll_home_core_return(int comm_home, int cores_at_init) {
  if (comm_home < 0)
    return 0;
  if (rcoll_home_core_thread < 0)
    rcoll_home_core_thread = comm_home;
  return sched_getcpu() != rcoll_home_core_thread &&
         rcoll_home_core_go(rcoll_home_core_thread, cores_at_init) >= 0;
}

#endif
