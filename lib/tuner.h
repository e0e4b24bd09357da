/* The tuner: for each call, picks the algorithm and pipeline chunk with the
 * lowest time predicted by a latency/bandwidth (alpha-beta) model of the
 * communicator's links, within what RCOLL_ALGO and RCOLL_DETERMINISTIC
 * allow.
 *
 * Two link classes are modelled: between ranks of one node (intra) and
 * between nodes (inter), each with a per-message latency alpha and a
 * bandwidth, taken from the transport that serves the class
 * (get_properties: latency_us, speed_mbps) and overridable with
 * RCOLL_TUNE_ALPHA / RCOLL_TUNE_BW; a node's ranks share its inter-node
 * bandwidth. Local reductions cost RCOLL_TUNE_REDUCE_BW. The placement of
 * ranks on nodes decides which steps of each algorithm cross nodes.
 *
 * Every rank must choose the same plan, so the choice depends only on the
 * call (collective, size), the topology and the parameters, and the
 * parameters are agreed at communicator creation: each rank derives its own
 * (transport properties, the inter-node latency measured over the
 * bootstrap ring, settings), then all take the most conservative of every
 * rank's (rcoll_tune_params_agree). */
#ifndef RCOLL_TUNER_H
#define RCOLL_TUNER_H

#include <stddef.h>

#include "algo.h"
#include "config.h"
#include "rcoll.h"
#include "topo.h"

struct rcollComm;

#define RCOLL_TUNE_MAX_STEPS 31 /* recursive halving steps the model tracks */
#define RCOLL_TUNE_CACHE 64     /* recent choices kept */

typedef struct rcoll_tune_link {
  double alpha_us;  /* latency of a message */
  double gbps;      /* GB/s (10^9 bytes per second) */
  double msg_us;    /* overhead of each message over 64 KiB (helper threads, registration) */
  size_t chunk_cap; /* largest chunk worth cutting (0: any): shared memory stays in cache */
  double each_us;   /* overhead of every message, whatever its size (system calls) */
} rcoll_tune_link_t;

/* The parameters a model is built from (rcoll_tuner_setup). */
typedef struct rcoll_tune_params {
  rcoll_tune_link_t intra, inter;
  double reduce_gbps;   /* local reduction throughput */
  size_t max_chunk;     /* the communicator's staging slot: chunks never exceed it */
  unsigned allowed;     /* bit per algorithm family (rcoll_algo_parse) */
  int deterministic;
  int window;           /* receives a connection keeps in flight (staging slots); 0: unbounded */
  int cores_shared;     /* some machine runs more ranks than it has cores */
  double ranks_per_core; /* the most of the communicator's ranks per core of any machine; at most 1: a core each */
  size_t flat_max;      /* the flat board's largest all-reduce (lib/flat.h); 0: no board */
} rcoll_tune_params_t;

typedef struct rcoll_tune_choice {
  int algo;         /* family (algo.h); -1: none */
  size_t chunk;     /* pipeline chunk in bytes, a multiple of 64 */
  double time_us;   /* predicted */
  /* The family's algorithm for the collective asked about (NULL with
   * algo -1), kept so that a call need not look it up again. */
  const rcoll_algorithm_t *desc;
} rcoll_tune_choice_t;

/* A communicator's model: parameters plus what the placement implies for
 * the shapes the algorithms share (ring, chain, binary trees, recursive
 * halving), which their cost functions read (tune_cost.h). */
typedef struct rcoll_tuner {
  rcoll_tune_params_t prm;
  int nranks, nnodes, ppn;  /* ppn: most ranks on one node */
  int uniform;              /* every node has ppn ranks */
  /* From the placement, per algorithm: does any message cross nodes, how
   * many ranks of one node send across at once (they share the node's
   * inter bandwidth), and the latency of its critical path of hops. */
  int ring_cross, ring_share;
  double ring_hop_us;       /* latency of the ring's slowest hop: every step waits for it */
  double chain_us;          /* latency of the chain 0 -> 1 -> ... -> n-1 */
  int tree_cross, tree_share, tree_height;
  double tree_out;          /* most a rank sends in the double tree, x vector */
  double tree_us;           /* the longest path from a rank to its tree's root */
  int btree_cross, btree_share;
  double btree_us;
  int rhd_steps, rhd_rem, fold_cross, fold_share;
  int step_cross[RCOLL_TUNE_MAX_STEPS], step_share[RCOLL_TUNE_MAX_STEPS];
  struct {
    size_t bytes;
    int coll; /* -1: empty */
    int skip; /* the family left out (rcoll_tune_choose_without), or -1 */
    rcoll_tune_choice_t choice;
  } cache[RCOLL_TUNE_CACHE];
} rcoll_tuner_t;

/* Builds a model for the placement in `topo` (the table tool and tests
 * call this directly; communicators through rcoll_tuner_create). */
rcollResult_t rcoll_tuner_setup(rcoll_tuner_t *t, const rcoll_topo_t *topo,
                                const rcoll_tune_params_t *prm);

/* Link figures of the transport described under this name (net.h); TCP's for a name no
 * transport describes. */
rcoll_tune_link_t rcoll_tune_default_link(const char *net);
/* Parameters from the settings (RCOLL_ALGO, RCOLL_DETERMINISTIC,
 * RCOLL_TUNE_*) and the links of the two classes (intra, inter) served by
 * the transports named in net_of; links[] gets the overrides applied. */
rcollResult_t rcoll_tune_params_from_settings(const rcoll_settings_t *s, const char *const net_of[2],
                                             rcoll_tune_link_t links[2], size_t max_chunk,
                                             rcoll_tune_params_t *out);
/* The model for a communicator: its topology, transports and settings,
 * agreed with every rank. Collective over the bootstrap: every rank calls
 * it once, at communicator creation. */
rcollResult_t rcoll_tuner_create(struct rcollComm *c, rcoll_tuner_t **out);

/* Merges every rank's parameters (all[nranks]) into the ones all use: per
 * link class the largest latency and overhead, the smallest bandwidth and
 * chunk cap; the smallest staging slot and reduction rate; only algorithms
 * every rank allows; deterministic if any rank asks. Independent of the
 * order of all[]. */
void rcoll_tune_params_agree(const rcoll_tune_params_t *all, int nranks, rcoll_tune_params_t *out);
/* Whether every rank's parameters (all[nranks], as allgathered) are ones a
 * rank of this library can send: finite positive figures, a staging slot
 * within RCOLL_CHUNK_SIZE's range, a window of 0..RCOLL_NSLOTS' maximum. An
 * error names the first rank whose are not. */
rcollResult_t rcoll_tune_params_check(const rcoll_tune_params_t *all, int nranks);
/* Allgathers prm over the bootstrap and replaces it with the agreed one. */
struct rcoll_bootstrap;
rcollResult_t rcoll_tune_params_exchange(struct rcoll_bootstrap *b, int rank, int nranks,
                                         rcoll_tune_params_t *prm);
/* One-way latency of a hop between nodes: half the shortest of a few
 * ping-pongs over the bootstrap ring by each rank whose left neighbour is
 * on another node, agreed by rcoll_tune_inter_agree (tuner_comm.c says
 * why); 0 on one node. Collective over the bootstrap; every rank gets the
 * same figure. */
rcollResult_t rcoll_tune_measure_inter(struct rcoll_bootstrap *b, const rcoll_topo_t *topo,
                                       double *inter_us);
/* Most a measured one-way latency is taken for (us): a larger figure is a
 * stalled rank, not a link, and is clamped to this. */
#define RCOLL_TUNE_INTER_MAX_US 1e6
/* The figure all ranks use from every rank's (fig[n], as allgathered; 0
 * from ranks with no crossing hop): the lower median of the positive finite
 * ones, each clamped to RCOLL_TUNE_INTER_MAX_US, so that one rank's figure
 * far above the others' (it was descheduled while it measured) is not the
 * model's. 0 when none is positive. Independent of the order of fig[]. */
double rcoll_tune_inter_agree(const double *fig, int n);

/* Whether the algorithm family implements the collective and runs as
 * itself on this placement. */
int rcoll_tune_applies(const rcoll_tuner_t *t, int coll, int algo);
/* Predicted time in us of `bytes` (the whole vector: count x type size, or
 * n blocks for all-gather and reduce-scatter) with the given chunk; a
 * negative value when the algorithm does not apply. */
double rcoll_tune_predict(const rcoll_tuner_t *t, int coll, int algo, size_t bytes, size_t chunk);
/* The best chunk for one algorithm, and its time. */
rcoll_tune_choice_t rcoll_tune_best(const rcoll_tuner_t *t, int coll, int algo, size_t bytes);
/* The choice for a call: the fastest allowed algorithm (only deterministic
 * ones for reductions in deterministic mode); when RCOLL_ALGO allows none
 * for this collective, its RCOLL_ALGO_FALLBACK one. Logs the alternatives under
 * RCOLL_DEBUG_SUBSYS=TUNE. */
rcoll_tune_choice_t rcoll_tune_choose(rcoll_tuner_t *t, int coll, size_t bytes);
/* The same choice without one algorithm family: device buffers never meet
 * on the flat board, which is host memory. Both remember recent choices. */
rcoll_tune_choice_t rcoll_tune_choose_without(rcoll_tuner_t *t, int coll, size_t bytes, int skip);

#endif
