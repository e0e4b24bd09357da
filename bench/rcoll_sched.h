/* bench/rcoll_sched: what the tool builds (rcoll_sched.c) and draws
 * (rcoll_sched_svg.c). */
#ifndef RCOLL_BENCH_SCHED_H
#define RCOLL_BENCH_SCHED_H

#include <stddef.h>

#include "algo.h"
#include "plan_replay.h"
#include "plan_world.h"

typedef struct sched {
  const rcoll_algorithm_t *algo;
  int coll, n, nodes, root;
  rcollDataType_t dtype;
  size_t tsz, count;  /* element size; the call's count (per rank for all-gather, reduce-scatter) */
  size_t vector;      /* bytes of the whole vector: count x size, or n blocks of it */
  size_t chunk;       /* the plans' chunk */
  int node_of[RCOLL_WORLD_MAX_RANKS];
  rcoll_world_t world;
  rcoll_replay_t unit;  /* columns for the drawing */
  rcoll_replay_t timed; /* the alpha-beta replay */
  double tuner_us;      /* the tuner's prediction (< 0: none) */
  /* The distinct offsets steps carry data from, ascending, when there are
   * at most SCHED_MAX_PIECES: then each is a band of its own. */
  long long piece[16];
  int npieces; /* 0: more than that; bands are equal slices of the vector */
} sched_t;

#define SCHED_MAX_PIECES 16

/* "send", "recv", "recv-reduce", "copy", "join" or "finish". */
const char *sched_kind(const rcoll_step_t *st);
/* The part of the whole vector step k of rank r carries or writes: its
 * byte offset, -1 for none (a join). Scratch pieces are traced back to
 * the step that filled them. */
long long sched_step_offset(const sched_t *s, int r, int k);
/* The vector is drawn in bands, a colour each: the pieces the messages
 * cut it into (ring segments, tree halves, chunks), or 16 equal slices
 * when there are more. sched_find_pieces finds them, once the plans are made. */
void sched_find_pieces(sched_t *s);
int sched_bands(const sched_t *s);
int sched_band(const sched_t *s, long long offset); /* -1 for none */

/* Writes the picture to path (SVG), and beside it a PNG when rsvg-convert
 * or ImageMagick's convert is found; says on stdout what it wrote. Returns
 * 0, or -1 after printing why to stderr. */
int sched_svg_write(const sched_t *s, const char *path);

#endif
