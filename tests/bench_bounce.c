/* The host's share of a small device call, on the CUDA fake (no GPU needed):
 * 2 ranks as threads of this process, float32 sum all-reduces of 8 bytes on
 * "device" buffers, queued on a stream as a trainer queues them, with the
 * call bounced through pinned host memory (RCOLL_CUDA_BOUNCE, the default),
 * bounced with its kernel (RCOLL_CUDA_BOUNCE_KERNEL=1) and not bounced (=0),
 * as one direct kernel (RCOLL_CUDA_DIRECT=1) through the IPC boxes and in
 * place (after the ranks' meeting on the host: direct_meet.h), beside the
 * same call on host buffers.
 *
 *   tests/bin/bench_bounce [calls]     (default 2000)
 *
 * Prints, per call: the time the calling thread spends in rcollAllReduce
 * (planning, queueing the copies, the event and the stream's wait: what a
 * GPU adds to it is the driver's time in those calls), and the proxy's time
 * running the unit (its accounts). The fake's streams are threads, so the
 * time from call to completion says nothing about a GPU: it is not printed.
 * tests/gpu/latency.cu measures the GPU's part on a GPU. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_comm.h"
#include "cuda/module.h"
#include "support/bench_pair.h"
#include "support/cuda_fake.h"

typedef struct rank {
  int rank, calls, device;
  double call_us; /* summed time in rcollAllReduce */
  double run_us;  /* the proxy's, from its accounts */
  int64_t units;
  int wrong;
} rank_t;

static void rank_body(rcollComm_t comm, void *arg) {
  rank_t *x = arg;
  const rcoll_cuda_api_t *a = rcoll_cuda_api();
  float *buf = NULL, host[2];
  rcoll_cuda_stream_t s = NULL;
  if (x->device) {
    a->malloc((void **)&buf, 2 * sizeof(float));
    a->stream_create_with_flags(&s, 0);
  } else {
    buf = host;
  }
  buf[0] = buf[1] = 1.0f;
  for (int i = 0; i < x->calls + 20; i++) {
    double t0 = bench_now_us();
    rcollResult_t r = rcollAllReduce(buf, buf, 2, rcollFloat32, rcollMax, comm, s);
    if (i >= 20) /* the first calls allocate */
      x->call_us += bench_now_us() - t0;
    x->wrong += r != rcollSuccess;
    if (x->device && i % 10 == 9) /* fewer calls in flight than the bounce has slots: no call waits for one */
      fake_stream_sync(s);
  }
  if (x->device) {
    fake_stream_sync(s);
    x->run_us = (double)comm->cuda->prof.run_us;
    x->units = comm->cuda->prof.units;
    x->wrong += buf[0] != 1.0f;
    a->stream_destroy(s);
    fake_free(buf);
  } else {
    x->wrong += buf[0] != 1.0f;
  }
}

static int run(const char *what, int device, int calls) {
  rank_t r[2] = {{.rank = 0, .calls = calls, .device = device}, {.rank = 1, .calls = calls, .device = device}};
  if (bench_pair_run(rank_body, &r[0], &r[1]) != 0 || r[0].wrong || r[1].wrong) {
    fprintf(stderr, "bench_bounce: %s: a call failed or gave a wrong result\n", what);
    return 1;
  }
  printf("%-50s %8.2f us in the call", what, r[0].call_us / calls);
  if (device && r[0].units > 0)
    printf(", proxy %8.2f us running each unit", r[0].run_us / (double)r[0].units);
  printf("\n");
  return 0;
}

int main(int argc, char **argv) {
  int calls = argc > 1 ? atoi(argv[1]) : 2000;
  if (calls < 1)
    calls = 1;
  if (rcoll_cuda_fatbin_size == 0) {
    fprintf(stderr, "bench_bounce: this build has no device code; skipped\n");
    return 77;
  }
  fake_cuda_install();
  setenv("RCOLL_DEBUG", "WARN", 0);
  printf("bench_bounce: 2 ranks (threads), 8-byte all-reduce, %d calls, the CUDA fake\n", calls);
  int bad = run("host buffers", 0, calls);
  setenv("RCOLL_CUDA_BOUNCE", "65536", 1);
  bad |= run("device buffers, bounced (RCOLL_CUDA_BOUNCE)", 1, calls);
  setenv("RCOLL_CUDA_BOUNCE_KERNEL", "1", 1);
  bad |= run("device buffers, bounce kernel (..._KERNEL=1)", 1, calls);
  setenv("RCOLL_CUDA_BOUNCE_KERNEL", "0", 1);
  setenv("RCOLL_CUDA_BOUNCE", "0", 1);
  bad |= run("device buffers, device plan (RCOLL_CUDA_BOUNCE=0)", 1, calls);
  setenv("RCOLL_CUDA_DIRECT", "1", 1);
  bad |= run("device buffers, direct kernel (RCOLL_CUDA_DIRECT=1)", 1, calls);
  setenv("RCOLL_CUDA_DIRECT_INPLACE", "1", 1);
  bad |= run("device buffers, direct in place (..._INPLACE=1)", 1, calls);
  return bad;
}
