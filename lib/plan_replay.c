/* The replay of plans in time (plan_replay.h): a list schedule over the
 * graph of every rank's steps, where an edge is a dependency, the order of
 * sends on a connection, or a message from its send to its receive. Steps
 * are taken in the order they become ready (a heap by ready time), and
 * each then waits for the resources it needs: its rank's core, the link,
 * the node's port. */
#include "plan_replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"
#include "tune_cost.h"

#define MAXR RCOLL_SIM_MAX_RANKS

typedef struct replay {
  rcoll_replay_t *rp;
  const rcoll_tuner_t *model; /* NULL: unit steps */
  const int *node_of;
  int nsteps;
  const rcoll_step_t **step; /* by step number */
  int *rank, *succ_first, *succ; /* successors by dependency (CSR) */
  int *next_send, *match;        /* next send on the connection; a send's receive */
  int *pending;                  /* what a step still waits for */
  double *ready;
  int *heap, nheap;
  double cpu[MAXR], link_free[MAXR][MAXR], port_free[MAXR];
} replay_t;

int rcoll_step_is_join(const rcoll_step_t *st) {
  return st->kind == RCOLL_STEP_COPY && st->bytes == 0 && st->dst == NULL;
}

/* ------------------------------------------------------------ the heap */

static int heap_less(const replay_t *x, int a, int b) {
  return x->ready[a] < x->ready[b] || (x->ready[a] == x->ready[b] && a < b);
}

static void heap_push(replay_t *x, int g) {
  int i = x->nheap++;
  for (; i > 0 && heap_less(x, g, x->heap[(i - 1) / 2]); i = (i - 1) / 2)
    x->heap[i] = x->heap[(i - 1) / 2];
  x->heap[i] = g;
}

static int heap_pop(replay_t *x) {
  int top = x->heap[0], last = x->heap[--x->nheap], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= x->nheap)
      break;
    if (c + 1 < x->nheap && heap_less(x, x->heap[c + 1], x->heap[c]))
      c++;
    if (!heap_less(x, x->heap[c], last))
      break;
    x->heap[i] = x->heap[c];
    i = c;
  }
  if (x->nheap > 0)
    x->heap[i] = last;
  return top;
}

/* A prerequisite of g is met at time t. */
static void arrive(replay_t *x, int g, double t) {
  x->ready[g] = fmax(x->ready[g], t);
  if (--x->pending[g] == 0)
    heap_push(x, g);
}

/* ------------------------------------------------------------ the graph */

static int fail(replay_t *x, const char *what) {
  snprintf(x->rp->error, sizeof x->rp->error, "%s", what);
  return -1;
}

static int alloc_graph(replay_t *x) {
  size_t n = (size_t)x->nsteps + 1;
  x->step = calloc(n, sizeof *x->step);
  x->rank = calloc(n, sizeof(int));
  x->succ_first = calloc(n + 1, sizeof(int));
  x->succ = calloc(2 * n, sizeof(int));
  x->next_send = malloc(n * sizeof(int));
  x->match = malloc(n * sizeof(int));
  x->pending = calloc(n, sizeof(int));
  x->ready = calloc(n, sizeof(double));
  x->heap = calloc(n, sizeof(int));
  x->rp->start = calloc(n, sizeof(double));
  x->rp->end = calloc(n, sizeof(double));
  if (!x->step || !x->rank || !x->succ_first || !x->succ || !x->next_send || !x->match || !x->pending ||
      !x->ready || !x->heap || !x->rp->start || !x->rp->end)
    return fail(x, "out of memory for the replay");
  memset(x->next_send, 0xff, n * sizeof(int)); /* -1 */
  memset(x->match, 0xff, n * sizeof(int));
  return 0;
}

/* Successor lists: g follows each of its dependencies. */
static void build_deps(replay_t *x) {
  const int *base = x->rp->base;
  for (int g = 0; g < x->nsteps; g++)
    for (int k = 0; k < 2; k++)
      if (x->step[g]->dep[k] != RCOLL_NO_DEP)
        x->succ_first[base[x->rank[g]] + x->step[g]->dep[k] + 1]++;
  for (int g = 0; g < x->nsteps; g++)
    x->succ_first[g + 1] += x->succ_first[g];
  int *fill = x->heap; /* free until the replay starts */
  memcpy(fill, x->succ_first, (size_t)x->nsteps * sizeof(int));
  for (int g = 0; g < x->nsteps; g++)
    for (int k = 0; k < 2; k++)
      if (x->step[g]->dep[k] != RCOLL_NO_DEP) {
        x->succ[fill[base[x->rank[g]] + x->step[g]->dep[k]]++] = g;
        x->pending[g]++;
      }
}

/* The messages of every connection a -> b: how many sends and receives,
 * and the sends in plan order (order[off[a][b] + k] is the k-th). */
typedef struct conns {
  int sends[MAXR][MAXR], recvs[MAXR][MAXR], off[MAXR][MAXR];
  int *order;
} conns_t;

/* Sends leave in plan order per connection: each waits for the previous. */
static void order_sends(replay_t *x, conns_t *c) {
  int n = x->rp->n, last[MAXR][MAXR], fill[MAXR][MAXR] = {{0}};
  memset(last, 0xff, sizeof last);
  for (int g = 0; g < x->nsteps; g++)
    if (x->step[g]->kind == RCOLL_STEP_SEND)
      c->sends[x->rank[g]][x->step[g]->peer]++;
  for (int a = 0, o = 0; a < n; a++)
    for (int b = 0; b < n; b++)
      c->off[a][b] = o, o += c->sends[a][b];
  for (int g = 0; g < x->nsteps; g++) {
    int a = x->rank[g], b = x->step[g]->peer;
    if (x->step[g]->kind != RCOLL_STEP_SEND)
      continue;
    c->order[c->off[a][b] + fill[a][b]++] = g;
    if (last[a][b] >= 0)
      x->next_send[last[a][b]] = g, x->pending[g]++;
    last[a][b] = g;
  }
}

/* The k-th receive of b from a takes the k-th send from a to b (plan.h's
 * matching rule); plans that do not pair up are an error. */
static int match_recvs(replay_t *x, conns_t *c) {
  char *e = x->rp->error;
  size_t len = sizeof x->rp->error;
  for (int g = 0; g < x->nsteps; g++) {
    const rcoll_step_t *st = x->step[g];
    int b = x->rank[g], a = st->peer;
    if (st->kind != RCOLL_STEP_RECV && st->kind != RCOLL_STEP_RECV_REDUCE)
      continue;
    if (c->recvs[a][b] >= c->sends[a][b])
      return snprintf(e, len, "rank %d receives more messages from %d than it sends", b, a), -1;
    int s = c->order[c->off[a][b] + c->recvs[a][b]++];
    if (x->step[s]->bytes != st->bytes)
      return snprintf(e, len, "%d -> %d: a send of %zu bytes meets a receive of %zu", a, b,
                      x->step[s]->bytes, st->bytes), -1;
    x->match[s] = g;
    x->pending[g]++;
  }
  for (int a = 0; a < x->rp->n; a++)
    for (int b = 0; b < x->rp->n; b++)
      if (c->recvs[a][b] != c->sends[a][b])
        return snprintf(e, len, "rank %d sends %d messages to %d, which receives %d", a, c->sends[a][b], b,
                        c->recvs[a][b]), -1;
  return 0;
}

static int build_messages(replay_t *x) {
  conns_t *c = calloc(1, sizeof *c);
  if (c == NULL || (c->order = calloc((size_t)x->nsteps + 1, sizeof(int))) == NULL) {
    free(c);
    return fail(x, "out of memory for the replay");
  }
  order_sends(x, c);
  int rc = match_recvs(x, c);
  free(c->order);
  free(c);
  return rc;
}

/* ------------------------------------------------------------ the schedule */

/* The link between two ranks as the tuner sees it; nothing in unit steps. */
static rcoll_cost_link_t link_between(const replay_t *x, int a, int b) {
  if (x->model == NULL)
    return (rcoll_cost_link_t){0, 0, 0, 0};
  return rcoll_cost_link(x->model, x->node_of[a] != x->node_of[b], 1);
}

/* The time a step other than a send holds its rank's core. */
static double core_time(const replay_t *x, const rcoll_step_t *st) {
  if (x->model == NULL)
    return 1;
  if (st->kind == RCOLL_STEP_RECV) /* the data lands without the core (sends pay the overhead) */
    return 0;
  return (double)st->bytes * rcoll_cost_beta(x->model->prm.reduce_gbps);
}

/* A send: its overhead on the core, then the wire when the link (and, out
 * of the node, the node's port) is free; the receive gets it alpha later. */
static void send_step(replay_t *x, int g, double start) {
  const rcoll_step_t *st = x->step[g];
  int a = x->rank[g], b = st->peer, cross = x->node_of[a] != x->node_of[b];
  rcoll_cost_link_t l = link_between(x, a, b);
  double posted = start + (x->model ? rcoll_cost_msg_us(l, (double)st->bytes) : 1);
  double wire = fmax(posted, x->link_free[a][b]);
  if (cross)
    wire = fmax(wire, x->port_free[x->node_of[a]]);
  double sent = wire + (double)st->bytes * l.b;
  x->cpu[a] = posted;
  x->link_free[a][b] = sent;
  if (cross)
    x->port_free[x->node_of[a]] = sent;
  x->rp->end[g] = x->model ? sent : posted;
  if (x->next_send[g] >= 0)
    arrive(x, x->next_send[g], start);
  arrive(x, x->match[g], x->rp->end[g] + l.lat);
}

static void run_step(replay_t *x, int g) {
  const rcoll_step_t *st = x->step[g];
  int r = x->rank[g];
  double start = x->ready[g];
  if (rcoll_step_is_join(st)) {
    x->rp->start[g] = x->rp->end[g] = start;
  } else if (st->kind == RCOLL_STEP_SEND) {
    x->rp->start[g] = start = fmax(start, x->cpu[r]);
    send_step(x, g, start);
  } else {
    double busy = core_time(x, st);
    if (busy > 0)
      start = fmax(start, x->cpu[r]);
    x->rp->start[g] = start;
    x->rp->end[g] = start + busy;
    if (busy > 0)
      x->cpu[r] = x->rp->end[g];
  }
  for (int k = x->succ_first[g]; k < x->succ_first[g + 1]; k++)
    arrive(x, x->succ[k], x->rp->end[g]);
}

static int schedule(replay_t *x) {
  int done = 0;
  for (int g = 0; g < x->nsteps; g++)
    if (x->pending[g] == 0)
      heap_push(x, g);
  while (x->nheap > 0) {
    int g = heap_pop(x);
    run_step(x, g);
    double *e = &x->rp->rank_end[x->rank[g]];
    *e = fmax(*e, x->rp->end[g]);
    done++;
  }
  if (done < x->nsteps)
    return fail(x, "the plans wait for each other in a cycle: some steps never become ready");
  for (int r = 0; r < x->rp->n; r++)
    x->rp->total = fmax(x->rp->total, x->rp->rank_end[r]);
  return 0;
}

int rcoll_replay_run(rcoll_replay_t *rp, rcoll_plan_t *const *plans, int n, const rcoll_tuner_t *model) {
  static const int one_node[MAXR];
  memset(rp, 0, sizeof *rp);
  replay_t x = {.rp = rp, .model = model, .node_of = one_node};
  if (n < 1 || n > MAXR)
    return fail(&x, "the replay takes 1 to 16 ranks");
  rp->n = n;
  for (int r = 0; r < n; r++)
    rp->base[r + 1] = rp->base[r] + plans[r]->nsteps;
  x.nsteps = rp->base[n];
  if (plans[0]->topo != NULL && plans[0]->topo->node_of != NULL && plans[0]->topo->nranks == n)
    x.node_of = plans[0]->topo->node_of;
  int rc = alloc_graph(&x);
  for (int r = 0; r < n && rc == 0; r++)
    for (int i = 0; i < plans[r]->nsteps; i++) {
      x.step[rp->base[r] + i] = &plans[r]->steps[i];
      x.rank[rp->base[r] + i] = r;
    }
  if (rc == 0) {
    build_deps(&x);
    rc = build_messages(&x);
  }
  if (rc == 0)
    rc = schedule(&x);
  free(x.step), free(x.rank), free(x.succ_first), free(x.succ);
  free(x.next_send), free(x.match), free(x.pending), free(x.ready), free(x.heap);
  return rc;
}

void rcoll_replay_free(rcoll_replay_t *rp) {
  free(rp->start);
  free(rp->end);
  rp->start = rp->end = NULL;
}
