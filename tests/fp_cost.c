/* What call fingerprints and the flight recorder cost a small call, measured
 * so that a loaded machine does not decide the answer: one thread drives
 * both ranks of a 2-rank communicator (rcollCommInitAll, each call a group
 * over both), so no rank ever waits for another to be scheduled and the time
 * per call is the CPU work of both ranks. Each setting is timed in turn,
 * round after round, and the best and median rounds are printed.
 *
 *   tests/bin/fp_cost [-n CALLS] [-r ROUNDS] [-b BYTES] [-T transport]
 *
 * Prints numbers only; it asserts nothing (tests/test_mismatch.c does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rcoll.h"

#define MAX_ROUNDS 64

typedef struct variant {
  const char *name, *fingerprint, *fr_entries;
  double ns[MAX_ROUNDS];
} variant_t;

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ns per call of `calls` all-reduces of `count` floats, both ranks driven
 * by this thread; -1 on failure. */
static double time_variant(const variant_t *v, int calls, size_t count) {
  setenv("RCOLL_FINGERPRINT", v->fingerprint, 1);
  setenv("RCOLL_FR_ENTRIES", v->fr_entries, 1);
  rcollComm_t comms[2];
  if (rcollCommInitAll(comms, 2, NULL) != rcollSuccess) {
    fprintf(stderr, "fp_cost: init: %s\n", rcollGetLastError(NULL));
    return -1;
  }
  float *buf[2];
  for (int r = 0; r < 2; r++) {
    buf[r] = calloc(count, sizeof(float));
    if (buf[r] == NULL)
      return -1;
  }
  double t0 = 0;
  int warm = calls / 10 + 10;
  rcollResult_t res = rcollSuccess;
  for (int i = 0; i < warm + calls && res == rcollSuccess; i++) {
    if (i == warm)
      t0 = now_ns();
    rcollGroupStart();
    for (int r = 0; r < 2; r++)
      rcollAllReduce(buf[r], buf[r], count, rcollFloat32, rcollSum, comms[r], NULL);
    res = rcollGroupEnd();
  }
  double ns = (now_ns() - t0) / calls;
  if (res != rcollSuccess)
    fprintf(stderr, "fp_cost: %s\n", rcollGetLastError(NULL));
  for (int r = 0; r < 2; r++) {
    rcollCommDestroy(comms[r]);
    free(buf[r]);
  }
  return res == rcollSuccess ? ns : -1;
}

int main(int argc, char **argv) {
  int calls = 20000, rounds = 10, c;
  size_t bytes = 8;
  while ((c = getopt(argc, argv, "n:r:b:T:")) != -1) {
    if (c == 'n')
      calls = atoi(optarg);
    else if (c == 'r')
      rounds = atoi(optarg);
    else if (c == 'b')
      bytes = (size_t)atol(optarg);
    else if (c == 'T')
      setenv("RCOLL_NET", optarg, 1);
    else {
      fprintf(stderr, "usage: %s [-n CALLS] [-r ROUNDS] [-b BYTES] [-T transport]\n", argv[0]);
      return 2;
    }
  }
  if (rounds < 1 || rounds > MAX_ROUNDS || calls < 1 || bytes < sizeof(float))
    return fprintf(stderr, "fp_cost: bad -n, -r or -b\n"), 2;
  variant_t vs[] = {{"fingerprints off, recorder off", "0", "0", {0}},
                    {"fingerprints on,  recorder off", "1", "0", {0}},
                    {"fingerprints off, recorder on ", "0", "64", {0}},
                    {"fingerprints on,  recorder on ", "1", "64", {0}}};
  int nv = (int)(sizeof vs / sizeof vs[0]);
  for (int round = 0; round < rounds; round++)
    for (int v = 0; v < nv; v++)
      if ((vs[v].ns[round] = time_variant(&vs[v], calls, bytes / sizeof(float))) < 0)
        return 1;
  printf("# %d rounds of %d all-reduces of %zu bytes, 2 ranks driven by one thread (%s)\n", rounds,
         calls, bytes, getenv("RCOLL_NET") ? getenv("RCOLL_NET") : "default transport");
  printf("# %-32s %12s %12s\n", "setting", "best ns/call", "median");
  for (int v = 0; v < nv; v++) {
    qsort(vs[v].ns, (size_t)rounds, sizeof(double), cmp);
    printf("  %-32s %12.0f %12.0f\n", vs[v].name, vs[v].ns[0], vs[v].ns[rounds / 2]);
  }
  return 0;
}
