/* Reference benchmark: MPI_Allreduce (float32, sum) timed the way
 * bench/allreduce_perf times rcollAllReduce, so the two tables can be set
 * side by side.
 *
 *   mpicc.mpich -O2 -o mpi_allreduce mpi_allreduce.c
 *   MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self mpiexec.mpich -n 2 ./mpi_allreduce 8 1M 16M 128M
 *
 * Sizes are given in bytes (K/M/G suffixes are binary multiples) either as a
 * list of arguments or as a sweep with -b/-e/-f. Each size runs -w warm-up
 * calls, then -n timed calls between two barriers; the reported time is the
 * mean over ranks of each rank's time per call, as nccl-tests' default -a 1.
 * algbw = bytes / time and busbw = algbw * 2(n-1)/n, both in GB/s (1e9). */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#define MAX_SIZES 64

typedef struct opts {
  size_t sizes[MAX_SIZES];
  int nsizes;
  int iters, warmup;
  int check;
  const char *json_path;
} opts_t;

typedef struct result {
  size_t bytes;
  double time_us, algbw, busbw;
  long wrong;
} result_t;

/* Parses "64", "1K", "4M", "1.5G" (with an optional trailing B); -1 if malformed. */
static int parse_size(const char *text, size_t *out) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || errno != 0 || v < 0 || !isfinite(v))
    return -1;
  double unit = 1;
  switch (toupper((unsigned char)*end)) {
  case 'K': unit = 1024.0; end++; break;
  case 'M': unit = 1024.0 * 1024; end++; break;
  case 'G': unit = 1024.0 * 1024 * 1024; end++; break;
  default: break;
  }
  if (toupper((unsigned char)*end) == 'B')
    end++;
  if (*end != '\0' || v * unit > 1e15)
    return -1;
  *out = (size_t)(v * unit);
  return 0;
}

static int parse_positive(const char *flag, const char *text, int lo, int *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < lo || v > (1 << 30)) {
    fprintf(stderr, "invalid value '%s' for %s\n", text, flag);
    return -1;
  }
  *out = (int)v;
  return 0;
}

static void usage(const char *prog) {
  printf("usage: %s [-n iters] [-w warmup] [-c 0|1] [-J file.json]\n"
         "          [-b minbytes -e maxbytes -f factor | SIZE...]\n"
         "default sizes: 8 B .. 128 MiB, factor 4; default -n 20 -w 5 -c 1\n", prog);
}

/* Expands -b/-e/-f into the size list when no sizes were listed. */
static int sweep_sizes(opts_t *o, size_t lo, size_t hi, int factor) {
  for (size_t s = lo; s <= hi && o->nsizes < MAX_SIZES; s *= (size_t)factor) {
    o->sizes[o->nsizes++] = s;
    if (s == 0)
      break;
  }
  return o->nsizes > 0 ? 0 : -1;
}

/* Returns 0 to run, 1 after -h, -1 on a bad flag (printed). */
static int parse_args(int argc, char **argv, opts_t *o) {
  size_t lo = 8, hi = (size_t)128 << 20;
  int factor = 4, c;
  memset(o, 0, sizeof(*o));
  o->iters = 20;
  o->warmup = 5;
  o->check = 1;
  while ((c = getopt(argc, argv, "b:e:f:n:w:c:J:h")) != -1) {
    int bad = 0;
    switch (c) {
    case 'b': bad = parse_size(optarg, &lo); break;
    case 'e': bad = parse_size(optarg, &hi); break;
    case 'f': bad = parse_positive("-f", optarg, 2, &factor); break;
    case 'n': bad = parse_positive("-n", optarg, 1, &o->iters); break;
    case 'w': bad = parse_positive("-w", optarg, 0, &o->warmup); break;
    case 'c': bad = parse_positive("-c", optarg, 0, &o->check); break;
    case 'J': o->json_path = optarg; break;
    case 'h': usage(argv[0]); return 1;
    default: bad = -1; break;
    }
    if (bad) {
      fprintf(stderr, "bad flag; run '%s -h'\n", argv[0]);
      return -1;
    }
  }
  for (; optind < argc && o->nsizes < MAX_SIZES; optind++)
    if (parse_size(argv[optind], &o->sizes[o->nsizes++]) != 0) {
      fprintf(stderr, "invalid size '%s'\n", argv[optind]);
      return -1;
    }
  return o->nsizes > 0 ? 0 : sweep_sizes(o, lo, hi, factor);
}

/* Element i of rank r's input: small integers, so every partial sum is exact
 * in float32 whatever order MPI reduces in, and the check can demand equality. */
static float input_value(int rank, size_t i) {
  return (float)((i * 7 + (size_t)rank * 13) % 101);
}

static void fill_input(float *buf, size_t count, int rank) {
  for (size_t i = 0; i < count; i++)
    buf[i] = input_value(rank, i);
}

static long count_wrong(const float *out, size_t count, int nranks) {
  long wrong = 0;
  for (size_t i = 0; i < count; i++) {
    float expect = 0;
    for (int r = 0; r < nranks; r++)
      expect += input_value(r, i);
    wrong += out[i] != expect;
  }
  return wrong;
}

/* Times one size; the buffers hold at least `count` floats and were touched. */
static result_t run_size(const opts_t *o, size_t bytes, float *in, float *out, int rank,
                         int nranks) {
  size_t count = bytes / sizeof(float);
  result_t r = {.bytes = count * sizeof(float), .wrong = -1};
  fill_input(in, count, rank);
  for (int i = 0; i < o->warmup; i++)
    MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < o->iters; i++)
    MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double mine = (MPI_Wtime() - t0) / o->iters, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  r.time_us = sum / nranks * 1e6;
  r.algbw = r.time_us > 0 ? (double)r.bytes / (r.time_us * 1e3) : 0;
  r.busbw = r.algbw * 2.0 * (nranks - 1) / nranks;
  if (o->check) {
    /* The timed calls left the sum in `out`; a fresh call is checked anyway so
     * that a stale buffer from an earlier size cannot pass. */
    memset(out, 0, r.bytes);
    MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long mine_wrong = count_wrong(out, count, nranks);
    MPI_Allreduce(&mine_wrong, &r.wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  }
  return r;
}

static void print_header(int nranks, const opts_t *o) {
  printf("# mpi_allreduce: MPI_Allreduce float sum, %d ranks, %d iters, %d warmup\n", nranks,
         o->iters, o->warmup);
  printf("# %12s %12s %12s %10s %10s %7s\n", "bytes", "count", "time_us", "algbw", "busbw",
         "#wrong");
  printf("# %12s %12s %12s %10s %10s %7s\n", "(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)",
         "");
}

static void print_row(const result_t *r, int check) {
  char wrong[24] = "N/A";
  if (check)
    snprintf(wrong, sizeof(wrong), "%ld", r->wrong);
  printf("  %12zu %12zu %12.2f %10.3f %10.3f %7s\n", r->bytes, r->bytes / sizeof(float),
         r->time_us, r->algbw, r->busbw, wrong);
  fflush(stdout);
}

static int write_json(const char *path, const result_t *res, int n, int nranks) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return -1;
  }
  fprintf(f, "{\"tool\": \"mpich\", \"collective\": \"all_reduce\", \"nranks\": %d, "
             "\"results\": [", nranks);
  for (int i = 0; i < n; i++) {
    char wrong[24] = "null";
    if (res[i].wrong >= 0)
      snprintf(wrong, sizeof(wrong), "%ld", res[i].wrong);
    fprintf(f, "%s\n  {\"bytes\": %zu, \"time_us\": %.3f, \"algbw\": %.6f, \"busbw\": %.6f, "
               "\"wrong\": %s}", i ? "," : "", res[i].bytes, res[i].time_us, res[i].algbw,
            res[i].busbw, wrong);
  }
  fprintf(f, "\n]}\n");
  return fclose(f) == 0 ? 0 : -1;
}

/* Allocates and pre-touches buffers for the largest size, so that page
 * faults are not timed as communication. */
static int alloc_buffers(const opts_t *o, float **in, float **out) {
  size_t max = sizeof(float);
  for (int i = 0; i < o->nsizes; i++)
    max = o->sizes[i] > max ? o->sizes[i] : max;
  *in = malloc(max);
  *out = malloc(max);
  if (!*in || !*out)
    return -1;
  memset(*in, 1, max);
  memset(*out, 1, max);
  return 0;
}

int main(int argc, char **argv) {
  int rank, nranks, status = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  opts_t o;
  int parsed = parse_args(argc, argv, &o);
  float *in = NULL, *out = NULL;
  result_t res[MAX_SIZES];
  if (parsed != 0) {
    MPI_Finalize();
    return parsed == 1 ? 0 : 2;
  }
  if (alloc_buffers(&o, &in, &out) != 0) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (rank == 0)
    print_header(nranks, &o);
  for (int i = 0; i < o.nsizes; i++) {
    res[i] = run_size(&o, o.sizes[i], in, out, rank, nranks);
    if (rank == 0)
      print_row(&res[i], o.check);
    status |= res[i].wrong > 0;
  }
  if (rank == 0 && o.json_path && write_json(o.json_path, res, o.nsizes, nranks) != 0)
    status = 2;
  free(in);
  free(out);
  MPI_Finalize();
  return status;
}
