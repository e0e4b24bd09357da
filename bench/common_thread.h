/* The state of one rank of the benchmark driver, shared by common.c (set-up,
 * sweep, checks) and common_time.c (the timed loop). */
#ifndef RCOLL_BENCH_COMMON_THREAD_H
#define RCOLL_BENCH_COMMON_THREAD_H

#include "common_impl.h"

typedef struct bench_thread {
  const bench_coll_t *coll;
  const bench_opts_t *opts;
  bench_world_t *world;
  bench_report_t *report; /* set on global rank 0 only, once the rank is known */
  int thread, rank, nranks;   /* rank and nranks within the group (NCCL_TESTS_SPLIT) */
  int world_rank, color;
  rcollComm_t comm;           /* the group's communicator: the benchmark runs on it */
  rcollComm_t world_comm;     /* every rank's; == comm without a split */
  void *reg_send, *reg_recv;  /* -R 1 handles */
  double *iter_sec;           /* -I: this rank's time of each iteration */
  double *iter_rows;          /* -I, global rank 0: per-process rows, then their max */
  bench_plan_t plan;          /* global rank 0: the transports to its peers */
  unsigned char *send_alloc, *recv_alloc;
  unsigned char *send, *recv; /* data areas of max_bytes, inside the guards, shifted by -u */
  /* Device runs (-G): send/recv above are device memory; these host mirrors
   * (same layout) are where inputs are written and results checked. */
  int device;                 /* CUDA device, -1 for host buffers */
  void *stream;               /* the rank's stream on device runs, else NULL */
  unsigned char *hsend_alloc, *hrecv_alloc;
  unsigned char *hsend, *hrecv;
  uint64_t seed;              /* advanced per checked run */
  int64_t oob;                /* local out-of-bounds events */
  int any_wrong;              /* some row had wrong elements (global) */
  int argc;
  char **argv;
  int64_t mem_start;          /* -M: resident bytes before any communicator */
  pthread_t tid;
} bench_thread_t;

double bench_now_sec(void);
/* A call of the collective on the rank's buffers, at byte offset `shift`. */
bench_call_t bench_make_call(const bench_thread_t *t, const bench_counts_t *c,
                             rcollDataType_t type, rcollRedOp_t op, int root, int in_place,
                             size_t shift);
/* Issues it; a failure ends the run. */
void bench_run_call(bench_thread_t *t, bench_call_t *call);
/* Device runs: waits for the rank's stream; host runs: nothing to wait for. */
void bench_device_wait(bench_thread_t *t);
/* The host mirror of a device call (the call itself on host runs). */
bench_call_t bench_host_view(const bench_thread_t *t, const bench_call_t *call);
void bench_upload_all(bench_thread_t *t);
/* Runs `-c` checked calls; returns the wrong elements summed over all ranks. */
int64_t bench_check_half(bench_thread_t *t, const bench_counts_t *c, rcollDataType_t type,
                         rcollRedOp_t op, int root, int in_place);
/* Times one half (out-of-place or in-place) of a row, then checks it. */
void bench_time_half(bench_thread_t *t, const bench_counts_t *c, rcollDataType_t type,
                     rcollRedOp_t op, int root, int in_place, size_t row_bytes,
                     bench_half_t *out);

#endif
