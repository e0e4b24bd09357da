/* Ranks as threads for the fake-CUDA tests (cuda_ranks.h). */
#include "cuda_ranks.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda/module.h"
#include "cuda_fake.h"

void cuda_ranks_setup(void) {
  if (rcoll_cuda_fatbin_size == 0)
    cr_skip_test("this build has no device code (configure found no CUDA), so device calls are "
                 "refused before they reach the proxy");
  setenv("RCOLL_TIMEOUT", "20", 1);
  /* The suites of the device steps use small counts, which would otherwise
   * run as host plans (lib/cuda/bounce.h); test_cuda_bounce.c turns it on. */
  setenv("RCOLL_CUDA_BOUNCE", "0", 1);
  fake_cuda_install();
}

double cuda_ranks_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void *cuda_ranks_dev_alloc(size_t bytes) {
  void *p = NULL;
  cr_assert_eq(rcoll_cuda_api()->malloc(&p, bytes ? bytes : 1), 0);
  return p;
}

rcoll_cuda_stream_t cuda_ranks_stream_new(void) {
  rcoll_cuda_stream_t s;
  rcoll_cuda_api()->stream_create_with_flags(&s, 0);
  return s;
}

float cuda_ranks_input(int rank, size_t i) {
  return (float)(rank * 100 + (int)(i % 61));
}

void cuda_ranks_fill(float *buf, size_t count, int rank) {
  for (size_t i = 0; i < count; i++)
    buf[i] = cuda_ranks_input(rank, i);
}

float cuda_ranks_sum_of(int n, size_t i) {
  float s = 0;
  for (int r = 0; r < n; r++)
    s += cuda_ranks_input(r, i);
  return s;
}

/* ---- ranks as threads ---- */

void *cuda_ranks_main(void *arg) {
  rank_ctx_t *x = arg;
  rcollComm_t comm;
  x->result = rcollCommInitRank(&comm, x->nranks, x->id, x->rank);
  if (x->result != rcollSuccess)
    return NULL;
  x->body(x, comm);
  rcollCommDestroy(comm);
  return NULL;
}

void cuda_ranks_run(int n, size_t count, void (*body)(rank_ctx_t *, rcollComm_t), rank_ctx_t *ctx) {
  rcollUniqueId id;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess);
  pthread_t t[MAX_RANKS];
  for (int r = 0; r < n; r++) {
    ctx[r] = (rank_ctx_t){.rank = r, .nranks = n, .id = id, .count = count, .body = body,
                          .user = ctx[r].user};
    pthread_create(&t[r], NULL, cuda_ranks_main, &ctx[r]);
  }
  for (int r = 0; r < n; r++)
    pthread_join(t[r], NULL);
  for (int r = 0; r < n; r++) {
    cr_expect_eq(ctx[r].result, rcollSuccess, "rank %d: %s", r, rcollGetErrorString(ctx[r].result));
    cr_expect_eq(ctx[r].wrong, 0, "rank %d: %ld wrong elements", r, ctx[r].wrong);
  }
}

void cuda_ranks_take_snapshot(void *snapshot) {
  cuda_ranks_snapshot_t *s = snapshot;
  memcpy(s->copy, s->src, s->count * sizeof(float));
}

static void nothing(void *arg) { (void)arg; }

void cuda_ranks_fork2(int (*rank_main)(int rank, const int ids[2], void *arg), void *arg, int secs) {
  int ids[2] = {-1, -1};
  int ready = pipe(ids) == 0;
  fake_stream_host(NULL, nothing, NULL); /* the legacy stream's thread has run, and waits */
  fake_stream_sync(NULL);
  pid_t pids[2] = {-1, -1};
  for (int r = 0; r < 2 && ready; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      /* Gone with the test, and within its time: a rank left behind would
       * hold the runner's output pipe open. */
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      alarm((unsigned)secs);
      _exit(rank_main(r, ids, arg));
    }
  }
  cr_assert(ready, "a pipe");
  for (int r = 0; r < 2; r++) {
    int st = 0;
    cr_assert_gt(pids[r], 0, "fork of rank %d", r);
    cr_assert_eq(waitpid(pids[r], &st, 0), pids[r]);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d: exit status %d (signal %d)", r,
              WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  }
  close(ids[0]);
  close(ids[1]);
}
