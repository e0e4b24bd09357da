/* The public API's behaviour on bad input and misuse: every refusal is a
 * result code plus a message naming what was wrong, never a crash, and a
 * refused call leaves the communicator usable. Also the small queries
 * (version, error strings, count, rank) and the failure of mismatched calls
 * between two ranks within RCOLL_TIMEOUT. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rcoll.h"

#define N 64

/* Every wait inside the library gives up after 5 s, so a broken test fails
 * instead of hanging; set before any communicator reads its settings. */
static void api_setup(void) { setenv("RCOLL_TIMEOUT", "5", 1); }

TestSuite(api, .init = api_setup, .timeout = 60);

/* Asserts the result code and that the last error names `needle`. */
static void expect_error(rcollResult_t got, rcollResult_t want, const char *needle) {
  const char *msg = rcollGetLastError(NULL);
  cr_assert_eq(got, want, "got %d (%s), want %d; last error: %s", got, rcollGetErrorString(got), want,
               msg ? msg : "(null)");
  cr_assert_not_null(msg);
  cr_assert(strstr(msg, needle) != NULL, "the message \"%s\" does not mention \"%s\"", msg, needle);
}

static rcollComm_t one_rank_comm(void) {
  rcollUniqueId id;
  rcollComm_t comm = NULL;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_assert_eq(rcollCommInitRank(&comm, 1, id, 0), rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_assert_not_null(comm);
  return comm;
}

/* ---- two ranks as threads ---- */

typedef struct rank_job {
  rcollUniqueId id;
  int rank;
  rcollComm_t comm;
  rcollResult_t result;
  void (*body)(struct rank_job *);
  /* filled by bodies */
  rcollResult_t call_result;
  char error[512];
  double seconds;
  int intact; /* guard bytes / buffers untouched */
} rank_job_t;

static void *rank_job_init(void *p) {
  rank_job_t *j = p;
  j->result = rcollCommInitRank(&j->comm, 2, j->id, j->rank);
  return NULL;
}

static void *rank_job_body(void *p) {
  rank_job_t *j = p;
  j->body(j);
  return NULL;
}

static void run_pair(rank_job_t jobs[2], void *(*fn)(void *)) {
  pthread_t th[2];
  for (int r = 0; r < 2; r++)
    cr_assert_eq(pthread_create(&th[r], NULL, fn, &jobs[r]), 0);
  for (int r = 0; r < 2; r++)
    pthread_join(th[r], NULL);
}

static void two_rank_comms(rank_job_t jobs[2]) {
  rcollUniqueId id;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess, "%s", rcollGetLastError(NULL));
  for (int r = 0; r < 2; r++)
    jobs[r] = (rank_job_t){.id = id, .rank = r};
  run_pair(jobs, rank_job_init);
  for (int r = 0; r < 2; r++)
    cr_assert_eq(jobs[r].result, rcollSuccess, "rank %d: init failed", r);
}

/* ------------------------------------------------------------------ */

Test(api, version_and_error_strings) {
  int v = -1;
  cr_assert_eq(rcollGetVersion(&v), rcollSuccess);
  cr_assert_eq(v, RCOLL_MAJOR * 10000 + RCOLL_MINOR * 100 + RCOLL_PATCH);
  expect_error(rcollGetVersion(NULL), rcollInvalidArgument, "version");
  const char *seen[rcollNumResults];
  for (int r = 0; r < rcollNumResults; r++) {
    seen[r] = rcollGetErrorString((rcollResult_t)r);
    cr_assert(seen[r] != NULL && seen[r][0] != '\0', "result %d has no string", r);
    for (int k = 0; k < r; k++)
      cr_assert_str_neq(seen[r], seen[k], "results %d and %d share a string", k, r);
  }
  cr_assert(strstr(rcollGetErrorString(rcollInvalidArgument), "invalid argument") != NULL);
  cr_assert(strstr(rcollGetErrorString(rcollTimeout), "timed out") != NULL);
  const char *unknown = rcollGetErrorString((rcollResult_t)99);
  cr_assert(unknown != NULL && unknown[0] != '\0');
}

Test(api, null_comm_is_refused_everywhere) {
  float b[N] = {0};
  int x;
  rcollResult_t e;
  expect_error(rcollAllReduce(b, b, N, rcollFloat32, rcollSum, NULL, NULL), rcollInvalidArgument, "comm");
  expect_error(rcollAllGather(b, b, 1, rcollFloat32, NULL, NULL), rcollInvalidArgument, "comm");
  expect_error(rcollReduceScatter(b, b, 1, rcollFloat32, rcollSum, NULL, NULL), rcollInvalidArgument,
               "comm");
  expect_error(rcollBroadcast(b, b, N, rcollFloat32, 0, NULL, NULL), rcollInvalidArgument, "comm");
  expect_error(rcollReduce(b, b, N, rcollFloat32, rcollSum, 0, NULL, NULL), rcollInvalidArgument, "comm");
  expect_error(rcollSend(b, N, rcollFloat32, 0, NULL, NULL), rcollInvalidArgument, "comm");
  expect_error(rcollRecv(b, N, rcollFloat32, 0, NULL, NULL), rcollInvalidArgument, "comm");
  expect_error(rcollCommCount(NULL, &x), rcollInvalidArgument, "comm");
  expect_error(rcollCommUserRank(NULL, &x), rcollInvalidArgument, "comm");
  expect_error(rcollCommGetAsyncError(NULL, &e), rcollInvalidArgument, "comm");
  expect_error(rcollCommFinalize(NULL), rcollInvalidArgument, "comm");
  expect_error(rcollCommDestroy(NULL), rcollInvalidArgument, "comm");
  expect_error(rcollCommAbort(NULL), rcollInvalidArgument, "comm");
}

/* A handle that is not a communicator (here garbage-filled memory) is
 * refused without being read: the registry of live handles does not know
 * it (lib/comm_registry.c). Destroyed handles: tests/test_comm_handle.c. */
Test(api, garbage_comm_handle_is_refused) {
  static const unsigned char fills[] = {0x00, 0x5a, 0xff};
  float b[N] = {0};
  int x = -7;
  for (size_t i = 0; i < sizeof fills; i++) {
    void *junk = malloc(16384);
    cr_assert_not_null(junk);
    memset(junk, fills[i], 16384);
    rcollComm_t comm = junk;
    expect_error(rcollAllReduce(b, b, N, rcollFloat32, rcollSum, comm, NULL), rcollInvalidArgument,
                 "comm");
    expect_error(rcollCommCount(comm, &x), rcollInvalidArgument, "comm");
    cr_assert_eq(x, -7, "an output was written on failure");
    expect_error(rcollCommDestroy(comm), rcollInvalidArgument, "comm");
    expect_error(rcollCommAbort(comm), rcollInvalidArgument, "comm");
    free(junk);
  }
}

Test(api, comm_queries) {
  rcollComm_t comm = one_rank_comm();
  int count = -1, rank = -1;
  cr_assert_eq(rcollCommCount(comm, &count), rcollSuccess);
  cr_assert_eq(rcollCommUserRank(comm, &rank), rcollSuccess);
  cr_assert_eq(count, 1);
  cr_assert_eq(rank, 0);
  expect_error(rcollCommCount(comm, NULL), rcollInvalidArgument, "count");
  expect_error(rcollCommUserRank(comm, NULL), rcollInvalidArgument, "rank");
  rcollResult_t async = rcollInternalError;
  cr_assert_eq(rcollCommGetAsyncError(comm, &async), rcollSuccess);
  cr_assert_eq(async, rcollSuccess);
  cr_assert_eq(rcollCommFinalize(comm), rcollSuccess);
  cr_assert_eq(rcollCommDestroy(comm), rcollSuccess);

  rank_job_t jobs[2];
  two_rank_comms(jobs);
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(rcollCommCount(jobs[r].comm, &count), rcollSuccess);
    cr_assert_eq(rcollCommUserRank(jobs[r].comm, &rank), rcollSuccess);
    cr_assert_eq(count, 2);
    cr_assert_eq(rank, r);
  }
  for (int r = 0; r < 2; r++)
    cr_assert_eq(rcollCommDestroy(jobs[r].comm), rcollSuccess);
}

/* rcollCommPeerTransport and rcollCommAlgorithm (not in NCCL): what the
 * bench programs print in their header; check_bench_json compares their
 * answers with what the calls themselves log. */
Test(api, what_a_comm_runs_on) {
  rank_job_t jobs[2];
  two_rank_comms(jobs);
  char t0[128] = "", t1[128] = "", algo[64] = "";
  int same = -1;
  cr_assert_eq(rcollCommPeerTransport(jobs[0].comm, 1, &same, t0, sizeof t0), rcollSuccess, "%s",
               rcollGetLastError(NULL));
  cr_assert_eq(same, 1, "two threads of one process on different nodes");
  cr_assert_eq(rcollCommPeerTransport(jobs[1].comm, 0, &same, t1, sizeof t1), rcollSuccess, "%s",
               rcollGetLastError(NULL));
  cr_assert(t0[0] != '\0', "no transport named");
  /* Both ends of a pair use the same transport. */
  cr_assert(strncmp(t0, t1, strcspn(t0, " ")) == 0, "rank 0 says %s, rank 1 says %s", t0, t1);
  expect_error(rcollCommPeerTransport(jobs[0].comm, 2, &same, t0, sizeof t0), rcollInvalidArgument,
               "peer");
  expect_error(rcollCommPeerTransport(jobs[0].comm, 1, &same, NULL, 8), rcollInvalidArgument, "buf");
  expect_error(rcollCommPeerTransport(jobs[0].comm, 1, NULL, t0, 8), rcollInvalidArgument, "sameNode");
  expect_error(rcollCommPeerTransport(NULL, 1, &same, t0, sizeof t0), rcollInvalidArgument, "comm");

  size_t chunk = 0;
  cr_assert_eq(rcollCommAlgorithm(jobs[0].comm, "allreduce", 1 << 20, algo, sizeof algo, &chunk),
               rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_assert(algo[0] != '\0' && chunk > 0, "algorithm '%s', chunk %zu", algo, chunk);
  cr_assert_eq(rcollCommAlgorithm(jobs[0].comm, "reduce_scatter", 64, algo, sizeof algo, &chunk),
               rcollSuccess, "%s", rcollGetLastError(NULL));
  expect_error(rcollCommAlgorithm(jobs[0].comm, "send", 64, algo, sizeof algo, &chunk),
               rcollInvalidArgument, "send");
  expect_error(rcollCommAlgorithm(jobs[0].comm, "all_reduce", 64, algo, sizeof algo, &chunk),
               rcollInvalidArgument, "all_reduce");
  expect_error(rcollCommAlgorithm(jobs[0].comm, "allreduce", 64, algo, sizeof algo, NULL),
               rcollInvalidArgument, "NULL");
  for (int r = 0; r < 2; r++)
    cr_assert_eq(rcollCommDestroy(jobs[r].comm), rcollSuccess);
}

Test(api, init_arguments_are_checked) {
  rcollUniqueId id;
  memset(&id, 0, sizeof id); /* never reached: the arguments are refused first */
  rcollComm_t comm = (rcollComm_t)(uintptr_t)1;
  expect_error(rcollGetUniqueId(NULL), rcollInvalidArgument, "uniqueId");
  expect_error(rcollCommInitRank(NULL, 1, id, 0), rcollInvalidArgument, "comm");
  expect_error(rcollCommInitRank(&comm, 0, id, 0), rcollInvalidArgument, "nranks");
  cr_assert_null(comm, "*comm must be NULL after a failed init");
  expect_error(rcollCommInitRank(&comm, -3, id, 0), rcollInvalidArgument, "nranks");
  expect_error(rcollCommInitRank(&comm, 2, id, 2), rcollInvalidArgument, "rank");
  expect_error(rcollCommInitRank(&comm, 2, id, 5), rcollInvalidArgument, "rank");
  expect_error(rcollCommInitRank(&comm, 2, id, -1), rcollInvalidArgument, "rank");
  expect_error(rcollCommInitAll(NULL, 2, NULL), rcollInvalidArgument, "comms");
  rcollComm_t comms[2];
  expect_error(rcollCommInitAll(comms, 0, NULL), rcollInvalidArgument, "ndev");
  /* An id that no rcollGetUniqueId made is refused, not followed. */
  memset(&id, 0x3c, sizeof id);
  cr_assert_neq(rcollCommInitRank(&comm, 1, id, 0), rcollSuccess);
  cr_assert_null(comm);
}

Test(api, config_is_checked) {
  rcollUniqueId id;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess);
  rcollComm_t comm = NULL;
  rcollConfig_t bad = RCOLL_CONFIG_INITIALIZER;
  bad.magic = 0x12345678u;
  expect_error(rcollCommInitRankConfig(&comm, 1, id, 0, &bad), rcollInvalidArgument, "config");
  cr_assert_null(comm);
  rcollConfig_t huge = RCOLL_CONFIG_INITIALIZER;
  huge.size = sizeof huge * 4; /* from a future ABI we do not know */
  expect_error(rcollCommInitRankConfig(&comm, 1, id, 0, &huge), rcollInvalidArgument, "config");
  /* The refusals did not consume the id: a good config joins with it. */
  rcollConfig_t good = RCOLL_CONFIG_INITIALIZER;
  good.timeoutMs = 3000;
  cr_assert_eq(rcollCommInitRankConfig(&comm, 1, id, 0, &good), rcollSuccess, "%s",
               rcollGetLastError(NULL));
  cr_assert_eq(rcollCommDestroy(comm), rcollSuccess);
}

Test(api, collective_arguments_are_checked) {
  rcollComm_t comm = one_rank_comm();
  float s[N] = {0}, r[N] = {0};
  size_t huge = (size_t)(int)-5; /* a negative int passed as a count */
  expect_error(rcollAllReduce(NULL, r, N, rcollFloat32, rcollSum, comm, NULL), rcollInvalidArgument,
               "sendbuff");
  expect_error(rcollAllReduce(s, NULL, N, rcollFloat32, rcollSum, comm, NULL), rcollInvalidArgument,
               "recvbuff");
  expect_error(rcollAllGather(NULL, r, N, rcollFloat32, comm, NULL), rcollInvalidArgument, "sendbuff");
  expect_error(rcollReduceScatter(s, NULL, N, rcollFloat32, rcollMax, comm, NULL),
               rcollInvalidArgument, "recvbuff");
  expect_error(rcollBroadcast(NULL, r, N, rcollFloat32, 0, comm, NULL), rcollInvalidArgument,
               "sendbuff");
  expect_error(rcollReduce(s, NULL, N, rcollFloat32, rcollSum, 0, comm, NULL), rcollInvalidArgument,
               "recvbuff");
  expect_error(rcollSend(NULL, N, rcollFloat32, 0, comm, NULL), rcollInvalidArgument, "sendbuff");
  expect_error(rcollRecv(NULL, N, rcollFloat32, 0, comm, NULL), rcollInvalidArgument, "recvbuff");
  expect_error(rcollAllReduce(s, r, huge, rcollFloat32, rcollSum, comm, NULL), rcollInvalidArgument,
               "count");
  expect_error(rcollAllReduce(s, r, SIZE_MAX, rcollInt8, rcollSum, comm, NULL), rcollInvalidArgument,
               "count");
  expect_error(rcollAllGather(s, r, huge, rcollFloat64, comm, NULL), rcollInvalidArgument, "count");
  expect_error(rcollBroadcast(s, r, huge, rcollUint8, 0, comm, NULL), rcollInvalidArgument, "count");
  expect_error(rcollAllReduce(s, r, N, (rcollDataType_t)99, rcollSum, comm, NULL),
               rcollInvalidArgument, "datatype");
  expect_error(rcollAllReduce(s, r, N, (rcollDataType_t)-1, rcollSum, comm, NULL),
               rcollInvalidArgument, "datatype");
  expect_error(rcollBroadcast(s, r, N, (rcollDataType_t)rcollNumTypes, 0, comm, NULL),
               rcollInvalidArgument, "datatype");
  expect_error(rcollAllReduce(s, r, N, rcollFloat32, (rcollRedOp_t)99, comm, NULL),
               rcollInvalidArgument, "op");
  expect_error(rcollReduce(s, r, N, rcollFloat32, (rcollRedOp_t)-1, 0, comm, NULL),
               rcollInvalidArgument, "op");
  expect_error(rcollReduceScatter(s, r, 1, rcollInt32, (rcollRedOp_t)rcollNumOps, comm, NULL),
               rcollInvalidArgument, "op");
  expect_error(rcollBroadcast(s, r, N, rcollFloat32, -1, comm, NULL), rcollInvalidArgument, "root");
  expect_error(rcollBroadcast(s, r, N, rcollFloat32, 1, comm, NULL), rcollInvalidArgument, "root");
  expect_error(rcollReduce(s, r, N, rcollFloat32, rcollSum, -1, comm, NULL), rcollInvalidArgument,
               "root");
  expect_error(rcollReduce(s, r, N, rcollFloat32, rcollSum, 1, comm, NULL), rcollInvalidArgument,
               "root");
  expect_error(rcollSend(s, N, rcollFloat32, 1, comm, NULL), rcollInvalidArgument, "peer");
  expect_error(rcollRecv(r, N, rcollFloat32, -1, comm, NULL), rcollInvalidArgument, "peer");
  /* A host buffer with a stream is a usage error, not something to ignore. */
  expect_error(rcollAllReduce(s, r, N, rcollFloat32, rcollSum, comm, (rcollStream_t)(uintptr_t)8),
               rcollInvalidUsage, "stream");
  /* None of the refusals broke the communicator. */
  rcollResult_t async = rcollInternalError;
  cr_assert_eq(rcollCommGetAsyncError(comm, &async), rcollSuccess);
  cr_assert_eq(async, rcollSuccess);
  for (int i = 0; i < N; i++)
    s[i] = (float)(i + 1);
  cr_assert_eq(rcollAllReduce(s, r, N, rcollFloat32, rcollSum, comm, NULL), rcollSuccess, "%s",
               rcollGetLastError(comm));
  for (int i = 0; i < N; i++)
    cr_assert_eq(r[i], (float)(i + 1), "element %d", i);
  cr_assert_eq(rcollCommDestroy(comm), rcollSuccess);
}

/* rcollAlltoAll, rcollGather, rcollScatter and rcollBcast: each refusal
 * names its argument; then each runs on one rank, in place and not. */
Test(api, alltoall_gather_scatter_bcast_arguments_are_checked) {
  float s[N] = {0}, r[N] = {0};
  expect_error(rcollAlltoAll(s, r, N, rcollFloat32, NULL, NULL), rcollInvalidArgument, "comm");
  expect_error(rcollGather(s, r, N, rcollFloat32, 0, NULL, NULL), rcollInvalidArgument, "comm");
  expect_error(rcollScatter(s, r, N, rcollFloat32, 0, NULL, NULL), rcollInvalidArgument, "comm");
  expect_error(rcollBcast(s, N, rcollFloat32, 0, NULL, NULL), rcollInvalidArgument, "comm");
  rcollComm_t comm = one_rank_comm();
  expect_error(rcollAlltoAll(NULL, r, N, rcollFloat32, comm, NULL), rcollInvalidArgument, "sendbuff");
  expect_error(rcollAlltoAll(s, NULL, N, rcollFloat32, comm, NULL), rcollInvalidArgument, "recvbuff");
  expect_error(rcollAlltoAll(s, s + 1, N / 2, rcollFloat32, comm, NULL), rcollInvalidArgument, "overlap");
  expect_error(rcollAlltoAll(s, r, N, (rcollDataType_t)rcollNumTypes, comm, NULL), rcollInvalidArgument,
               "datatype");
  expect_error(rcollAlltoAll(s, r, (size_t)(int)-5, rcollFloat32, comm, NULL), rcollInvalidArgument,
               "count");
  expect_error(rcollGather(NULL, r, N, rcollFloat32, 0, comm, NULL), rcollInvalidArgument, "sendbuff");
  expect_error(rcollGather(s, NULL, N, rcollFloat32, 0, comm, NULL), rcollInvalidArgument, "recvbuff");
  expect_error(rcollGather(s, r, N, rcollFloat32, 1, comm, NULL), rcollInvalidArgument, "root");
  expect_error(rcollScatter(NULL, r, N, rcollFloat32, 0, comm, NULL), rcollInvalidArgument, "sendbuff");
  expect_error(rcollScatter(s, NULL, N, rcollFloat32, 0, comm, NULL), rcollInvalidArgument, "recvbuff");
  expect_error(rcollScatter(s, r, N, rcollFloat32, -1, comm, NULL), rcollInvalidArgument, "root");
  expect_error(rcollBcast(NULL, N, rcollFloat32, 0, comm, NULL), rcollInvalidArgument, "buff");
  expect_error(rcollBcast(s, N, rcollFloat32, 2, comm, NULL), rcollInvalidArgument, "root");
  expect_error(rcollBcast(s, N, (rcollDataType_t)-1, 0, comm, NULL), rcollInvalidArgument, "datatype");
  for (int i = 0; i < N; i++)
    s[i] = (float)(i + 1), r[i] = 0;
  cr_assert_eq(rcollAlltoAll(s, r, N, rcollFloat32, comm, NULL), rcollSuccess, "%s", rcollGetLastError(comm));
  cr_assert_eq(rcollAlltoAll(r, r, N, rcollFloat32, comm, NULL), rcollSuccess, "%s", rcollGetLastError(comm));
  cr_assert_eq(rcollGather(s, r, N, rcollFloat32, 0, comm, NULL), rcollSuccess, "%s", rcollGetLastError(comm));
  cr_assert_eq(rcollGather(r, r, N, rcollFloat32, 0, comm, NULL), rcollSuccess, "%s", rcollGetLastError(comm));
  cr_assert_eq(rcollScatter(r, r, N, rcollFloat32, 0, comm, NULL), rcollSuccess, "%s", rcollGetLastError(comm));
  cr_assert_eq(rcollBcast(r, N, rcollFloat32, 0, comm, NULL), rcollSuccess, "%s", rcollGetLastError(comm));
  for (int i = 0; i < N; i++)
    cr_assert_eq(r[i], (float)(i + 1), "element %d", i);
  for (int i = 0; i < N; i++)
    r[i] = 0;
  cr_assert_eq(rcollScatter(s, r, N, rcollFloat32, 0, comm, NULL), rcollSuccess, "%s", rcollGetLastError(comm));
  for (int i = 0; i < N; i++)
    cr_assert_eq(r[i], (float)(i + 1), "element %d", i);
  cr_assert_eq(rcollAlltoAll(NULL, NULL, 0, rcollInt8, comm, NULL), rcollSuccess);
  cr_assert_eq(rcollGather(NULL, NULL, 0, rcollInt8, 0, comm, NULL), rcollSuccess);
  cr_assert_eq(rcollScatter(NULL, NULL, 0, rcollInt8, 0, comm, NULL), rcollSuccess);
  cr_assert_eq(rcollCommDestroy(comm), rcollSuccess);
}

/* Count 0 moves nothing, so buffers may be NULL (as NCCL allows). */
Test(api, zero_count_accepts_null_buffers) {
  rcollComm_t comm = one_rank_comm();
  cr_assert_eq(rcollAllReduce(NULL, NULL, 0, rcollFloat32, rcollSum, comm, NULL), rcollSuccess);
  cr_assert_eq(rcollAllGather(NULL, NULL, 0, rcollInt8, comm, NULL), rcollSuccess);
  cr_assert_eq(rcollBroadcast(NULL, NULL, 0, rcollInt8, 0, comm, NULL), rcollSuccess);
  cr_assert_eq(rcollCommDestroy(comm), rcollSuccess);
}

Test(api, group_end_without_start) {
  expect_error(rcollGroupEnd(), rcollInvalidUsage, "rcollGroupStart");
  /* Balanced groups still work afterwards, nested too. */
  cr_assert_eq(rcollGroupStart(), rcollSuccess);
  cr_assert_eq(rcollGroupStart(), rcollSuccess);
  cr_assert_eq(rcollGroupEnd(), rcollSuccess);
  cr_assert_eq(rcollGroupEnd(), rcollSuccess);
  expect_error(rcollGroupEnd(), rcollInvalidUsage, "rcollGroupStart");
}

/* One refused call makes rcollGroupEnd fail and none of the calls run. */
Test(api, group_with_a_bad_call_runs_nothing) {
  rcollComm_t comm = one_rank_comm();
  int s[N], r[N];
  for (int i = 0; i < N; i++) {
    s[i] = i * 3 + 1;
    r[i] = -1;
  }
  cr_assert_eq(rcollGroupStart(), rcollSuccess);
  cr_assert_eq(rcollAllReduce(s, r, N, rcollInt32, rcollSum, comm, NULL), rcollSuccess);
  cr_assert_eq(rcollAllReduce(s, r, N, (rcollDataType_t)99, rcollSum, comm, NULL),
               rcollInvalidArgument);
  expect_error(rcollGroupEnd(), rcollInvalidArgument, "datatype");
  for (int i = 0; i < N; i++)
    cr_assert_eq(r[i], -1, "element %d was written by a group that failed", i);
  /* The communicator is still good: the same call outside the failed group works. */
  cr_assert_eq(rcollAllReduce(s, r, N, rcollInt32, rcollSum, comm, NULL), rcollSuccess, "%s",
               rcollGetLastError(comm));
  for (int i = 0; i < N; i++)
    cr_assert_eq(r[i], s[i], "element %d", i);
  cr_assert_eq(rcollCommDestroy(comm), rcollSuccess);
}

/* Two ranks: each puts a send/recv and one bad call in a group. Both groups
 * fail, nothing moves, and a later exchange meets no stale message. */
static void group_two_ranks_body(rank_job_t *j) {
  int peer = 1 - j->rank, s[N], r[N];
  for (int i = 0; i < N; i++) {
    s[i] = 1000 * (j->rank + 1) + i;
    r[i] = -1;
  }
  rcollGroupStart();
  rcollSend(s, N, rcollInt32, peer, j->comm, NULL);
  rcollRecv(r, N, rcollInt32, peer, j->comm, NULL);
  rcollBroadcast(s, r, N, rcollInt32, 7, j->comm, NULL); /* root 7 of 2 ranks */
  j->call_result = rcollGroupEnd();
  snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(NULL));
  j->intact = 1;
  for (int i = 0; i < N; i++)
    j->intact &= r[i] == -1;
  for (int i = 0; i < N; i++)
    s[i] += 7;
  rcollGroupStart();
  rcollSend(s, N, rcollInt32, peer, j->comm, NULL);
  rcollRecv(r, N, rcollInt32, peer, j->comm, NULL);
  j->result = rcollGroupEnd();
  for (int i = 0; i < N; i++)
    j->intact &= r[i] == 1000 * (peer + 1) + i + 7;
}

Test(api, group_with_a_bad_call_on_two_ranks) {
  rank_job_t jobs[2];
  two_rank_comms(jobs);
  for (int r = 0; r < 2; r++)
    jobs[r].body = group_two_ranks_body;
  run_pair(jobs, rank_job_body);
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(jobs[r].call_result, rcollInvalidArgument, "rank %d", r);
    cr_assert(strstr(jobs[r].error, "root") != NULL, "rank %d: %s", r, jobs[r].error);
    cr_assert_eq(jobs[r].result, rcollSuccess, "rank %d: the exchange after the failed group: %s",
                 r, rcollGetLastError(jobs[r].comm));
    cr_assert(jobs[r].intact, "rank %d: wrong data (a failed group moved something)", r);
  }
  for (int r = 0; r < 2; r++)
    cr_assert_eq(rcollCommDestroy(jobs[r].comm), rcollSuccess);
}

/* ---- mismatched calls ---- */

#define GUARD 4096

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank 0 all-reduces 100 floats, rank 1 200: both must fail, neither may
 * write past its buffer. */
static void mismatch_body(rank_job_t *j) {
  size_t count = j->rank == 0 ? 100 : 200;
  size_t bytes = count * sizeof(float);
  unsigned char *mem = malloc(bytes + 2 * GUARD);
  if (mem == NULL) /* no cr_assert here: Criterion asserts belong to the test's thread */
    return;
  memset(mem, 0xa5, bytes + 2 * GUARD);
  float *buf = (float *)(mem + GUARD);
  for (size_t i = 0; i < count; i++)
    buf[i] = 1.0f;
  double t0 = now_s();
  j->call_result = rcollAllReduce(buf, buf, count, rcollFloat32, rcollSum, j->comm, NULL);
  j->seconds = now_s() - t0;
  snprintf(j->error, sizeof j->error, "%s", rcollGetLastError(j->comm));
  j->intact = 1;
  for (size_t i = 0; i < GUARD; i++)
    j->intact &= mem[i] == 0xa5 && mem[GUARD + bytes + i] == 0xa5;
  free(mem);
}

Test(api, mismatched_counts_fail_on_both_ranks, .timeout = 40) {
  rank_job_t jobs[2];
  two_rank_comms(jobs);
  for (int r = 0; r < 2; r++)
    jobs[r].body = mismatch_body;
  run_pair(jobs, rank_job_body);
  for (int r = 0; r < 2; r++) {
    cr_assert_neq(jobs[r].call_result, rcollSuccess, "rank %d: a mismatched all-reduce succeeded", r);
    cr_assert(jobs[r].error[0] != '\0', "rank %d: no error text", r);
    cr_assert_lt(jobs[r].seconds, 15.0, "rank %d: took %.1f s with RCOLL_TIMEOUT=5", r,
                 jobs[r].seconds);
    cr_assert(jobs[r].intact, "rank %d: memory around the buffer was overwritten", r);
    rcollResult_t async = rcollSuccess;
    cr_assert_eq(rcollCommGetAsyncError(jobs[r].comm, &async), rcollSuccess);
    cr_assert_neq(async, rcollSuccess, "rank %d: the failure is not recorded on the communicator", r);
  }
  /* A failed communicator refuses further calls and is torn down by abort. */
  float x = 1.0f;
  cr_assert_neq(rcollAllReduce(&x, &x, 1, rcollFloat32, rcollSum, jobs[0].comm, NULL), rcollSuccess);
  for (int r = 0; r < 2; r++)
    cr_assert_eq(rcollCommAbort(jobs[r].comm), rcollSuccess);
}
