/* Execution traces: recording (trace.h). The file itself is written by
 * trace_write.c at comm destroy. */
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm.h"
#include "log.h"
#include "trace_priv.h"

/* Ping-pongs per neighbour: enough for one to meet no scheduling delay. */
#define TRACE_CLOCK_ROUNDS 16
#define TRACE_FIRST_CAP 4096

/* FNV-1a, continued from h. */
static uint64_t trace_hash(uint64_t h, const void *data, size_t bytes) {
  for (size_t i = 0; i < bytes; i++)
    h = (h ^ ((const unsigned char *)data)[i]) * 0x100000001b3ull;
  return h;
}

/* The communicator's name in the files: the same on all its ranks. The id
 * alone is not enough: an environment launch without a secret derives its
 * id from the root's address, which a rerun repeats. So rank 0's creation
 * time is mixed in where the ranks exchange it (trace_clock_sync) or where
 * there is no other rank. */
static uint64_t trace_comm_hash(const rcollUniqueId *id) {
  return trace_hash(0xcbf29ce484222325ull, id->internal, sizeof id->internal);
}

void rcoll_trace_chain_offsets(const int64_t *left, int nranks, int rank, int64_t *offset,
                               int64_t *closure) {
  /* clock(k-1) = clock(k) + left[k], so clock(0) = clock(rank) + left[1] + ... + left[rank]. */
  *offset = 0;
  for (int k = 1; k <= rank; k++)
    *offset += left[k];
  *closure = 0;
  for (int k = 0; k < nranks; k++)
    *closure += left[k];
}

/* Measures the neighbours' offsets and chains them into this rank's. */
static rcollResult_t trace_clock_sync(struct rcollComm *c, rcoll_trace_t *t) {
  int64_t left = 0, rtt = 0;
  RCOLL_CHECK(rcoll_bootstrap_clock_left(c->bootstrap, TRACE_CLOCK_ROUNDS, rcoll_trace_now, &left,
                                         &rtt));
  /* Per rank: its offset to its left and its creation time (gathered);
   * then room for the offsets alone. */
  int64_t *all = calloc((size_t)c->nranks, 3 * sizeof *all);
  if (all == NULL)
    return rcoll_error(rcollSystemError, "rank %d: out of memory for the trace's clocks", c->rank);
  all[2 * c->rank] = left;
  all[2 * c->rank + 1] = t != NULL ? t->created_ns : 0;
  rcollResult_t r = rcoll_bootstrap_allgather(c->bootstrap, all, 2 * sizeof *all);
  if (r == rcollSuccess && t != NULL) {
    int64_t *lefts = all + 2 * c->nranks;
    for (int k = 0; k < c->nranks; k++)
      lefts[k] = all[2 * k];
    t->comm_hash = trace_hash(t->comm_hash, &all[1], sizeof all[1]);
    rcoll_trace_chain_offsets(lefts, c->nranks, c->rank, &t->offset_ns, &t->closure_ns);
    t->rtt_ns = rtt;
    t->sync = "ring ping-pong over the bootstrap, shortest of 16 round trips per neighbour";
  }
  free(all);
  return r;
}

/* Creates the file now, so that a directory that cannot take it is reported
 * at init, once, and costs nothing afterwards. The directory itself is made
 * if missing (not its parents: a typo should not grow a tree). A name that
 * is taken (another process of the same id, a rerun into the same
 * directory) gets a suffix. */
static int trace_create_file(rcoll_trace_t *t, const char *dir) {
  (void)mkdir(dir, 0755); /* EEXIST is the usual case; a real failure shows below */
  for (int n = 1; n < 100; n++) {
    char suffix[16] = "";
    if (n > 1)
      snprintf(suffix, sizeof suffix, "-%d", n);
    snprintf(t->path, sizeof t->path, "%s/rcoll-trace-%016llx-rank%d%s.json", dir,
             (unsigned long long)t->comm_hash, t->rank, suffix);
    int fd = open(t->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST)
      continue;
    if (fd < 0)
      break;
    t->file = fdopen(fd, "w");
    if (t->file == NULL)
      close(fd);
    return t->file != NULL ? 0 : -1;
  }
  RCOLL_WARN("rank %d: RCOLL_TRACE: cannot create %s (%s); this rank writes no trace", t->rank,
             t->path, strerror(errno));
  return -1;
}

static rcoll_trace_t *trace_new(struct rcollComm *c, const rcollUniqueId *id) {
  rcoll_trace_t *t = calloc(1, sizeof *t);
  if (t == NULL)
    return NULL;
  t->rank = c->rank;
  t->nranks = c->nranks;
  t->comm_hash = trace_comm_hash(id);
  t->max = c->settings.trace_events > 0 ? (size_t)c->settings.trace_events : 0;
  t->sync = c->nranks == 1 ? "one rank" : "none: not every rank sets RCOLL_TRACE";
  t->created_ns = rcoll_trace_now();
  if (c->nranks == 1)
    t->comm_hash = trace_hash(t->comm_hash, &t->created_ns, sizeof t->created_ns);
  snprintf(t->host, sizeof t->host, "%s", rcoll_bootstrap_host(c->bootstrap, c->rank));
  return t;
}

rcollResult_t rcoll_trace_open(struct rcollComm *c, const rcollUniqueId *id) {
  int all = 1;
  for (int r = 0; r < c->nranks; r++)
    all &= (c->infos[r].flags & RCOLL_RANK_TRACING) != 0;
  if (!(c->infos[c->rank].flags & RCOLL_RANK_TRACING))
    return rcollSuccess;
  rcoll_trace_t *t = trace_new(c, id);
  if (t == NULL)
    RCOLL_WARN("rank %d: RCOLL_TRACE: out of memory; this rank writes no trace", c->rank);
  rcollResult_t r = all && c->nranks > 1 ? trace_clock_sync(c, t) : rcollSuccess;
  if (r != rcollSuccess || t == NULL || trace_create_file(t, c->settings.trace) != 0) {
    free(t);
    return r;
  }
  RCOLL_INFO(RCOLL_SUB_INIT, "rank %d: tracing to %s (clock offset to rank 0 %lld ns, round trip "
             "%lld ns)", c->rank, t->path, (long long)t->offset_ns, (long long)t->rtt_ns);
  c->trace = t;
  return rcollSuccess;
}

void rcoll_trace_close(struct rcollComm *c) {
  rcoll_trace_t *t = c->trace;
  if (t == NULL)
    return;
  c->trace = NULL;
  int werr = rcoll_trace_write(t) != 0 ? errno : 0;
  if (fclose(t->file) != 0 && werr == 0)
    werr = errno;
  if (werr != 0)
    RCOLL_WARN("rank %d: RCOLL_TRACE: writing %s failed (%s); the file is incomplete", t->rank,
               t->path, strerror(werr));
  free(t->recs);
  free(t->posted);
  free(t->arrived);
  free(t);
}

/* Stops recording for good: an allocation failed mid-call. */
static void trace_stop(rcoll_trace_t *t, const char *why) {
  if (!t->stopped)
    RCOLL_WARN("rank %d: RCOLL_TRACE: %s; the trace ends here", t->rank, why);
  t->stopped = 1;
}

/* A slot for one more event, or NULL when the cap is reached (counted). */
static rcoll_trace_rec_t *trace_add(rcoll_trace_t *t, uint8_t type) {
  if (t->stopped)
    return NULL;
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : TRACE_FIRST_CAP;
    if (cap > t->max)
      cap = t->max;
    if (cap <= t->n) {
      if (t->dropped++ == 0)
        t->full_ns = rcoll_trace_now();
      return NULL;
    }
    rcoll_trace_rec_t *recs = realloc(t->recs, cap * sizeof *recs);
    if (recs == NULL) {
      trace_stop(t, "out of memory for events");
      return NULL;
    }
    t->recs = recs;
    t->cap = cap;
  }
  rcoll_trace_rec_t *e = &t->recs[t->n++];
  memset(e, 0, sizeof *e);
  e->type = type;
  e->call = t->call;
  return e;
}

void rcoll_trace_call(rcoll_trace_t *t, const char *name, size_t bytes) {
  t->label = t->label_calls++ ? "group" : name;
  t->label_bytes += bytes;
}

void rcoll_trace_run_begin(rcoll_trace_t *t, const rcoll_plan_t *p) {
  t->call++;
  t->run_begin = rcoll_trace_now();
  if (p->nsteps > t->nsteps_cap) {
    int cap = p->nsteps * 2;
    int64_t *posted = realloc(t->posted, (size_t)cap * sizeof *posted);
    if (posted != NULL)
      t->posted = posted;
    int64_t *arrived = posted ? realloc(t->arrived, (size_t)cap * sizeof *arrived) : NULL;
    if (arrived == NULL) {
      trace_stop(t, "out of memory for a plan's step times");
      return;
    }
    t->arrived = arrived;
    t->nsteps_cap = cap;
  }
}

void rcoll_trace_connected(rcoll_trace_t *t, int64_t begin_ns) {
  int64_t now = rcoll_trace_now();
  /* Connections are made on first use: most calls find them all made. */
  if (now - begin_ns < 1000)
    return;
  rcoll_trace_rec_t *e = trace_add(t, RCOLL_TR_CONNECT);
  if (e != NULL) {
    e->t0 = begin_ns;
    e->t2 = now;
  }
}

void rcoll_trace_run_end(rcoll_trace_t *t, const rcoll_plan_t *p, rcollResult_t r, int device) {
  rcoll_trace_rec_t *e = trace_add(t, RCOLL_TR_CALL);
  if (e != NULL) {
    e->t0 = t->run_begin;
    e->t2 = rcoll_trace_now();
    e->name = device ? "device plan" : t->label ? t->label : "plan";
    e->algo = p->algo ? p->algo : "?";
    e->a = device ? 0 : t->label_bytes;
    e->b = (uint64_t)p->nsteps;
    e->peer = (int32_t)r;
  }
  if (device)
    return;
  t->label = NULL;
  t->label_bytes = 0;
  t->label_calls = 0;
}

void rcoll_trace_posted(rcoll_trace_t *t, const rcoll_plan_t *p, int step) {
  if (t->stopped || step >= t->nsteps_cap)
    return;
  (void)p;
  t->posted[step] = rcoll_trace_now();
  t->arrived[step] = 0;
}

void rcoll_trace_arrived(rcoll_trace_t *t, const rcoll_plan_t *p, int step) {
  (void)p;
  if (!t->stopped && step < t->nsteps_cap)
    t->arrived[step] = rcoll_trace_now();
}

void rcoll_trace_done(rcoll_trace_t *t, const rcoll_plan_t *p, int step) {
  if (t->stopped || step >= t->nsteps_cap)
    return;
  const rcoll_step_t *st = &p->steps[step];
  rcoll_trace_rec_t *e = trace_add(t, RCOLL_TR_STEP);
  if (e == NULL)
    return;
  e->t0 = t->posted[step];
  e->t1 = t->arrived[step];
  e->t2 = rcoll_trace_now();
  e->a = st->seq;
  e->b = st->bytes;
  e->peer = st->peer;
  e->step = step;
  e->kind = st->kind;
  e->flags = st->flags;
  e->join = st->kind == RCOLL_STEP_COPY && (st->src == NULL || st->src == st->dst);
}

void rcoll_trace_net_wait(rcoll_trace_t *t, int64_t begin_ns, int conns) {
  rcoll_trace_rec_t *e = trace_add(t, RCOLL_TR_NET_WAIT);
  if (e != NULL) {
    e->t0 = begin_ns;
    e->t2 = rcoll_trace_now();
    e->a = (uint64_t)conns;
  }
}

void rcoll_trace_idle(rcoll_trace_t *t, int64_t begin_ns, int64_t passes, int64_t sleeps) {
  rcoll_trace_rec_t *e = trace_add(t, RCOLL_TR_IDLE);
  if (e != NULL) {
    e->t0 = begin_ns;
    e->t2 = rcoll_trace_now();
    e->a = (uint64_t)passes;
    e->b = (uint64_t)sleeps;
  }
}
