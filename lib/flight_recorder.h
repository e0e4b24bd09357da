/* The flight recorder: every communicator keeps its last RCOLL_FR_ENTRIES
 * calls (kind, number, size, algorithm, state, how far the call got, times)
 * in a ring, always on and cheap (a few plain stores per call, one clock
 * read). The ring is dumped as text when a call fails (a timeout, a peer
 * that died, a mismatch: the comm's async error), on rcollCommAbort, and on
 * SIGUSR1, to RCOLL_FR_DUMP_FILE or the log; scripts/rcoll-fr-analyze reads
 * every rank's dump and says which rank is behind, in which call
 * (docs/faults.md).
 *
 * The ring is written by the threads that make and run the calls and read
 * by the SIGUSR1 dumper thread at any time, so every field is atomic
 * (relaxed): a dump taken mid-call may mix two moments of an entry, never
 * read memory being freed. */
#ifndef RCOLL_FLIGHT_RECORDER_H
#define RCOLL_FLIGHT_RECORDER_H

#include <stdatomic.h>
#include <stdint.h>

#include "rcoll.h"

struct rcollComm;
struct rcoll_call;

enum rcoll_fr_state {
  RCOLL_FR_EMPTY = 0,
  RCOLL_FR_POSTED,    /* planned inside an open group */
  RCOLL_FR_RUNNING,   /* the engine is running it */
  RCOLL_FR_DONE,
  RCOLL_FR_FAILED,
  RCOLL_FR_DISCARDED, /* its group was refused before it ran */
  RCOLL_FR_DEVICE,    /* queued for the CUDA proxy (not followed further) */
};

/* Opens the comm's recorder (RCOLL_FR_ENTRIES; 0: none) and registers the
 * comm for SIGUSR1 dumps. A failure only leaves the comm without one. */
void rcoll_fr_open(struct rcollComm *c);
void rcoll_fr_close(struct rcollComm *c);

/* A call was planned: its entry, numbered (0 when the recorder is off). */
uint64_t rcoll_fr_post(struct rcollComm *c, const struct rcoll_call *call);
void rcoll_fr_set_state(struct rcollComm *c, uint64_t id, int state, rcollResult_t r);
/* The engine starts (at now_us) and ends the comm's plan: every call in it. */
void rcoll_fr_run_begin(struct rcollComm *c, int64_t now_us);
void rcoll_fr_run_end(struct rcollComm *c, rcollResult_t r);
/* The engine has waited long on step `step`: records how far its call got. */
void rcoll_fr_waiting(struct rcollComm *c, int step);
/* The engine moved again after rcoll_fr_waiting: the wait is over. */
void rcoll_fr_moving(struct rcollComm *c);

/* Writes the ring (fr_dump.c): a header line with rank, host, pid, comm
 * and reason, then one line per entry, oldest first. */
void rcoll_fr_dump(struct rcollComm *c, const char *reason);

/* Internals shared by flight_recorder.c and fr_dump.c. */
typedef struct rcoll_fr_entry {
  _Atomic uint64_t id; /* which call (0: empty); stored first when the slot is reused */
  _Atomic uint64_t seq, count, bytes;
  _Atomic int kind, dtype, op, root, state, result, device;
  _Atomic(const char *) algo; /* static strings only */
  _Atomic int64_t start_us, end_us;
  /* How far it got (call.h's rcoll_call_progress), when the engine last waited long. */
  _Atomic int steps, steps_done, wait_peer, wait_sending, msgs, msgs_done;
} rcoll_fr_entry_t;

typedef struct rcoll_fr {
  rcoll_fr_entry_t *ring;
  uint64_t n;        /* entries (RCOLL_FR_ENTRIES) */
  uint64_t mask;     /* the ring holds mask + 1 >= n entries: a power of two,
                        so that finding a call's entry takes no division */
  _Atomic uint64_t next_id; /* the next call's id (1, 2, ...); read by the dumper */
  int waiting;       /* rcoll_fr_waiting published a wait not yet over */
  char host[64];
  struct rcoll_fr *next_registered; /* fr_dump.c's list, under its lock */
  struct rcollComm *comm;
} rcoll_fr_t;

/* Where call `id` is kept (if it is still there: compare the entry's id). */
static inline rcoll_fr_entry_t *rcoll_fr_slot(const rcoll_fr_t *fr, uint64_t id) {
  return &fr->ring[id & fr->mask];
}

void rcoll_fr_register(rcoll_fr_t *fr);
void rcoll_fr_unregister(rcoll_fr_t *fr);

#endif
