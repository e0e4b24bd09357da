/* The smallest complete rcoll program: four ranks as threads of one process,
 * each with its own communicator, all-reducing a vector of floats.
 *
 *   make && examples/bin/allreduce_threads
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "rcoll.h"

#define NRANKS 4
#define COUNT (1 << 20)

static rcollUniqueId id;

static void *rank_main(void *arg) {
  int rank = (int)(long)arg;
  rcollComm_t comm;
  if (rcollCommInitRank(&comm, NRANKS, id, rank) != rcollSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", rank, rcollGetLastError(NULL));
    return (void *)1;
  }
  float *buf = malloc(COUNT * sizeof *buf);
  for (int i = 0; i < COUNT; i++)
    buf[i] = (float)(rank + 1);
  /* In place: every rank ends with 1 + 2 + 3 + 4 = 10 in each element. */
  rcollResult_t r = rcollAllReduce(buf, buf, COUNT, rcollFloat32, rcollSum, comm, NULL);
  long bad = 0;
  for (int i = 0; i < COUNT; i++)
    bad += buf[i] != 10.0f;
  if (r != rcollSuccess || bad)
    fprintf(stderr, "rank %d: %s, %ld wrong elements (%s)\n", rank, rcollGetErrorString(r), bad,
            rcollGetLastError(comm));
  else if (rank == 0)
    printf("all-reduce of %d floats over %d ranks: every element is %.1f\n", COUNT, NRANKS, buf[0]);
  free(buf);
  rcollCommDestroy(comm);
  return (void *)(long)(r != rcollSuccess || bad);
}

int main(void) {
  if (rcollGetUniqueId(&id) != rcollSuccess) {
    fprintf(stderr, "rcollGetUniqueId: %s\n", rcollGetLastError(NULL));
    return 1;
  }
  pthread_t t[NRANKS];
  for (long i = 0; i < NRANKS; i++)
    pthread_create(&t[i], NULL, rank_main, (void *)i);
  int failed = 0;
  for (int i = 0; i < NRANKS; i++) {
    void *ret;
    pthread_join(t[i], &ret);
    failed |= ret != NULL;
  }
  return failed;
}
