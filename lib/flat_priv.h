/* The flat board's layout in its shared segment, private to the files
 * that implement it: flat.c (the protocol), flat_open.c (creation) and
 * flat_balance.c (the spread over cores). flat.h is the interface.
 *
 * A rank's area is its control area (FLAT_CTL), then its two slots (call k
 * uses slot k & 1). A slot's first line holds the call number, the owner's
 * sleeping flag, the call's description, its count and the first 40 bytes
 * of its vector; larger vectors continue in the lines after it. */
#ifndef RCOLL_FLAT_PRIV_H
#define RCOLL_FLAT_PRIV_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "call.h"
#include "flat.h"

#define FLAT_LINE 64
#define FLAT_CLOCK_EVERY 8  /* passes between readings of the clock, as the engine's spin; the stats' long waits */

/* A rank's control area; only its owner writes it, except `word`. */
typedef struct flat_ctl {
  _Atomic uint64_t done;      /* board calls up to this number are read: their slots are free */
  _Atomic uint64_t cur_seq;   /* the collective it last entered; 0 while cur_* change */
  _Atomic uint64_t cur_count;
  _Atomic uint32_t cur_desc;  /* flat_desc() of that call, FLAT_ON_BOARD if it runs here */
  _Atomic uint32_t word;      /* futex word: a peer that finds the owner asleep bumps it */
  _Atomic uint32_t closed;    /* the owner destroyed or aborted its communicator */
  _Atomic int32_t cur_root;   /* that call's root, RCOLL_FP_NONE without one */
  int32_t pid;
  _Atomic int32_t cpu;        /* the core its last call started on, plus one; 0: none yet */
  uint64_t ns_key;            /* pidns.h: the pid means something here only if this is ours */
  _Atomic uint64_t cur_algo[RCOLL_FP_ALGO / 8 + 1]; /* that call's algorithm's name (rcoll_fp_t.algo) */
} flat_ctl_t;
#define FLAT_CTL 128 /* two lines */
_Static_assert(sizeof(flat_ctl_t) <= FLAT_CTL, "a control area is two cache lines");

typedef struct flat_slot {
  _Atomic uint64_t seq;       /* the call whose vector this holds; stored last */
  _Atomic uint32_t sleeping;  /* the owner sleeps on its `word` waiting in this call */
  uint32_t desc;
  uint64_t count;
  unsigned char data[];       /* 40 bytes in this line, the rest after it */
} flat_slot_t;
#define FLAT_SLOT_HDR 24
_Static_assert(offsetof(flat_slot_t, data) == FLAT_SLOT_HDR, "the slot header is 24 bytes");

#define FLAT_ON_BOARD (1u << 31)
#define FLAT_ALGO_NAME "flat" /* the algorithm's name, as fingerprints and the tuner give it */

struct rcoll_flat {
  unsigned char *base;
  size_t map_bytes, max, slot_bytes, stride;
  uint64_t ns_key;
  uint64_t *known_done; /* per peer: a `done` it is known to have reached */
  int *cpus;            /* per rank: its core, as rcoll_flat_balance last read it */
  uint64_t balance_tick;
  const rcoll_algorithm_t *algo; /* algorithms/allreduce_flat.c, as the tuner returns it */
  rcoll_fp_t fp;        /* the running board call's fingerprint (call.h) */
  rcoll_flat_stats_t stats;
};

static inline flat_ctl_t *flat_ctl(const struct rcoll_flat *f, int rank) {
  return (flat_ctl_t *)(f->base + (size_t)rank * f->stride);
}

static inline flat_slot_t *flat_slot(const struct rcoll_flat *f, int rank, uint64_t seq) {
  return (flat_slot_t *)(f->base + (size_t)rank * f->stride + FLAT_CTL + (seq & 1) * f->slot_bytes);
}

#endif
