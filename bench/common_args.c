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
                    "half/float16, bfloat16, float/float32, double/float64 or all)\n", text);
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
         "\t[-w,--warmup_iters <warmup iteration count>]\n"
         "\t[-c,--check <0/1: check results element by element>]\n"
         "%s"
         "\t[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/bfloat16/float/double/all>]\n"
         "%s"
         "\t[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>]\n"
         "\t[-J,--json <file> also write the results as JSON]\n"
         "\t[-G,--device-buffers [0/1]: CUDA device buffers (the default when a GPU is present)]\n"
         "\t[--host-buffers: host buffers even when a GPU is present]\n"
         "\t[-h,--help]\n"
         "Ranks: -t N threads; mpiexec -n P (built with MPI); or RANK/WORLD_SIZE (PMI_RANK/\n"
         "PMI_SIZE) with MASTER_ADDR/MASTER_PORT or RCOLL_COMM_ID in the environment.\n",
         prog, coll->uses_op ? "\t[-o,--op <sum/prod/min/max/avg/all>]\n" : "",
         coll->uses_root ? "\t[-r,--root <root>]\n" : "");
}

static void set_defaults(bench_opts_t *o) {
  memset(o, 0, sizeof(*o));
  o->nthreads = 1;
  o->min_bytes = o->max_bytes = 32u << 20;
  o->step_bytes = 1u << 20;
  o->step_factor = 1;
  o->iters = 20;
  o->warmup = 5;
  o->check = 1;
  o->average = BENCH_AVG_MEAN;
  o->ntypes = 1;
  o->types[0] = rcollFloat32;
  o->nops = 1;
  o->ops[0] = rcollSum;
  o->device_buffers = -1;
}

static const struct option bench_longopts[] = {
  {"nthreads", required_argument, 0, 't'},   {"ngpus", required_argument, 0, 'g'},
  {"minbytes", required_argument, 0, 'b'},   {"maxbytes", required_argument, 0, 'e'},
  {"stepbytes", required_argument, 0, 'i'},  {"stepfactor", required_argument, 0, 'f'},
  {"iters", required_argument, 0, 'n'},      {"warmup_iters", required_argument, 0, 'w'},
  {"check", required_argument, 0, 'c'},      {"op", required_argument, 0, 'o'},
  {"datatype", required_argument, 0, 'd'},   {"root", required_argument, 0, 'r'},
  {"average", required_argument, 0, 'a'},    {"json", required_argument, 0, 'J'},
  {"blocking", required_argument, 0, 'z'},   {"device-buffers", optional_argument, 0, 'G'},
  {"host-buffers", no_argument, 0, 'H'},     {"help", no_argument, 0, 'h'},
  {0, 0, 0, 0},
};

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
  case 'w': return parse_int("-w", arg, 0, 1 << 30, &o->warmup);
  case 'c': return parse_int("-c", arg, 0, 1000, &o->check);
  case 'o': return parse_ops(arg, o);
  case 'd': return parse_types(arg, o);
  case 'r': return parse_int("-r", arg, 0, 1 << 30, &o->root);
  case 'a': return parse_int("-a", arg, 0, 3, &o->average);
  case 'J': o->json_path = arg; return 0;
  case 'z': return parse_int("-z", arg, 0, 1, &v); /* host calls always block */
  case 'G':
    /* -G alone or -G 1: device buffers. nccl-tests' "-G 0" (no CUDA graphs)
     * keeps the default, which is device buffers when a GPU is present. */
    if (arg != NULL && parse_int("-G", arg, 0, 1, &v) != 0)
      return -1;
    o->device_buffers = arg == NULL || v == 1 ? 1 : o->device_buffers;
    return 0;
  case 'H': o->device_buffers = 0; return 0;
  default: return -1;
  }
}

int bench_parse_args(int argc, char **argv, const bench_coll_t *coll, bench_opts_t *o) {
  int step_bytes_given = 0, c;
  set_defaults(o);
  optind = 1;
  while ((c = getopt_long(argc, argv, "t:g:b:e:i:f:n:w:c:o:d:r:a:J:z:G::h", bench_longopts,
                          NULL)) != -1) {
    if (c == 'h') {
      usage(basename(argv[0]), coll);
      return 1;
    }
    /* -G takes an optional value, which getopt only sees attached (-G1):
     * take a separate "0" or "1" too, as nccl-tests scripts write it. */
    const char *arg = optarg;
    if (c == 'G' && arg == NULL && optind < argc &&
        (strcmp(argv[optind], "0") == 0 || strcmp(argv[optind], "1") == 0))
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
  if (o->min_bytes > o->max_bytes) {
    fprintf(stderr, "invalid sizes for 'minbytes' and 'maxbytes': %zu > %zu\n", o->min_bytes,
            o->max_bytes);
    return -1;
  }
  return 0;
}
