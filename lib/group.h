/* Groups: between rcollGroupStart and rcollGroupEnd, calls only add steps to
 * their communicator's plan; GroupEnd runs the plans of every communicator
 * touched together, so sends and receives posted in one group cannot
 * deadlock, and one thread can drive several communicators of
 * rcollCommInitAll. */
#ifndef RCOLL_GROUP_H
#define RCOLL_GROUP_H

#include "algo.h"
#include "comm.h"

/* Non-zero while the calling thread is inside a group. */
int rcoll_group_active(void);
/* Adds comm to the group's list (once); fails when the list cannot grow. */
rcollResult_t rcoll_group_add(struct rcollComm *comm);
/* Remembers the first error of a call inside a group; GroupEnd returns it. */
void rcoll_group_fail(rcollResult_t r);

/* A device call that the direct path (RCOLL_CUDA_DIRECT) may run as a
 * kernel, held by coll.c until rcollGroupEnd: it joined the group like any
 * device call, but is neither planned nor launched yet. */
struct coll_desc;
typedef struct rcoll_held {
  const struct coll_desc *d;
  rcoll_coll_args_t a;
  struct rcollComm *comm;
  rcollStream_t stream;
  int device;
  int p2p; /* a send or receive */
} rcoll_held_t;

/* Keeps h for rcollGroupEnd; fails when the list cannot grow. */
rcollResult_t rcoll_group_hold(const rcoll_held_t *h);
/* At rcollGroupEnd, still inside the group (coll.c): a direct kernel when
 * `direct` and the direct path takes the call, else planned into the
 * group like the calls made before. */
rcollResult_t rcoll_coll_release(const rcoll_held_t *h, int direct);
/* The group's sends and receives (n of them, in the order made) as direct
 * kernels when the direct path takes them, else each planned as above. */
rcollResult_t rcoll_coll_release_p2p(const rcoll_held_t *h, int n);

#endif
