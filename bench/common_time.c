/* The timed loop, as nccl-tests times it: -n iterations of -m calls each
 * (grouped), waited for as -z says, timed to the last call's end (-C: to its
 * return), with -I keeping each iteration's time per call, then combined
 * across ranks as -a says. */
#include "common_thread.h"

/* ---- timing ---- */

/* -z 1 and 2: each call (each group of -m calls) is waited for; 1 adds a
 * barrier of every rank. */
static void after_calls(bench_thread_t *t) {
  if (t->opts->blocking != 1 && t->opts->blocking != 2)
    return;
  bench_device_wait(t);
  if (t->opts->blocking == 1)
    bench_world_barrier(t->world, t->thread);
}

/* One timed iteration: -m calls, each at its own offset of the big buffers
 * (so that small sizes are not served from a warm cache), in one group when
 * there are several, as nccl-tests aggregates them. */
static void run_iteration(bench_thread_t *t, const bench_counts_t *c, rcollDataType_t type,
                          rcollRedOp_t op, int root, int in_place, int iter, size_t row_bytes) {
  const int m = t->opts->agg_iters;
  size_t steps = row_bytes ? t->opts->max_bytes / row_bytes : 1;
  if (steps == 0)
    steps = 1;
  if (m > 1 && rcollGroupStart() != rcollSuccess)
    bench_fail(t->world, t->rank, t->comm, "rcollGroupStart", rcollInternalError);
  for (int a = 0; a < m; a++) {
    size_t k = ((size_t)iter * (size_t)m + (size_t)a) % steps;
    bench_call_t call = bench_make_call(t, c, type, op, root, in_place, row_bytes * k);
    bench_run_call(t, &call);
    if (m == 1)
      after_calls(t);
  }
  if (m > 1) {
    rcollResult_t r = rcollGroupEnd();
    if (r != rcollSuccess)
      bench_fail(t->world, t->rank, t->comm, "rcollGroupEnd", r);
    after_calls(t); /* the grouped calls complete together */
  }
}

/* The timed loop: returns the seconds per call until the last call finished
 * (*cpu: until the last call returned, -C), barriers of -z 3 excluded. With
 * -I each iteration is waited for and its time per call kept. */
static double timed_loop(bench_thread_t *t, const bench_counts_t *c, rcollDataType_t type,
                         rcollRedOp_t op, int root, int in_place, size_t row_bytes, double *cpu) {
  const bench_opts_t *o = t->opts;
  const double calls = (double)o->iters * o->agg_iters;
  /* Each iteration is timed only when -I or -z 3 asks: a clock read costs
   * a visible part of a small call on some machines (on a VM here, a third
   * of a microsecond per iteration of an 8-byte all-reduce). */
  const int timed = o->blocking == 3 || o->per_iter;
  double coll_only = 0, start = bench_now_sec();
  for (int iter = 0; iter < o->iters; iter++) {
    double t0 = timed ? bench_now_sec() : 0;
    run_iteration(t, c, type, op, root, in_place, iter, row_bytes);
    if (!timed) {
      if (t->thread == 0) /* one writer: threads sharing the count would bounce its line */
        bench_watchdog_beat();
      continue;
    }
    bench_device_wait(t);
    double d = bench_now_sec() - t0;
    if (o->per_iter)
      t->iter_sec[iter] = d / o->agg_iters;
    if (o->blocking == 3) {
      coll_only += d;
      bench_world_barrier(t->world, t->thread);
    }
    bench_watchdog_beat();
  }
  double issued = bench_now_sec() - start;
  bench_device_wait(t); /* the time is until the last call finished, not returned */
  double done = bench_now_sec() - start;
  *cpu = (o->blocking == 3 ? coll_only : issued) / calls;
  return (o->blocking == 3 ? coll_only : done) / calls;
}

/* -I: every process's row of per-iteration times (max over its threads) to
 * global rank 0, which keeps the rows and their max per iteration, in us. */
static void gather_iterations(bench_thread_t *t, bench_half_t *out, int in_place) {
  const bench_opts_t *o = t->opts;
  const int nprocs = t->world->nprocs;
  double *rows = t->world_rank == 0 ? t->iter_rows + (size_t)in_place * (nprocs + 1) * o->iters
                                    : NULL;
  bench_world_gather_iters(t->world, t->thread, t->iter_sec, o->iters, rows);
  if (!rows)
    return;
  double *max = rows + (size_t)nprocs * o->iters;
  for (int i = 0; i < o->iters; i++) {
    max[i] = 0;
    for (int p = 0; p < nprocs; p++) {
      rows[(size_t)p * o->iters + i] *= 1e6;
      if (rows[(size_t)p * o->iters + i] > max[i])
        max[i] = rows[(size_t)p * o->iters + i];
    }
  }
  out->iter_us = max;
  out->proc_iter_us = rows;
  out->nprocs = nprocs;
}

void bench_time_half(bench_thread_t *t, const bench_counts_t *c, rcollDataType_t type,
                      rcollRedOp_t op, int root, int in_place, size_t row_bytes,
                      bench_half_t *out) {
  const bench_opts_t *o = t->opts;
  bench_call_t call = bench_make_call(t, c, type, op, root, in_place, 0);
  if (o->check) {
    bench_call_t h = bench_host_view(t, &call);
    bench_fill_input((void *)h.send, c->send_count, type, op, t->nranks, t->rank, 99);
    bench_upload_all(t);
  }
  /* The barrier, then an untimed call: between processes the barrier is
   * MPI's, which busy-waits, and the rank that leaves it last would take
   * the first timed call's CPU from the other on a loaded machine (2
   * namespaces x 1 rank at load 4: first iterations of 1.5-4.1 ms where
   * the others took 13-150 us). The call lines the ranks up inside rcoll. */
  bench_world_barrier(t->world, t->thread);
  bench_run_call(t, &call);
  bench_device_wait(t);

  double cpu, sec = timed_loop(t, c, type, op, root, in_place, row_bytes, &cpu);
  /* Likewise after the loop: a rank done with its last timed call waits
   * in an untimed one rather than in MPI's busy reduction while its peer
   * still finishes (last iterations of 1.6-4.8 ms, same runs). */
  bench_run_call(t, &call);
  bench_device_wait(t);
  sec = bench_world_reduce(t->world, t->thread, sec, o->average);
  cpu = bench_world_reduce(t->world, t->thread, cpu, o->average);
  *out = (bench_half_t){.time_us = (o->cputime ? cpu : sec) * 1e6};
  if (o->per_iter)
    gather_iterations(t, out, in_place);
  bench_world_barrier(t->world, t->thread);

  out->algbw = sec > 0 ? (double)row_bytes / 1e9 / sec : 0.0;
  out->busbw = out->algbw * t->coll->busbw_factor(t->nranks);
  int checked = o->check && !(in_place && t->coll->in_place_unchecked);
  out->wrong = checked ? bench_check_half(t, c, type, op, root, in_place) : -1;
  if (out->wrong > 0)
    t->any_wrong = 1;
}

