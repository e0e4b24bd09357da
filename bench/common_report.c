/* The results table, in nccl-tests' layout (so that the scripts operators
 * already run over nccl-tests output keep working), with its optional
 * columns (-I, -S, -C) and footer lines (-M), and the JSON beside it (-J,
 * common_json.c). Only global rank 0 calls these. */
#include <stdlib.h>
#include <string.h>

#include "common_impl.h"

static void print_settings(const bench_opts_t *o, const bench_world_t *w) {
  printf("# nThread %d nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
         "iters: %d agg iters: %d validation: %d graph: 0 unalign: %d\n",
         w->nthreads, o->min_bytes, o->max_bytes,
         o->step_factor > 1 ? o->step_factor : o->step_bytes,
         o->step_factor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->agg_iters,
         o->check ? 1 : 0, o->unalign);
  static const char *blocking[] = {
    NULL, "wait and barrier after each inner iteration (-m)",
    "wait after each inner iteration (-m), no barrier",
    "wait and barrier after each outer iteration (-n); time excludes barrier"};
  if (o->blocking)
    printf("# Blocking Enabled: %s \n", blocking[o->blocking]);
  if (o->per_iter) {
    printf("# Per-Iteration Report: host clock timing; i_* uses max over process rows");
    if (o->per_iter_skip)
      printf("; summary skips first %d iterations", o->per_iter_skip);
    printf(" \n");
  }
  if (o->parallel_init)
    printf("# Parallel Init Enabled: threads call into rcollCommInitRank concurrently \n");
  if (o->reg)
    printf("# Registered buffers: rcollCommRegister on every rank's send and receive buffers\n");
  if (o->host_malloc)
    printf("# Host buffers: posix_memalign, not rcollMemAlloc (--host-malloc, or a GPU is present, where "
           "rcollMemAlloc gives device memory)\n");
  if (o->timeout)
    printf("# Timeout: the run ends after %d s without progress\n", o->timeout);
}

static void print_column_titles(const bench_opts_t *o) {
  const char *time = o->cputime ? "cputime" : "time";
  const char *ts = o->timestamps ? "timestamp" : "";
  const char *ts_fmt = o->timestamps ? "%Y-%m-%d %H:%M:%S" : "";
  int pad = o->timestamps ? 19 : 0;
  if (o->per_iter) {
    printf("# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)"
           "                                in-place (+ per-iteration)\n", "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  "
           "%6s  %7s  %7s  %7s  %7s %*s\n", "size", "count", "type", "redop", "root", time,
           "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", time, "algbw", "busbw",
           "#wrong", "i_min", "i_max", "i_p99", "i_cv%", pad, ts);
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  "
           "%6s  %7s  %7s  %7s  %7s %*s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
           "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
           "(us)", "(us)", "(%)", pad, ts_fmt);
    return;
  }
  printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
         "          \n", "", "", "", "", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size",
         "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw",
         "busbw", "#wrong", pad, ts);
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)",
         "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
         pad, ts_fmt);
}

void bench_report_header(bench_report_t *r, const bench_opts_t *o, const bench_world_t *w,
                         const bench_coll_t *coll, const char *rank_lines, int argc,
                         char **argv) {
  r->opts = o;
  if (o->json_path)
    r->json = bench_json_open(o->json_path);
  print_settings(o, w);
  printf("#\n# Using devices\n");
  for (int i = 0; i < w->nranks; i++)
    printf("%s\n", rank_lines + (size_t)i * BENCH_LINE_MAX);
  printf("#\n");
  if (r->plan) {
    bench_plan_print(r->plan);
    bench_plan_print_algorithms(r->comm, coll, o);
    printf("#\n");
  }
  print_column_titles(o);
  if (r->json)
    bench_json_header(r->json, o, w, coll, rank_lines, argc, argv, r->plan);
}

/* Appends " i_min i_max i_p99 i_cv%" of one half (-I). */
static int format_iter_columns(char *out, size_t len, const bench_opts_t *o,
                               const bench_half_t *h) {
  bench_iter_stats_t s;
  bench_iter_stats(h->iter_us + o->per_iter_skip, o->iters - o->per_iter_skip, &s);
  char mn[16], mx[16], p99[16], cv[16];
  bench_format_num(mn, 7, s.min);
  bench_format_num(mx, 7, s.max);
  bench_format_num(p99, 7, s.p99);
  bench_format_num(cv, 7, s.cv_pct);
  return snprintf(out, len, "  %7s  %7s  %7s  %7s", mn, mx, p99, cv);
}

void bench_report_row(bench_report_t *r, const bench_coll_t *coll, const bench_row_t *row) {
  const bench_opts_t *o = r->opts;
  char line[1024];
  size_t n = (size_t)snprintf(line, sizeof(line), "%12zu  %12zu  %8s  %6s  %6d", row->size,
                              row->count, row->type, row->redop, row->root);
  for (int h = 0; h < 2; h++) {
    const bench_half_t *half = &row->half[h];
    char t[16], alg[16], bus[16], wrong[32];
    bench_format_num(t, 7, half->time_us);
    bench_format_num(alg, 6, half->algbw);
    bench_format_num(bus, 6, half->busbw);
    if (half->wrong < 0)
      snprintf(wrong, sizeof(wrong), "%6s", "N/A");
    else
      snprintf(wrong, sizeof(wrong), "%6lld", (long long)half->wrong);
    n += (size_t)snprintf(line + n, sizeof(line) - n, "  %7s  %6s  %6s  %s", t, alg, bus, wrong);
    if (o->per_iter && half->iter_us)
      n += (size_t)format_iter_columns(line + n, sizeof(line) - n, o, half);
    r->bw_sum += half->busbw;
    r->bw_count++;
  }
  if (o->timestamps) {
    char when[64];
    bench_format_now(when, sizeof(when));
    snprintf(line + n, sizeof(line) - n, "%21s", when);
  }
  printf("%s\n", line);
  if (r->json)
    bench_json_row(r->json, r->json_rows++, o, coll, row);
}

/* nccl-tests' memory figure: B, KB, MB or GB (1024-based) with 2, 1 or 0
 * decimals as the number grows. */
static void format_mem(char *buf, size_t len, int64_t bytes) {
  static const char *units[] = {"B", "KB", "MB", "GB"};
  double v = (double)bytes;
  int u = 0;
  while (u < 3 && (v >= 1024.0 || v <= -1024.0)) {
    v /= 1024.0;
    u++;
  }
  double a = v < 0 ? -v : v;
  snprintf(buf, len, "%.*f %s", a < 10.0 ? 2 : a < 100.0 ? 1 : 0, v, units[u]);
}

static void print_memory(const bench_mem_t *m) {
  char init[32], bufs[32], coll[32], total[32];
  format_mem(init, sizeof(init), m->init);
  format_mem(bufs, sizeof(bufs), m->buffers);
  format_mem(coll, sizeof(coll), m->collective);
  format_mem(total, sizeof(total), m->init + m->buffers + m->collective);
  printf("# %-20s : Initialization %s | User-Allocated %s | Collective %s | Total  %s\n",
         "Host memory usage", init, bufs, coll, total);
}

int bench_report_footer(bench_report_t *r, int64_t out_of_bounds, const bench_mem_t *mem) {
  double avg = r->bw_count ? r->bw_sum / r->bw_count : 0.0;
  const char *min_env = getenv("NCCL_TESTS_MIN_BW");
  double min_bw = min_env && *min_env ? atof(min_env) : -1;
  int low = min_bw >= 0 && avg < min_bw * 0.9;
  printf("# %-20s : %lld %s\n", "Out of bounds values", (long long)out_of_bounds,
         out_of_bounds ? "FAILED" : "OK");
  printf("# %-20s : %g %s\n", "Avg bus bandwidth", avg, min_bw < 0 ? "" : low ? "FAILED" : "OK");
  printf("#\n");
  if (mem)
    print_memory(mem);
  if (r->json) {
    bench_json_footer(r->json, out_of_bounds, avg, min_bw);
    fclose(r->json);
    r->json = NULL;
  }
  return low;
}
