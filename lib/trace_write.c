/* Execution traces: the file. Trace Event JSON (the format of
 * chrome://tracing, which ui.perfetto.dev reads too): an object with
 * "traceEvents" and "otherData", pid = this rank, one tid ("lane") per kind
 * of work so that overlap shows as stacked slices:
 *   1 calls, 2 progress (engine waits, sleeps in the transport, connects),
 *   3 reduce, 4 local copy,
 *   100 + 512 (2p + d) + s: sends to (d = 0) or receives from (d = 1) rank p.
 * Slices on one lane must nest, and a connection's pipelined messages
 * overlap without nesting, so a connection has as many lanes (s) as it had
 * messages in flight at once: each message takes the first that is free at
 * its post (assign_sublanes).
 * Steps are "X" slices from post to done; a message's send and its receive
 * on the other rank are joined by a flow arrow (id: sender, receiver and the
 * message's number on that connection, the same on both sides). Times are
 * this rank's CLOCK_MONOTONIC in microseconds; otherData.rcoll.clock_offset_ns
 * is what scripts/rcoll-trace-merge adds to align them with rank 0. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace_priv.h"

enum { LANE_CALLS = 1, LANE_PROGRESS = 2, LANE_REDUCE = 3, LANE_COPY = 4, LANE_PEERS = 100 };
/* Lanes per connection. The engine has at most 512 steps in flight
 * (ENGINE_WINDOW in engine.c), so no connection needs more; were it to,
 * the extra messages would share the last lane. */
#define SUBLANES 512

static const char *const STEP_NAMES[RCOLL_STEP_NKINDS] = {"send", "recv", "recv-reduce", "copy"};

/* Microseconds with the nanoseconds kept: Trace Event "ts" is in us. */
static void put_us(FILE *f, const char *key, int64_t ns) {
  fprintf(f, ",\"%s\":%" PRId64 ".%03d", key, ns / 1000, (int)(ns % 1000));
}

/* Host names and the like, with the characters JSON forbids escaped. */
static void put_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

static void put_head(FILE *f, const rcoll_trace_t *t, const char *name, const char *cat,
                     const char *ph, int tid, int64_t ts) {
  fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"%s\",\"pid\":%d,\"tid\":%d", name, cat,
          ph, t->rank, tid);
  put_us(f, "ts", ts);
}

static void put_lane(FILE *f, const rcoll_trace_t *t, int tid, const char *label) {
  fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
          t->rank, tid);
  put_str(f, label);
  fprintf(f, "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
             "\"args\":{\"sort_index\":%d}}", t->rank, tid, tid);
}

/* A message step's connection: 2 peer + 1 when it receives; -1 for a local step. */
static int step_conn(const rcoll_trace_rec_t *e) {
  if (e->type != RCOLL_TR_STEP || e->kind == RCOLL_STEP_COPY)
    return -1;
  return 2 * e->peer + (e->kind != RCOLL_STEP_SEND);
}

typedef struct lane_order {
  int conn;
  int64_t t0;
  size_t idx;
} lane_order_t;

static int lane_order_cmp(const void *pa, const void *pb) {
  const lane_order_t *a = pa, *b = pb;
  if (a->conn != b->conn)
    return a->conn < b->conn ? -1 : 1;
  return a->t0 < b->t0 ? -1 : a->t0 > b->t0;
}

/* Gives every message step a lane of its connection (sub[i]) and counts the
 * lanes each connection used (used[conn]). Without memory for the sort, every
 * message takes its connection's first lane (pipelined ones then misnest). */
static void assign_sublanes(const rcoll_trace_t *t, uint16_t *sub, uint16_t *used) {
  lane_order_t *o = malloc((t->n ? t->n : 1) * sizeof *o);
  size_t m = 0;
  for (size_t i = 0; i < t->n; i++) {
    int conn = step_conn(&t->recs[i]);
    if (conn >= 0 && o != NULL)
      o[m++] = (lane_order_t){conn, t->recs[i].t0, i};
    else if (conn >= 0)
      used[conn] = 1;
  }
  qsort(o, m, sizeof *o, lane_order_cmp);
  int64_t ends[SUBLANES];
  for (size_t k = 0; k < m; k++) {
    int conn = o[k].conn, s = 0;
    if (k == 0 || o[k - 1].conn != conn)
      used[conn] = 0;
    while (s < used[conn] && ends[s] > o[k].t0)
      s++;
    if (s == SUBLANES)
      s = SUBLANES - 1;
    if (s == used[conn])
      used[conn]++;
    sub[o[k].idx] = (uint16_t)s;
    ends[s] = t->recs[o[k].idx].t2;
  }
  free(o);
}

static int peer_lane(int conn, int sub) { return LANE_PEERS + SUBLANES * conn + sub; }

static void put_lanes(FILE *f, const rcoll_trace_t *t, const uint16_t *used) {
  fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":",
          t->rank);
  char label[128];
  snprintf(label, sizeof label, "rank %d (%s)", t->rank, t->host);
  put_str(f, label);
  fprintf(f, "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
             "\"args\":{\"sort_index\":%d}}", t->rank, t->rank);
  put_lane(f, t, LANE_CALLS, "calls");
  put_lane(f, t, LANE_PROGRESS, "progress: engine waits, connects");
  put_lane(f, t, LANE_REDUCE, "reduce");
  put_lane(f, t, LANE_COPY, "local copy");
  for (int conn = 0; conn < 2 * t->nranks; conn++)
    for (int s = 0; s < used[conn]; s++) {
      snprintf(label, sizeof label, "%s rank %d", conn % 2 ? "recv from" : "send to", conn / 2);
      if (s > 0) /* the n-th message in flight at once */
        snprintf(label + strlen(label), sizeof label - strlen(label), " (%d)", s + 1);
      put_lane(f, t, peer_lane(conn, s), label);
    }
}

static void put_call(FILE *f, const rcoll_trace_t *t, const rcoll_trace_rec_t *e) {
  put_head(f, t, e->name, "call", "X", LANE_CALLS, e->t0);
  put_us(f, "dur", e->t2 - e->t0);
  fprintf(f, ",\"args\":{\"call\":%u,\"algo\":\"%s\",\"bytes\":%" PRIu64 ",\"steps\":%" PRIu64
             ",\"result\":%d}}", e->call, e->algo, e->a, e->b, e->peer);
}

/* The flow id of a message: the same text on its sender and its receiver. */
static void put_flow(FILE *f, const rcoll_trace_t *t, const rcoll_trace_rec_t *e, int from, int to,
                     const char *ph, int tid, int64_t ts) {
  put_head(f, t, "message", "msg", ph, tid, ts);
  fprintf(f, ",\"id\":\"%08x:%d>%d#%" PRIu64 "\"%s}", (unsigned)(t->comm_hash >> 32), from, to,
          e->a, ph[0] == 'f' ? ",\"bp\":\"e\"" : "");
}

static void put_step(FILE *f, const rcoll_trace_t *t, const rcoll_trace_rec_t *e, int sub) {
  int local = e->kind == RCOLL_STEP_COPY;
  int tid = local ? LANE_COPY : peer_lane(step_conn(e), sub);
  const char *name = !local ? STEP_NAMES[e->kind] : !e->join ? "copy"
                     : (e->flags & RCOLL_STEP_FINISH) ? "finish" : "join";
  put_head(f, t, name, "step", "X", tid, e->t0);
  put_us(f, "dur", e->t2 - e->t0);
  fprintf(f, ",\"args\":{\"call\":%u,\"step\":%d,\"bytes\":%" PRIu64, e->call, e->step, e->b);
  if (!local)
    fprintf(f, ",\"peer\":%d,\"msg\":%" PRIu64, e->peer, e->a);
  fprintf(f, "}}");
  if (local)
    return;
  if (e->kind == RCOLL_STEP_SEND) {
    put_flow(f, t, e, t->rank, e->peer, "s", tid, e->t0);
    return;
  }
  int64_t arrived = e->t1 ? e->t1 : e->t2;
  put_head(f, t, "arrived", "data", "i", tid, arrived);
  fprintf(f, ",\"s\":\"t\",\"args\":{\"peer\":%d,\"msg\":%" PRIu64 ",\"bytes\":%" PRIu64 "}}",
          e->peer, e->a, e->b);
  put_flow(f, t, e, e->peer, t->rank, "f", tid, arrived);
  if (e->t1) { /* reduced from its staging slot after it arrived */
    put_head(f, t, "reduce", "reduce", "X", LANE_REDUCE, e->t1);
    put_us(f, "dur", e->t2 - e->t1);
    fprintf(f, ",\"args\":{\"call\":%u,\"step\":%d,\"bytes\":%" PRIu64 ",\"peer\":%d}}", e->call,
            e->step, e->b, e->peer);
  }
}

/* The progress lane: "wait" slices (nothing moved) hold the "transport
 * wait" slices of the sleeps in the transport inside them. */
static void put_other(FILE *f, const rcoll_trace_t *t, const rcoll_trace_rec_t *e) {
  const char *name = e->type == RCOLL_TR_IDLE ? "wait"
                     : e->type == RCOLL_TR_NET_WAIT ? "transport wait" : "connect";
  put_head(f, t, name, "progress", "X", LANE_PROGRESS, e->t0);
  put_us(f, "dur", e->t2 - e->t0);
  fprintf(f, ",\"args\":{\"call\":%u", e->call);
  if (e->type == RCOLL_TR_IDLE)
    fprintf(f, ",\"idle passes\":%" PRIu64 ",\"transport waits\":%" PRIu64, e->a, e->b);
  if (e->type == RCOLL_TR_NET_WAIT)
    fprintf(f, ",\"connections\":%" PRIu64, e->a);
  fprintf(f, "}}");
}

static void put_meta(FILE *f, const rcoll_trace_t *t) {
  fprintf(f, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"rcoll\":{\"version\":1,"
             "\"comm\":\"%016" PRIx64 "\",\"rank\":%d,\"nranks\":%d,\"host\":", t->comm_hash,
          t->rank, t->nranks);
  put_str(f, t->host);
  fprintf(f, ",\"pid\":%d,\"clock\":\"CLOCK_MONOTONIC\",\"clock_offset_ns\":%" PRId64
             ",\"clock_rtt_ns\":%" PRId64 ",\"clock_ring_closure_ns\":%" PRId64 ",\"clock_sync\":",
          (int)getpid(), t->offset_ns, t->rtt_ns, t->closure_ns);
  put_str(f, t->sync);
  fprintf(f, ",\"events\":%zu,\"event_cap\":%zu,\"events_dropped\":%" PRIu64
             ",\"complete\":%s}}}\n", t->n, t->max, t->dropped, t->stopped ? "false" : "true");
}

int rcoll_trace_write(rcoll_trace_t *t) {
  FILE *f = t->file;
  uint16_t *sub = calloc(t->n ? t->n : 1, sizeof *sub);
  uint16_t *used = calloc(2 * (size_t)t->nranks, sizeof *used);
  if (sub == NULL || used == NULL) {
    free(sub);
    free(used);
    errno = ENOMEM;
    return -1;
  }
  assign_sublanes(t, sub, used);
  fprintf(f, "{\"traceEvents\":[\n");
  put_lanes(f, t, used);
  for (size_t i = 0; i < t->n; i++) {
    const rcoll_trace_rec_t *e = &t->recs[i];
    if (e->type == RCOLL_TR_STEP)
      put_step(f, t, e, sub[i]);
    else if (e->type == RCOLL_TR_CALL)
      put_call(f, t, e);
    else
      put_other(f, t, e);
  }
  if (t->dropped) {
    put_head(f, t, "trace full", "trace", "i", LANE_CALLS, t->full_ns);
    fprintf(f, ",\"s\":\"p\",\"args\":{\"dropped\":%" PRIu64 ",\"cap\":%zu,\"setting\":"
               "\"RCOLL_TRACE_EVENTS\"}}", t->dropped, t->max);
  }
  put_meta(f, t);
  free(sub);
  free(used);
  return ferror(f) || fflush(f) != 0 ? -1 : 0;
}
