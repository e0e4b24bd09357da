/* Groups: between rcollGroupStart and rcollGroupEnd, calls only add steps to
 * their communicator's plan; GroupEnd runs the plans of every communicator
 * touched together, so sends and receives posted in one group cannot
 * deadlock, and one thread can drive several communicators of
 * rcollCommInitAll. */
#ifndef RCOLL_GROUP_H
#define RCOLL_GROUP_H

#include "comm.h"

/* Non-zero while the calling thread is inside a group. */
int rcoll_group_active(void);
/* Adds comm to the group's list (once); fails when the list cannot grow. */
rcollResult_t rcoll_group_add(struct rcollComm *comm);
/* Remembers the first error of a call inside a group; GroupEnd returns it. */
void rcoll_group_fail(rcollResult_t r);

#endif
