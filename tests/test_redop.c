/* rcollRedOpCreatePreMulSum and rcollRedOpDestroy (lib/redop.c): every
 * refusal names its argument; a made op sums each rank's input times that
 * rank's scalar, through all-reduce, reduce-scatter and reduce, in place
 * and not; rcollScalarDevice reads the scalar at each call,
 * rcollScalarHostImmediate once; a destroyed op is refused. Ranks are
 * threads of this process. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "rcoll.h"

#define N 37
#define NRANKS 3

static void setup(void) { setenv("RCOLL_TIMEOUT", "5", 1); }
TestSuite(redop, .init = setup, .timeout = 60);

static void expect_error(rcollResult_t got, rcollResult_t want, const char *needle) {
  const char *msg = rcollGetLastError(NULL);
  cr_assert_eq(got, want, "got %d, want %d; last error: %s", got, want, msg ? msg : "(null)");
  cr_assert(msg != NULL && strstr(msg, needle) != NULL, "\"%s\" does not mention \"%s\"", msg, needle);
}

Test(redop, arguments_are_checked) {
  rcollUniqueId id;
  rcollComm_t comm;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess);
  cr_assert_eq(rcollCommInitRank(&comm, 1, id, 0), rcollSuccess, "%s", rcollGetLastError(NULL));
  float two = 2, s[N], r[N];
  rcollRedOp_t op;
  expect_error(rcollRedOpCreatePreMulSum(&op, &two, rcollFloat32, rcollScalarHostImmediate, NULL),
               rcollInvalidArgument, "comm");
  expect_error(rcollRedOpCreatePreMulSum(NULL, &two, rcollFloat32, rcollScalarHostImmediate, comm),
               rcollInvalidArgument, "op");
  expect_error(rcollRedOpCreatePreMulSum(&op, NULL, rcollFloat32, rcollScalarHostImmediate, comm),
               rcollInvalidArgument, "scalar");
  expect_error(rcollRedOpCreatePreMulSum(&op, &two, (rcollDataType_t)rcollNumTypes, rcollScalarHostImmediate,
                                         comm), rcollInvalidArgument, "datatype");
  expect_error(rcollRedOpCreatePreMulSum(&op, &two, rcollFloat32, (rcollScalarResidence_t)7, comm),
               rcollInvalidArgument, "residence");
  expect_error(rcollRedOpDestroy(rcollSum, comm), rcollInvalidArgument, "built-in");
  expect_error(rcollRedOpDestroy((rcollRedOp_t)(rcollNumOps + 3), comm), rcollInvalidArgument, "op");
  cr_assert_eq(rcollRedOpCreatePreMulSum(&op, &two, rcollFloat32, rcollScalarHostImmediate, comm), rcollSuccess);
  cr_assert_geq((int)op, rcollNumOps);
  for (int i = 0; i < N; i++)
    s[i] = (float)i;
  /* Only for the datatype it was made for. */
  expect_error(rcollAllReduce(s, r, N, rcollInt32, op, comm, NULL), rcollInvalidArgument, "datatype");
  cr_assert_eq(rcollAllReduce(s, r, N, rcollFloat32, op, comm, NULL), rcollSuccess, "%s", rcollGetLastError(comm));
  for (int i = 0; i < N; i++)
    cr_assert_eq(r[i], 2.0f * (float)i, "element %d", i);
  /* 64 ops at most; destroying one frees its place. */
  rcollRedOp_t more[64];
  int made = 0;
  while (made < 64 && rcollRedOpCreatePreMulSum(&more[made], &two, rcollFloat32, rcollScalarHostImmediate,
                                                comm) == rcollSuccess)
    made++;
  cr_assert_eq(made, 63, "one op was made already");
  expect_error(rcollRedOpCreatePreMulSum(&more[63], &two, rcollFloat32, rcollScalarHostImmediate, comm),
               rcollInvalidUsage, "destroy");
  for (int k = 0; k < made; k++)
    cr_assert_eq(rcollRedOpDestroy(more[k], comm), rcollSuccess);
  cr_assert_eq(rcollRedOpDestroy(op, comm), rcollSuccess);
  expect_error(rcollRedOpDestroy(op, comm), rcollInvalidArgument, "destroyed");
  expect_error(rcollAllReduce(s, r, N, rcollFloat32, op, comm, NULL), rcollInvalidArgument, "op");
  cr_assert_eq(rcollCommDestroy(comm), rcollSuccess);
}

typedef struct job {
  rcollUniqueId id;
  int rank;
  long wrong;
  rcollResult_t result;
} job_t;

static double in(int r, size_t i) { return (double)((r + 1) * 10 + (int)(i % 7)); }
static double scale(int r) { return (double)(r + 2); } /* rank r's scalar */

/* The expected sum of scale(q) * in(q, i) over the ranks. */
static double want(size_t i) {
  double s = 0;
  for (int q = 0; q < NRANKS; q++)
    s += scale(q) * in(q, i);
  return s;
}

#define STEP(call)                     \
  do {                                 \
    if ((j->result = (call)) != rcollSuccess) \
      return;                          \
  } while (0)

static void calls(job_t *j, rcollComm_t comm) {
  int r = j->rank;
  double d_scalar = scale(r), buf[NRANKS * N], out[NRANKS * N];
  int32_t i_scalar = 0, ibuf[NRANKS * N], iout[N];
  rcollRedOp_t dop, iop;
  /* All-reduce of float64, out of place then in place. */
  STEP(rcollRedOpCreatePreMulSum(&dop, &d_scalar, rcollFloat64, rcollScalarHostImmediate, comm));
  d_scalar = -100; /* read already: must not matter */
  for (size_t i = 0; i < N; i++)
    buf[i] = in(r, i);
  STEP(rcollAllReduce(buf, out, N, rcollFloat64, dop, comm, NULL));
  STEP(rcollAllReduce(buf, buf, N, rcollFloat64, dop, comm, NULL));
  for (size_t i = 0; i < N; i++)
    j->wrong += (out[i] != want(i)) + (buf[i] != want(i));
  /* Two calls in a group: both scaled copies live until the group runs. */
  for (size_t i = 0; i < N; i++)
    buf[i] = in(r, i), buf[N + i] = in(r, i);
  STEP(rcollGroupStart());
  STEP(rcollAllReduce(buf, out, N, rcollFloat64, dop, comm, NULL));
  STEP(rcollAllReduce(buf + N, out + N, N, rcollFloat64, dop, comm, NULL));
  STEP(rcollGroupEnd());
  for (size_t i = 0; i < N; i++)
    j->wrong += (out[i] != want(i)) + (out[N + i] != want(i));
  /* Reduce to root 1, in place there. */
  for (size_t i = 0; i < N; i++)
    buf[i] = in(r, i);
  STEP(rcollReduce(buf, buf, N, rcollFloat64, dop, 1, comm, NULL));
  for (size_t i = 0; r == 1 && i < N; i++)
    j->wrong += buf[i] != want(i);
  /* Reduce-scatter of int32 with the scalar read at each call. */
  STEP(rcollRedOpCreatePreMulSum(&iop, &i_scalar, rcollInt32, rcollScalarDevice, comm));
  i_scalar = (int32_t)scale(r);
  for (size_t i = 0; i < NRANKS * N; i++)
    ibuf[i] = (int32_t)in(r, i);
  STEP(rcollReduceScatter(ibuf, iout, N, rcollInt32, iop, comm, NULL));
  for (size_t i = 0; i < N; i++)
    j->wrong += iout[i] != (int32_t)want((size_t)r * N + i);
  STEP(rcollRedOpDestroy(dop, comm));
  STEP(rcollRedOpDestroy(iop, comm));
}

static void *rank_main(void *p) {
  job_t *j = p;
  rcollComm_t comm;
  j->result = rcollCommInitRank(&comm, NRANKS, j->id, j->rank);
  if (j->result != rcollSuccess)
    return NULL;
  calls(j, comm);
  if (j->result != rcollSuccess)
    rcollCommAbort(comm);
  else
    rcollCommDestroy(comm);
  return NULL;
}

Test(redop, premulsum_sums_scaled_inputs) {
  job_t jobs[NRANKS];
  pthread_t th[NRANKS];
  rcollUniqueId id;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess);
  for (int r = 0; r < NRANKS; r++) {
    jobs[r] = (job_t){.id = id, .rank = r};
    cr_assert_eq(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
  }
  for (int r = 0; r < NRANKS; r++)
    pthread_join(th[r], NULL);
  for (int r = 0; r < NRANKS; r++) {
    cr_assert_eq(jobs[r].result, rcollSuccess, "rank %d: %s", r, rcollGetErrorString(jobs[r].result));
    cr_assert_eq(jobs[r].wrong, 0, "rank %d: %ld wrong elements", r, jobs[r].wrong);
  }
}
