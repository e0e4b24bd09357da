/* NCCL's all-reduce on device buffers, timed as bench/allreduce_perf times
 * rcoll's, so that tests/gpu/compare_nccl.sh can put the two side by side
 * in one run. nccl-tests itself needs MPI or threads in one process to run
 * several ranks; this program is one rank per process, launched like
 * rcoll's ranks (RANK, WORLD_SIZE, LOCAL_RANK), with NCCL's unique id
 * passed through a file that rank 0 writes.
 *
 * NCCL is opened with dlopen (NCCL_PERF_LIB, else libnccl.so.2), and the
 * few functions used are declared here: NCCL's ABI for them has not
 * changed since 2.x, and the GPU machine's NCCL may come with PyTorch and
 * no header.
 *
 * Usage: nccl_perf -b MIN -e MAX [-f FACTOR] [-n ITERS] [-w WARMUP]
 *   env NCCL_PERF_ID=FILE (required): where rank 0 puts the unique id.
 * Prints one row per size, as the rcoll bench does (out-of-place columns
 * only): size count type redop root time(us) algbw busbw #wrong. Exit 77
 * without a GPU or NCCL. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  char internal[128];
} nccl_id_t;
typedef struct nccl_comm *nccl_comm_t;
enum { NCCL_FLOAT32 = 7, NCCL_SUM = 0 };

typedef struct nccl_api {
  int (*get_version)(int *);
  int (*get_unique_id)(nccl_id_t *);
  int (*comm_init_rank)(nccl_comm_t *, int, nccl_id_t, int);
  int (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
  int (*comm_destroy)(nccl_comm_t);
  const char *(*error_string)(int);
} nccl_api_t;

static int load_nccl(nccl_api_t *a) {
  const char *path = getenv("NCCL_PERF_LIB") ? getenv("NCCL_PERF_LIB") : "libnccl.so.2";
  void *h = dlopen(path, RTLD_NOW);
  if (h == NULL) {
    fprintf(stderr, "nccl_perf: cannot open %s: %s\n", path, dlerror());
    return -1;
  }
  *(void **)&a->get_version = dlsym(h, "ncclGetVersion");
  *(void **)&a->get_unique_id = dlsym(h, "ncclGetUniqueId");
  *(void **)&a->comm_init_rank = dlsym(h, "ncclCommInitRank");
  *(void **)&a->all_reduce = dlsym(h, "ncclAllReduce");
  *(void **)&a->comm_destroy = dlsym(h, "ncclCommDestroy");
  *(void **)&a->error_string = dlsym(h, "ncclGetErrorString");
  if (!a->get_version || !a->get_unique_id || !a->comm_init_rank || !a->all_reduce ||
      !a->comm_destroy || !a->error_string) {
    fprintf(stderr, "nccl_perf: %s lacks an NCCL function this program needs\n", path);
    return -1;
  }
  return 0;
}

static int env_int(const char *name, int def) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : def;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank 0 writes the id under a temporary name and renames it, so that the
 * others never read half of it; they wait up to 120 s for it. */
static int share_id(const nccl_api_t *a, int rank, nccl_id_t *id) {
  const char *file = getenv("NCCL_PERF_ID");
  if (file == NULL) {
    fprintf(stderr, "nccl_perf: set NCCL_PERF_ID to a file path for the unique id\n");
    return -1;
  }
  if (rank == 0) {
    int r = a->get_unique_id(id);
    if (r != 0) {
      fprintf(stderr, "nccl_perf: ncclGetUniqueId: %s\n", a->error_string(r));
      return -1;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, file) != 0) {
      fprintf(stderr, "nccl_perf: writing %s: %s\n", file, strerror(errno));
      return -1;
    }
    return 0;
  }
  for (double end = now_s() + 120; now_s() < end; usleep(10000)) {
    FILE *f = fopen(file, "rb");
    if (f == NULL)
      continue;
    size_t got = fread(id, sizeof *id, 1, f);
    fclose(f);
    if (got == 1)
      return 0;
  }
  fprintf(stderr, "nccl_perf: rank %d: no unique id in %s after 120 s\n", rank, file);
  return -1;
}

/* Element i of rank r: small integers, so that float sums are exact. */
static float input(int r, size_t i) { return (float)((r + 1) + (int)(i % 7)); }

static long check(const float *got, size_t n, int nranks) {
  long wrong = 0;
  for (size_t i = 0; i < n; i++) {
    float want = 0;
    for (int r = 0; r < nranks; r++)
      want += input(r, i);
    wrong += got[i] != want;
  }
  return wrong;
}

#define CUDA_OK(call)                                                                  \
  do {                                                                                 \
    cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "nccl_perf: %s failed: %s\n", #call, cudaGetErrorString(e_));    \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

static int run_size(const nccl_api_t *a, nccl_comm_t comm, cudaStream_t s, size_t bytes,
                    int iters, int warmup, int rank, int nranks, float *dsend, float *drecv,
                    float *host) {
  size_t n = bytes / 4;
  for (size_t i = 0; i < n; i++)
    host[i] = input(rank, i);
  CUDA_OK(cudaMemcpy(dsend, host, n * 4, cudaMemcpyHostToDevice));
  int r = a->all_reduce(dsend, drecv, n, NCCL_FLOAT32, NCCL_SUM, comm, s);
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(host, drecv, n * 4, cudaMemcpyDeviceToHost));
  long wrong = r == 0 ? check(host, n, nranks) : (long)n;
  for (int i = 0; i < warmup && r == 0; i++)
    r = a->all_reduce(dsend, drecv, n, NCCL_FLOAT32, NCCL_SUM, comm, s);
  CUDA_OK(cudaStreamSynchronize(s));
  double t0 = now_s();
  for (int i = 0; i < iters && r == 0; i++)
    r = a->all_reduce(dsend, drecv, n, NCCL_FLOAT32, NCCL_SUM, comm, s);
  CUDA_OK(cudaStreamSynchronize(s));
  double us = (now_s() - t0) / iters * 1e6;
  if (r != 0) {
    fprintf(stderr, "nccl_perf: ncclAllReduce of %zu bytes: %s\n", bytes, a->error_string(r));
    return 1;
  }
  double algbw = (double)bytes / us / 1e3, busbw = algbw * 2.0 * (nranks - 1) / nranks;
  printf("%12zu %12zu %8s %6s %6d %9.2f %7.2f %7.2f %6ld\n", bytes, n, "float", "sum", -1, us,
         algbw, busbw, wrong);
  fflush(stdout);
  return wrong != 0;
}

int main(int argc, char **argv) {
  size_t min = 8, max = 8;
  double factor = 2;
  int iters = 20, warmup = 5;
  for (int o; (o = getopt(argc, argv, "b:e:f:n:w:")) != -1;) {
    switch (o) {
    case 'b': min = strtoull(optarg, NULL, 0); break;
    case 'e': max = strtoull(optarg, NULL, 0); break;
    case 'f': factor = atof(optarg); break;
    case 'n': iters = atoi(optarg); break;
    case 'w': warmup = atoi(optarg); break;
    default: fprintf(stderr, "usage: nccl_perf -b MIN -e MAX [-f FACTOR] [-n ITERS] [-w WARMUP]\n"); return 2;
    }
  }
  if (min < 4 || max < min || factor <= 1 || iters < 1 || warmup < 0) {
    fprintf(stderr, "nccl_perf: need 4 <= -b <= -e, -f > 1, -n >= 1, -w >= 0\n");
    return 2;
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    fprintf(stderr, "nccl_perf: no CUDA device here; skipped\n");
    return 77;
  }
  nccl_api_t a;
  if (load_nccl(&a) != 0)
    return 77;
  int rank = env_int("RANK", 0), nranks = env_int("WORLD_SIZE", 1);
  CUDA_OK(cudaSetDevice(env_int("LOCAL_RANK", rank) % ndev));
  nccl_id_t id;
  if (share_id(&a, rank, &id) != 0)
    return 1;
  nccl_comm_t comm;
  int version = 0, r = a.comm_init_rank(&comm, nranks, id, rank);
  if (r != 0) {
    fprintf(stderr, "nccl_perf: rank %d: ncclCommInitRank: %s\n", rank, a.error_string(r));
    return 1;
  }
  a.get_version(&version);
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *dsend, *drecv, *host = malloc(max);
  CUDA_OK(cudaMalloc((void **)&dsend, max));
  CUDA_OK(cudaMalloc((void **)&drecv, max));
  if (host == NULL)
    return 1;
  printf("# nccl_perf: NCCL %d, %d ranks, rank %d on device %d; out-of-place float sum\n", version,
         nranks, rank, env_int("LOCAL_RANK", rank) % ndev);
  printf("#%11s %12s %8s %6s %6s %9s %7s %7s %6s\n", "size", "count", "type", "redop", "root",
         "time", "algbw", "busbw", "#wrong");
  int failed = 0;
  for (double b = (double)min; b <= (double)max && !failed; b *= factor)
    failed = run_size(&a, comm, s, (size_t)b / 4 * 4, iters, warmup, rank, nranks, dsend, drecv, host);
  a.comm_destroy(comm);
  cudaFree(dsend);
  cudaFree(drecv);
  free(host);
  return failed;
}
