/* Ranks as threads (bench_pair.h). */
#include "bench_pair.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

double bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int bench_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp);
  return v[n / 2];
}

typedef struct bench_rank {
  int rank, nranks, failed;
  rcollUniqueId id;
  void (*body)(rcollComm_t, void *);
  void *arg;
} bench_rank_t;

static void *bench_rank_main(void *p) {
  bench_rank_t *x = p;
  rcollComm_t comm;
  if (rcollCommInitRank(&comm, x->nranks, x->id, x->rank) != rcollSuccess) {
    x->failed = 1;
    return NULL;
  }
  x->body(comm, x->arg);
  rcollCommDestroy(comm);
  return NULL;
}

int bench_ranks_run(int n, void (*body)(rcollComm_t comm, void *arg), void *const *args) {
  bench_rank_t r[BENCH_MAX_RANKS];
  pthread_t t[BENCH_MAX_RANKS];
  if (n < 1 || n > BENCH_MAX_RANKS)
    return n;
  rcollUniqueId id;
  rcollGetUniqueId(&id);
  for (int i = 0; i < n; i++) {
    r[i] = (bench_rank_t){.rank = i, .nranks = n, .id = id, .body = body, .arg = args[i]};
    pthread_create(&t[i], NULL, bench_rank_main, &r[i]);
  }
  int failed = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(t[i], NULL);
    failed += r[i].failed;
  }
  return failed;
}

int bench_pair_run(void (*body)(rcollComm_t comm, void *arg), void *arg0, void *arg1) {
  void *args[2] = {arg0, arg1};
  return bench_ranks_run(2, body, args);
}
