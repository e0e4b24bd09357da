/* Execution traces (RCOLL_TRACE=dir): what each call and each step of its
 * plan did and when, written by every rank as Trace Event JSON at comm
 * destroy, for ui.perfetto.dev or chrome://tracing (docs/trace.md).
 *
 * Off, a communicator's `trace` is NULL and the engine's only cost is a test
 * of that pointer where a step moves: no clock read, no allocation. On, the
 * events are kept in memory (at most RCOLL_TRACE_EVENTS) and written once, so
 * tracing adds no I/O to a call. A failure to record or write is logged once
 * and ends the trace; it never fails a call. */
#ifndef RCOLL_TRACE_H
#define RCOLL_TRACE_H

#include <stdint.h>
#include <time.h>

#include "plan.h"
#include "rcoll.h"

struct rcollComm;
typedef struct rcoll_trace rcoll_trace_t;

/* The trace's clock: CLOCK_MONOTONIC in nanoseconds, the clock whose
 * offsets between ranks rcoll_trace_open measures. */
static inline int64_t rcoll_trace_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Collective (every rank calls it after the transports are open): when every
 * rank traces, measures this rank's clock offset to rank 0 over the
 * bootstrap, then, when this rank traces, creates its file and sets
 * c->trace. An error is a bootstrap failure; a file that cannot be created
 * only leaves c->trace NULL, with a warning. */
rcollResult_t rcoll_trace_open(struct rcollComm *c, const rcollUniqueId *id);
/* Writes the file and frees the trace; safe when c->trace is NULL. */
void rcoll_trace_close(struct rcollComm *c);

/* Names the call whose plan runs next (several in a group). */
void rcoll_trace_call(rcoll_trace_t *t, const char *name, size_t bytes);

/* Engine hooks, called only when the communicator has a trace. */
void rcoll_trace_run_begin(rcoll_trace_t *t, const rcoll_plan_t *p);
void rcoll_trace_connected(rcoll_trace_t *t, int64_t begin_ns);
/* `device`: the CUDA proxy ran the plan; the call it names is left for
 * the host call whose name the calling thread may be setting meanwhile. */
void rcoll_trace_run_end(rcoll_trace_t *t, const rcoll_plan_t *p, rcollResult_t r, int device);
void rcoll_trace_posted(rcoll_trace_t *t, const rcoll_plan_t *p, int step);
/* A received chunk is in its staging slot; its reduction starts now. */
void rcoll_trace_arrived(rcoll_trace_t *t, const rcoll_plan_t *p, int step);
void rcoll_trace_done(rcoll_trace_t *t, const rcoll_plan_t *p, int step);
/* The engine slept in the transport's wait op from begin_ns to now, on
 * `conns` connections. */
void rcoll_trace_net_wait(rcoll_trace_t *t, int64_t begin_ns, int conns);
/* The engine waited from begin_ns to now: `passes` idle passes, of which
 * `sleeps` slept in the transport's wait. */
void rcoll_trace_idle(rcoll_trace_t *t, int64_t begin_ns, int64_t passes, int64_t sleeps);

#endif
