/* -T: nccl-tests ends a test whose stream has not finished after T seconds.
 * Host calls block inside the library, so a watchdog thread does it here:
 * every rank beats at each iteration, check and phase, and when no beat came
 * for T seconds (a hung peer, a lost link) the run ends with status 2 instead
 * of hanging until the launcher's own limit. */
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "common_impl.h"

/* Beats are counted, not timed: the timed loop beats once per iteration,
 * and a clock read there would be part of every small call's time. The
 * watchdog thread notices when the count stops moving. */
static atomic_ullong beats;
static bench_world_t *dog_world;
static int dog_seconds;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void bench_watchdog_beat(void) { atomic_fetch_add_explicit(&beats, 1, memory_order_relaxed); }

static void *watch(void *arg) {
  (void)arg;
  unsigned long long seen = atomic_load(&beats);
  long long last_beat_ms = now_ms();
  for (;;) {
    usleep(100 * 1000);
    unsigned long long now_beats = atomic_load(&beats);
    if (now_beats != seen) {
      seen = now_beats;
      last_beat_ms = now_ms();
    }
    long long idle = now_ms() - last_beat_ms;
    if (idle < (long long)dog_seconds * 1000)
      continue;
    char host[64] = "unknown";
    gethostname(host, sizeof(host) - 1);
    fflush(stdout);
    fprintf(stderr, "%s: Test timeout (%ds): no progress for %lld ms\n", host, dog_seconds, idle);
    bench_world_abort(dog_world, BENCH_EXIT_ERROR);
  }
  return NULL;
}

void bench_watchdog_start(bench_world_t *w, int seconds) {
  pthread_t tid;
  dog_world = w;
  dog_seconds = seconds;
  bench_watchdog_beat();
  if (pthread_create(&tid, NULL, watch, NULL) == 0)
    pthread_detach(tid);
  else
    fprintf(stderr, "-T %d: cannot start the watchdog thread; no timeout\n", seconds);
}
