/* Two ranks as threads of this process, for the benches on the CUDA fake
 * (bench_bounce.c, bench_staging.c). */
#ifndef RCOLL_TESTS_SUPPORT_BENCH_PAIR_H
#define RCOLL_TESTS_SUPPORT_BENCH_PAIR_H

#include "rcoll.h"

/* CLOCK_MONOTONIC in microseconds. */
double bench_now_us(void);

/* Runs body(comm, args[r]) on ranks 0 and 1 of one new communicator, each
 * in a thread, between rcollCommInitRank and rcollCommDestroy. Returns the
 * number of ranks whose init failed (their body is not run). */
int bench_pair_run(void (*body)(rcollComm_t comm, void *arg), void *arg0, void *arg1);

#endif
