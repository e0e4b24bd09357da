/* The trace's records, shared by trace.c (recording) and trace_write.c (the
 * JSON writer); nothing else looks inside. */
#ifndef RCOLL_TRACE_PRIV_H
#define RCOLL_TRACE_PRIV_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trace.h"

enum rcoll_trace_type {
  RCOLL_TR_STEP,
  RCOLL_TR_CALL,
  RCOLL_TR_IDLE,    /* the engine found nothing to do */
  RCOLL_TR_CONNECT, /* connections made on first use */
  RCOLL_TR_NET_WAIT /* a sleep in the transport's wait op */
};

/* One event, kept in memory until the file is written (72 bytes: keep it
 * small, a long run holds a million). Times are the trace clock's
 * (rcoll_trace_now). */
typedef struct rcoll_trace_rec {
  int64_t t0;       /* STEP: posted; others: begin */
  int64_t t1;       /* STEP: data arrived (0 when arrival was completion) */
  int64_t t2;       /* STEP: done; others: end */
  uint64_t a;       /* STEP: message number on its connection; CALL: bytes; IDLE: passes;
                     * NET_WAIT: connections waited on */
  uint64_t b;       /* STEP: bytes; CALL: steps; IDLE: sleeps */
  const char *name; /* CALL: the call, e.g. rcollAllReduce (static strings only) */
  const char *algo; /* CALL: the algorithm that planned it */
  uint32_t call;    /* which call of the communicator (1, 2, ...) */
  int32_t peer;     /* STEP: the peer; CALL: the result */
  int32_t step;     /* STEP: its index in the plan */
  uint8_t type;     /* rcoll_trace_type */
  uint8_t kind;     /* STEP: rcoll_step_kind_t */
  uint8_t flags;    /* STEP: rcoll_step_flags */
  uint8_t join;     /* STEP: a COPY that moves nothing (a join or a finish) */
} rcoll_trace_rec_t;

struct rcoll_trace {
  FILE *file;
  char path[512];
  int rank, nranks;
  uint64_t comm_hash;
  char host[64];
  /* The events, grown by doubling up to `max`; past it they are counted. */
  rcoll_trace_rec_t *recs;
  size_t n, cap, max;
  uint64_t dropped;
  int64_t full_ns; /* when the first event was dropped */
  int stopped;     /* an allocation failed: record nothing more */
  /* Per step of the running plan: when it was posted and when its data came. */
  int64_t *posted, *arrived;
  int nsteps_cap;
  /* The call about to run and the one running. */
  const char *label;
  size_t label_bytes;
  int label_calls;
  uint32_t call;
  int64_t run_begin;
  /* Clock alignment (rcoll_trace_open). */
  int64_t offset_ns; /* add to this rank's times for rank 0's clock */
  int64_t rtt_ns;    /* round trip of the sample the offset to the left came from */
  int64_t closure_ns; /* sum of the offsets round the ring: 0 when exact */
  const char *sync;  /* how the offset was found */
  int64_t created_ns;
};

/* From every rank's left[k] (rank k-1's clock minus rank k's, rank 0's from
 * rank n-1), this rank's offset to rank 0 and the sum round the ring (0
 * when every measurement is exact). */
void rcoll_trace_chain_offsets(const int64_t *left, int nranks, int rank, int64_t *offset,
                               int64_t *closure);

/* Writes the records as Trace Event JSON to t->file; returns 0, or -1 with
 * errno on a write error. */
int rcoll_trace_write(rcoll_trace_t *t);

#endif
