/* Command-line flags, with nccl-tests' names, defaults and semantics. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common_impl.h"

static const struct {
  const char *name; /* as nccl-tests prints it */
  const char *alias;
  rcollDataType_t type;
  size_t size;
} bench_types[BENCH_MAX_TYPES] = {
  {"int8", "char", rcollInt8, 1},         {"uint8", NULL, rcollUint8, 1},
  {"int32", "int", rcollInt32, 4},        {"uint32", NULL, rcollUint32, 4},
  {"int64", NULL, rcollInt64, 8},         {"uint64", NULL, rcollUint64, 8},
  {"half", "float16", rcollFloat16, 2},   {"float", "float32", rcollFloat32, 4},
  {"double", "float64", rcollFloat64, 8}, {"bfloat16", "bf16", rcollBfloat16, 2},
  {"f8e4m3", "float8e4m3", rcollFloat8e4m3, 1}, {"f8e5m2", "float8e5m2", rcollFloat8e5m2, 1},
};

/* nccl-tests' order for "-o all". */
static const struct {
  const char *name;
  rcollRedOp_t op;
} bench_ops[BENCH_MAX_OPS] = {
  {"sum", rcollSum}, {"prod", rcollProd}, {"max", rcollMax}, {"min", rcollMin}, {"avg", rcollAvg},
};

const char *bench_type_name(rcollDataType_t t) {
  for (int i = 0; i < BENCH_MAX_TYPES; i++)
    if (bench_types[i].type == t)
      return bench_types[i].name;
  return "invalid";
}

size_t bench_type_size(rcollDataType_t t) {
  for (int i = 0; i < BENCH_MAX_TYPES; i++)
    if (bench_types[i].type == t)
      return bench_types[i].size;
  return 0;
}

const char *bench_op_name(rcollRedOp_t op) {
  for (int i = 0; i < BENCH_MAX_OPS; i++)
    if (bench_ops[i].op == op)
      return bench_ops[i].name;
  return "invalid";
}

int bench_parse_size(const char *text, size_t *out) {
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
  case 'T': unit = 1024.0 * 1024 * 1024 * 1024; end++; break;
  default: break;
  }
  /* "64MB" and "64M" mean the same, as nccl-tests reads only the letter. */
  if (toupper((unsigned char)*end) == 'B')
    end++;
  if (*end != '\0' || v * unit > 1e18)
    return -1;
  *out = (size_t)(v * unit);
  return 0;
}

size_t bench_next_size(const bench_opts_t *o, size_t size) {
  if (o->step_factor > 1)
    return size ? size * o->step_factor : 1; /* 0 * f would never advance */
  return size + o->step_bytes;
}

static int parse_int(const char *flag, const char *text, long lo, long hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 0);
  if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi) {
    fprintf(stderr, "invalid value '%s' for %s (expected an integer in %ld..%ld)\n", text, flag,
            lo, hi);
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int parse_types(const char *text, bench_opts_t *o) {
  o->ntypes = 0;
  for (int i = 0; i < BENCH_MAX_TYPES; i++) {
    int all = strcasecmp(text, "all") == 0;
    int named = strcasecmp(text, bench_types[i].name) == 0 ||
                (bench_types[i].alias && strcasecmp(text, bench_types[i].alias) == 0);
    if (all || named)
      o->types[o->ntypes++] = bench_types[i].type;
  }
  if (o->ntypes == 0) {
    fprintf(stderr, "invalid datatype '%s' (int8, uint8, int32, uint32, int64, uint64, "
                    "half/float16, bfloat16, float/float32, double/float64, f8e4m3, f8e5m2 or all)\n", text);
    return -1;
  }
  return 0;
}

static int parse_ops(const char *text, bench_opts_t *o) {
  o->nops = 0;
  for (int i = 0; i < BENCH_MAX_OPS; i++)
    if (strcasecmp(text, "all") == 0 || strcasecmp(text, bench_ops[i].name) == 0)
      o->ops[o->nops++] = bench_ops[i].op;
  if (o->nops == 0) {
    fprintf(stderr, "invalid op '%s' (sum, prod, min, max, avg or all)\n", text);
    return -1;
  }
  return 0;
}

static void usage(const char *prog, const bench_coll_t *coll) {
  printf("USAGE: %s\n"
         "\t[-t,--nthreads <ranks as threads in this process>]\n"
         "\t[-b,--minbytes <min size in bytes, K/M/G suffixes>]\n"
         "\t[-e,--maxbytes <max size in bytes>]\n"
         "\t[-i,--stepbytes <increment size>]\n"
         "\t[-f,--stepfactor <increment factor>]\n"
         "\t[-n,--iters <iteration count>]\n"
         "\t[-m,--agg_iters <calls aggregated in one group per iteration>]\n"
         "\t[-w,--warmup_iters <warmup iteration count>]\n"
         "\t[-N,--run_cycles <sweeps of the sizes; 0=until killed>]\n"
         "\t[-p,--parallel_init <0/1>]\n"
         "\t[-c,--check <checked runs per size>]\n"
         "%s"
         "\t[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/bfloat16/float/double/all>]\n"
         "%s"
         "\t[-z,--blocking <0/1/2/3> 1=wait+barrier after each call, 2=wait after each call, "
         "3=wait+barrier after each iteration (time excludes the barrier)]\n"
         "\t[-T,--timeout <seconds without progress before the run is ended>]\n"
         "\t[-C,--report_cputime <0/1>]\n"
         "\t[-S,--report_timestamps <0/1>]\n"
         "\t[-J,--output_file <file.json> nccl-tests' JSON, plus rcoll's fields]\n"
         "\t[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>]\n"
         "\t[-R,--local_register <0/1> register the buffers with rcollCommRegister]\n"
         "\t[-M,--memory <0/1> report host memory use]\n"
         "\t[-u,--unalign <elements> misalign the buffers]\n"
         "\t[-I,--per_iter_timing <0/1> per-iteration times and i_min/i_max/i_p99/i_cv%% columns]\n"
         "\t[-K,--per_iter_skip <count> leading iterations left out of the -I summary]\n"
         "\t[--device-buffers[=0/1], -G with no value: CUDA device buffers (the default when a "
         "GPU is present)]\n"
         "\t[--host-buffers: host buffers even when a GPU is present]\n"
         "\t[--host-malloc: host buffers from posix_memalign instead of rcollMemAlloc (whose blocks "
         "a peer process can map, as nccl-tests takes its buffers from ncclMemAlloc)]\n"
         "\t[-h,--help]\n"
         "GPU-only flags of nccl-tests: -g 1, -G 0, -y 0, -D 0 are accepted; other values, and\n"
         "-x and -V, are refused.\n"
         "Ranks: -t N threads; mpiexec -n P (built with MPI); or RANK/WORLD_SIZE (PMI_RANK/\n"
         "PMI_SIZE) with MASTER_ADDR/MASTER_PORT or RCOLL_COMM_ID in the environment.\n"
         "NCCL_TESTS_SPLIT=\"AND|OR|MOD|DIV <n>\" splits the ranks into groups that run side by side.\n",
         prog, coll->uses_op ? "\t[-o,--op <sum/prod/min/max/avg/all>]\n" : "",
         coll->uses_root ? "\t[-r,--root <root/all>]\n" : "");
}

static void set_defaults(bench_opts_t *o) {
  memset(o, 0, sizeof(*o));
  o->nthreads = 1;
  o->min_bytes = o->max_bytes = 32u << 20;
  o->step_bytes = 1u << 20;
  o->step_factor = 1;
  o->iters = 20;
  o->warmup = 5;
  o->agg_iters = 1;
  o->run_cycles = 1;
  o->check = 1;
  o->average = BENCH_AVG_MEAN;
  o->ntypes = 1;
  o->types[0] = rcollFloat32;
  o->nops = 1;
  o->ops[0] = rcollSum;
  o->device_buffers = -1;
}

static const struct option bench_longopts[] = {
  {"nthreads", required_argument, 0, 't'},        {"ngpus", required_argument, 0, 'g'},
  {"minbytes", required_argument, 0, 'b'},        {"maxbytes", required_argument, 0, 'e'},
  {"stepbytes", required_argument, 0, 'i'},       {"stepfactor", required_argument, 0, 'f'},
  {"iters", required_argument, 0, 'n'},           {"agg_iters", required_argument, 0, 'm'},
  {"warmup_iters", required_argument, 0, 'w'},    {"run_cycles", required_argument, 0, 'N'},
  {"parallel_init", required_argument, 0, 'p'},   {"check", required_argument, 0, 'c'},
  {"op", required_argument, 0, 'o'},              {"datatype", required_argument, 0, 'd'},
  {"root", required_argument, 0, 'r'},            {"blocking", required_argument, 0, 'z'},
  {"stream_null", required_argument, 0, 'y'},     {"timeout", required_argument, 0, 'T'},
  {"cudagraph", required_argument, 0, 'G'},       {"report_cputime", required_argument, 0, 'C'},
  {"report_timestamps", required_argument, 0, 'S'}, {"output_file", required_argument, 0, 'J'},
  {"json", required_argument, 0, 'J'},            {"average", required_argument, 0, 'a'},
  {"local_register", required_argument, 0, 'R'}, {"cta_policy", required_argument, 0, 'x'},
  {"device_implementation", required_argument, 0, 'D'},
  {"device_cta_count", required_argument, 0, 'V'},
  {"memory", required_argument, 0, 'M'},          {"unalign", required_argument, 0, 'u'},
  {"per_iter_timing", required_argument, 0, 'I'}, {"per_iter_skip", required_argument, 0, 'K'},
  {"device-buffers", optional_argument, 0, 'B'},  {"host-buffers", no_argument, 0, 'H'},
  {"host-malloc", no_argument, 0, 'L'},
  {"help", no_argument, 0, 'h'},                  {0, 0, 0, 0},
};

/* nccl-tests' flags that only mean something to NCCL on a GPU: the value that
 * asks for nothing is accepted, so that scripts run unchanged; any other is
 * refused, since silently ignoring it would report numbers for a different
 * experiment than the one asked for. */
static int gpu_only_flag(int c, const char *arg) {
  int v = 0;
  const char *what = c == 'G' ? "CUDA graph launches (rcoll's calls are not captured into graphs; "
                                "device buffers are --device-buffers, or -G with no value)"
                   : c == 'y' ? "the CUDA null stream (each rank uses its own stream)"
                   : c == 'x' ? "NCCL's CTA policy (rcoll launches no CTAs of its own)"
                   : c == 'D' ? "NCCL's device API implementations"
                              : "CTAs of NCCL's device API (-D)";
  char flag[3] = {'-', (char)c, 0};
  if ((c == 'G' || c == 'y' || c == 'D') && parse_int(flag, arg, 0, 1 << 30, &v) == 0 && v == 0)
    return 0;
  fprintf(stderr, "%s %s: nccl-tests uses this flag for %s; it has no meaning for rcoll%s\n",
          flag, arg, what, c == 'x' || c == 'V' ? "" : " (only 0 is accepted)");
  return -1;
}

/* -r: a rank, or "all" (nccl-tests' -1) for every root in turn. */
static int parse_root(const char *arg, int *root) {
  if (strcasecmp(arg, "all") == 0) {
    *root = -1;
    return 0;
  }
  char *end;
  errno = 0;
  long v = strtol(arg, &end, 0);
  if (end == arg || *end != '\0' || errno != 0 || v < -1 || v > (1 << 30)) {
    fprintf(stderr, "invalid value '%s' for -r (expected a rank, or all)\n", arg);
    return -1;
  }
  *root = (int)v;
  return 0;
}

/* Applies one flag; returns 0, or -1 after printing why it is wrong. */
static int apply_flag(int c, const char *arg, bench_opts_t *o, int *step_bytes_given) {
  int v = 0;
  switch (c) {
  case 't': return parse_int("-t", arg, 1, 1024, &o->nthreads);
  case 'g':
    /* One rank per thread: scripts that pass -g 1 keep working. */
    if (parse_int("-g", arg, 1, 1, &v) != 0)
      fprintf(stderr, "-g: rcoll runs one rank per thread; use -t for more ranks\n");
    return v == 1 ? 0 : -1;
  case 'b':
  case 'e':
  case 'i': {
    size_t s;
    if (bench_parse_size(arg, &s) != 0) {
      fprintf(stderr, "invalid size '%s' for -%c\n", arg, c);
      return -1;
    }
    if (c == 'b') o->min_bytes = s;
    if (c == 'e') o->max_bytes = s;
    if (c == 'i') { o->step_bytes = s; *step_bytes_given = 1; }
    return 0;
  }
  case 'f':
    if (parse_int("-f", arg, 1, 1 << 20, &v) != 0) return -1;
    o->step_factor = (size_t)v;
    return 0;
  case 'n': return parse_int("-n", arg, 1, 1 << 30, &o->iters);
  case 'm': return parse_int("-m", arg, 1, 1 << 20, &o->agg_iters);
  case 'N': return parse_int("-N", arg, 0, 1 << 30, &o->run_cycles);
  case 'w': return parse_int("-w", arg, 0, 1 << 30, &o->warmup);
  case 'c': return parse_int("-c", arg, 0, 1000, &o->check);
  case 'p': return parse_int("-p", arg, 0, 1, &o->parallel_init);
  case 'o': return parse_ops(arg, o);
  case 'd': return parse_types(arg, o);
  case 'r': return parse_root(arg, &o->root);
  case 'a': return parse_int("-a", arg, 0, 3, &o->average);
  case 'J': o->json_path = arg; return 0;
  case 'z': return parse_int("-z", arg, 0, 3, &o->blocking);
  case 'T': return parse_int("-T", arg, 0, 1 << 30, &o->timeout);
  case 'C': return parse_int("-C", arg, 0, 1, &o->cputime);
  case 'S': return parse_int("-S", arg, 0, 1, &o->timestamps);
  case 'M': return parse_int("-M", arg, 0, 1, &o->memory);
  case 'u': return parse_int("-u", arg, 0, 1 << 20, &o->unalign);
  case 'I': return parse_int("-I", arg, 0, 1, &o->per_iter);
  case 'K': return parse_int("-K", arg, 0, 1 << 30, &o->per_iter_skip);
  case 'R':
    if (parse_int("-R", arg, 0, 2, &o->reg) != 0)
      return -1;
    if (o->reg == 2)
      fprintf(stderr, "-R 2: symmetric registration (NCCL windows) does not exist in rcoll; "
                      "-R 1 registers the buffers with rcollCommRegister\n");
    return o->reg == 2 ? -1 : 0;
  case 'G':
    /* -G with no value is rcoll's device-buffer switch (nccl-tests' -G
     * always takes a value); -G N is nccl-tests' CUDA graph launches. */
    if (arg == NULL) {
      o->device_buffers = 1;
      return 0;
    }
    return gpu_only_flag(c, arg);
  case 'y':
  case 'x':
  case 'D':
  case 'V': return gpu_only_flag(c, arg);
  case 'B':
    if (arg != NULL && parse_int("--device-buffers", arg, 0, 1, &v) != 0)
      return -1;
    o->device_buffers = arg == NULL || v == 1 ? 1 : 0;
    return 0;
  case 'H': o->device_buffers = 0; return 0;
  case 'L': o->host_malloc = 1; return 0;
  default: return -1;
  }
}

int bench_parse_args(int argc, char **argv, const bench_coll_t *coll, bench_opts_t *o) {
  int step_bytes_given = 0, c;
  set_defaults(o);
  optind = 1;
  while ((c = getopt_long(argc, argv, "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G::C:S:J:a:R:x:D:V:M:"
                          "u:I:K:h", bench_longopts, NULL)) != -1) {
    if (c == 'h') {
      usage(basename(argv[0]), coll);
      return 1;
    }
    /* -G takes an optional value, which getopt only sees attached (-G0):
     * take a separate number too, as nccl-tests scripts write "-G 0". */
    const char *arg = optarg;
    if (c == 'G' && arg == NULL && optind < argc && isdigit((unsigned char)argv[optind][0]))
      arg = argv[optind++];
    if (c == '?' || apply_flag(c, arg, o, &step_bytes_given) != 0) {
      fprintf(stderr, "Run '%s -h' for the flags.\n", argv[0]);
      return -1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "unexpected argument '%s'\n", argv[optind]);
    return -1;
  }
  /* -i asks for additive steps even when -f is also given. */
  if (step_bytes_given)
    o->step_factor = 1;
  if (o->step_factor <= 1 && o->step_bytes == 0) {
    fprintf(stderr, "-i 0 would never advance the size sweep\n");
    return -1;
  }
  if (o->per_iter_skip && (!o->per_iter || o->per_iter_skip >= o->iters)) {
    fprintf(stderr, "-K %d: needs -I 1 and fewer than -n %d iterations to skip\n",
            o->per_iter_skip, o->iters);
    return -1;
  }
  if (o->min_bytes > o->max_bytes) {
    fprintf(stderr, "invalid sizes for 'minbytes' and 'maxbytes': %zu > %zu\n", o->min_bytes,
            o->max_bytes);
    return -1;
  }
  return 0;
}
