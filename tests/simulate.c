/* Driver for tests/check_simulate.sh: n ranks of this process
 * (rcollCommInitAll, shared memory) put one all-reduce of `bytes` (float32)
 * in a group each, and rcollGroupSimulateEnd ends it. Prints the estimate
 * and the algorithm the communicator chooses, for the script to compare with
 * bench/rcoll_tune's table; exits 1 if anything ran (a receive buffer or a
 * send buffer changed) or the communicators are unusable afterwards.
 *
 *   tests/bin/simulate NRANKS BYTES */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcoll.h"

#define MAX_RANKS 8

int main(int argc, char **argv) {
  int n = argc > 2 ? atoi(argv[1]) : 0;
  size_t bytes = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : 0;
  if (n < 1 || n > MAX_RANKS || bytes < 4 || bytes % 4) {
    fprintf(stderr, "usage: simulate NRANKS(1..%d) BYTES(a multiple of 4)\n", MAX_RANKS);
    return 2;
  }
  size_t count = bytes / 4;
  rcollComm_t comms[MAX_RANKS];
  float *send[MAX_RANKS], *recv[MAX_RANKS];
  if (rcollCommInitAll(comms, n, NULL) != rcollSuccess) {
    fprintf(stderr, "simulate: init: %s\n", rcollGetLastError(NULL));
    return 1;
  }
  for (int r = 0; r < n; r++) {
    send[r] = malloc(bytes);
    recv[r] = malloc(bytes);
    for (size_t i = 0; i < count; i++)
      send[r][i] = 1.0f, recv[r][i] = -7.0f;
  }
  rcollSimInfo_t sim = RCOLL_SIM_INFO_INITIALIZER;
  rcollGroupStart();
  for (int r = 0; r < n; r++)
    if (rcollAllReduce(send[r], recv[r], count, rcollFloat32, rcollSum, comms[r], NULL) != rcollSuccess)
      return fprintf(stderr, "simulate: allreduce: %s\n", rcollGetLastError(comms[r])), 1;
  if (rcollGroupSimulateEnd(&sim) != rcollSuccess)
    return fprintf(stderr, "simulate: %s\n", rcollGetLastError(NULL)), 1;
  int ran = 0;
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < count; i++)
      ran |= recv[r][i] != -7.0f || send[r][i] != 1.0f;
  char algo[32] = "?";
  size_t chunk = 0;
  rcollCommAlgorithm(comms[0], "allreduce", bytes, algo, sizeof algo, &chunk);
  printf("estimated_us %.3f algorithm %s ran %d\n", sim.estimatedTime, algo, ran);
  /* The communicators still work: the same calls, run. */
  rcollGroupStart();
  for (int r = 0; r < n; r++)
    rcollAllReduce(send[r], recv[r], count, rcollFloat32, rcollSum, comms[r], NULL);
  rcollResult_t rr = rcollGroupEnd();
  for (int r = 0; r < n && rr == rcollSuccess; r++)
    for (size_t i = 0; i < count; i++)
      if (recv[r][i] != (float)n)
        rr = rcollInternalError;
  for (int r = 0; r < n; r++) {
    rcollCommDestroy(comms[r]);
    free(send[r]);
    free(recv[r]);
  }
  if (rr != rcollSuccess)
    fprintf(stderr, "simulate: the group run after the simulation failed or was wrong\n");
  return ran || rr != rcollSuccess;
}
