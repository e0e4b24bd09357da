/* The in-memory plan executor (plan_sim.h). */
#include "plan_sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"

struct rcoll_sim_msg {
  rcoll_step_t *send; /* zero buffering: the sender's step, still posted */
  void *copy;         /* buffered: the data, copied when the send was posted */
  size_t bytes;
  struct rcoll_sim_msg *next;
};
typedef struct rcoll_sim_msg sim_msg_t;

static unsigned sim_rand(rcoll_sim_t *s) {
  s->seed = s->seed * 1103515245u + 12345u;
  return (s->seed >> 16) & 0x7fff;
}

static int sim_deps_done(const rcoll_plan_t *p, const rcoll_step_t *st) {
  for (int k = 0; k < 2; k++)
    if (st->dep[k] != RCOLL_NO_DEP && p->steps[st->dep[k]].state != RCOLL_STEP_DONE)
      return 0;
  return 1;
}

static void sim_finish(const rcoll_sim_t *s, rcoll_step_t *st) {
  if (st->flags & RCOLL_STEP_FINISH) {
    rcollDataType_t t = (rcollDataType_t)st->dtype;
    rcoll_reduce_finish(st->dst, st->bytes / rcoll_type_size(t), t, (rcollRedOp_t)st->op, s->n);
  }
}

static void sim_push(rcoll_sim_t *s, int from, int to, sim_msg_t *m) {
  if (s->tail[from][to] != NULL)
    s->tail[from][to]->next = m;
  else
    s->head[from][to] = m;
  s->tail[from][to] = m;
}

/* A board step writes its vector (a copy: in place, its rank's result may
 * overwrite it before the others have read it). */
static int sim_board_post(rcoll_sim_t *s, int r, rcoll_step_t *st) {
  int k = s->board_posted[r];
  void *vec = k < RCOLL_SIM_BOARD ? malloc(st->bytes + 1) : NULL;
  if (vec == NULL) {
    snprintf(s->error, sizeof s->error, "rank %d: board step %d: no room", r, k);
    return 0;
  }
  memcpy(vec, st->src, st->bytes);
  s->board[r][k].step = st;
  s->board[r][k].vec = vec;
  s->board_posted[r]++;
  st->state = RCOLL_STEP_POSTED;
  return 1;
}

/* It completes once every rank wrote its vector for the same board call,
 * reducing them all in rank order. */
static int sim_board_complete(rcoll_sim_t *s, int r, rcoll_step_t *st) {
  int k = s->board_done[r];
  if (k >= s->board_posted[r] || s->board[r][k].step != st)
    return 0;
  for (int q = 0; q < s->n; q++)
    if (s->board_posted[q] <= k)
      return 0;
  for (int q = 0; q < s->n; q++)
    if (s->board[q][k].step->bytes != st->bytes) {
      snprintf(s->error, sizeof s->error, "board call %d: rank %d wrote %zu bytes, rank %d %zu", k, q,
               s->board[q][k].step->bytes, r, st->bytes);
      return 0;
    }
  rcollDataType_t t = (rcollDataType_t)st->dtype;
  size_t count = st->bytes / rcoll_type_size(t);
  memcpy(st->dst, s->board[0][k].vec, st->bytes);
  for (int q = 1; q < s->n; q++)
    rcoll_reduce(st->dst, st->dst, s->board[q][k].vec, count, t, (rcollRedOp_t)st->op);
  rcoll_reduce_finish(st->dst, count, t, (rcollRedOp_t)st->op, s->n);
  s->board_done[r]++;
  st->state = RCOLL_STEP_DONE;
  return 1;
}

static int sim_post(rcoll_sim_t *s, int r, rcoll_step_t *st) {
  if (!sim_deps_done(s->plans[r], st))
    return 0;
  if (st->flags & RCOLL_STEP_BOARD)
    return sim_board_post(s, r, st);
  if (st->kind == RCOLL_STEP_COPY) {
    if (st->src != NULL && st->src != st->dst && st->bytes > 0)
      memmove(st->dst, st->src, st->bytes);
    sim_finish(s, st);
    st->state = RCOLL_STEP_DONE;
    return 1;
  }
  int q = st->peer;
  if (st->kind == RCOLL_STEP_SEND) {
    if (st->seq != s->send_posted[r][q])
      return 0;
    sim_msg_t *m = calloc(1, sizeof *m);
    if (m != NULL && !s->zero_buffer && (m->copy = malloc(st->bytes + 1)) == NULL) {
      free(m);
      m = NULL;
    }
    if (m == NULL) {
      snprintf(s->error, sizeof s->error, "rank %d: out of memory for a message to %d", r, q);
      return 0;
    }
    m->bytes = st->bytes;
    if (s->zero_buffer) {
      m->send = st;
      st->state = RCOLL_STEP_POSTED;
    } else {
      memcpy(m->copy, st->src, st->bytes);
      st->state = RCOLL_STEP_DONE;
    }
    sim_push(s, r, q, m);
    s->send_posted[r][q]++;
    return 1;
  }
  if (st->seq != s->recv_posted[r][q])
    return 0;
  if (st->kind == RCOLL_STEP_RECV_REDUCE) {
    if (s->slots_used[r][q] >= s->nslots)
      return 0;
    s->slots_used[r][q]++;
  }
  s->recv_posted[r][q]++;
  st->state = RCOLL_STEP_POSTED;
  return 1;
}

/* Completes a posted receive if the next message from its peer is there. */
static int sim_complete(rcoll_sim_t *s, int r, rcoll_step_t *st) {
  if (st->flags & RCOLL_STEP_BOARD)
    return sim_board_complete(s, r, st);
  int q = st->peer;
  sim_msg_t *m = s->head[q][r];
  if (st->seq != s->recv_done[r][q] || m == NULL)
    return 0;
  if (m->bytes != st->bytes) {
    snprintf(s->error, sizeof s->error, "rank %d expected %zu bytes from %d, message %llu has %zu",
             r, st->bytes, q, (unsigned long long)st->seq, m->bytes);
    return 0;
  }
  void *staged = NULL; /* like the engine's staging slot */
  if (st->kind == RCOLL_STEP_RECV_REDUCE && (staged = malloc(st->bytes + 1)) == NULL) {
    snprintf(s->error, sizeof s->error, "rank %d: out of memory for a staging slot", r);
    return 0; /* the message stays queued, and is freed with the others */
  }
  s->head[q][r] = m->next;
  if (m->next == NULL)
    s->tail[q][r] = NULL;
  const void *data = m->send != NULL ? m->send->src : m->copy;
  if (st->kind == RCOLL_STEP_RECV) {
    memcpy(st->dst, data, st->bytes);
  } else {
    memcpy(staged, data, st->bytes);
    rcollDataType_t t = (rcollDataType_t)st->dtype;
    rcoll_reduce(st->dst, st->src, staged, st->bytes / rcoll_type_size(t), t, (rcollRedOp_t)st->op);
    free(staged);
    sim_finish(s, st);
    s->slots_used[r][q]--;
  }
  if (m->send != NULL)
    m->send->state = RCOLL_STEP_DONE;
  free(m->copy);
  free(m);
  s->recv_done[r][q]++;
  st->state = RCOLL_STEP_DONE;
  return 1;
}

/* One engine pass over rank r's window; skip_pct of steps are passed over. */
static int sim_pass(rcoll_sim_t *s, int r, unsigned skip_pct) {
  rcoll_plan_t *p = s->plans[r];
  int moved = 0, seen = 0;
  for (int i = p->head; i < p->nsteps && seen < RCOLL_SIM_WINDOW; i++) {
    rcoll_step_t *st = &p->steps[i];
    if (st->state == RCOLL_STEP_DONE)
      continue;
    seen++;
    if (skip_pct > 0 && sim_rand(s) % 100 < skip_pct)
      continue;
    if (st->state == RCOLL_STEP_PENDING)
      moved += sim_post(s, r, st);
    if (st->state == RCOLL_STEP_POSTED && st->kind != RCOLL_STEP_SEND)
      moved += sim_complete(s, r, st);
    if (s->error[0])
      return moved;
  }
  while (p->head < p->nsteps && p->steps[p->head].state == RCOLL_STEP_DONE)
    p->head++;
  return moved;
}

static void sim_free_msgs(rcoll_sim_t *s) {
  for (int r = 0; r < s->n; r++)
    for (int k = 0; k < s->board_posted[r]; k++)
      free(s->board[r][k].vec);
  for (int a = 0; a < s->n; a++)
    for (int b = 0; b < s->n; b++)
      while (s->head[a][b] != NULL) {
        sim_msg_t *m = s->head[a][b];
        s->head[a][b] = m->next;
        free(m->copy);
        free(m);
      }
}

int rcoll_sim_run(rcoll_sim_t *s, unsigned skip_pct) {
  int order[RCOLL_SIM_MAX_RANKS];
  for (int r = 0; r < s->n; r++)
    order[r] = r;
  for (;;) {
    for (int r = s->n - 1; r > 0; r--) { /* a fresh shuffled visiting order */
      int k = (int)(sim_rand(s) % (unsigned)(r + 1)), t = order[r];
      order[r] = order[k];
      order[k] = t;
    }
    int moved = 0, busy = 0;
    for (int k = 0; k < s->n && !s->error[0]; k++)
      moved += sim_pass(s, order[k], skip_pct);
    for (int r = 0; r < s->n && !s->error[0] && moved == 0; r++)
      moved += sim_pass(s, r, 0); /* nothing moved: try once more without skipping */
    for (int r = 0; r < s->n; r++)
      busy += s->plans[r]->head < s->plans[r]->nsteps;
    if (s->error[0] || !busy)
      break;
    if (moved == 0) {
      for (int r = 0; r < s->n; r++)
        if (s->plans[r]->head < s->plans[r]->nsteps) {
          const rcoll_step_t *st = &s->plans[r]->steps[s->plans[r]->head];
          snprintf(s->error, sizeof s->error, "deadlock: rank %d stuck at step %d (kind %d, peer %d)",
                   r, s->plans[r]->head, st->kind, st->peer);
          break;
        }
      break;
    }
  }
  sim_free_msgs(s);
  return s->error[0] ? -1 : 0;
}

void rcoll_sim_init(rcoll_sim_t *s, rcoll_plan_t *const *plans, int n, int zero_buffer, int nslots,
                    unsigned seed) {
  memset(s, 0, sizeof *s);
  s->n = n;
  s->zero_buffer = zero_buffer;
  s->nslots = nslots;
  s->seed = seed;
  for (int r = 0; r < n; r++)
    s->plans[r] = plans[r];
}
