/* Internal interfaces between the bench/common*.c files. */
#ifndef RCOLL_BENCH_COMMON_IMPL_H
#define RCOLL_BENCH_COMMON_IMPL_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"

/* Exit statuses: wrong results as nccl-tests (1); usage or API failure (2). */
#define BENCH_EXIT_WRONG 1
#define BENCH_EXIT_ERROR 2

/* ---------------------------------------------------------------- options */

#define BENCH_MAX_TYPES 12
#define BENCH_MAX_OPS 5

/* How the per-rank times are combined (-a), as nccl-tests. */
enum bench_average { BENCH_AVG_RANK0 = 0, BENCH_AVG_MEAN, BENCH_AVG_MIN, BENCH_AVG_MAX };

typedef struct bench_opts {
  int nthreads;
  size_t min_bytes, max_bytes;
  size_t step_bytes;
  size_t step_factor; /* > 1: multiplicative sweep; otherwise additive */
  int iters, warmup;
  int agg_iters;      /* -m: calls per timed iteration, in one group */
  int run_cycles;     /* -N: sweeps of the sizes; 0 repeats until killed */
  int check;          /* number of checked runs per size and half */
  int average;        /* enum bench_average */
  int root;           /* -1: every root in turn (-r all) */
  int ntypes;
  rcollDataType_t types[BENCH_MAX_TYPES];
  int nops;
  rcollRedOp_t ops[BENCH_MAX_OPS];
  const char *json_path;
  int device_buffers; /* -1: device when a GPU is present; 0 host; 1 device (--device-buffers) */
  int host_malloc;    /* host buffers from posix_memalign, not rcollMemAlloc: --host-malloc, or a GPU here */
  int blocking;       /* -z 0..3, as nccl-tests */
  int per_iter;       /* -I: per-iteration times and their summary columns */
  int per_iter_skip;  /* -K: leading iterations left out of the summary */
  int cputime;        /* -C: report the time to issue the calls */
  int reg;            /* -R 1: rcollCommRegister the buffers */
  int timestamps;     /* -S */
  int timeout;        /* -T seconds; 0: none */
  int memory;         /* -M */
  int unalign;        /* -u: elements the buffers are shifted by */
  int parallel_init;  /* -p */
} bench_opts_t;

/* Returns 0 to run, 1 when -h printed the usage, -1 on a bad flag (printed). */
int bench_parse_args(int argc, char **argv, const bench_coll_t *coll, bench_opts_t *o);
/* "64", "1K", "4M", "1.5G" (binary multiples); -1 on malformed text. */
int bench_parse_size(const char *text, size_t *out);
/* The next swept size after `size`. */
size_t bench_next_size(const bench_opts_t *o, size_t size);

/* nccl-tests' names: "float", "half", ... and "sum", "prod", ... */
const char *bench_type_name(rcollDataType_t t);
const char *bench_op_name(rcollRedOp_t op);
size_t bench_type_size(rcollDataType_t t);

/* ------------------------------------------------------- values and check */

/* One element: floating types as a double holding an exactly representable
 * value, integer types as their bits zero-extended to 64. */
typedef struct bench_val {
  double f;
  uint64_t u;
} bench_val_t;

int bench_type_is_float(rcollDataType_t t);
uint16_t bench_fp_encode(double d, int mbits, int ebits);
double bench_fp_decode(uint64_t bits, int mbits, int ebits);
bench_val_t bench_load(const void *buf, size_t i, rcollDataType_t t);
void bench_store(void *buf, size_t i, rcollDataType_t t, bench_val_t v);

/* The input element `index` of `rank` for a test of (type, op, seed). */
bench_val_t bench_input(rcollDataType_t t, rcollRedOp_t op, int nranks, int rank, size_t index,
                        uint64_t seed);
void bench_fill_input(void *buf, size_t count, rcollDataType_t t, rcollRedOp_t op, int nranks,
                      int rank, uint64_t seed);

/* Guard bytes on both sides of every buffer catch writes out of bounds. */
#define BENCH_GUARD_BYTES 4096
void bench_guard_set(unsigned char *p, size_t n);
size_t bench_guard_count_bad(const unsigned char *p, size_t n);

/* Counts elements of call->recv (call->counts.recv_count of them) that differ
 * from the expected result, computed here from bench_input(). */
int64_t bench_count_wrong(const bench_coll_t *coll, const bench_call_t *call, uint64_t seed);
/* Counts elements of an out-of-place send buffer the call modified. */
int64_t bench_count_modified_input(const bench_call_t *call, uint64_t seed);

/* ----------------------------------------------------------------- world */

enum bench_launch { BENCH_LAUNCH_THREADS = 0, BENCH_LAUNCH_MPI, BENCH_LAUNCH_ENV };
enum bench_reduce { BENCH_RED_RANK0 = 0, BENCH_RED_MEAN, BENCH_RED_MIN, BENCH_RED_MAX,
                    BENCH_RED_SUM };

#define BENCH_LINE_MAX 256

/* The ranks of one run: nprocs processes of nthreads threads each. Local
 * threads meet in `sync`; local thread 0 then talks to the other processes
 * (through MPI, or through the communicator itself in environment mode). */
typedef struct bench_world {
  int launch;
  int nprocs, proc;
  int nthreads;
  int nranks;
  rcollUniqueId id;
  rcollComm_t env_comm; /* environment mode: the one rank of this process */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived;
  unsigned generation;
  double acc, result;
  char (*lines)[BENCH_LINE_MAX]; /* one per local thread, for the rank list */
  double *vec;                   /* per-iteration times folded over local threads */
  size_t vec_cap;
} bench_world_t;

/* Decides the launch mode from MPI and the environment. Returns 0 or -1. */
int bench_world_init(bench_world_t *w, int *argc, char ***argv, int nthreads);
/* Creates this thread's communicator; returns its global rank or -1. */
int bench_world_comm_init(bench_world_t *w, int thread, rcollComm_t *comm);
void bench_world_finalize(bench_world_t *w);
/* Ends the whole run after an error (every process, under MPI). */
void bench_world_abort(bench_world_t *w, int status) __attribute__((noreturn));

/* Collective over every rank (all threads of all processes). */
double bench_world_reduce(bench_world_t *w, int thread, double v, int how);
void bench_world_barrier(bench_world_t *w, int thread);
/* Gathers each rank's line; on global rank 0, out receives all of them in
 * rank order (nranks lines of BENCH_LINE_MAX). */
void bench_world_gather_lines(bench_world_t *w, int thread, const char *line, char *out);

/* -I: each process's per-iteration times (the max over its threads of
 * `times`, n of them) land on global rank 0 as rows (nprocs x n, process
 * order); other ranks pass rows = NULL. */
void bench_world_gather_iters(bench_world_t *w, int thread, const double *times, int n,
                              double *rows);

/* Prints "rank R: <fn> failed: ..." and ends the run. */
void bench_fail(bench_world_t *w, int rank, rcollComm_t comm, const char *fn, rcollResult_t r)
    __attribute__((noreturn));

/* ------------------------------------------------------- device buffers */

/* CUDA devices here (0 without a driver, a runtime or a GPU). */
int bench_cuda_devices(void);
/* Selects this rank's device (local rank modulo the devices) and returns it. */
int bench_cuda_select(int local_index, int rank);
void *bench_cuda_alloc(size_t bytes, int rank);
void bench_cuda_free(void *p);
void bench_cuda_upload(void *dev, const void *host, size_t bytes, int rank);
void bench_cuda_download(void *host, const void *dev, size_t bytes, int rank);
void bench_cuda_sync(int rank);
/* A non-blocking stream for the rank's calls: on the legacy default stream
 * rcoll's device calls return only once done (docs/gpu.md), and the timed
 * loop, as nccl-tests', queues its calls and waits once at the end. */
void *bench_cuda_stream_create(int rank);
void bench_cuda_stream_destroy(void *stream);

/* ------------------------------------------------- what the library uses */

#define BENCH_MAX_CLASSES 8

/* Rank 0's peers of one class ("node-local", "remote") on one transport. */
typedef struct bench_peer_class {
  char cls[16];
  char transport[128];
  int peers;
} bench_peer_class_t;

typedef struct bench_plan {
  int nclasses;
  bench_peer_class_t classes[BENCH_MAX_CLASSES];
} bench_plan_t;

/* Rank `rank` (global rank 0) asks the library for the transport to each
 * peer, and whether it is on the same node. */
void bench_plan_transports(bench_plan_t *p, rcollComm_t world_comm, int rank, int nranks);
/* The algorithm and chunk of a call moving `bytes`; -1 (and "") when the
 * library plans none for this collective. */
int bench_plan_algorithm(rcollComm_t comm, const char *coll, size_t bytes, char *algo,
                         size_t len, size_t *chunk);
void bench_plan_print(const bench_plan_t *p);
void bench_plan_print_algorithms(rcollComm_t comm, const bench_coll_t *coll,
                                 const bench_opts_t *o);

/* ---------------------------------------------------------------- report */

/* -I summary of one half, over the iterations after -K's skip. */
typedef struct bench_iter_stats {
  double min, max, avg, p50, p95, p99, stdev, cv_pct; /* microseconds; cv in % */
} bench_iter_stats_t;

typedef struct bench_half {
  double time_us, algbw, busbw; /* time_us is the CPU time under -C */
  int64_t wrong; /* -1: not checked */
  /* -I, on global rank 0: per-iteration times in us, each the max over the
   * process rows; and the rows themselves (nprocs x iters). */
  const double *iter_us;
  const double *proc_iter_us;
  int nprocs;
} bench_half_t;

typedef struct bench_row {
  size_t size, count;
  const char *type, *redop;
  int root;
  bench_half_t half[2]; /* out-of-place, in-place */
  char algo[64];        /* the library's algorithm for this size ("" unknown) */
  size_t chunk;
} bench_row_t;

/* Host memory of one process (-M), in bytes, as the max over processes. */
typedef struct bench_mem {
  int64_t init, buffers, collective;
} bench_mem_t;

typedef struct bench_report {
  const bench_opts_t *opts;
  const bench_plan_t *plan;
  rcollComm_t comm; /* global rank 0's: where the algorithms are asked */
  FILE *json;
  int json_rows;
  double bw_sum;
  int bw_count;
} bench_report_t;

void bench_report_header(bench_report_t *r, const bench_opts_t *o, const bench_world_t *w,
                         const bench_coll_t *coll, const char *rank_lines, int argc,
                         char **argv);
void bench_report_row(bench_report_t *r, const bench_coll_t *coll, const bench_row_t *row);
/* Returns 1 when NCCL_TESTS_MIN_BW is set and the average bus bandwidth
 * falls below 90% of it, as nccl-tests. */
int bench_report_footer(bench_report_t *r, int64_t out_of_bounds, const bench_mem_t *mem);

/* nccl-tests' -I summary (nearest-rank percentiles, population stdev). */
void bench_iter_stats(const double *us, int n, bench_iter_stats_t *s);
/* nccl-tests' fixed-width number: as many decimals (2, 1, 0) as fit, else %e. */
void bench_format_num(char *buf, int width, double v);
/* "%Y-%m-%d %H:%M:%S", local time, as nccl-tests' -S and JSON stamps. */
void bench_format_now(char *buf, size_t len);

/* JSON in nccl-tests' schema (its version 3, as tools/analyze_perf_json.py
 * reads it), with rcoll's own fields beside nccl-tests'. */
FILE *bench_json_open(const char *path);
void bench_json_header(FILE *f, const bench_opts_t *o, const bench_world_t *w,
                       const bench_coll_t *coll, const char *rank_lines, int argc, char **argv,
                       const bench_plan_t *plan);
void bench_json_row(FILE *f, int index, const bench_opts_t *o, const bench_coll_t *coll,
                    const bench_row_t *row);
void bench_json_footer(FILE *f, int64_t out_of_bounds, double avg_busbw, double min_bw);

/* -T: ends the run when no rank has made progress for `seconds`. */
void bench_watchdog_start(bench_world_t *w, int seconds);
void bench_watchdog_beat(void);

/* NCCL_TESTS_SPLIT / NCCL_TESTS_SPLIT_MASK: the group of a rank (0 when
 * unset); -1 after printing why the value does not parse. */
int bench_split_color(int rank, int *color);

#endif
