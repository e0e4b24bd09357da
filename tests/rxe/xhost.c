/* Conformance across hosts: one rank per process, joined through the
 * environment (RANK, WORLD_SIZE, RCOLL_COMM_ID) so that the ranks may sit in
 * different VMs. Runs every collective of tests/conformance_case.h, in place
 * and out of place, every root, over the given counts with type and op
 * rotated so that each count sees several types and ops, and checks every
 * element (and the guard bytes) against the independent reference of
 * conformance_ref.h.
 *
 *   RANK=0 WORLD_SIZE=2 RCOLL_COMM_ID=192.168.77.1:29500 xhost -c 0,1,7,65537
 *
 * Prints one FAIL line per failed case and "xhost: rank R of N: P passed,
 * F failed"; exits 1 when anything failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rcoll.h"
#include "../conformance_case.h"

#define MAX_COUNTS 16
#define MAX_CASES 4096

static int parse_counts(const char *text, size_t *out) {
  int k = 0;
  for (const char *p = text; *p && k < MAX_COUNTS;) {
    char *end;
    out[k++] = (size_t)strtoull(p, &end, 10);
    if (end == p || (*end != ',' && *end != '\0'))
      return -1;
    p = *end == ',' ? end + 1 : end;
  }
  return k;
}

/* The same list on every rank: the rotation pairs the types with the ops. */
static int build_cases(int n, const size_t *counts, int ncounts, ccase_t *cases) {
  int k = 0;
  for (int ci = 0; ci < ncounts; ci++)
    for (int coll = 0; coll < NCOLLS; coll++)
      for (int inplace = 0; inplace <= coll_has_inplace(coll); inplace++)
        for (int root = 0; root < (coll_has_root(coll) ? n : 1) && k < MAX_CASES; root++) {
          rcollDataType_t t = (rcollDataType_t)(k % rcollNumTypes);
          rcollRedOp_t op = (rcollRedOp_t)((k + k / rcollNumTypes) % rcollNumOps);
          cases[k] = (ccase_t){coll, counts[ci], t, op, root, inplace, ref_hash(0x78686f7374ull + (uint64_t)k)};
          k++;
        }
  return k;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int run_case(rcollComm_t comm, const ccase_t *c, int rank, int n) {
  rank_bufs_t b;
  case_fault_t f;
  char root[16] = "-";
  if (coll_has_root(c->coll))
    snprintf(root, sizeof root, "%d", c->root);
  const char *what = NULL;
  if (case_prepare(c, rank, n, &b) != 0)
    what = "out of memory";
  rcollResult_t r = what ? rcollSystemError : case_call(c, rank, n, &b, comm);
  if (what == NULL && r != rcollSuccess)
    what = rcollGetLastError(comm);
  if (what == NULL && case_check(c, rank, n, &b, &f) != 0)
    what = f.what;
  if (what != NULL)
    printf("FAIL xhost %s ranks=%d count=%zu type=%s op=%s root=%s inplace=%d rank=%d: %s\n",
           coll_names[c->coll], n, c->count, ref_type_names[c->type],
           coll_has_op(c->coll) ? ref_op_names[c->op] : "-", root, c->inplace, rank, what);
  rank_bufs_free(&b);
  return what == NULL ? 0 : r != rcollSuccess ? -1 : 1;
}

int main(int argc, char **argv) {
  size_t counts[MAX_COUNTS] = {0, 1, 7, 4099, 65537};
  int ncounts = 5, c;
  while ((c = getopt(argc, argv, "c:")) != -1) {
    if (c != 'c' || (ncounts = parse_counts(optarg, counts)) <= 0) {
      fprintf(stderr, "usage: RANK=r WORLD_SIZE=n RCOLL_COMM_ID=host:port %s [-c COUNTS]\n", argv[0]);
      return 2;
    }
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  double t0 = now_s();
  rcollComm_t comm = NULL;
  rcollResult_t r = rcollCommInitFromEnv(&comm, NULL);
  if (r != rcollSuccess) {
    printf("FAIL xhost: joining returned %s: %s\n", rcollGetErrorString(r), rcollGetLastError(NULL));
    return 1;
  }
  int rank = 0, n = 0;
  rcollCommUserRank(comm, &rank);
  rcollCommCount(comm, &n);
  static ccase_t cases[MAX_CASES];
  int ncases = build_cases(n, counts, ncounts, cases), passed = 0, failed = 0;
  for (int i = 0; i < ncases; i++) {
    int rc = run_case(comm, &cases[i], rank, n);
    passed += rc == 0;
    failed += rc != 0;
    if (rc < 0) { /* the communicator is unusable after a failed call */
      failed += ncases - i - 1;
      rcollCommAbort(comm);
      comm = NULL;
      break;
    }
  }
  if (comm != NULL && (r = rcollCommDestroy(comm)) != rcollSuccess) {
    printf("FAIL xhost: destroy returned %s\n", rcollGetErrorString(r));
    failed++;
  }
  printf("xhost: rank %d of %d: %d passed, %d failed (%.1f s)\n", rank, n, passed, failed, now_s() - t0);
  return failed ? 1 : 0;
}
