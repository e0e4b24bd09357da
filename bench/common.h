/* The shared driver of the rcoll benchmarks (nccl-tests compatible).
 *
 * Each bench/<coll>_perf.c describes one collective with a bench_coll_t and
 * calls bench_main(). Everything else - flags, launch (threads, MPI, or the
 * environment), timing, the element-wise check and the table - lives in the
 * bench/common*.c files. Only the public API include/rcoll.h is used. */
#ifndef RCOLL_BENCH_COMMON_H
#define RCOLL_BENCH_COMMON_H

#include <stddef.h>
#include <stdio.h>

#include "rcoll.h"

/* Element counts of one call, as nccl-tests' getCollByteCount defines them.
 * The in-place offsets are in elements and are multiplied by the rank:
 * in place, sendbuff = buf + send_inplace_off * rank and
 * recvbuff = buf + recv_inplace_off * rank. */
typedef struct bench_counts {
  size_t send_count;       /* elements each rank's send buffer holds */
  size_t recv_count;       /* elements each rank's receive buffer holds */
  size_t param_count;      /* the count argument passed to the call */
  size_t send_inplace_off;
  size_t recv_inplace_off;
} bench_counts_t;

/* One call to run: the buffers, the counts and the communicator. */
typedef struct bench_call {
  const void *send;
  void *recv;
  bench_counts_t counts;
  rcollDataType_t type;
  rcollRedOp_t op;
  int root;
  int rank;
  int nranks;
  rcollComm_t comm;
  rcollStream_t stream; /* device runs: the rank's own stream, as nccl-tests; else NULL */
  const char *failed; /* set by run(): the API function that failed */
} bench_call_t;

/* Where one element of a rank's result comes from. */
typedef enum bench_src_kind {
  BENCH_SRC_SKIP = 0, /* not defined by the collective (reduce on a non-root) */
  BENCH_SRC_COPY,     /* input element `index` of rank `rank` */
  BENCH_SRC_REDUCE    /* op over every rank's input element `index` */
} bench_src_kind_t;

typedef struct bench_src {
  bench_src_kind_t kind;
  int rank;
  size_t index;
} bench_src_t;

typedef struct bench_coll {
  const char *name;   /* "all_reduce", as in the JSON output */
  int uses_op;        /* 0: -o is ignored and the redop column shows "none" */
  int uses_root;      /* 0: -r is ignored and the root column shows -1 */
  /* 1: in place the result is undefined (send and receive buffers overlap);
   * the in-place half is timed and its #wrong shows N/A, as nccl-tests. */
  int in_place_unchecked;
  /* Counts for `count` elements of the swept size (nccl-tests semantics). */
  void (*counts)(size_t count, int nranks, bench_counts_t *c);
  /* busbw = algbw * factor. */
  double (*busbw_factor)(int nranks);
  /* Issues the collective; on failure sets call->failed. */
  rcollResult_t (*run)(bench_call_t *call);
  /* Source of element j of the result on rank call->rank. */
  bench_src_t (*source)(const bench_call_t *call, size_t j);
} bench_coll_t;

/* Parses argv, launches the ranks, sweeps the sizes and prints the table.
 * Returns the process exit status. */
int bench_main(int argc, char **argv, const bench_coll_t *coll);

/* s as a JSON string, quotes included (control bytes escaped; UTF-8 passes
 * through). The -J writer's, shared with rcoll_linkcheck. */
void bench_json_str(FILE *f, const char *s);

#endif
