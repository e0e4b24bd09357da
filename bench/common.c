/* The benchmark driver: one thread per local rank, each with its own
 * communicator and buffers, sweeping sizes as nccl-tests does.
 *
 * Per (type, op): warm up at the largest and the smallest size, then for each
 * size and for out-of-place then in-place: one untimed call, a barrier, `-n`
 * timed calls (each at a different offset of the big buffers, as nccl-tests,
 * so that small sizes are not served from a warm cache), and `-c` checked
 * calls whose every element is compared with an independently computed
 * expectation, with guard bytes around the buffers. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common_impl.h"

typedef struct bench_thread {
  const bench_coll_t *coll;
  const bench_opts_t *opts;
  bench_world_t *world;
  bench_report_t *report; /* set on global rank 0 only, once the rank is known */
  int thread, rank, nranks;
  rcollComm_t comm;
  unsigned char *send_alloc, *recv_alloc;
  unsigned char *send, *recv; /* data areas of max_bytes, inside the guards */
  uint64_t seed;              /* advanced per checked run */
  int64_t oob;                /* local out-of-bounds events */
  int any_wrong;              /* some row had wrong elements (global) */
  int argc;
  char **argv;
  pthread_t tid;
} bench_thread_t;

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t max_size(size_t a, size_t b) {
  return a > b ? a : b;
}

/* ---- buffers ---- */

static unsigned char *alloc_buffer(size_t data_bytes, unsigned char **data) {
  size_t bytes = BENCH_GUARD_BYTES + data_bytes + BENCH_GUARD_BYTES;
  void *p = NULL;
  if (posix_memalign(&p, 4096, bytes) != 0)
    return NULL;
  memset(p, 0, bytes); /* touch every page before anything is timed */
  *data = (unsigned char *)p + BENCH_GUARD_BYTES;
  bench_guard_set(*data - BENCH_GUARD_BYTES, BENCH_GUARD_BYTES);
  return p;
}

static void alloc_buffers(bench_thread_t *t) {
  t->send_alloc = alloc_buffer(t->opts->max_bytes, &t->send);
  t->recv_alloc = alloc_buffer(t->opts->max_bytes, &t->recv);
  if (!t->send_alloc || !t->recv_alloc) {
    fprintf(stderr, "rank %d: cannot allocate 2 x %zu bytes of buffers\n", t->rank,
            t->opts->max_bytes);
    rcollCommAbort(t->comm);
    bench_world_abort(t->world, BENCH_EXIT_ERROR);
  }
}

/* ---- one call ---- */

static bench_call_t make_call(const bench_thread_t *t, const bench_counts_t *c,
                              rcollDataType_t type, rcollRedOp_t op, int root, int in_place,
                              size_t shift) {
  size_t ws = bench_type_size(type);
  bench_call_t call = {.counts = *c, .type = type, .op = op, .root = root, .rank = t->rank,
                       .nranks = t->nranks, .comm = t->comm};
  if (in_place) {
    unsigned char *base = t->recv + shift;
    call.send = base + c->send_inplace_off * (size_t)t->rank * ws;
    call.recv = base + c->recv_inplace_off * (size_t)t->rank * ws;
  } else {
    call.send = t->send + shift;
    call.recv = t->recv + shift;
  }
  return call;
}

static void run_call(bench_thread_t *t, bench_call_t *call) {
  call->failed = NULL;
  rcollResult_t r = t->coll->run(call);
  if (r != rcollSuccess)
    bench_fail(t->world, t->rank, t->comm, call->failed ? call->failed : "collective", r);
}

/* ---- checked run ---- */

/* Bytes of the receive buffer a call may touch, from its start. */
static size_t used_bytes(const bench_call_t *call, int in_place) {
  const bench_counts_t *c = &call->counts;
  size_t ws = bench_type_size(call->type);
  if (!in_place)
    return c->recv_count * ws;
  size_t rank = (size_t)call->rank;
  return max_size(c->send_inplace_off * rank + c->send_count,
                  c->recv_inplace_off * rank + c->recv_count) * ws;
}

/* Poisons the result area (all-ones bytes: NaN in every floating type),
 * writes the inputs and arms the guards. */
static void prepare_check(bench_thread_t *t, const bench_call_t *call, int in_place) {
  size_t ws = bench_type_size(call->type);
  size_t used = used_bytes(call, in_place);
  memset(t->recv, 0xff, used);
  bench_fill_input((void *)call->send, call->counts.send_count, call->type, call->op, t->nranks,
                   t->rank, t->seed);
  bench_guard_set(t->recv + used, BENCH_GUARD_BYTES);
  if (!in_place)
    bench_guard_set(t->send + call->counts.send_count * ws, BENCH_GUARD_BYTES);
}

/* Counts bytes written outside the buffers, and send elements modified. */
static int64_t count_out_of_bounds(bench_thread_t *t, const bench_call_t *call, int in_place) {
  size_t ws = bench_type_size(call->type);
  int64_t bad = (int64_t)bench_guard_count_bad(t->recv + used_bytes(call, in_place),
                                               BENCH_GUARD_BYTES);
  bad += (int64_t)bench_guard_count_bad(t->recv - BENCH_GUARD_BYTES, BENCH_GUARD_BYTES);
  if (!in_place) {
    bad += (int64_t)bench_guard_count_bad(t->send + call->counts.send_count * ws,
                                          BENCH_GUARD_BYTES);
    bad += (int64_t)bench_guard_count_bad(t->send - BENCH_GUARD_BYTES, BENCH_GUARD_BYTES);
    bad += bench_count_modified_input(call, t->seed);
  }
  if (bad) {
    fprintf(stderr, "rank %d: %lld bytes/elements changed outside the result buffer\n", t->rank,
            (long long)bad);
    bench_guard_set(t->recv - BENCH_GUARD_BYTES, BENCH_GUARD_BYTES);
    bench_guard_set(t->send - BENCH_GUARD_BYTES, BENCH_GUARD_BYTES);
  }
  return bad;
}

/* Runs `-c` checked calls; returns the wrong elements summed over all ranks. */
static int64_t check_half(bench_thread_t *t, const bench_counts_t *c, rcollDataType_t type,
                          rcollRedOp_t op, int root, int in_place) {
  int64_t wrong = 0;
  for (int i = 0; i < t->opts->check; i++) {
    t->seed++;
    bench_call_t call = make_call(t, c, type, op, root, in_place, 0);
    prepare_check(t, &call, in_place);
    run_call(t, &call);
    int64_t local = bench_count_wrong(t->coll, &call, t->seed);
    /* As nccl-tests: each rank's failing check is one out-of-bounds event. */
    t->oob += (local > 0) + count_out_of_bounds(t, &call, in_place);
    wrong = (int64_t)bench_world_reduce(t->world, t->thread, (double)local, BENCH_RED_SUM);
    if (wrong)
      break;
  }
  return wrong;
}

/* ---- timing ---- */

static void time_half(bench_thread_t *t, const bench_counts_t *c, rcollDataType_t type,
                      rcollRedOp_t op, int root, int in_place, size_t row_bytes,
                      bench_half_t *out) {
  const bench_opts_t *o = t->opts;
  bench_call_t call = make_call(t, c, type, op, root, in_place, 0);
  if (o->check)
    bench_fill_input((void *)call.send, c->send_count, type, op, t->nranks, t->rank, 99);
  run_call(t, &call);
  bench_world_barrier(t->world, t->thread);

  size_t steps = row_bytes ? o->max_bytes / row_bytes : 1;
  double start = now_sec();
  for (int iter = 0; iter < o->iters; iter++) {
    call = make_call(t, c, type, op, root, in_place, row_bytes * ((size_t)iter % steps));
    run_call(t, &call);
  }
  double sec = (now_sec() - start) / o->iters;
  sec = bench_world_reduce(t->world, t->thread, sec, o->average);
  bench_world_barrier(t->world, t->thread);

  out->time_us = sec * 1e6;
  out->algbw = sec > 0 ? (double)row_bytes / 1e9 / sec : 0.0;
  out->busbw = out->algbw * t->coll->busbw_factor(t->nranks);
  int checked = o->check && !(in_place && t->coll->in_place_unchecked);
  out->wrong = checked ? check_half(t, c, type, op, root, in_place) : -1;
  if (out->wrong > 0)
    t->any_wrong = 1;
}

static void warmup(bench_thread_t *t, size_t bytes, rcollDataType_t type, rcollRedOp_t op,
                   int root) {
  bench_counts_t c;
  t->coll->counts(bytes / bench_type_size(type), t->nranks, &c);
  bench_call_t call = make_call(t, &c, type, op, root, 0, 0);
  for (int i = 0; i < t->opts->warmup; i++)
    run_call(t, &call);
}

static void sweep(bench_thread_t *t, rcollDataType_t type, rcollRedOp_t op) {
  const bench_opts_t *o = t->opts;
  const size_t ws = bench_type_size(type);
  const int root = t->coll->uses_root ? o->root : -1;
  bench_world_barrier(t->world, t->thread);
  warmup(t, o->max_bytes, type, op, root);
  warmup(t, o->min_bytes, type, op, root);
  for (size_t size = o->min_bytes; size <= o->max_bytes;) {
    bench_counts_t c;
    t->coll->counts(size / ws, t->nranks, &c);
    bench_row_t row = {.size = max_size(c.send_count, c.recv_count) * ws,
                       .count = c.param_count, .type = bench_type_name(type),
                       .redop = t->coll->uses_op ? bench_op_name(op) : "none", .root = root};
    for (int in_place = 0; in_place < 2; in_place++)
      time_half(t, &c, type, op, root, in_place, row.size, &row.half[in_place]);
    if (t->report)
      bench_report_row(t->report, t->coll, &row);
    size_t next = bench_next_size(o, size);
    if (next <= size)
      break; /* the size wrapped around */
    size = next;
  }
}

/* ---- per-rank thread ---- */

static void print_header(bench_thread_t *t) {
  char line[BENCH_LINE_MAX], host[64] = "unknown";
  gethostname(host, sizeof(host) - 1);
  snprintf(line, sizeof(line), "#  Rank %2d Group %2d Pid %6d on %10s device %2d [cpu] host",
           t->rank, 0, (int)getpid(), host, 0);
  char *lines = NULL;
  if (t->thread == 0 && !(lines = calloc((size_t)t->nranks, BENCH_LINE_MAX))) {
    fprintf(stderr, "rank %d: out of memory\n", t->rank);
    bench_world_abort(t->world, BENCH_EXIT_ERROR);
  }
  bench_world_gather_lines(t->world, t->thread, line, lines);
  if (t->report)
    bench_report_header(t->report, t->opts, t->world, t->coll, lines, t->argc, t->argv);
  free(lines);
}

static void check_root(bench_thread_t *t) {
  if (!t->coll->uses_root || t->opts->root < t->nranks)
    return;
  if (t->rank == 0)
    fprintf(stderr, "invalid root %d: there are %d ranks\n", t->opts->root, t->nranks);
  rcollCommAbort(t->comm);
  bench_world_abort(t->world, BENCH_EXIT_ERROR);
}

static void *thread_main(void *arg) {
  bench_thread_t *t = arg;
  const bench_opts_t *o = t->opts;
  t->rank = bench_world_comm_init(t->world, t->thread, &t->comm);
  t->nranks = t->world->nranks;
  if (t->rank != 0)
    t->report = NULL;
  check_root(t);
  alloc_buffers(t);
  print_header(t);
  for (int i = 0; i < o->ntypes; i++)
    for (int j = 0; j < (t->coll->uses_op ? o->nops : 1); j++)
      sweep(t, o->types[i], t->coll->uses_op ? o->ops[j] : rcollSum);
  int64_t oob = (int64_t)bench_world_reduce(t->world, t->thread, (double)t->oob, BENCH_RED_SUM);
  if (t->report)
    bench_report_footer(t->report, oob);
  if (oob)
    t->any_wrong = 1;
  bench_world_barrier(t->world, t->thread);
  rcollResult_t r = rcollCommDestroy(t->comm);
  if (r != rcollSuccess)
    bench_fail(t->world, t->rank, NULL, "rcollCommDestroy", r);
  free(t->send_alloc);
  free(t->recv_alloc);
  return NULL;
}

int bench_main(int argc, char **argv, const bench_coll_t *coll) {
  setlinebuf(stdout);
  bench_opts_t opts;
  int parsed = bench_parse_args(argc, argv, coll, &opts);
  if (parsed != 0)
    return parsed > 0 ? 0 : BENCH_EXIT_ERROR;
  bench_world_t world;
  if (bench_world_init(&world, &argc, &argv, opts.nthreads) != 0)
    return BENCH_EXIT_ERROR;
  bench_report_t report = {0};
  bench_thread_t *threads = calloc((size_t)opts.nthreads, sizeof(*threads));
  if (!threads)
    return BENCH_EXIT_ERROR;
  for (int i = 0; i < opts.nthreads; i++)
    threads[i] = (bench_thread_t){.coll = coll, .opts = &opts, .world = &world, .thread = i,
                                  .report = &report, .argc = argc, .argv = argv};
  for (int i = 1; i < opts.nthreads; i++)
    if (pthread_create(&threads[i].tid, NULL, thread_main, &threads[i]) != 0) {
      fprintf(stderr, "cannot start thread %d\n", i);
      bench_world_abort(&world, BENCH_EXIT_ERROR);
    }
  thread_main(&threads[0]);
  for (int i = 1; i < opts.nthreads; i++)
    pthread_join(threads[i].tid, NULL);
  int status = threads[0].any_wrong ? BENCH_EXIT_WRONG : 0;
  free(threads);
  bench_world_finalize(&world);
  return status;
}
