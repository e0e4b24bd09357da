/* The results table, byte for byte in nccl-tests' layout (so that the scripts
 * operators already run over nccl-tests output keep working), and the same
 * rows as JSON. Only global rank 0 calls these. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common_impl.h"

static const char *launch_name(int launch) {
  switch (launch) {
  case BENCH_LAUNCH_MPI: return "mpi";
  case BENCH_LAUNCH_ENV: return "env";
  default: return "threads";
  }
}

/* Writes s as a JSON string (quotes, backslashes and control bytes escaped). */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

/* JSON has no NaN or infinity: write null instead. */
static void json_num(FILE *f, double v) {
  if (v != v || v > 1e308 || v < -1e308)
    fputs("null", f);
  else
    fprintf(f, "%.6g", v);
}

static void json_header(bench_report_t *r, const bench_opts_t *o, const bench_world_t *w,
                        const bench_coll_t *coll, const char *rank_lines, int argc, char **argv) {
  FILE *f = r->json;
  int version = 0;
  rcollGetVersion(&version);
  char when[64];
  time_t now = time(NULL);
  strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&now));
  fprintf(f, "{\n\"header\": {\"collective\": ");
  json_str(f, coll->name);
  fprintf(f, ", \"rcoll_version\": %d, \"start_time\": ", version);
  json_str(f, when);
  fprintf(f, ", \"launch\": \"%s\", \"nranks\": %d, \"nprocs\": %d, \"nthreads\": %d,"
             " \"minbytes\": %zu, \"maxbytes\": %zu, \"%s\": %zu, \"warmup_iters\": %d,"
             " \"iters\": %d, \"check\": %d, \"average\": %d,\n \"args\": [",
          launch_name(w->launch), w->nranks, w->nprocs, w->nthreads, o->min_bytes, o->max_bytes,
          o->step_factor > 1 ? "stepfactor" : "stepbytes",
          o->step_factor > 1 ? o->step_factor : o->step_bytes, o->warmup, o->iters, o->check,
          o->average);
  for (int i = 0; i < argc; i++) {
    fputs(i ? ", " : "", f);
    json_str(f, argv[i]);
  }
  fputs("],\n \"ranks\": [", f);
  for (int i = 0; i < w->nranks; i++) {
    const char *line = rank_lines + (size_t)i * BENCH_LINE_MAX;
    fputs(i ? ",\n  " : "\n  ", f);
    json_str(f, line[0] == '#' ? line + 1 : line);
  }
  fputs("]},\n\"results\": [", f);
}

void bench_report_header(bench_report_t *r, const bench_opts_t *o, const bench_world_t *w,
                         const bench_coll_t *coll, const char *rank_lines, int argc,
                         char **argv) {
  if (o->json_path) {
    r->json = fopen(o->json_path, "w");
    if (!r->json)
      printf("# skipping json output; %s not accessible\n", o->json_path);
    else
      printf("# Writing JSON output to %s\n", o->json_path);
  }
  printf("# nThread %d nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
         "iters: %d agg iters: 1 validation: %d graph: 0\n",
         w->nthreads, o->min_bytes, o->max_bytes,
         o->step_factor > 1 ? o->step_factor : o->step_bytes,
         o->step_factor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->check ? 1 : 0);
  printf("#\n# Using devices\n");
  for (int i = 0; i < w->nranks; i++)
    printf("%s\n", rank_lines + (size_t)i * BENCH_LINE_MAX);
  printf("#\n");
  printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
         "          \n", "", "", "", "", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
         "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
         "#wrong");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
         "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
         "");
  if (r->json)
    json_header(r, o, w, coll, rank_lines, argc, argv);
}

/* nccl-tests keeps the time column 7 wide by dropping decimals as it grows. */
static void format_time(char *buf, size_t len, double us) {
  const char *fmt = us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f";
  snprintf(buf, len, fmt, us);
}

static void json_half(FILE *f, const char *key, const bench_half_t *h) {
  fprintf(f, ", \"%s\": {\"time_us\": ", key);
  json_num(f, h->time_us);
  fputs(", \"algbw\": ", f);
  json_num(f, h->algbw);
  fputs(", \"busbw\": ", f);
  json_num(f, h->busbw);
  if (h->wrong < 0)
    fputs(", \"wrong\": null}", f);
  else
    fprintf(f, ", \"wrong\": %lld}", (long long)h->wrong);
}

static void json_row(bench_report_t *r, const bench_coll_t *coll, const bench_row_t *row) {
  FILE *f = r->json;
  fputs(r->json_rows++ ? ",\n {" : "\n {", f);
  fputs("\"collective\": ", f);
  json_str(f, coll->name);
  fprintf(f, ", \"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"root\": %d",
          row->size, row->count, row->type, row->redop, row->root);
  json_half(f, "oop", &row->half[0]);
  json_half(f, "ip", &row->half[1]);
  fputc('}', f);
}

void bench_report_row(bench_report_t *r, const bench_coll_t *coll, const bench_row_t *row) {
  char line[512];
  int n = snprintf(line, sizeof(line), "%12zu  %12zu  %8s  %6s  %6d", row->size, row->count,
                   row->type, row->redop, row->root);
  for (int h = 0; h < 2; h++) {
    const bench_half_t *half = &row->half[h];
    char t[32], wrong[32];
    format_time(t, sizeof(t), half->time_us);
    if (half->wrong < 0)
      snprintf(wrong, sizeof(wrong), "%5s", "N/A");
    else
      snprintf(wrong, sizeof(wrong), "%5lld", (long long)half->wrong);
    n += snprintf(line + n, sizeof(line) - (size_t)n, "  %7s  %6.2f  %6.2f  %s", t, half->algbw,
                  half->busbw, wrong);
    r->bw_sum += half->busbw;
    r->bw_count++;
  }
  printf("%s\n", line);
  if (r->json)
    json_row(r, coll, row);
}

void bench_report_footer(bench_report_t *r, int64_t out_of_bounds) {
  double avg = r->bw_count ? r->bw_sum / r->bw_count : 0.0;
  printf("# %-20s : %lld %s\n", "Out of bounds values", (long long)out_of_bounds,
         out_of_bounds ? "FAILED" : "OK");
  printf("# %-20s : %g \n", "Avg bus bandwidth", avg);
  printf("#\n");
  if (r->json) {
    fprintf(r->json, "\n],\n\"out_of_bounds\": {\"count\": %lld, \"okay\": %s},\n",
            (long long)out_of_bounds, out_of_bounds ? "false" : "true");
    fputs("\"avg_busbw\": ", r->json);
    json_num(r->json, avg);
    fputs("\n}\n", r->json);
    fclose(r->json);
    r->json = NULL;
  }
}
