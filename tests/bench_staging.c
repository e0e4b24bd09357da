/* What staging through host memory adds to the host path, on the CUDA fake
 * with a modelled bus (no GPU needed): 2 ranks as threads over the socket
 * transport, float32 all-reduces and sends of rank 0 to rank 1 on "device"
 * buffers (every message copied to a pinned slot, sent, copied back:
 * lib/cuda/stage.c), beside the same calls on host buffers, in alternating
 * rounds. Each fake copy takes LAT us plus bytes / GBPS, as a copy over
 * PCIe would; the network is this machine's loopback. The default bus is
 * slow (2 GB/s) so that a copy's time is the model's, not that of the
 * fake's memcpy on this machine's cores.
 *
 *   tests/bin/bench_staging [rounds [GBPS [LAT]]]   (default 5 rounds, 2 GB/s, 5 us)
 *
 * Prints per size the median time of a call on host and on device buffers,
 * their ratio, and what one copy of the whole vector over the modelled bus
 * takes: a send that did not overlap its copies with the wire would take
 * two of those (down at the sender, up at the receiver) and the host time;
 * one that did, about one and a slot's.
 * The fake's copies also run memcpy on this machine's cores, beside the
 * sockets: a ratio here says how the protocol overlaps, not what a GPU
 * machine will see (tests/gpu/compare_nccl.sh measures that). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_comm.h"
#include "cuda/module.h"
#include "support/bench_pair.h"
#include "support/cuda_fake.h"

enum { CALL_ALLREDUCE, CALL_SEND };

/* Both ranks start the timed call together: a receiver that finished its
 * first call later would otherwise start its clock after the sender. */
static pthread_barrier_t start;

typedef struct rank {
  int rank, device, call;
  size_t count;
  double us; /* one call, after a first that allocates */
  int wrong;
} rank_t;

static rcollResult_t one_call(rank_t *x, float *buf, rcollComm_t comm, rcoll_cuda_stream_t s) {
  rcollResult_t r;
  if (x->call == CALL_ALLREDUCE)
    r = rcollAllReduce(buf, buf, x->count, rcollFloat32, rcollMax, comm, s);
  else if (x->rank == 0)
    r = rcollSend(buf, x->count, rcollFloat32, 1, comm, s);
  else
    r = rcollRecv(buf, x->count, rcollFloat32, 0, comm, s);
  if (x->device)
    fake_stream_sync(s);
  return r;
}

static void rank_body(rcollComm_t comm, void *arg) {
  rank_t *x = arg;
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  size_t bytes = x->count * sizeof(float);
  float *buf = NULL;
  rcoll_cuda_stream_t s = NULL;
  if (x->device) {
    a->malloc((void **)&buf, bytes);
    a->stream_create_with_flags(&s, 0);
  } else {
    buf = malloc(bytes);
  }
  for (size_t i = 0; buf != NULL && i < x->count; i++)
    buf[i] = (float)(x->rank + 1);
  x->wrong += buf == NULL || one_call(x, buf, comm, s) != rcollSuccess;
  pthread_barrier_wait(&start);
  double t0 = bench_now_us();
  x->wrong += buf == NULL || one_call(x, buf, comm, s) != rcollSuccess;
  x->us = bench_now_us() - t0;
  /* max over ranks 1 and 2, or rank 0's ones */
  x->wrong += buf != NULL && buf[x->count - 1] != (x->call == CALL_ALLREDUCE ? 2.0f : 1.0f);
  if (x->device) {
    a->stream_destroy(s);
    fake_free(buf);
  } else {
    free(buf);
  }
}

/* One call on both ranks; its time on the slower, or -1. */
static double run(int device, int call, size_t count) {
  rank_t r[2] = {{.rank = 0, .device = device, .call = call, .count = count},
                 {.rank = 1, .device = device, .call = call, .count = count}};
  if (bench_pair_run(rank_body, &r[0], &r[1]) != 0 || r[0].wrong || r[1].wrong)
    return -1;
  return r[0].us > r[1].us ? r[0].us : r[1].us;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  double gbps = argc > 2 ? atof(argv[2]) : 2, lat = argc > 3 ? atof(argv[3]) : 5;
  if (rounds < 1 || rounds > 99 || gbps <= 0 || lat < 0) {
    fprintf(stderr, "usage: bench_staging [rounds (1-99) [GB/s (> 0) [latency us (>= 0)]]]\n");
    return 2;
  }
  if (rcoll_cuda_fatbin_size == 0) {
    fprintf(stderr, "bench_staging: this build has no device code; skipped\n");
    return 77;
  }
  fake_cuda_install();
  pthread_barrier_init(&start, NULL, 2);
  setenv("RCOLL_DEBUG", "WARN", 0);
  setenv("RCOLL_SHM_DISABLE", "1", 1); /* the socket transport */
  setenv("RCOLL_P2P_DISABLE", "1", 1); /* staging, not CUDA IPC */
  setenv("RCOLL_CUDA_BOUNCE", "0", 1); /* device plans at every size */
  atomic_store(&fake_stats.copy_delay_us, (int)lat);
  atomic_store(&fake_stats.copy_bytes_per_us, (int)(gbps * 1000));
  printf("bench_staging: 2 ranks (threads) over sockets, the CUDA fake with copies of %.0f us + bytes at "
         "%.1f GB/s, median of %d alternating rounds\n", lat, gbps, rounds);
  printf("%-10s %10s %12s %12s %7s %14s\n", "call", "bytes", "host us", "device us", "ratio", "one copy us");
  static const size_t sizes[] = {(size_t)1 << 20, (size_t)16 << 20, (size_t)64 << 20};
  static const char *const names[] = {"allreduce", "send"};
  for (int call = CALL_ALLREDUCE; call <= CALL_SEND; call++) {
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      double host[99], dev[99];
      for (int i = 0; i < rounds; i++) {
        host[i] = run(0, call, sizes[k] / sizeof(float));
        dev[i] = run(1, call, sizes[k] / sizeof(float));
        if (host[i] < 0 || dev[i] < 0) {
          fprintf(stderr, "bench_staging: %s of %zu bytes failed or gave a wrong result\n", names[call],
                  sizes[k]);
          return 1;
        }
      }
      double h = bench_median(host, rounds), d = bench_median(dev, rounds);
      printf("%-10s %10zu %12.0f %12.0f %7.2f %14.0f\n", names[call], sizes[k], h, d, d / h,
             lat + (double)sizes[k] / (gbps * 1000));
    }
  }
  return 0;
}
