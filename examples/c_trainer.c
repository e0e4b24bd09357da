/* Data-parallel SGD in plain C: logistic regression on synthetic data, each
 * rank on its own shard, gradients summed with rcollAllReduce so that every
 * rank takes the same step and ends with the same weights.
 *
 *   mpiexec -n 4 env RCOLL_COMM_ID=127.0.0.1:29555 examples/bin/c_trainer
 *   RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 examples/bin/c_trainer &
 *   RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 examples/bin/c_trainer
 *
 * Rank, size and rendezvous come from the launcher (rcollCommInitFromEnv). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "rcoll.h"

#define DIM 16        /* features; weight DIM is the bias */
#define SAMPLES 4096  /* per rank */
#define STEPS 50
#define LR 0.5

/* A small deterministic generator, so that every run sees the same data. */
static double uniform(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*s >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

/* Labels come from a fixed "true" weight vector, so the loss must fall. */
static void make_shard(int rank, float *x, float *y) {
  uint64_t s = 12345u + (uint64_t)rank * 7919u;
  for (int i = 0; i < SAMPLES; i++) {
    double z = 0.0;
    for (int j = 0; j < DIM; j++) {
      x[i * DIM + j] = (float)uniform(&s);
      z += x[i * DIM + j] * ((j % 3) - 1.0);
    }
    y[i] = z + 0.1 * uniform(&s) > 0.0 ? 1.0f : 0.0f;
  }
}

/* Gradient of the mean log-loss over this shard into g[0..DIM]; g[DIM+1] gets
 * the summed loss, so one all-reduce carries both. */
static void gradient(const float *w, const float *x, const float *y, float *g) {
  for (int j = 0; j < DIM + 2; j++)
    g[j] = 0.0f;
  for (int i = 0; i < SAMPLES; i++) {
    double z = w[DIM];
    for (int j = 0; j < DIM; j++)
      z += w[j] * x[i * DIM + j];
    double p = 1.0 / (1.0 + exp(-z)), err = p - y[i];
    for (int j = 0; j < DIM; j++)
      g[j] += (float)(err * x[i * DIM + j]);
    g[DIM] += (float)err;
    g[DIM + 1] += (float)-(y[i] ? log(p + 1e-12) : log(1.0 - p + 1e-12));
  }
}

static int fail(const char *what, rcollResult_t r, rcollComm_t comm) {
  fprintf(stderr, "c_trainer: %s: %s: %s\n", what, rcollGetErrorString(r), rcollGetLastError(comm));
  return 1;
}

int main(void) {
  rcollComm_t comm;
  rcollResult_t r = rcollCommInitFromEnv(&comm, NULL);
  if (r != rcollSuccess)
    return fail("rcollCommInitFromEnv", r, NULL);
  int rank, size;
  rcollCommUserRank(comm, &rank);
  rcollCommCount(comm, &size);

  float *x = malloc(sizeof(float) * SAMPLES * DIM), *y = malloc(sizeof(float) * SAMPLES);
  float w[DIM + 1] = {0}, g[DIM + 2];
  if (x == NULL || y == NULL)
    return fail("malloc", rcollSystemError, NULL);
  make_shard(rank, x, y);

  double first = 0.0, loss = 0.0;
  for (int step = 0; step < STEPS; step++) {
    gradient(w, x, y, g);
    /* Sum gradients and losses over every rank: the data-parallel step. */
    r = rcollAllReduce(g, g, DIM + 2, rcollFloat32, rcollSum, comm, NULL);
    if (r != rcollSuccess)
      return fail("rcollAllReduce", r, comm);
    double n = (double)SAMPLES * size;
    for (int j = 0; j <= DIM; j++)
      w[j] -= (float)(LR * g[j] / n);
    loss = g[DIM + 1] / n;
    if (step == 0)
      first = loss;
    if (rank == 0 && (step % 10 == 0 || step == STEPS - 1))
      printf("step %2d loss %.6f\n", step, loss);
  }

  /* Every rank must hold the same weights: compare against rank 0's. */
  float w0[DIM + 1];
  for (int j = 0; j <= DIM; j++)
    w0[j] = w[j];
  r = rcollBroadcast(w0, w0, DIM + 1, rcollFloat32, 0, comm, NULL);
  if (r != rcollSuccess)
    return fail("rcollBroadcast", r, comm);
  int same = 1;
  for (int j = 0; j <= DIM; j++)
    same &= w0[j] == w[j];
  if (rank == 0)
    printf("%d ranks: loss %.4f -> %.4f, weights identical on every rank: %s\n", size, first, loss,
           same ? "yes" : "NO");
  rcollCommDestroy(comm);
  free(x);
  free(y);
  return same && loss < first ? 0 : 1;
}
