/* rcollGroupSimulateEnd (lib/group.c): misuse is refused; a simulated group
 * runs nothing and leaves its communicators usable; the estimate of two calls
 * on one communicator is the sum of each alone, and of a group over several
 * communicators the slowest one's; sends and receives are priced too, more
 * for more bytes. tests/check_simulate.sh compares the estimates with
 * bench/rcoll_tune's. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "rcoll.h"

static void setup(void) { setenv("RCOLL_TIMEOUT", "30", 1); }
TestSuite(simulate, .init = setup, .timeout = 120);

static float simulate_allreduces(rcollComm_t *comms, int ncomms, const size_t *counts, int ncalls, float *buf) {
  rcollSimInfo_t sim = RCOLL_SIM_INFO_INITIALIZER;
  cr_assert_eq(sim.estimatedTime, RCOLL_UNDEF_FLOAT);
  cr_assert_eq(rcollGroupStart(), rcollSuccess);
  for (int c = 0; c < ncomms; c++)
    for (int k = 0; k < ncalls; k++)
      cr_assert_eq(rcollAllReduce(buf, buf, counts[k], rcollFloat32, rcollSum, comms[c], NULL), rcollSuccess);
  cr_assert_eq(rcollGroupSimulateEnd(&sim), rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_assert_gt(sim.estimatedTime, 0);
  return sim.estimatedTime;
}

Test(simulate, misuse_is_refused) {
  rcollSimInfo_t sim = RCOLL_SIM_INFO_INITIALIZER;
  cr_expect_eq(rcollGroupSimulateEnd(NULL), rcollInvalidArgument);
  cr_expect_eq(rcollGroupSimulateEnd(&sim), rcollInvalidUsage, "no group open");
  cr_expect(strstr(rcollGetLastError(NULL), "no matching rcollGroupStart") != NULL);
  rcollSimInfo_t raw;
  memset(&raw, 0, sizeof raw);
  cr_assert_eq(rcollGroupStart(), rcollSuccess);
  cr_expect_eq(rcollGroupSimulateEnd(&raw), rcollInvalidArgument, "not initialised");
  cr_expect(strstr(rcollGetLastError(NULL), "RCOLL_SIM_INFO_INITIALIZER") != NULL);
  cr_assert_eq(rcollGroupStart(), rcollSuccess);
  cr_expect_eq(rcollGroupSimulateEnd(&sim), rcollInvalidUsage, "nested: only the outermost");
  cr_expect_eq(rcollGroupEnd(), rcollSuccess);
  cr_expect_eq(rcollGroupSimulateEnd(&sim), rcollSuccess, "an empty group");
  cr_expect_eq(sim.estimatedTime, 0.0f);
}

Test(simulate, nothing_runs_and_estimates_add_up) {
  enum { N = 1 << 16 };
  rcollComm_t comms[2];
  cr_assert_eq(rcollCommInitAll(comms, 2, NULL), rcollSuccess, "%s", rcollGetLastError(NULL));
  float *buf = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++)
    buf[i] = 3.0f;
  size_t small = 16, large = N;
  float one_small = simulate_allreduces(comms, 1, &small, 1, buf);
  float one_large = simulate_allreduces(comms, 1, &large, 1, buf);
  size_t both[2] = {small, large};
  float two = simulate_allreduces(comms, 1, both, 2, buf);
  cr_expect_float_eq(two, one_small + one_large, 1e-3f, "two calls on one comm: %g = %g + %g", two, one_small,
                     one_large);
  float across = simulate_allreduces(comms, 2, &large, 1, buf);
  cr_expect_float_eq(across, one_large, 1e-3f, "the same call on two comms at once: %g, alone %g", across,
                     one_large);
  for (int i = 0; i < N; i++)
    cr_assert_eq(buf[i], 3.0f, "element %d changed: a simulated group ran", i);
  /* The communicators work afterwards. */
  float *b2 = malloc(N * sizeof(float));
  memcpy(b2, buf, N * sizeof(float));
  cr_assert_eq(rcollGroupStart(), rcollSuccess);
  cr_assert_eq(rcollAllReduce(buf, buf, N, rcollFloat32, rcollSum, comms[0], NULL), rcollSuccess);
  cr_assert_eq(rcollAllReduce(b2, b2, N, rcollFloat32, rcollSum, comms[1], NULL), rcollSuccess);
  cr_assert_eq(rcollGroupEnd(), rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_expect(buf[0] == 6.0f && b2[N - 1] == 6.0f);
  for (int r = 0; r < 2; r++)
    rcollCommDestroy(comms[r]);
  free(buf);
  free(b2);
}

/* A send and its receive, simulated on two comms of one process. */
static float simulate_sendrecv(rcollComm_t *comms, size_t count, float *sbuf, float *rbuf) {
  rcollSimInfo_t sim = RCOLL_SIM_INFO_INITIALIZER;
  cr_assert_eq(rcollGroupStart(), rcollSuccess);
  cr_assert_eq(rcollSend(sbuf, count, rcollFloat32, 1, comms[0], NULL), rcollSuccess);
  cr_assert_eq(rcollRecv(rbuf, count, rcollFloat32, 0, comms[1], NULL), rcollSuccess);
  cr_assert_eq(rcollGroupSimulateEnd(&sim), rcollSuccess, "%s", rcollGetLastError(NULL));
  return sim.estimatedTime;
}

Test(simulate, sends_and_receives_are_priced) {
  enum { N = 1 << 18 };
  rcollComm_t comms[2];
  cr_assert_eq(rcollCommInitAll(comms, 2, NULL), rcollSuccess, "%s", rcollGetLastError(NULL));
  float *sbuf = malloc(N * sizeof(float)), *rbuf = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++)
    sbuf[i] = 1.0f, rbuf[i] = -1.0f;
  float small = simulate_sendrecv(comms, 16, sbuf, rbuf), large = simulate_sendrecv(comms, N, sbuf, rbuf);
  cr_expect_gt(small, 0.0f, "a 64-byte send/recv: %g us", small);
  cr_expect_gt(large, small, "1 MiB (%g us) costs more than 64 B (%g us)", large, small);
  for (int i = 0; i < N; i++)
    cr_assert_eq(rbuf[i], -1.0f, "element %d arrived: a simulated group ran", i);
  for (int r = 0; r < 2; r++)
    rcollCommDestroy(comms[r]);
  free(sbuf);
  free(rbuf);
}
