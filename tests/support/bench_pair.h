/* Ranks as threads of this process, for the benches on the CUDA fake
 * (bench_bounce.c, bench_staging.c, bench_ipc.c). */
#ifndef RCOLL_TESTS_SUPPORT_BENCH_PAIR_H
#define RCOLL_TESTS_SUPPORT_BENCH_PAIR_H

#include "rcoll.h"

#define BENCH_MAX_RANKS 8

/* CLOCK_MONOTONIC in microseconds. */
double bench_now_us(void);

/* The median of v[0 .. n) (sorts v). */
double bench_median(double *v, int n);

/* Runs body(comm, args[r]) on ranks 0 .. n - 1 (at most BENCH_MAX_RANKS)
 * of one new communicator, each in a thread, between rcollCommInitRank and
 * rcollCommDestroy. Returns the number of ranks whose init failed (their
 * body is not run). */
int bench_ranks_run(int n, void (*body)(rcollComm_t comm, void *arg), void *const *args);

/* bench_ranks_run on two ranks. */
int bench_pair_run(void (*body)(rcollComm_t comm, void *arg), void *arg0, void *arg1);

#endif
