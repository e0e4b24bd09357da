/* Algorithms: each one plans a collective into a rcoll_plan_t (see plan.h).
 *
 * One algorithm per file in algorithms/, and nothing else to edit: a file
 * defines its descriptor with RCOLL_ALGORITHM(id) = {...}, and the build
 * gathers every descriptor of the files of algorithms/ into one table
 * (scripts/gen-algorithms.sh writes it), which the tuner, the RCOLL_ALGO
 * parser, bench/rcoll_info, bench/rcoll_tune, bench/rcoll_sched and the
 * plan tests iterate over. docs/architecture.md has the steps.
 *
 * Arguments were validated at the public entry; count may be 0 (then
 * nothing is planned). Buffers are host pointers; sendbuff may equal
 * recvbuff (in-place). */
#ifndef RCOLL_ALGO_H
#define RCOLL_ALGO_H

#include <stddef.h>

#include "plan.h"
#include "rcoll.h"

typedef enum rcoll_coll_kind {
  RCOLL_COLL_ALLREDUCE = 0,
  RCOLL_COLL_BROADCAST,
  RCOLL_COLL_REDUCE,
  RCOLL_COLL_ALLGATHER,
  RCOLL_COLL_REDUCE_SCATTER,
  RCOLL_COLL_SEND,
  RCOLL_COLL_RECV,
  /* Appended, so that the kinds above keep their numbers. */
  RCOLL_COLL_ALLTOALL,
  RCOLL_COLL_GATHER,
  RCOLL_COLL_SCATTER,
  RCOLL_COLL_NKINDS
} rcoll_coll_kind_t;

/* "allreduce", "broadcast", ... ("invalid" out of range). */
const char *rcoll_coll_name(int coll);
/* Whether the collective reduces (RCOLL_DETERMINISTIC applies to it). */
int rcoll_coll_reduces(int coll);
/* Whether it is a send or a receive rather than a collective. */
int rcoll_coll_is_p2p(int coll);
/* Whether count is one rank's block, so that the call's vector (the
 * tuner's bytes, nccl-tests' size) is n blocks: all-gather,
 * reduce-scatter, all-to-all, gather and scatter. */
int rcoll_coll_per_rank(int coll);
/* Whether it has a root (broadcast, reduce, gather, scatter). */
int rcoll_coll_rooted(int coll);

typedef struct rcoll_coll_args {
  const void *sendbuff;
  void *recvbuff;
  size_t count;  /* allreduce/bcast/reduce: elements; allgather: per-rank sendcount;
                    reduce_scatter: per-rank recvcount; send/recv: elements;
                    alltoall: elements to and from each rank; gather, scatter:
                    elements of each rank's block */
  rcollDataType_t dtype;
  rcollRedOp_t op;
  int root;      /* broadcast/reduce/gather/scatter root, or send/recv peer */
  int rank;
  int nranks;
} rcoll_coll_args_t;

struct rcoll_tuner;
struct rcoll_topo;
typedef void (*rcoll_planner_t)(rcoll_plan_t *, const rcoll_coll_args_t *);

/* What one rank moves in a call by the algorithm's textbook formula, for a
 * vector that splits evenly (the plans' totals then match it exactly;
 * uneven splits round each message by less than an element).
 * tests/test_sched.c holds every algorithm's plans to its formula, and
 * bench/rcoll_sched prints both for students to compare. */
typedef struct rcoll_traffic {
  double sent, received; /* bytes */
  double reduced;        /* elements received and reduced into a result */
  const char *formula;   /* the formula in words, e.g. "2(n-1)/n S each way" */
} rcoll_traffic_t;
typedef void (*rcoll_traffic_fn_t)(const rcoll_coll_args_t *a, const struct rcoll_topo *topo,
                                   rcoll_traffic_t *out);

enum rcoll_algo_flags {
  /* Reduces every element in rank order, ((x0 op x1) op x2) op ...,
   * whatever the chunking or placement: RCOLL_DETERMINISTIC=1 uses only
   * these, and the automatic choice never picks one (they are slower). */
  RCOLL_ALGO_DETERMINISTIC = 1,
  /* The collective's choice when RCOLL_ALGO allows none of its algorithms. */
  RCOLL_ALGO_FALLBACK = 2,
  /* The only way to do the collective (point to point): always allowed,
   * not named in RCOLL_ALGO. */
  RCOLL_ALGO_ONLY = 4,
  /* Plans from the placement of ranks on nodes (p->topo): the plan tests
   * sweep every placement for it, not two. */
  RCOLL_ALGO_TOPOLOGY = 8,
  /* With RCOLL_ALGO_DETERMINISTIC: fast enough where its cost says so, so
   * the automatic choice considers it too. */
  RCOLL_ALGO_AUTO = 16,
};

/* What an algorithm file declares about itself. Algorithms of different
 * collectives that share a name ("ring" for all-reduce, all-gather and
 * reduce-scatter) are one family, which RCOLL_ALGO names. */
typedef struct rcoll_algorithm {
  const char *name;       /* lower case, as RCOLL_ALGO spells it */
  rcoll_coll_kind_t coll; /* the collective it plans */
  const char *summary;    /* one line for bench/rcoll_info */
  rcoll_planner_t plan;
  /* Predicted microseconds for `bytes` (the whole vector: count x type
   * size, or n blocks for all-gather and reduce-scatter) cut into chunks of
   * `chunk`, on the links and placement the tuner models (tune_cost.h). */
  double (*cost)(const struct rcoll_tuner *t, double bytes, size_t chunk);
  /* Whether it runs as itself on this placement (NULL: always). */
  int (*applies)(const struct rcoll_tuner *t);
  /* Its per-rank traffic by formula (a: this rank's call as planned;
   * topo: the placement, for topology-aware algorithms). Every algorithm
   * brings one: the tests check its plans against it. */
  rcoll_traffic_fn_t traffic;
  unsigned flags;  /* rcoll_algo_flags */
  /* Near ties in predicted time go to the lower tie_order: the simpler or
   * better-measured algorithm (tuner.c says which measurements). */
  int tie_order;
} rcoll_algorithm_t;

/* Building blocks of the formulas: S, the vector's bytes (a->count x the
 * type size: a block for all-gather and reduce-scatter), and a result. */
double rcoll_traffic_bytes(const rcoll_coll_args_t *a);
void rcoll_traffic_set(rcoll_traffic_t *out, double sent, double received, double reduced,
                       const char *formula);

/* Defines the descriptor of an algorithm file: RCOLL_ALGORITHM(allreduce_ring)
 * = {...}. The build's table lists it by this line, which must start the line. */
#define RCOLL_ALGORITHM(id) const rcoll_algorithm_t rcoll_algorithm_##id

/* The generated table (build/gen/algorithms.c), NULL-terminated, in the
 * order of the files' names. */
extern const rcoll_algorithm_t *const rcoll_algorithms[];

/* Families: every distinct name of the table, numbered in the order of
 * first appearance (the same on every rank, which run one build). The
 * tuner's bit masks and choices are family numbers. */
int rcoll_algo_family_count(void);
const char *rcoll_algo_name(int family);            /* "invalid" out of range */
int rcoll_algo_from_name(const char *name, size_t len); /* case ignored; -1 when unknown */
/* The family's algorithm for a collective, NULL when it has none. */
const rcoll_algorithm_t *rcoll_algorithm_find(int coll, int family);
/* Its family number (rcoll_algo_from_name of its name). */
int rcoll_algorithm_family(const rcoll_algorithm_t *a);

/* Parses an RCOLL_ALGO value into a bit per family: a comma list of names,
 * or with a leading ^ every algorithm but those listed; empty allows all
 * but the deterministic ones; ONLY families are always allowed. Case is
 * ignored; an unknown name is an error listing the known ones. */
rcollResult_t rcoll_algo_parse(const char *text, unsigned *allowed);
/* The families the automatic choice considers (no deterministic ones). */
unsigned rcoll_algo_auto_mask(void);
/* "ring, tree, ...": the names RCOLL_ALGO takes, into buf. */
const char *rcoll_algo_list(char *buf, size_t len);

#endif
