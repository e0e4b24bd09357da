/* -J: the results as JSON in nccl-tests' schema (version 3 of its file, the
 * one tools/analyze_perf_json.py and dashboards built on nccl-tests read):
 * the same keys, value types and order, including its habits (booleans as
 * the strings "true"/"false", root as the padded string the table prints,
 * NaN as the string "nan"), so that their readers take rcoll's files
 * unchanged. rcoll's own fields sit beside them under keys nccl-tests does
 * not use ("library", "rcoll"), which those readers ignore. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common_impl.h"

#define JSON_FILE_VERSION 3

extern char **environ;

void bench_json_str(FILE *f, const char *s) {
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

static void json_num(FILE *f, double v) {
  if (v != v)
    fputs("\"nan\"", f);
  else
    fprintf(f, "%f", v);
}

static const char *json_bool(int v) {
  return v ? "\"true\"" : "\"false\"";
}

/* nccl-tests never overwrites: it writes to path, else path.0, path.1 ... */
FILE *bench_json_open(const char *path) {
  char try[4096];
  snprintf(try, sizeof(try), "%s", path);
  for (int n = 0; n < 1000; n++) {
    int fd = open(try, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
      printf("# Writing JSON output to %s\n", try);
      return fdopen(fd, "w");
    }
    if (errno != EEXIST)
      break;
    snprintf(try, sizeof(try), "%s.%d", path, n);
  }
  printf("# skipping json output; %s not accessible\n", try);
  return NULL;
}

/* The environment a run depends on, not all of it: a shared results file
 * should not carry the user's tokens and passwords. */
static int env_kept(const char *e) {
  static const char *prefixes[] = {"RCOLL_", "NCCL_", "UCX_", "CUDA_", "OMPI_", "PMI_",
                                   "SLURM_", "MASTER_", "RANK=", "WORLD_SIZE=", "LOCAL_RANK="};
  for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
    if (strncmp(e, prefixes[i], strlen(prefixes[i])) == 0)
      return 1;
  return 0;
}

/* One "devices" entry per process, as nccl-tests (it parses the first rank
 * line of each process); the analyzer groups process rows by hostname. */
static void json_device(FILE *f, const char *line) {
  int rank = 0, group = 0, pid = 0, device = 0;
  char host[256] = "", hex[128] = "", info[256] = "";
  sscanf(line, "#  Rank %d Group %d Pid %d on %255s device %d [%127[^]]] %255[^\n]", &rank, &group,
         &pid, host, &device, hex, info);
  fprintf(f, "{\"rank\":%d,\"group\":%d,\"pid\":%d,\"hostname\":", rank, group, pid);
  bench_json_str(f, host);
  fprintf(f, ",\"device\":%d,\"device_hex\":", device);
  bench_json_str(f, hex);
  fputs(",\"device_info\":", f);
  bench_json_str(f, info);
  fputc('}', f);
}

static void json_transports(FILE *f, const bench_plan_t *plan) {
  fputs(",\"transports\":[", f);
  for (int i = 0; plan && i < plan->nclasses; i++) {
    fprintf(f, "%s{\"class\":\"%s\",\"transport\":", i ? "," : "", plan->classes[i].cls);
    bench_json_str(f, plan->classes[i].transport);
    fprintf(f, ",\"peers\":%d}", plan->classes[i].peers);
  }
  fputc(']', f);
}

static void json_config(FILE *f, const bench_opts_t *o, const bench_world_t *w,
                        const bench_coll_t *coll, const char *rank_lines,
                        const bench_plan_t *plan) {
  fprintf(f, ",\"config\":{\"nthreads\":%d,\"ngpus\":1,\"minimum_bytes\":%zu,"
             "\"maximum_bytes\":%zu,\"%s\":%zu,\"warmup_iters\":%d,\"iterations\":%d,"
             "\"aggregated_iterations\":%d,\"validation\":%d,\"graph\":0,"
             "\"blocking_collectives\":%s,\"per_iter_timing\":%s,\"per_iter_skip\":%d,"
             "\"parallel_init\":%s,\"devices\":[",
          w->nthreads, o->min_bytes, o->max_bytes, o->step_factor > 1 ? "step_factor" : "step_bytes",
          o->step_factor > 1 ? o->step_factor : o->step_bytes, o->warmup, o->iters, o->agg_iters,
          o->check, json_bool(o->blocking), json_bool(o->per_iter), o->per_iter_skip,
          json_bool(o->parallel_init));
  for (int p = 0; p < w->nprocs; p++) {
    fputs(p ? "," : "", f);
    json_device(f, rank_lines + (size_t)p * (size_t)w->nthreads * BENCH_LINE_MAX);
  }
  fputs("],\"rcoll\":{\"collective\":", f);
  bench_json_str(f, coll->name);
  fprintf(f, ",\"nranks\":%d,\"nprocs\":%d,\"launch\":\"%s\",\"buffers\":\"%s\","
             "\"blocking\":%d,\"run_cycles\":%d,\"average\":%d,\"report_cputime\":%d,"
             "\"local_register\":%d,\"unalign\":%d,\"timeout\":%d",
          w->nranks, w->nprocs,
          w->launch == BENCH_LAUNCH_MPI ? "mpi" : w->launch == BENCH_LAUNCH_ENV ? "env" : "threads",
          o->device_buffers == 1 ? "device" : "host", o->blocking, o->run_cycles, o->average,
          o->cputime, o->reg, o->unalign, o->timeout);
  json_transports(f, plan);
  fputs(",\"ranks\":[", f);
  for (int i = 0; i < w->nranks; i++) {
    const char *line = rank_lines + (size_t)i * BENCH_LINE_MAX;
    fputs(i ? "," : "", f);
    bench_json_str(f, line[0] == '#' ? line + 1 : line);
  }
  fputs("]}}", f);
}

void bench_json_header(FILE *f, const bench_opts_t *o, const bench_world_t *w,
                       const bench_coll_t *coll, const char *rank_lines, int argc, char **argv,
                       const bench_plan_t *plan) {
  int version = 0;
  rcollGetVersion(&version);
  char when[64];
  bench_format_now(when, sizeof(when));
  fprintf(f, "{\"version\":%d,\"start_time\":", JSON_FILE_VERSION);
  bench_json_str(f, when);
  fputs(",\"args\":[", f);
  for (int i = 0; i < argc; i++) {
    fputs(i ? "," : "", f);
    bench_json_str(f, argv[i]);
  }
  fputs("],\"env\":[", f);
  int n = 0;
  for (char **e = environ; e && *e; e++)
    if (env_kept(*e)) {
      fputs(n++ ? "," : "", f);
      bench_json_str(f, *e);
    }
  /* nccl_version holds the library's version code, rcollGetVersion's. */
  fprintf(f, "],\"nccl_version\":%d,\"library\":\"rcoll\"", version);
  json_config(f, o, w, coll, rank_lines, plan);
  fputs(",\"results\":[", f);
}

static void json_per_iter(FILE *f, const bench_opts_t *o, const bench_half_t *h) {
  bench_iter_stats_t s;
  bench_iter_stats(h->iter_us + o->per_iter_skip, o->iters - o->per_iter_skip, &s);
  fprintf(f, "{\"skipped_iterations\":%d", o->per_iter_skip);
  const struct {
    const char *key;
    double v;
  } stats[] = {{"min_us", s.min}, {"max_us", s.max},   {"avg_us", s.avg},       {"p50_us", s.p50},
               {"p95_us", s.p95}, {"p99_us", s.p99},   {"stdev_us", s.stdev}, {"cv_pct", s.cv_pct}};
  for (size_t i = 0; i < sizeof(stats) / sizeof(stats[0]); i++) {
    fprintf(f, ",\"%s\":", stats[i].key);
    json_num(f, stats[i].v);
  }
  fputs(",\"times_us\":[", f);
  for (int i = 0; i < o->iters; i++) {
    fputs(i ? "," : "", f);
    json_num(f, h->iter_us[i]);
  }
  fputc(']', f);
  /* One row per process, only when there is more than one, as nccl-tests. */
  if (h->proc_iter_us && h->nprocs > 1) {
    fputs(",\"per_process_max_times_us\":[", f);
    for (int p = 0; p < h->nprocs; p++) {
      fputs(p ? ",[" : "[", f);
      for (int i = 0; i < o->iters; i++) {
        fputs(i ? "," : "", f);
        json_num(f, h->proc_iter_us[(size_t)p * (size_t)o->iters + (size_t)i]);
      }
      fputc(']', f);
    }
    fputc(']', f);
  }
  fputc('}', f);
}

static void json_half(FILE *f, const bench_opts_t *o, const bench_half_t *h, int in_place) {
  fprintf(f, ",\"%s\":{\"%s\":", in_place ? "in_place" : "out_of_place",
          o->cputime ? "cpu_time" : "time");
  json_num(f, h->time_us);
  fputs(",\"alg_bw\":", f);
  json_num(f, h->algbw);
  fputs(",\"bus_bw\":", f);
  json_num(f, h->busbw);
  fputs(",\"nwrong\":", f);
  if (h->wrong < 0)
    fputs("null", f);
  else
    json_num(f, (double)h->wrong);
  fputc('}', f);
  if (o->per_iter && h->iter_us) {
    fprintf(f, ",\"%s\":", in_place ? "in_place_per_iter" : "out_of_place_per_iter");
    json_per_iter(f, o, h);
  }
}

void bench_json_row(FILE *f, int index, const bench_opts_t *o, const bench_coll_t *coll,
                    const bench_row_t *row) {
  fprintf(f, "%s\n{\"size\":%zu,\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\",\"root\":\"%6d\"",
          index ? "," : "", row->size, row->count, row->type, row->redop, row->root);
  for (int h = 0; h < 2; h++)
    json_half(f, o, &row->half[h], h);
  fprintf(f, ",\"actual_iterations\":%d,\"experiment_name\":\"\",\"rcoll\":{\"collective\":",
          o->iters);
  bench_json_str(f, coll->name);
  if (row->algo[0]) {
    fputs(",\"algorithm\":", f);
    bench_json_str(f, row->algo);
    fprintf(f, ",\"chunk\":%zu", row->chunk);
  }
  fputs("}}", f);
}

void bench_json_footer(FILE *f, int64_t out_of_bounds, double avg_busbw, double min_bw) {
  char when[64];
  bench_format_now(when, sizeof(when));
  fprintf(f, "\n],\"out_of_bounds\":{\"count\":%lld,\"okay\":%s},"
             "\"average_bus_bandwidth\":{\"bandwidth\":",
          (long long)out_of_bounds, json_bool(out_of_bounds == 0));
  json_num(f, avg_busbw);
  fprintf(f, ",\"okay\":%s},\"errors\":[],\"end_time\":",
          min_bw < 0 ? "\"unchecked\"" : json_bool(avg_busbw >= min_bw * 0.9));
  bench_json_str(f, when);
  fputs("}\n", f);
}
