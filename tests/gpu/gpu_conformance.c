/* GPU conformance of rcoll: every collective on CUDA device buffers, one rank
 * per process, on a real GPU (several ranks may share one). Built and
 * launched by tests/gpu/run.sh: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
 * come from the environment (rcollCommInitFromEnv).
 *
 * Inputs are small integers, exact in every type, so expected results are
 * computed here exactly (avg: rounded once, compared within a unit in the last
 * place of the type). The input is copied to the device on the call's stream
 * just before the call, and the result copied back on it just after, with no
 * host synchronization in between: a call that did not order itself on its
 * stream would read stale inputs or be read before it finished.
 *
 * Knobs for finding why a run hangs (tests/gpu/probe.sh varies them):
 *   GPU_CONF_STREAM=created|default  the calls' stream: one created non-blocking
 *                                    (default), or the legacy default stream
 *   GPU_CONF_HOST=pageable|pinned    the host side of the copies around a call
 *   GPU_CONF_CASES=all|collectives   collectives: skip the all-types sweep
 *   GPU_CONF_LIMIT=seconds           the watchdog (45)
 * Exit status: 0 all passed, 1 some failed, 3 hung, 77 no GPU here. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hang_dump.h"
#include "rcoll.h"

static int rank, nranks, failures, passes;
static rcollComm_t comm;

#define CUDA_OK(call)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

/* ---- a watchdog: a hang names the case it hung in ----
 * A deadlock inside CUDA (a stream waiting for the proxy while the proxy
 * waits for the device) is beyond rcoll's own timeouts; without this the
 * launcher's timeout kills the rank with its output buffered and nothing
 * says where it stopped. */
static unsigned case_limit_s = 45;
static char current[128] = "init";

static void on_alarm(int sig) {
  (void)sig;
  char msg[200];
  int n = snprintf(msg, sizeof msg, "rank %d: HUNG for %u s in: %s; the threads:\n", rank,
                   case_limit_s, current);
  if (write(2, msg, (size_t)n) < 0)
    _exit(3);
  hang_dump_all();
  _exit(3);
}

static void begin_case(const char *what) {
  snprintf(current, sizeof current, "%s", what);
  alarm(case_limit_s);
}

/* ---- the knobs ---- */

static int use_default_stream, use_pinned_host, only_collectives;

static const char *knob(const char *name, const char *dflt) {
  const char *v = getenv(name);
  return v != NULL && *v ? v : dflt;
}

/* Host buffers for the copies around a call: pageable (malloc) or pinned. */
static void *host_alloc(size_t bytes) {
  void *p = NULL;
  if (!use_pinned_host)
    return malloc(bytes ? bytes : 1);
  CUDA_OK(cudaMallocHost(&p, bytes ? bytes : 1));
  return p;
}

static void host_free(void *p) {
  if (use_pinned_host)
    cudaFreeHost(p);
  else
    free(p);
}

/* ---- element types, written from their definitions ---- */

static size_t type_size(rcollDataType_t t) {
  static const size_t sizes[rcollNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return sizes[t];
}

static int type_is_fp8(rcollDataType_t t) {
  return t == rcollFloat8e4m3 || t == rcollFloat8e5m2;
}

static int type_is_float(rcollDataType_t t) {
  return t == rcollFloat16 || t == rcollFloat32 || t == rcollFloat64 || t == rcollBfloat16 ||
         type_is_fp8(t);
}

static int type_is_unsigned(rcollDataType_t t) {
  return t == rcollUint8 || t == rcollUint32 || t == rcollUint64;
}

/* float16 of a small integer (|v| <= 2048): exact. */
static uint16_t half_of_int(int v) {
  if (v == 0)
    return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  unsigned a = (unsigned)abs(v);
  int e = 0;
  while ((a >> e) > 1)
    e++;
  unsigned mant = (a << (10 - e)) & 0x3ff;
  return (uint16_t)(sign | (unsigned)(e + 15) << 10 | mant);
}

static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double s = (h & 0x8000) ? -1 : 1;
  if (e == 31)
    return m ? NAN : s * INFINITY;
  return e == 0 ? s * ldexp(m, -24) : s * ldexp(m + 1024, e - 25);
}

/* fp8 (e4m3: 3 mantissa bits, bias 7, largest 448; e5m2: 2 bits, bias 15),
 * nearest even, saturating; finite values only. */
static uint8_t fp8_of_double(double v, rcollDataType_t t) {
  int mbits = t == rcollFloat8e4m3 ? 3 : 2, bias = t == rcollFloat8e4m3 ? 7 : 15, e;
  uint8_t sign = v < 0 ? 0x80 : 0;
  double a = fmin(fabs(v), t == rcollFloat8e4m3 ? 448.0 : 57344.0);
  if (a == 0)
    return sign;
  frexp(a, &e);
  e = e - 1 < 1 - bias ? 1 - bias : e - 1;
  double q = nearbyint(ldexp(a, mbits - e));
  if (q >= ldexp(1, mbits + 1))
    q /= 2, e++;
  if (q < ldexp(1, mbits))
    return (uint8_t)(sign | (unsigned)q);
  return (uint8_t)(sign | (unsigned)(e + bias) << mbits | ((unsigned)q - (1u << mbits)));
}

static double fp8_to_double(uint8_t v, rcollDataType_t t) {
  int mbits = t == rcollFloat8e4m3 ? 3 : 2, bias = t == rcollFloat8e4m3 ? 7 : 15;
  int e = (v & 0x7f) >> mbits, m = v & ((1 << mbits) - 1);
  double s = (v & 0x80) ? -1 : 1;
  return e == 0 ? s * ldexp(m, 1 - bias - mbits) : s * ldexp(m + (1 << mbits), e - bias - mbits);
}

static double bf16_to_double(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void store(void *buf, size_t i, rcollDataType_t t, int64_t v) {
  char *p = (char *)buf + i * type_size(t);
  switch (t) {
  case rcollInt8: case rcollUint8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
  case rcollInt32: case rcollUint32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
  case rcollInt64: case rcollUint64: memcpy(p, &v, 8); break;
  case rcollFloat16: { uint16_t x = half_of_int((int)v); memcpy(p, &x, 2); break; }
  case rcollBfloat16: { float f = (float)v; uint32_t u; memcpy(&u, &f, 4); uint16_t x = (uint16_t)(u >> 16); memcpy(p, &x, 2); break; }
  case rcollFloat32: { float x = (float)v; memcpy(p, &x, 4); break; }
  case rcollFloat8e4m3: case rcollFloat8e5m2: *(uint8_t *)p = fp8_of_double((double)v, t); break;
  default: { double x = (double)v; memcpy(p, &x, 8); break; }
  }
}

/* An element as a double (floats) or as its integer value. */
static double load(const void *buf, size_t i, rcollDataType_t t) {
  const char *p = (const char *)buf + i * type_size(t);
  switch (t) {
  case rcollInt8: return *(const int8_t *)p;
  case rcollUint8: return *(const uint8_t *)p;
  case rcollInt32: { int32_t x; memcpy(&x, p, 4); return x; }
  case rcollUint32: { uint32_t x; memcpy(&x, p, 4); return x; }
  case rcollInt64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
  case rcollUint64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
  case rcollFloat16: { uint16_t x; memcpy(&x, p, 2); return half_to_double(x); }
  case rcollBfloat16: { uint16_t x; memcpy(&x, p, 2); return bf16_to_double(x); }
  case rcollFloat32: { float x; memcpy(&x, p, 4); return x; }
  case rcollFloat8e4m3: case rcollFloat8e5m2: return fp8_to_double(*(const uint8_t *)p, t);
  default: { double x; memcpy(&x, p, 8); return x; }
  }
}

/* Input of rank r at index i: in [-2, 2] (unsigned: [0, 4]); never 0 for
 * prod, so that products keep information. Every result is exact. */
static int64_t input(rcollDataType_t t, rcollRedOp_t op, int r, size_t i) {
  int h = (int)((r * 7 + i * 3) % 5);
  if (op == rcollProd) {
    static const int odd[4] = {1, -1, 2, -2};
    return type_is_unsigned(t) ? 1 + h % 3 : odd[h % 4];
  }
  return type_is_unsigned(t) ? h : h - 2;
}

static double expected(rcollDataType_t t, rcollRedOp_t op, size_t i) {
  double acc = (double)input(t, op, 0, i);
  for (int r = 1; r < nranks; r++) {
    double v = (double)input(t, op, r, i);
    acc = op == rcollProd ? acc * v : op == rcollMax ? fmax(acc, v) : op == rcollMin ? fmin(acc, v) : acc + v;
  }
  if (op == rcollAvg)
    acc = type_is_float(t) ? acc / nranks : trunc(acc / nranks); /* C integer division */
  return acc;
}

static int matches(rcollDataType_t t, rcollRedOp_t op, double got, double want) {
  /* fp8 rounds at every step (computed in half, back to fp8): sums beyond
   * 2^(mbits+1) and avg may be off by a few fp8 steps. */
  if (type_is_fp8(t) && (op == rcollSum || op == rcollAvg))
    return fabs(got - want) <= nranks * ldexp(1.0, t == rcollFloat8e4m3 ? -3 : -2) * fmax(1.0, fabs(want));
  if (op != rcollAvg || !type_is_float(t))
    return got == want;
  double ulp = t == rcollBfloat16 ? 1.0 / 128 : t == rcollFloat16 ? 1.0 / 1024 : t == rcollFloat32 ? 1e-7 : 1e-15;
  return fabs(got - want) <= 2 * ulp * fmax(1.0, fabs(want));
}

/* ---- one case ---- */

static void report(const char *what, long wrong) {
  if (wrong == 0) {
    passes++;
    return;
  }
  failures++;
  fprintf(stderr, "rank %d: FAIL %s: %ld wrong elements\n", rank, what, wrong);
}

static void check_async(const char *what) {
  rcollResult_t a = rcollSuccess;
  rcollCommGetAsyncError(comm, &a);
  if (a != rcollSuccess) {
    fprintf(stderr, "rank %d: FAIL %s: async error %s (%s)\n", rank, what, rcollGetErrorString(a),
            rcollGetLastError(comm));
    exit(1);
  }
}

/* all-reduce of every type and op, out of place and in place */
static void case_allreduce_types(cudaStream_t s, size_t count) {
  for (int t = 0; t < rcollNumTypes; t++) {
    size_t bytes = count * type_size((rcollDataType_t)t);
    char *h = host_alloc(bytes), *out = host_alloc(bytes);
    void *d_in, *d_out;
    CUDA_OK(cudaMalloc(&d_in, bytes));
    CUDA_OK(cudaMalloc(&d_out, bytes));
    for (int op = 0; op < rcollNumOps; op++) {
      for (int in_place = 0; in_place < 2; in_place++) {
        for (size_t i = 0; i < count; i++)
          store(h, i, (rcollDataType_t)t, input((rcollDataType_t)t, (rcollRedOp_t)op, rank, i));
        void *dst = in_place ? d_in : d_out;
        char what[96];
        snprintf(what, sizeof what, "allreduce type %d op %d count %zu %s", t, op, count,
                 in_place ? "in place" : "out of place");
        begin_case(what);
        CUDA_OK(cudaMemcpyAsync(d_in, h, bytes, cudaMemcpyHostToDevice, s));
        rcollResult_t r = rcollAllReduce(d_in, dst, count, (rcollDataType_t)t, (rcollRedOp_t)op, comm, s);
        CUDA_OK(cudaMemcpyAsync(out, dst, bytes, cudaMemcpyDeviceToHost, s));
        CUDA_OK(cudaStreamSynchronize(s));
        check_async(what);
        long wrong = r != rcollSuccess;
        for (size_t i = 0; i < count && !wrong; i++)
          wrong += !matches((rcollDataType_t)t, (rcollRedOp_t)op, load(out, i, (rcollDataType_t)t),
                            expected((rcollDataType_t)t, (rcollRedOp_t)op, i));
        report(what, wrong);
      }
    }
    cudaFree(d_in);
    cudaFree(d_out);
    host_free(h);
    host_free(out);
  }
}

/* float32: each collective at one count, against the inputs of every rank. */
static void case_collectives(cudaStream_t s, size_t n) {
  size_t N = n * (size_t)nranks;
  float *h = host_alloc(N * 4 + 4), *out = host_alloc(N * 4 + 4);
  float *din, *dout;
  CUDA_OK(cudaMalloc((void **)&din, N * 4 + 4));
  CUDA_OK(cudaMalloc((void **)&dout, N * 4 + 4));
  int root = nranks - 1, next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  for (int which = 0; which < 8; which++) {
    size_t in_count = which == 2 || which == 5 || which == 7 ? N : n;
    size_t out_count = which == 1 || which == 5 || (which == 6 && rank == root) ? N : n;
    for (size_t i = 0; i < in_count; i++)
      h[i] = (float)input(rcollFloat32, rcollSum, rank, i);
    static const char *const names[] = {"allreduce", "allgather", "reduce_scatter", "broadcast",
                                        "sendrecv ring", "alltoall", "gather", "scatter"};
    char what[96];
    snprintf(what, sizeof what, "%s float32 count %zu", names[which], n);
    begin_case(what);
    CUDA_OK(cudaMemcpyAsync(din, h, in_count * 4, cudaMemcpyHostToDevice, s));
    rcollResult_t r;
    const char *name;
    switch (which) {
    case 0: name = "allreduce"; r = rcollAllReduce(din, dout, n, rcollFloat32, rcollSum, comm, s); break;
    case 1: name = "allgather"; r = rcollAllGather(din, dout, n, rcollFloat32, comm, s); break;
    case 2: name = "reduce_scatter"; r = rcollReduceScatter(din, dout, n, rcollFloat32, rcollSum, comm, s); break;
    case 3: name = "broadcast"; r = rcollBroadcast(din, dout, n, rcollFloat32, root, comm, s); break;
    case 5: name = "alltoall"; r = rcollAlltoAll(din, dout, n, rcollFloat32, comm, s); break;
    case 6: name = "gather"; r = rcollGather(din, dout, n, rcollFloat32, root, comm, s); break;
    case 7: name = "scatter"; r = rcollScatter(din, dout, n, rcollFloat32, root, comm, s); break;
    default:
      name = "sendrecv ring";
      rcollGroupStart();
      rcollSend(din, n, rcollFloat32, next, comm, s);
      rcollRecv(dout, n, rcollFloat32, prev, comm, s);
      r = rcollGroupEnd();
      break;
    }
    CUDA_OK(cudaMemcpyAsync(out, dout, out_count * 4, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    check_async(name);
    long wrong = r != rcollSuccess;
    for (size_t i = 0; i < out_count && n > 0 && (which != 6 || rank == root); i++) {
      double want = which == 0   ? expected(rcollFloat32, rcollSum, i)
                    : which == 1 || which == 6 ? (double)input(rcollFloat32, rcollSum, (int)(i / n), i % n)
                    : which == 2 ? expected(rcollFloat32, rcollSum, (size_t)rank * n + i)
                    : which == 3 ? (double)input(rcollFloat32, rcollSum, root, i)
                    : which == 5 ? (double)input(rcollFloat32, rcollSum, (int)(i / n), (size_t)rank * n + i % n)
                    : which == 7 ? (double)input(rcollFloat32, rcollSum, root, (size_t)rank * n + i)
                                 : (double)input(rcollFloat32, rcollSum, prev, i);
      wrong += out[i] != want;
    }
    report(what, wrong);
  }
  cudaFree(din);
  cudaFree(dout);
  host_free(h);
  host_free(out);
}

/* rcollReduce avg to root 0, on the default stream (NULL). */
static void case_reduce_default_stream(size_t n) {
  float *h = host_alloc(n * 4), *d;
  CUDA_OK(cudaMalloc((void **)&d, n * 4));
  for (size_t i = 0; i < n; i++)
    h[i] = (float)input(rcollFloat32, rcollAvg, rank, i);
  begin_case("reduce avg in place on the default stream");
  CUDA_OK(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
  rcollResult_t r = rcollReduce(d, d, n, rcollFloat32, rcollAvg, 0, comm, NULL);
  CUDA_OK(cudaMemcpyAsync(h, d, n * 4, cudaMemcpyDeviceToHost, NULL));
  CUDA_OK(cudaStreamSynchronize(NULL));
  check_async("reduce on the default stream");
  long wrong = r != rcollSuccess;
  for (size_t i = 0; rank == 0 && i < n; i++)
    wrong += !matches(rcollFloat32, rcollAvg, h[i], expected(rcollFloat32, rcollAvg, i));
  report("reduce avg in place on the default stream", wrong);
  cudaFree(d);
  host_free(h);
}

static int local_rank(void) {
  const char *v = getenv("LOCAL_RANK");
  return v ? atoi(v) : rank;
}

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    fprintf(stderr, "gpu_conformance: no CUDA device here; skipped\n");
    return 77;
  }
  const char *r = getenv("RANK");
  rank = r ? atoi(r) : 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  use_default_stream = strcmp(knob("GPU_CONF_STREAM", "created"), "default") == 0;
  use_pinned_host = strcmp(knob("GPU_CONF_HOST", "pageable"), "pinned") == 0;
  only_collectives = strcmp(knob("GPU_CONF_CASES", "all"), "collectives") == 0;
  case_limit_s = (unsigned)atoi(knob("GPU_CONF_LIMIT", "45"));
  if (case_limit_s == 0)
    case_limit_s = 45;
  fprintf(stderr, "rank %d: %s stream, %s host buffers, %s cases, watchdog %u s\n", rank,
          use_default_stream ? "the legacy default" : "a created non-blocking",
          use_pinned_host ? "pinned" : "pageable", only_collectives ? "float32" : "all", case_limit_s);
  hang_dump_init();
  signal(SIGALRM, on_alarm);
  begin_case("rcollCommInitFromEnv");
  CUDA_OK(cudaSetDevice(local_rank() % ndev));
  rcollResult_t res = rcollCommInitFromEnv(&comm, NULL);
  if (res != rcollSuccess) {
    fprintf(stderr, "rank %d: rcollCommInitFromEnv: %s\n", rank, rcollGetLastError(NULL));
    return 1;
  }
  rcollCommUserRank(comm, &rank);
  rcollCommCount(comm, &nranks);
  cudaStream_t s = NULL;
  if (!use_default_stream)
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (!only_collectives)
    case_allreduce_types(s, 1031);
  static const size_t counts[] = {0, 1, 7, 4099, (1u << 20) + 3, 16u << 20};
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
    case_collectives(s, counts[k]);
  case_reduce_default_stream(100003);
  int dev = -1;
  rcollCommCuDevice(comm, &dev);
  begin_case("rcollCommFinalize");
  res = rcollCommFinalize(comm);
  report("rcollCommFinalize", res != rcollSuccess);
  rcollCommDestroy(comm);
  if (s != NULL)
    cudaStreamDestroy(s);
  printf("gpu_conformance rank %d of %d (device %d): %d passed, %d failed\n", rank, nranks, dev,
         passes, failures);
  return failures ? 1 : 0;
}
