/* Lab exercise 04's experiment: the same all-reduce run by different
 * algorithms, its results compared bit for bit. NRANKS ranks as threads of
 * this process (rcollCommInitAll); each run sets RCOLL_ALGO and
 * RCOLL_DETERMINISTIC before its communicators are made, since they read
 * their settings then. The inputs mix magnitudes (1e-3 .. 1e7, both signs)
 * so that the order of the additions shows in the low bits of a float.
 *
 * Prints one line per question of docs/lab/04-determinism/answers.txt,
 * "name = same|differ", as observed here, and exits 1 when a run failed.
 * The student's lab_rank_order_sum() (rank_order.c) is the reference of
 * the last question: what the deterministic algorithms promise. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcoll.h"

#define NRANKS 5
#define COUNT 4099

void lab_rank_order_sum(const float *const *inputs, int nranks, size_t count, float *out);

typedef struct run {
  rcollComm_t comm;
  rcollDataType_t dtype;
  const void *in;
  void *out;
  rcollResult_t result;
} run_t;

static float fin[NRANKS][COUNT];
static int32_t iin[NRANKS][COUNT];

/* A fixed pseudo-random mix (the same every run, no libc rand). */
static void make_inputs(void) {
  uint32_t x = 12345;
  for (int r = 0; r < NRANKS; r++)
    for (int i = 0; i < COUNT; i++) {
      x = x * 1664525u + 1013904223u;
      float mant = (float)((x >> 8) & 0xffff) / 65536.0f - 0.5f;
      static const float scale[] = {1e-3f, 1.0f, 1e3f, 1e7f};
      fin[r][i] = mant * scale[(x >> 28) & 3];
      iin[r][i] = (int32_t)(x >> 4) - (1 << 27);
    }
}

static void *rank_main(void *arg) {
  run_t *r = arg;
  r->result = rcollAllReduce(r->in, r->out, COUNT, r->dtype, rcollSum, r->comm, NULL);
  return NULL;
}

/* One all-reduce on NRANKS fresh communicators with these settings; out[r]
 * gets rank r's result. */
static int all_reduce(const char *algo, const char *det, rcollDataType_t t, void *out[NRANKS]) {
  setenv("RCOLL_ALGO", algo, 1);
  setenv("RCOLL_DETERMINISTIC", det, 1);
  rcollComm_t comms[NRANKS];
  if (rcollCommInitAll(comms, NRANKS, NULL) != rcollSuccess) {
    fprintf(stderr, "rcollCommInitAll: %s\n", rcollGetLastError(NULL));
    return -1;
  }
  run_t runs[NRANKS];
  pthread_t th[NRANKS];
  for (int r = 0; r < NRANKS; r++) {
    runs[r] = (run_t){comms[r], t, t == rcollFloat32 ? (const void *)fin[r] : (const void *)iin[r], out[r], 0};
    pthread_create(&th[r], NULL, rank_main, &runs[r]);
  }
  int bad = 0;
  for (int r = 0; r < NRANKS; r++) {
    pthread_join(th[r], NULL);
    if (runs[r].result != rcollSuccess) {
      fprintf(stderr, "RCOLL_ALGO=%s RCOLL_DETERMINISTIC=%s rank %d: %s\n", algo, det, r,
              rcollGetLastError(comms[r]));
      bad = 1;
    }
  }
  for (int r = 0; r < NRANKS; r++)
    rcollCommDestroy(comms[r]);
  return bad ? -1 : 0;
}

static const char *same(const void *a, const void *b, size_t bytes) {
  return memcmp(a, b, bytes) == 0 ? "same" : "differ";
}

int main(void) {
  static float ring[NRANKS][COUNT], tree[NRANKS][COUNT], dring[NRANKS][COUNT], dtree[NRANKS][COUNT];
  static float mine[COUNT];
  static int32_t iring[NRANKS][COUNT], itree[NRANKS][COUNT];
  void *p[6][NRANKS];
  for (int r = 0; r < NRANKS; r++) {
    p[0][r] = ring[r], p[1][r] = tree[r], p[2][r] = dring[r], p[3][r] = dtree[r];
    p[4][r] = iring[r], p[5][r] = itree[r];
  }
  make_inputs();
  if (all_reduce("ring", "0", rcollFloat32, p[0]) || all_reduce("tree", "0", rcollFloat32, p[1]) ||
      all_reduce("ring", "1", rcollFloat32, p[2]) || all_reduce("tree", "1", rcollFloat32, p[3]) ||
      all_reduce("ring", "0", rcollInt32, p[4]) || all_reduce("tree", "0", rcollInt32, p[5]))
    return 1;
  const float *inputs[NRANKS];
  for (int r = 0; r < NRANKS; r++)
    inputs[r] = fin[r];
  lab_rank_order_sum(inputs, NRANKS, COUNT, mine);
  int every = 1;
  for (int r = 1; r < NRANKS; r++)
    every &= memcmp(ring[r], ring[0], sizeof ring[0]) == 0;
  printf("ring_vs_tree = %s\n", same(ring[0], tree[0], sizeof ring[0]));
  printf("ring_every_rank_same = %s\n", every ? "same" : "differ");
  printf("deterministic_ring_vs_tree = %s\n", same(dring[0], dtree[0], sizeof dring[0]));
  printf("deterministic_vs_ring = %s\n", same(dring[0], ring[0], sizeof dring[0]));
  printf("int32_ring_vs_tree = %s\n", same(iring[0], itree[0], sizeof iring[0]));
  printf("deterministic_vs_rank_order = %s\n", same(dring[0], mine, sizeof mine));
  int ndiff = 0;
  for (int i = 0; i < COUNT; i++)
    ndiff += memcmp(&ring[0][i], &tree[0][i], sizeof(float)) != 0;
  printf("# ring and tree differ in %d of %d elements\n", ndiff, COUNT);
  return 0;
}
