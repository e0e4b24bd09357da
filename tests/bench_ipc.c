/* The proxy's CUDA IPC protocol within a node, on the CUDA fake with a
 * modelled GPU (no GPU needed): 2 and 4 ranks as threads of this process
 * on one "device", float32 sum all-reduces on device buffers, each part a
 * copy into the sender's ring and a copy or reduce kernel out of it
 * (lib/cuda/ipc.c). The fake's device-to-device copies and reduce kernels
 * first wait a launch latency (LAT us; other streams' work goes on), then
 * move their traffic over one memory that all streams share, in turn, at
 * GBPS (fake_stats.dev_bytes_per_us): a GPU's memory is one resource,
 * whichever process or stream uses it.
 *
 *   tests/bin/bench_ipc [rounds [GBPS [LAT]]]   (default 3 rounds, 2 GB/s, 10 us)
 *
 * Prints per rank count and size the median time of a call, its busbw as
 * a share of the modelled copy bandwidth (GBPS / 2: a copy reads and
 * writes its bytes), which is what tests/gpu/compare_nccl.sh reports on a
 * GPU, and the ring's bound on this memory: per rank (n - 1) / n of the
 * vector copied in (2 bytes of traffic each) and reduced (3) while
 * reduce-scattering, copied in and copied out (2 and 2) while gathering:
 * 9 (n - 1) times the vector's bytes over the one memory. Time above the
 * bound is the protocol's: launches and the proxy's round trips not hidden
 * behind other work. The default memory is slow so that the model, not the
 * fake's memcpy on this machine's cores, is a copy's time; it says how the
 * protocol overlaps work, not what a GPU will see. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_comm.h"
#include "cuda/module.h"
#include "support/bench_pair.h"
#include "support/cuda_fake.h"

static pthread_barrier_t start;

typedef struct rank {
  int rank, nranks;
  size_t count;
  double us;
  int wrong;
} rank_t;

static void rank_body(rcollComm_t comm, void *arg) {
  rank_t *x = arg;
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  float *buf = NULL;
  rcoll_cuda_stream_t s = NULL;
  a->malloc((void **)&buf, x->count * sizeof(float));
  a->stream_create_with_flags(&s, 0);
  for (size_t i = 0; buf != NULL && i < x->count; i++)
    buf[i] = 1;
  /* A first call sets up the rings; the second is timed. */
  for (int k = 0; k < 2; k++) {
    if (k == 1)
      pthread_barrier_wait(&start);
    double t0 = bench_now_us();
    x->wrong += buf == NULL || rcollAllReduce(buf, buf, x->count, rcollFloat32, rcollSum, comm, s) != rcollSuccess;
    fake_stream_sync(s);
    x->us = bench_now_us() - t0;
  }
  float want = (float)(x->nranks * x->nranks); /* two sums of ones */
  x->wrong += buf != NULL && (buf[0] != want || buf[x->count - 1] != want);
  a->stream_destroy(s);
  fake_free(buf);
}

/* One call on n ranks: its time on the slowest, or -1. */
static double run(int n, size_t count) {
  rank_t r[BENCH_MAX_RANKS];
  void *args[BENCH_MAX_RANKS];
  pthread_barrier_init(&start, NULL, (unsigned)n);
  for (int i = 0; i < n; i++) {
    r[i] = (rank_t){.rank = i, .nranks = n, .count = count};
    args[i] = &r[i];
  }
  int failed = bench_ranks_run(n, rank_body, args);
  pthread_barrier_destroy(&start);
  double us = 0;
  for (int i = 0; i < n; i++) {
    failed += r[i].wrong;
    us = r[i].us > us ? r[i].us : us;
  }
  return failed ? -1 : us;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  double gbps = argc > 2 ? atof(argv[2]) : 2, lat = argc > 3 ? atof(argv[3]) : 10;
  if (rounds < 1 || rounds > 99 || gbps <= 0 || lat < 0) {
    fprintf(stderr, "usage: bench_ipc [rounds (1-99) [GB/s (> 0) [latency us (>= 0)]]]\n");
    return 2;
  }
  if (rcoll_cuda_fatbin_size == 0) {
    fprintf(stderr, "bench_ipc: this build has no device code; skipped\n");
    return 77;
  }
  fake_cuda_install();
  setenv("RCOLL_DEBUG", "WARN", 0);
  setenv("RCOLL_CUDA_BOUNCE", "0", 1); /* device plans at every size */
  atomic_store(&fake_stats.dev_bytes_per_us, (int)(gbps * 1000));
  atomic_store(&fake_stats.dev_op_us, (int)lat);
  printf("bench_ipc: ranks (threads) on one fake GPU over CUDA IPC, a memory of %.1f GB/s shared by every "
         "stream, %.0f us a launch; median of %d rounds\n", gbps, lat, rounds);
  printf("%5s %10s %10s %12s %10s %12s %9s\n", "ranks", "bytes", "us", "busbw GB/s", "% of copy",
         "ring bound", "us/bound");
  static const size_t sizes[] = {(size_t)1 << 20, (size_t)16 << 20, (size_t)64 << 20};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    for (int n = 2; n <= 4; n += 2) {
      double t[99];
      for (int i = 0; i < rounds; i++)
        if ((t[i] = run(n, sizes[k] / sizeof(float))) < 0) {
          fprintf(stderr, "bench_ipc: %d ranks, %zu bytes failed or gave a wrong result\n", n, sizes[k]);
          return 1;
        }
      double us = bench_median(t, rounds), bytes = (double)sizes[k];
      double busbw = bytes / us / 1000 * 2 * (n - 1) / n, bound = 9.0 * (n - 1) * bytes / (gbps * 1000);
      printf("%5d %10zu %10.0f %12.3f %9.1f%% %12.0f %9.2f\n", n, sizes[k], us, busbw,
             100 * busbw / (gbps / 2), bound, us / bound);
    }
  }
  return 0;
}
