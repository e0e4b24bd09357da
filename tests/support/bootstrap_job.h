/* Whole bootstrap jobs run as threads of the test process, and a root the
 * test plays itself: what test_bootstrap.c and test_bootstrap_strays.c
 * share. Each rank joins, allgathers twice (blocks only it can produce) and
 * optionally passes a barrier that rank 0 enters late. */
#ifndef RCOLL_TESTS_SUPPORT_BOOTSTRAP_JOB_H
#define RCOLL_TESTS_SUPPORT_BOOTSTRAP_JOB_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap.h"
#include "config.h"
#include "error.h"
#include "rcoll.h"
#include "sockutil.h"

#define MAX_RANKS 8

typedef struct job job_t;
typedef struct {
  job_t *job;
  int rank;
  int close_early; /* joins, then leaves without taking part */
  rcollResult_t rc_init, rc_op;
  char err[RCOLL_ERROR_TEXT_MAX];
  int bad_blocks;
  int saw_early_barrier;
  char host_of_0[64];
  int64_t elapsed_ms;
} rank_t;

struct job {
  rcoll_settings_t s;
  rcollUniqueId id;
  int nranks;
  size_t bytes;
  int do_barrier;
  atomic_int entered;
  rank_t ranks[MAX_RANKS];
};

/* Settings with this timeout and no interface steering from the environment. */
rcoll_settings_t settings_with_timeout(int seconds);
/* A real root on 127.0.0.1, its id. */
rcollUniqueId start_root(const rcoll_settings_t *s, uint64_t secret);

void job_setup(job_t *j, int nranks, int timeout_s);
/* Runs ranks [first, last) as threads and waits for them. */
void job_run(job_t *j, int first, int last);
/* pthread body of one rank (a rank_t of the job). */
void *rank_main(void *arg);
/* pthread body: job_run over all ranks. */
void *run_job(void *arg);
void expect_job_ok(job_t *j);

/* An id naming a root at `at` that the test plays itself. */
rcollUniqueId fake_root_id(const rcoll_sockaddr_t *at, uint64_t secret);
/* Connects to a ring listener and introduces itself as `rank`. */
int knock(const rcoll_sockaddr_t *at, uint64_t secret, int rank);
/* Plays the root of a 3-rank job: takes each rank's hello as it came on
 * the wire (wire[rank]) and its connection (fds[rank]). */
void fake_root_take3(int lfd, uint64_t secret, rcoll_bootstrap_hello_t wire[3], int fds[3]);

#endif
