/* The flight recorder's ring (flight_recorder.h). Entries are indexed by
 * call id modulo the ring's size; a call's entry is written when it is
 * planned, when its plan starts and ends, and when the engine waits long. */
#include "flight_recorder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "clock.h"
#include "comm.h"
#include "log.h"

#define RELAXED memory_order_relaxed
#define SET(field, v) atomic_store_explicit(&(field), (v), RELAXED)

void rcoll_fr_open(struct rcollComm *c) {
  uint64_t n = c->settings.fr_entries > 0 ? (uint64_t)c->settings.fr_entries : 0;
  if (n == 0)
    return;
  uint64_t cap = 1;
  while (cap < n)
    cap <<= 1;
  rcoll_fr_t *fr = calloc(1, sizeof *fr);
  rcoll_fr_entry_t *ring = fr != NULL ? calloc(cap, sizeof *ring) : NULL;
  if (ring == NULL) {
    free(fr);
    RCOLL_WARN("rank %d: no memory for the flight recorder (RCOLL_FR_ENTRIES=%llu); going without",
               c->rank, (unsigned long long)n);
    return;
  }
  fr->ring = ring;
  fr->n = n;
  fr->mask = cap - 1;
  SET(fr->next_id, 1);
  fr->comm = c;
  snprintf(fr->host, sizeof fr->host, "%s",
           c->bootstrap ? rcoll_bootstrap_host(c->bootstrap, c->rank) : "?");
  c->fr = fr;
  rcoll_fr_register(fr);
}

void rcoll_fr_close(struct rcollComm *c) {
  if (c->fr == NULL)
    return;
  rcoll_fr_unregister(c->fr); /* waits for a dump in progress */
  free(c->fr->ring);
  free(c->fr);
  c->fr = NULL;
}

static rcoll_fr_entry_t *fr_entry(rcoll_fr_t *fr, uint64_t id) {
  rcoll_fr_entry_t *e = rcoll_fr_slot(fr, id);
  return atomic_load_explicit(&e->id, RELAXED) == id ? e : NULL;
}

uint64_t rcoll_fr_post(struct rcollComm *c, const rcoll_call_t *call) {
  rcoll_fr_t *fr = c->fr;
  if (fr == NULL)
    return 0;
  uint64_t id = atomic_load_explicit(&fr->next_id, RELAXED);
  SET(fr->next_id, id + 1);
  rcoll_fr_entry_t *e = rcoll_fr_slot(fr, id);
  const rcoll_fp_t *fp = call->fp;
  SET(e->id, id);
  SET(e->seq, fp->seq);
  SET(e->count, fp->count);
  SET(e->kind, fp->kind);
  SET(e->dtype, fp->dtype);
  SET(e->op, fp->op);
  SET(e->root, fp->root);
  SET(e->algo, c->plan.algo);
  SET(e->device, call->device);
  SET(e->state, call->device ? RCOLL_FR_DEVICE : RCOLL_FR_POSTED);
  SET(e->result, rcollSuccess);
  SET(e->start_us, 0);
  SET(e->end_us, 0);
  SET(e->steps, call->nsteps);
  SET(e->steps_done, 0);
  SET(e->wait_peer, -1);
  return id;
}

void rcoll_fr_set_state(struct rcollComm *c, uint64_t id, int state, rcollResult_t r) {
  rcoll_fr_entry_t *e = c->fr != NULL && id != 0 ? fr_entry(c->fr, id) : NULL;
  if (e == NULL)
    return;
  SET(e->state, state);
  SET(e->result, (int)r);
}

void rcoll_fr_run_begin(struct rcollComm *c, int64_t now_us) {
  rcoll_fr_t *fr = c->fr;
  if (fr == NULL)
    return;
  for (int i = 0; i < c->ncalls; i++) {
    rcoll_fr_entry_t *e = c->calls[i].fr_id ? fr_entry(fr, c->calls[i].fr_id) : NULL;
    if (e == NULL || c->calls[i].device)
      continue;
    SET(e->state, RCOLL_FR_RUNNING);
    SET(e->start_us, now_us);
  }
}

void rcoll_fr_run_end(struct rcollComm *c, rcollResult_t r) {
  rcoll_fr_t *fr = c->fr;
  if (fr == NULL)
    return;
  int64_t now = rcoll_now_coarse_us();
  for (int i = 0; i < c->ncalls; i++) {
    rcoll_fr_entry_t *e = c->calls[i].fr_id ? fr_entry(fr, c->calls[i].fr_id) : NULL;
    if (e == NULL || c->calls[i].device)
      continue;
    SET(e->end_us, now);
    SET(e->result, (int)r);
    if (r == rcollSuccess) {
      SET(e->steps_done, c->calls[i].nsteps);
      SET(e->wait_peer, -1);
    }
    SET(e->state, r == rcollSuccess ? RCOLL_FR_DONE : RCOLL_FR_FAILED);
  }
  fr->waiting = 0;
}

void rcoll_fr_waiting(struct rcollComm *c, int step) {
  rcoll_call_progress_t pr;
  const rcoll_call_t *call = rcoll_call_progress(c, step, &pr);
  rcoll_fr_entry_t *e = c->fr != NULL && call != NULL && call->fr_id ? fr_entry(c->fr, call->fr_id) : NULL;
  if (e == NULL)
    return;
  SET(e->steps, pr.steps);
  SET(e->steps_done, pr.steps_done);
  SET(e->wait_sending, pr.sending);
  SET(e->msgs, pr.msgs);
  SET(e->msgs_done, pr.msgs_done);
  SET(e->wait_peer, pr.peer);
  c->fr->waiting = 1;
}

void rcoll_fr_moving(struct rcollComm *c) {
  if (c->fr == NULL || !c->fr->waiting)
    return;
  c->fr->waiting = 0;
  for (int i = 0; i < c->ncalls; i++) {
    rcoll_fr_entry_t *e = c->calls[i].fr_id ? fr_entry(c->fr, c->calls[i].fr_id) : NULL;
    if (e != NULL)
      SET(e->wait_peer, -1);
  }
}
