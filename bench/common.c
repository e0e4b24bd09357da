/* The benchmark driver: one thread per local rank, each with its own
 * communicator and buffers, sweeping sizes as nccl-tests does.
 *
 * Per (type, op, root): warm up at every size from the smallest, doubling,
 * at the largest, and at the smallest again; then
 * -N times, for each size and for out-of-place then in-place: a barrier,
 * one untimed call, the timed loop (common_time.c), one more untimed call
 * (common_time.c says why), and `-c` checked calls
 * whose every element is compared with an independently computed
 * expectation, with guard bytes around the buffers. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common_thread.h"

double bench_now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t max_size(size_t a, size_t b) {
  return a > b ? a : b;
}

/* ---- buffers ---- */

/* Host buffers come from rcollMemAlloc, as nccl-tests takes its buffers
 * from ncclMemAlloc (a peer process can then map them: lib/memalloc.c), or
 * with --host-malloc from posix_memalign, as most applications' do. */
static unsigned char *alloc_buffer(size_t data_bytes, int pool, unsigned char **data) {
  size_t bytes = BENCH_GUARD_BYTES + data_bytes + BENCH_GUARD_BYTES;
  void *p = NULL;
  if (pool ? rcollMemAlloc(&p, bytes) != rcollSuccess : posix_memalign(&p, 4096, bytes) != 0)
    return NULL;
  memset(p, 0, bytes); /* touch every page before anything is timed */
  *data = (unsigned char *)p + BENCH_GUARD_BYTES;
  bench_guard_set(*data - BENCH_GUARD_BYTES, BENCH_GUARD_BYTES);
  return p;
}

/* -u shifts the buffers by up to unalign elements of 8 bytes. */
static size_t data_bytes(const bench_thread_t *t) {
  return t->opts->max_bytes + 8 * (size_t)t->opts->unalign;
}

static size_t alloc_bytes(const bench_thread_t *t) {
  return BENCH_GUARD_BYTES + data_bytes(t) + BENCH_GUARD_BYTES;
}

/* Device runs: device buffers beside host mirrors of the same layout, which
 * take the inputs and guards and are copied to the device before a checked
 * call, and get the results back after it. */
static void alloc_device_buffers(bench_thread_t *t) {
  t->device = bench_cuda_select(t->thread, t->rank);
  t->stream = bench_cuda_stream_create(t->rank);
  t->hsend_alloc = alloc_buffer(data_bytes(t), 0, &t->hsend);
  t->hrecv_alloc = alloc_buffer(data_bytes(t), 0, &t->hrecv);
  if (!t->hsend_alloc || !t->hrecv_alloc)
    return;
  t->send_alloc = bench_cuda_alloc(alloc_bytes(t), t->rank);
  t->recv_alloc = bench_cuda_alloc(alloc_bytes(t), t->rank);
  t->send = t->send_alloc + BENCH_GUARD_BYTES;
  t->recv = t->recv_alloc + BENCH_GUARD_BYTES;
  bench_cuda_upload(t->send_alloc, t->hsend_alloc, alloc_bytes(t), t->rank);
  bench_cuda_upload(t->recv_alloc, t->hrecv_alloc, alloc_bytes(t), t->rank);
}

/* -R 1: the whole allocations, guards included, registered once, as
 * nccl-tests registers its buffers before the sweep. */
static void register_buffers(bench_thread_t *t) {
  if (!t->opts->reg)
    return;
  rcollResult_t r = rcollCommRegister(t->comm, t->send_alloc, alloc_bytes(t), &t->reg_send);
  if (r == rcollSuccess)
    r = rcollCommRegister(t->comm, t->recv_alloc, alloc_bytes(t), &t->reg_recv);
  if (r != rcollSuccess)
    bench_fail(t->world, t->rank, t->comm, "rcollCommRegister", r);
}

static void alloc_buffers(bench_thread_t *t) {
  t->device = -1;
  if (t->opts->device_buffers == 1) {
    alloc_device_buffers(t);
  } else {
    t->send_alloc = alloc_buffer(data_bytes(t), !t->opts->host_malloc, &t->send);
    t->recv_alloc = alloc_buffer(data_bytes(t), !t->opts->host_malloc, &t->recv);
    t->hsend_alloc = t->send_alloc, t->hsend = t->send;
    t->hrecv_alloc = t->recv_alloc, t->hrecv = t->recv;
  }
  if (!t->send_alloc || !t->recv_alloc || !t->hsend_alloc || !t->hrecv_alloc) {
    fprintf(stderr, "rank %d: cannot allocate 2 x %zu bytes of buffers\n", t->rank,
            t->opts->max_bytes);
    rcollCommAbort(t->comm);
    bench_world_abort(t->world, BENCH_EXIT_ERROR);
  }
  register_buffers(t);
}

/* -u: as nccl-tests, the buffers start `unalign` elements of the swept type
 * past their aligned base, for every size; the guards move with them. */
static void set_unalign(bench_thread_t *t, rcollDataType_t type) {
  size_t shift = (size_t)t->opts->unalign * bench_type_size(type);
  t->send = t->send_alloc + BENCH_GUARD_BYTES + shift;
  t->recv = t->recv_alloc + BENCH_GUARD_BYTES + shift;
  t->hsend = t->hsend_alloc + BENCH_GUARD_BYTES + shift;
  t->hrecv = t->hrecv_alloc + BENCH_GUARD_BYTES + shift;
  bench_guard_set(t->hsend - BENCH_GUARD_BYTES, BENCH_GUARD_BYTES);
  bench_guard_set(t->hrecv - BENCH_GUARD_BYTES, BENCH_GUARD_BYTES);
  bench_upload_all(t);
}

/* ---- one call ---- */

bench_call_t bench_make_call(const bench_thread_t *t, const bench_counts_t *c,
                              rcollDataType_t type, rcollRedOp_t op, int root, int in_place,
                              size_t shift) {
  size_t ws = bench_type_size(type);
  bench_call_t call = {.counts = *c, .type = type, .op = op, .root = root, .rank = t->rank,
                       .nranks = t->nranks, .comm = t->comm, .stream = t->stream};
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

void bench_run_call(bench_thread_t *t, bench_call_t *call) {
  call->failed = NULL;
  rcollResult_t r = t->coll->run(call);
  if (r != rcollSuccess)
    bench_fail(t->world, t->rank, t->comm, call->failed ? call->failed : "collective", r);
}

/* A device call returns before it runs: wait for it, and report a failure
 * it met after returning (the communicator's async error). */
void bench_device_wait(bench_thread_t *t) {
  if (t->device < 0)
    return;
  bench_cuda_sync(t->rank);
  rcollResult_t async = rcollSuccess;
  rcollCommGetAsyncError(t->comm, &async);
  if (async != rcollSuccess)
    bench_fail(t->world, t->rank, t->comm, "a device collective (async error)", async);
}

/* The host mirror of a call: the same offsets in the host buffers. */
bench_call_t bench_host_view(const bench_thread_t *t, const bench_call_t *call) {
  bench_call_t h = *call;
  h.send = t->hrecv + ((const unsigned char *)call->send - t->recv);
  if ((const unsigned char *)call->send >= t->send && (const unsigned char *)call->send <= t->send +
      data_bytes(t))
    h.send = t->hsend + ((const unsigned char *)call->send - t->send);
  h.recv = t->hrecv + ((unsigned char *)call->recv - t->recv);
  return h;
}

void bench_upload_all(bench_thread_t *t) {
  if (t->device < 0)
    return;
  bench_cuda_upload(t->send_alloc, t->hsend_alloc, alloc_bytes(t), t->rank);
  bench_cuda_upload(t->recv_alloc, t->hrecv_alloc, alloc_bytes(t), t->rank);
}

static void download_all(bench_thread_t *t) {
  if (t->device < 0)
    return;
  bench_cuda_download(t->hsend_alloc, t->send_alloc, alloc_bytes(t), t->rank);
  bench_cuda_download(t->hrecv_alloc, t->recv_alloc, alloc_bytes(t), t->rank);
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
static void prepare_check(bench_thread_t *t, const bench_call_t *dcall, int in_place) {
  bench_call_t h = bench_host_view(t, dcall);
  const bench_call_t *call = &h;
  size_t ws = bench_type_size(call->type);
  size_t used = used_bytes(call, in_place);
  memset(t->hrecv, 0xff, used);
  bench_fill_input((void *)call->send, call->counts.send_count, call->type, call->op, t->nranks,
                   t->rank, t->seed);
  bench_guard_set(t->hrecv + used, BENCH_GUARD_BYTES);
  if (!in_place)
    bench_guard_set(t->hsend + call->counts.send_count * ws, BENCH_GUARD_BYTES);
  bench_upload_all(t);
}

/* Counts bytes written outside the buffers, and send elements modified. */
/* On the host mirrors (downloaded after a device call). */
static int64_t count_out_of_bounds(bench_thread_t *t, const bench_call_t *call, int in_place) {
  size_t ws = bench_type_size(call->type);
  int64_t bad = (int64_t)bench_guard_count_bad(t->hrecv + used_bytes(call, in_place),
                                               BENCH_GUARD_BYTES);
  bad += (int64_t)bench_guard_count_bad(t->hrecv - BENCH_GUARD_BYTES, BENCH_GUARD_BYTES);
  if (!in_place) {
    bad += (int64_t)bench_guard_count_bad(t->hsend + call->counts.send_count * ws,
                                          BENCH_GUARD_BYTES);
    bad += (int64_t)bench_guard_count_bad(t->hsend - BENCH_GUARD_BYTES, BENCH_GUARD_BYTES);
    bad += bench_count_modified_input(call, t->seed);
  }
  if (bad) {
    fprintf(stderr, "rank %d: %lld bytes/elements changed outside the result buffer\n", t->rank,
            (long long)bad);
    bench_guard_set(t->hrecv - BENCH_GUARD_BYTES, BENCH_GUARD_BYTES);
    bench_guard_set(t->hsend - BENCH_GUARD_BYTES, BENCH_GUARD_BYTES);
  }
  return bad;
}

/* Runs `-c` checked calls; returns the wrong elements summed over all ranks. */
int64_t bench_check_half(bench_thread_t *t, const bench_counts_t *c, rcollDataType_t type,
                          rcollRedOp_t op, int root, int in_place) {
  int64_t wrong = 0;
  for (int i = 0; i < t->opts->check; i++) {
    t->seed++;
    bench_call_t call = bench_make_call(t, c, type, op, root, in_place, 0);
    bench_watchdog_beat();
    prepare_check(t, &call, in_place);
    bench_run_call(t, &call);
    bench_device_wait(t);
    download_all(t);
    bench_call_t h = bench_host_view(t, &call);
    int64_t local = bench_count_wrong(t->coll, &h, t->seed);
    /* As nccl-tests: each rank's failing check is one out-of-bounds event. */
    t->oob += (local > 0) + count_out_of_bounds(t, &h, in_place);
    wrong = (int64_t)bench_world_reduce(t->world, t->thread, (double)local, BENCH_RED_SUM);
    if (wrong)
      break;
  }
  return wrong;
}

static void warmup(bench_thread_t *t, size_t bytes, rcollDataType_t type, rcollRedOp_t op,
                   int root) {
  bench_counts_t c;
  t->coll->counts(bytes / bench_type_size(type), t->nranks, &c);
  bench_call_t call = bench_make_call(t, &c, type, op, root, 0, 0);
  for (int i = 0; i < t->opts->warmup; i++) {
    bench_run_call(t, &call);
    bench_watchdog_beat(); /* -T: a long warm-up is progress too */
  }
  bench_device_wait(t);
}

/* One pass over the sizes: a row per size. */
static void sweep_sizes(bench_thread_t *t, rcollDataType_t type, rcollRedOp_t op, int root) {
  const bench_opts_t *o = t->opts;
  const size_t ws = bench_type_size(type);
  for (size_t size = o->min_bytes; size <= o->max_bytes;) {
    bench_counts_t c;
    t->coll->counts(size / ws, t->nranks, &c);
    bench_row_t row = {.size = max_size(c.send_count, c.recv_count) * ws,
                       .count = c.param_count, .type = bench_type_name(type),
                       .redop = t->coll->uses_op ? bench_op_name(op) : "none", .root = root};
    for (int in_place = 0; in_place < 2; in_place++)
      bench_time_half(t, &c, type, op, root, in_place, row.size, &row.half[in_place]);
    if (t->report) /* asked after the timing, which it must not disturb */
      bench_plan_algorithm(t->comm, t->coll->name, row.size, row.algo, sizeof(row.algo),
                           &row.chunk);
    if (t->report)
      bench_report_row(t->report, t->coll, &row);
    size_t next = bench_next_size(o, size);
    if (next <= size)
      break; /* the size wrapped around */
    size = next;
  }
}

/* Per (type, op, root): warm up, then -N passes over the sizes (0: until
 * killed). */
static void sweep(bench_thread_t *t, rcollDataType_t type, rcollRedOp_t op, int root) {
  const bench_opts_t *o = t->opts;
  set_unalign(t, type);
  bench_world_barrier(t->world, t->thread);
  /* As nccl-tests: -w calls at every size from the smallest, doubling; and
   * at the largest, which doubling may step over. */
  size_t size = o->min_bytes;
  for (; size <= o->max_bytes && size != 0; size *= 2)
    warmup(t, size, type, op, root);
  if (size == 0 || size / 2 != o->max_bytes)
    warmup(t, o->max_bytes, type, op, root);
  /* And last at the first size timed, as nccl-tests' TimeTest ends its
   * warm-up (the largest, then the smallest): the first timed row follows
   * calls of its own size, not the largest ones. Right after 64 MiB, the
   * first 8-byte calls between 2 namespaces were at times 60 us instead of
   * 7 (the kernel had woken both ranks on one core; it still can). */
  if (o->min_bytes != o->max_bytes)
    warmup(t, o->min_bytes, type, op, root);
  for (long cycle = 0; o->run_cycles == 0 || cycle < o->run_cycles; cycle++)
    sweep_sizes(t, type, op, root);
}

/* -r all (nccl-tests' -1): every rank of the group is the root in turn. */
static void sweep_roots(bench_thread_t *t, rcollDataType_t type, rcollRedOp_t op) {
  if (!t->coll->uses_root) {
    sweep(t, type, op, -1);
    return;
  }
  int first = t->opts->root < 0 ? 0 : t->opts->root;
  int last = t->opts->root < 0 ? t->nranks - 1 : t->opts->root;
  for (int root = first; root <= last; root++)
    sweep(t, type, op, root);
}

/* ---- per-rank thread ---- */

static void print_header(bench_thread_t *t) {
  char line[BENCH_LINE_MAX], host[64] = "unknown";
  gethostname(host, sizeof(host) - 1);
  snprintf(line, sizeof(line), "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s",
           t->world_rank, t->color, (int)getpid(), host, t->device < 0 ? 0 : t->device,
           t->device < 0 ? "cpu" : "gpu", t->device < 0 ? "host buffers" : "device buffers");
  char *lines = NULL;
  if (t->thread == 0 && !(lines = calloc((size_t)t->world->nranks, BENCH_LINE_MAX))) {
    fprintf(stderr, "rank %d: out of memory\n", t->rank);
    bench_world_abort(t->world, BENCH_EXIT_ERROR);
  }
  bench_world_gather_lines(t->world, t->thread, line, lines);
  if (t->report) {
    bench_plan_transports(&t->plan, t->world_comm, t->world_rank, t->world->nranks);
    t->report->plan = &t->plan;
    t->report->comm = t->comm;
  }
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

/* NCCL_TESTS_SPLIT: the benchmark runs on the rank's group, a communicator
 * split from everyone's; the driver's own barriers stay world-wide. */
static void join_group(bench_thread_t *t) {
  t->world_comm = t->comm;
  if (bench_split_color(t->world_rank, &t->color) != 0) {
    rcollCommAbort(t->comm);
    bench_world_abort(t->world, BENCH_EXIT_ERROR);
  }
  if (!getenv("NCCL_TESTS_SPLIT") && !getenv("NCCL_TESTS_SPLIT_MASK"))
    return;
  rcollResult_t r = rcollCommSplit(t->world_comm, t->color, t->world_rank, &t->comm, NULL);
  if (r == rcollSuccess)
    r = rcollCommUserRank(t->comm, &t->rank);
  if (r == rcollSuccess)
    r = rcollCommCount(t->comm, &t->nranks);
  if (r != rcollSuccess)
    bench_fail(t->world, t->world_rank, t->world_comm, "rcollCommSplit", r);
}

static void alloc_iterations(bench_thread_t *t) {
  const bench_opts_t *o = t->opts;
  if (!o->per_iter)
    return;
  t->iter_sec = calloc((size_t)o->iters, sizeof(double));
  if (t->world_rank == 0) /* two halves of (nprocs rows + their max) */
    t->iter_rows = calloc(2 * (size_t)(t->world->nprocs + 1) * (size_t)o->iters, sizeof(double));
  if (!t->iter_sec || (t->world_rank == 0 && !t->iter_rows)) {
    fprintf(stderr, "rank %d: out of memory for -I's %d iterations\n", t->rank, o->iters);
    bench_world_abort(t->world, BENCH_EXIT_ERROR);
  }
}

/* -M: the process's resident memory, read by local thread 0 between phases
 * once every local rank has finished the phase. */
static int64_t resident_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
      resident = 0;
    fclose(f);
  }
  return (int64_t)resident * sysconf(_SC_PAGESIZE);
}

static int64_t memory_phase(bench_thread_t *t, int64_t *mark) {
  if (!t->opts->memory)
    return 0;
  bench_world_barrier(t->world, t->thread);
  int64_t now = resident_bytes(), used = now - *mark;
  *mark = now;
  return (int64_t)bench_world_reduce(t->world, t->thread, t->thread == 0 ? (double)used : 0,
                                     BENCH_RED_MAX);
}

static void free_buffers(bench_thread_t *t) {
  if (t->reg_send)
    rcollCommDeregister(t->comm, t->reg_send);
  if (t->reg_recv)
    rcollCommDeregister(t->comm, t->reg_recv);
  if (t->device >= 0) {
    bench_cuda_free(t->send_alloc);
    bench_cuda_free(t->recv_alloc);
    bench_cuda_stream_destroy(t->stream);
    free(t->hsend_alloc);
    free(t->hrecv_alloc);
  } else if (t->opts->host_malloc) {
    free(t->send_alloc);
    free(t->recv_alloc);
  } else {
    rcollMemFree(t->send_alloc);
    rcollMemFree(t->recv_alloc);
  }
  free(t->iter_sec);
  free(t->iter_rows);
}

static void destroy_comms(bench_thread_t *t) {
  rcollResult_t r = rcollCommDestroy(t->comm);
  if (r == rcollSuccess && t->world_comm != t->comm)
    r = rcollCommDestroy(t->world_comm);
  if (r != rcollSuccess)
    bench_fail(t->world, t->rank, NULL, "rcollCommDestroy", r);
}

static void *thread_main(void *arg) {
  bench_thread_t *t = arg;
  const bench_opts_t *o = t->opts;
  bench_mem_t mem = {0};
  int64_t mark = t->mem_start;
  t->world_rank = t->rank = bench_world_comm_init(t->world, t->thread, &t->comm);
  t->nranks = t->world->nranks;
  bench_watchdog_beat();
  if (t->rank != 0)
    t->report = NULL;
  join_group(t);
  mem.init = memory_phase(t, &mark);
  check_root(t);
  alloc_buffers(t);
  alloc_iterations(t);
  mem.buffers = memory_phase(t, &mark);
  print_header(t);
  for (int i = 0; i < o->ntypes; i++)
    for (int j = 0; j < (t->coll->uses_op ? o->nops : 1); j++)
      sweep_roots(t, o->types[i], t->coll->uses_op ? o->ops[j] : rcollSum);
  mem.collective = memory_phase(t, &mark);
  int64_t oob = (int64_t)bench_world_reduce(t->world, t->thread, (double)t->oob, BENCH_RED_SUM);
  if (t->report && bench_report_footer(t->report, oob, o->memory ? &mem : NULL))
    t->any_wrong = 1;
  if (oob)
    t->any_wrong = 1;
  bench_world_barrier(t->world, t->thread);
  free_buffers(t);
  destroy_comms(t);
  return NULL;
}

/* Device buffers by default when a GPU is present, as nccl-tests. Ranks on
 * device buffers are one per process: the collectives are issued on the
 * default stream, which the threads of one process share, and a stream
 * that waits for one rank's collective would hold back the next rank's. */
static int resolve_buffers(bench_opts_t *o) {
  int gpus = bench_cuda_devices();
  if (o->device_buffers < 0)
    o->device_buffers = gpus > 0 && o->nthreads == 1;
  if (o->device_buffers == 1 && gpus == 0) {
    fprintf(stderr, "--device-buffers: no CUDA device here (no driver, runtime or GPU)\n");
    return -1;
  }
  /* Where there is a GPU, rcollMemAlloc gives device memory (as
   * ncclMemAlloc): host buffers there come from posix_memalign. */
  if (o->device_buffers != 1 && gpus > 0)
    o->host_malloc = 1;
  if (o->device_buffers == 1 && o->nthreads > 1) {
    fprintf(stderr, "--device-buffers: device buffers take one rank per process (launch with "
                    "mpiexec or RANK/WORLD_SIZE); -t %d ranks would share one default stream\n",
            o->nthreads);
    return -1;
  }
  return 0;
}

int bench_main(int argc, char **argv, const bench_coll_t *coll) {
  setlinebuf(stdout);
  bench_opts_t opts;
  int parsed = bench_parse_args(argc, argv, coll, &opts);
  if (parsed != 0)
    return parsed > 0 ? 0 : BENCH_EXIT_ERROR;
  if (resolve_buffers(&opts) != 0)
    return BENCH_EXIT_ERROR;
  int color;
  if (bench_split_color(0, &color) != 0) /* a bad value is refused before any rank starts */
    return BENCH_EXIT_ERROR;
  int64_t mem_start = opts.memory ? resident_bytes() : 0;
  bench_world_t world;
  if (bench_world_init(&world, &argc, &argv, opts.nthreads) != 0)
    return BENCH_EXIT_ERROR;
  if (opts.timeout)
    bench_watchdog_start(&world, opts.timeout);
  bench_report_t report = {0};
  bench_thread_t *threads = calloc((size_t)opts.nthreads, sizeof(*threads));
  if (!threads)
    return BENCH_EXIT_ERROR;
  for (int i = 0; i < opts.nthreads; i++)
    threads[i] = (bench_thread_t){.coll = coll, .opts = &opts, .world = &world, .thread = i,
                                  .report = &report, .argc = argc, .argv = argv,
                                  .mem_start = mem_start};
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
