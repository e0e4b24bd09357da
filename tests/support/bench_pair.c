/* Two ranks as threads (bench_pair.h). */
#include "bench_pair.h"

#include <pthread.h>
#include <time.h>

double bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

typedef struct pair_rank {
  int rank, failed;
  rcollUniqueId id;
  void (*body)(rcollComm_t, void *);
  void *arg;
} pair_rank_t;

static void *pair_main(void *p) {
  pair_rank_t *x = p;
  rcollComm_t comm;
  if (rcollCommInitRank(&comm, 2, x->id, x->rank) != rcollSuccess) {
    x->failed = 1;
    return NULL;
  }
  x->body(comm, x->arg);
  rcollCommDestroy(comm);
  return NULL;
}

int bench_pair_run(void (*body)(rcollComm_t comm, void *arg), void *arg0, void *arg1) {
  pair_rank_t r[2] = {{.rank = 0, .body = body, .arg = arg0}, {.rank = 1, .body = body, .arg = arg1}};
  rcollGetUniqueId(&r[0].id);
  r[1].id = r[0].id;
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, pair_main, &r[i]);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  return r[0].failed + r[1].failed;
}
