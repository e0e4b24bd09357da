/* One conformance case seen from one rank: lay out the buffers (with guard
 * bytes on both sides), fill the inputs, make the call, and check every
 * received element against conformance_ref.h. Split into prepare / call /
 * check so that one thread can drive all ranks of rcollCommInitAll in a group
 * (tests/conformance.c). No Criterion: stand-alone programs link it.
 *
 * In-place follows NCCL: all-gather and gather sendbuff = recvbuff +
 * rank*count, reduce-scatter and scatter recvbuff = sendbuff + rank*count,
 * the others sendbuff == recvbuff (all-to-all too, which rcoll defines and
 * NCCL does not); the legacy rcollBcast is in place only. */
#ifndef RCOLL_TESTS_SUPPORT_CONFORMANCE_CASE_H
#define RCOLL_TESTS_SUPPORT_CONFORMANCE_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "rcoll.h"

/* A2A_SENDRECV is an all-to-all made of grouped sends and receives (as
 * nccl-tests did before NCCL had one); ALLTOALL is rcollAlltoAll. */
enum { ALLREDUCE, ALLGATHER, REDUCE_SCATTER, BROADCAST, REDUCE, SENDRECV, A2A_SENDRECV, ALLTOALL,
       GATHER, SCATTER, BCAST, NCOLLS };
extern const char *const coll_names[NCOLLS];

int coll_has_root(int coll);
int coll_has_op(int coll);
int coll_has_inplace(int coll);
int coll_only_inplace(int coll);

typedef struct ccase {
  int coll;
  size_t count; /* NCCL's count argument (per-rank count for gather/scatter) */
  rcollDataType_t type;
  rcollRedOp_t op;
  int root;
  int inplace;
  uint64_t seed;
  int grouped; /* made in one group with the next case (a random sequence's) */
} ccase_t;

/* Case k of a seeded random sequence, the same on every rank: any
 * collective, type, op, root, in place or not, a count from counts[];
 * about one case in six opens a group that holds it and case k + 1 (never
 * the last of ncases). */
ccase_t ccase_random(uint64_t seed, int k, int ncases, int n, const size_t *counts, size_t ncounts);

/* A buffer with guard bytes before and after its data. */
typedef struct region {
  unsigned char *mem;
  size_t bytes;
  int pooled; /* mem came from rcollMemAlloc */
  int hooked; /* ... from ccase_alloc */
} region_t;

typedef struct rank_bufs {
  region_t a, b;     /* out-of-place: a = send, b = recv; in-place: a only */
  void *send, *recv; /* what the call gets (NULL where the rank does not use it) */
} rank_bufs_t;

/* Allocates and fills this rank's buffers; returns 0, or -1 when out of memory. */
int case_prepare(const ccase_t *c, int rank, int n, rank_bufs_t *b);
void rank_bufs_free(rank_bufs_t *b);
/* 1: buffers come from rcollMemAlloc (conformance -m), whose blocks from
 * 64 KiB peers map, instead of malloc; where it gives device memory (a
 * machine with a GPU), from malloc after all. */
extern int ccase_pool_buffers;
/* Where set, buffers come from ccase_alloc and go back to ccase_free
 * instead (the fake-CUDA tests' device memory, which the host can read). */
extern void *(*ccase_alloc)(size_t bytes);
extern void (*ccase_free)(void *p);

/* Makes this rank's call (send/recv and all-to-all as one group) on the
 * NULL stream, or on `stream`. */
rcollResult_t case_call(const ccase_t *c, int rank, int n, rank_bufs_t *b, rcollComm_t comm);
rcollResult_t case_call_on(const ccase_t *c, int rank, int n, rank_bufs_t *b, rcollComm_t comm,
                           rcollStream_t stream);

/* What went wrong, for the report line. */
typedef struct case_fault {
  char what[160];
} case_fault_t;

/* Returns 0 when this rank's results are right (received elements, an
 * unchanged send buffer out of place, intact guards); otherwise fills *f. */
int case_check(const ccase_t *c, int rank, int n, const rank_bufs_t *b, case_fault_t *f);

#endif
