/* Ranks whose settings differ, on device buffers (the CUDA host fake):
 * RCOLL_CHUNK_SIZE and RCOLL_NSLOTS are each rank's own, yet a device plan
 * cuts its messages into the slot every rank agreed (the tuner's
 * max_chunk: lib/coll.c), on one node and across two, so a sender's part
 * always fits the receiver's slot. Ranks are processes here (threads would
 * share one environment), so the data is staged through pinned slots (the
 * fake's CUDA IPC does not cross processes). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rcoll.h"
#include "support/cuda_fake.h"
#include "support/cuda_ranks.h"

TestSuite(cuda_settings, .init = cuda_ranks_setup, .timeout = 120);

#define N 100003 /* floats: many parts of either slot, and a tail */

/* Elements of buf that are not want(i), logged (the first 3) on stderr. */
static int count_off(int rank, const char *what, const float *buf, size_t n, float (*want)(size_t, int),
                     int arg) {
  int bad = 0;
  for (size_t i = 0; i < n; i++)
    if (buf[i] != want(i, arg) && bad++ < 3)
      fprintf(stderr, "rank %d: %s[%zu] is %g, not %g\n", rank, what, i, buf[i], want(i, arg));
  return bad;
}

static float sum2(size_t i, int unused) { (void)unused; return cuda_ranks_sum_of(2, i); }
static float of_rank(size_t i, int rank) { return cuda_ranks_input(rank, i); }

static float *dev_floats(size_t n) {
  void *p = NULL;
  return rcoll_cuda_api()->malloc(&p, n * sizeof(float)) == 0 ? p : NULL;
}

/* An all-reduce, a reduce-scatter, a broadcast, a send and an exchange in a
 * group, each checked; the number of wrong elements and failed calls. */
static int calls(int rank, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  float *a = dev_floats(2 * N), *b = dev_floats(2 * N);
  if (a == NULL || b == NULL)
    return 1;
  int bad = 0, peer = 1 - rank;
  cuda_ranks_fill(a, N, rank);
  bad += rcollAllReduce(a, a, N, rcollFloat32, rcollSum, comm, s) != rcollSuccess;
  fake_stream_sync(s);
  bad += count_off(rank, "all-reduce", a, N, sum2, 0);
  cuda_ranks_fill(a, 2 * N, rank);
  bad += rcollReduceScatter(a, b, N, rcollFloat32, rcollSum, comm, s) != rcollSuccess;
  fake_stream_sync(s);
  for (size_t i = 0; i < N; i++)
    if (b[i] != cuda_ranks_sum_of(2, (size_t)rank * N + i) && bad++ < 3)
      fprintf(stderr, "rank %d: reduce-scatter[%zu] is %g\n", rank, i, b[i]);
  cuda_ranks_fill(a, N, rank);
  bad += rcollBroadcast(a, a, N, rcollFloat32, 1, comm, s) != rcollSuccess;
  fake_stream_sync(s);
  bad += count_off(rank, "broadcast", a, N, of_rank, 1);
  cuda_ranks_fill(a, N, rank);
  bad += (rank == 0 ? rcollSend(a, N, rcollFloat32, 1, comm, s) : rcollRecv(b, N, rcollFloat32, 0, comm, s)) !=
         rcollSuccess;
  fake_stream_sync(s);
  if (rank == 1)
    bad += count_off(rank, "received", b, N, of_rank, 0);
  rcollGroupStart();
  rcollSend(a, N, rcollFloat32, peer, comm, s);
  rcollRecv(b, N, rcollFloat32, peer, comm, s);
  bad += rcollGroupEnd() != rcollSuccess;
  fake_stream_sync(s);
  bad += count_off(rank, "exchanged", b, N, of_rank, peer);
  fake_free(a);
  fake_free(b);
  rcoll_cuda_api()->stream_destroy(s);
  return bad;
}

/* One rank in a process of its own (cuda_ranks_fork2) with its own
 * settings ("NAME=VALUE ..." in the arg's string [rank]). Exit status 0
 * when all went well. */
static int settings_rank(int rank, const int ids[2], void *arg) {
  char *env = ((char **)arg)[rank];
  rcollUniqueId id;
  if (rank == 0 ? rcollGetUniqueId(&id) != rcollSuccess || write(ids[1], &id, sizeof id) != (ssize_t)sizeof id
                : read(ids[0], &id, sizeof id) != (ssize_t)sizeof id)
    return 2;
  for (char *save = NULL, *kv = strtok_r(env, " ", &save); kv != NULL; kv = strtok_r(NULL, " ", &save))
    putenv(kv);
  fake_cuda_install();
  rcollComm_t comm;
  if (rcollCommInitRank(&comm, 2, id, rank) != rcollSuccess)
    return 3;
  int bad = calls(rank, comm);
  rcollCommDestroy(comm);
  fflush(stderr);
  return bad ? 4 : 0;
}

/* Both ranks' settings, each its own. */
static void two_processes(const char *env0, const char *env1) {
  static char env[2][256];
  snprintf(env[0], sizeof env[0], "%s", env0);
  snprintf(env[1], sizeof env[1], "%s", env1);
  char *envs[2] = {env[0], env[1]};
  cuda_ranks_fork2(settings_rank, envs, 100);
}

#define STAGED "RCOLL_P2P_DISABLE=1 "

Test(cuda_settings, chunk_sizes_and_slots_differ_on_one_node_over_sockets) {
  two_processes(STAGED "RCOLL_SHM_DISABLE=1 RCOLL_CHUNK_SIZE=8192 RCOLL_NSLOTS=2",
                STAGED "RCOLL_SHM_DISABLE=1 RCOLL_CHUNK_SIZE=65536 RCOLL_NSLOTS=8");
}

Test(cuda_settings, chunk_sizes_and_slots_differ_on_one_node_over_shm) {
  two_processes(STAGED "RCOLL_CHUNK_SIZE=65536 RCOLL_NSLOTS=3", STAGED "RCOLL_CHUNK_SIZE=4096 RCOLL_NSLOTS=16");
}

Test(cuda_settings, chunk_sizes_and_slots_differ_across_two_nodes) {
  two_processes(STAGED "RCOLL_HOSTID=node-a RCOLL_CHUNK_SIZE=8192 RCOLL_NSLOTS=2",
                STAGED "RCOLL_HOSTID=node-b RCOLL_CHUNK_SIZE=131072 RCOLL_NSLOTS=4");
}
