/* The measuring side of rcoll_linkcheck: one rank's state while it runs the
 * rounds (rcoll_linkcheck_measure.c), over the benches' world
 * (common_world.c: threads, MPI or the environment). */
#ifndef RCOLL_BENCH_LINKCHECK_RUN_H
#define RCOLL_BENCH_LINKCHECK_RUN_H

#include <stdatomic.h>

#include "common_impl.h"
#include "rcoll_linkcheck.h"

enum lc_phase { LC_PHASE_INIT = 0, LC_PHASE_WAIT, LC_PHASE_LATENCY, LC_PHASE_BANDWIDTH,
                LC_PHASE_GATHER, LC_PHASE_DONE };

typedef struct lc_rank {
  const lc_opts_t *opts;
  bench_world_t *world;
  int thread, rank, nranks;
  rcollComm_t comm;
  unsigned char *buf;  /* opts->bytes, sent or received */
  uint64_t ping, pong; /* the 8-byte messages */
  double *rtt;         /* opts->pings round trips, in us */
  double *bw;          /* opts->iters messages' rates, in GB/s */
  lc_link_t *row;      /* nranks: this rank's links as their src */
  /* Where the rank is, for -T's message; read by the watchdog thread. */
  atomic_int who, phase, round, peer;
  int status; /* the exit status, once the rank is done */
  pthread_t tid;
} lc_rank_t;

/* Runs every round; fills r->row (latency, bandwidth, transport). A failed
 * call ends the run, naming the peer and what was being measured. */
void lc_measure_all(lc_rank_t *r);
/* What the rank is doing, for errors and -T: "measuring bandwidth with
 * rank 2 in round 1 of 3". Safe from another thread. */
void lc_describe(lc_rank_t *r, char *buf, size_t len);

#endif
