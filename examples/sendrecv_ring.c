/* Point-to-point: every rank passes a message to its right neighbour around
 * a ring, until each message has visited every rank and come home. Ranks are
 * threads of one process, each with its own communicator.
 *
 *   make && examples/bin/sendrecv_ring [nranks]      (default 4)
 *
 * The lesson is the group: rcollSend and rcollRecv on host buffers block
 * until done, so if every rank first sent and then received, every rank
 * would wait in its send for a receive that nobody has posted yet. Between
 * rcollGroupStart and rcollGroupEnd the calls are only queued, and
 * rcollGroupEnd runs the send and the receive together. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcoll.h"

#define COUNT 4096 /* ints per message */

static rcollUniqueId id;
static int nranks = 4;

/* A message says where it started: element i of rank r's is r * 1000000 + i. */
static void fill(int *msg, int origin) {
  for (int i = 0; i < COUNT; i++)
    msg[i] = origin * 1000000 + i;
}

static int from(const int *msg, int origin) {
  for (int i = 0; i < COUNT; i++)
    if (msg[i] != origin * 1000000 + i)
      return 0;
  return 1;
}

static void *rank_main(void *arg) {
  int rank = (int)(long)arg;
  int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
  rcollComm_t comm;
  if (rcollCommInitRank(&comm, nranks, id, rank) != rcollSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", rank, rcollGetLastError(NULL));
    return (void *)1;
  }
  int *mine = malloc(COUNT * sizeof *mine), *incoming = malloc(COUNT * sizeof *incoming);
  long wrong = mine == NULL || incoming == NULL;
  if (!wrong)
    fill(mine, rank);
  /* nranks hops: after hop h we hold the message that started h ranks to
   * our left; after the last one, our own is back. */
  for (int hop = 1; hop <= nranks && !wrong; hop++) {
    rcollGroupStart();
    rcollSend(mine, COUNT, rcollInt32, right, comm, NULL);
    rcollRecv(incoming, COUNT, rcollInt32, left, comm, NULL);
    rcollResult_t r = rcollGroupEnd();
    if (r != rcollSuccess) {
      fprintf(stderr, "rank %d: hop %d: %s (%s)\n", rank, hop, rcollGetErrorString(r),
              rcollGetLastError(comm));
      wrong = 1;
      break;
    }
    int origin = ((rank - hop) % nranks + nranks) % nranks;
    if (!from(incoming, origin)) {
      fprintf(stderr, "rank %d: hop %d: the message is not rank %d's\n", rank, hop, origin);
      wrong = 1;
    }
    memcpy(mine, incoming, COUNT * sizeof *mine); /* pass it on at the next hop */
  }
  if (!wrong && rank == 0)
    printf("ring of %d ranks: every message made %d hops and came home intact\n", nranks, nranks);
  free(mine);
  free(incoming);
  rcollCommDestroy(comm);
  return (void *)wrong;
}

int main(int argc, char **argv) {
  if (argc > 1)
    nranks = atoi(argv[1]);
  if (nranks < 2 || nranks > 64) {
    fprintf(stderr, "usage: %s [nranks 2..64]\n", argv[0]);
    return 2;
  }
  if (rcollGetUniqueId(&id) != rcollSuccess) {
    fprintf(stderr, "rcollGetUniqueId: %s\n", rcollGetLastError(NULL));
    return 1;
  }
  pthread_t t[64];
  for (long i = 0; i < nranks; i++)
    pthread_create(&t[i], NULL, rank_main, (void *)i);
  int failed = 0;
  for (int i = 0; i < nranks; i++) {
    void *ret;
    pthread_join(t[i], &ret);
    failed |= ret != NULL;
  }
  return failed;
}
