/* Building blocks of the tuner's cost model, for the cost functions of the
 * algorithm files (algo.h: rcoll_algorithm_t.cost).
 *
 * Times are in microseconds. A message of b bytes over a link costs its
 * latency alpha (which messages in flight overlap), a per-message overhead
 * (which they do not) and b * beta (beta = 1 / bandwidth); ranks of a node
 * that send across nodes at once share the node's inter-node bandwidth. A
 * pipelined algorithm whose chunks pass S hops costs the latency of its
 * longest path plus (chunks + S - 1) chunk times; phases that overlap chunk
 * by chunk cost one chunk's phases plus (chunks - 1) times the slowest.
 *
 * Two limits keep that from flattering pipelines on slow links. A
 * connection has `window` receives in flight (its staging slots), and a
 * chunk's slot is held from the receive's posting until the chunk, which
 * its sender could only forward after receiving it, has come the whole way:
 * at most window x chunk bytes move per round trip (2 alpha), so a link of
 * 260 us moves 4 x 8 KiB chunks at 60 MB/s, not at its 1.25 GB/s: a
 * pipeline of more chunks than the window spends at least 2 alpha / window
 * per chunk. A ring step lasts as long as the ring's slowest hop: 2
 * namespaces x 2 ranks with 260 us between them took 1250-1930 us for an
 * 8-byte ring all-reduce, 6 steps at the crossing hop's latency each, not
 * at the mean of the four hops (two of which stay inside a node). And phases
 * only overlap on idle cores: where a machine runs more ranks than it has
 * cores (cores_shared), the reductions, copies and the network stack of one
 * phase take the cores the other phases would need (allreduce_hier.c's cost
 * says what that measured). */
#ifndef RCOLL_TUNE_COST_H
#define RCOLL_TUNE_COST_H

#include <stddef.h>

#include "tuner.h"

/* A link as a step sees it. */
typedef struct rcoll_cost_link {
  double lat, b; /* latency in us; us per byte */
  double big_us; /* extra overhead of a message over RCOLL_COST_BIG_MSG */
  double eng_us; /* overhead of any message: the engine's (RCOLL_COST_ENGINE_US, + SHARED_US), the link's each_us */
} rcoll_cost_link_t;

/* What the engine spends on each message (posting, testing, completing;
 * more when ranks outnumber cores). Unlike latency, which messages in flight
 * overlap, overheads are paid message after message: they keep the model
 * from cutting vectors into chunks that only add cost. Messages over 64 KiB
 * also pay the link's own overhead (the socket hands them to helper
 * threads; smaller ones travel inline). */
#define RCOLL_COST_ENGINE_US 2.0
#define RCOLL_COST_BIG_MSG 65536.0
/* What each message adds where a machine runs more ranks than it has cores
 * (cores_shared): a message that the peer's rank or a helper must be
 * scheduled to move. Measured (issue 18): all-reduce hier of 64 MiB, 2
 * namespaces x 2 ranks on 2 cores, 116-123 ms in 128 KiB chunks and 90-95 ms
 * in 4 MiB ones, where the model without it predicted the same time for
 * both: 26 ms for about 990 more messages. */
#define RCOLL_COST_SHARED_US 25.0
/* And what a message over RCOLL_COST_BIG_MSG costs there, in multiples of
 * the link's own figure: the thread it is handed to must wait for a core
 * too. Measured (socket, 8 ranks on 2 cores, Rabenseifner): 1 MiB took
 * 3.2-3.5 ms in 28 messages of 64 KiB and 4.5-4.6 ms in 6 of 128-512 KiB,
 * 512 KiB 1.8-2.1 ms in 14 and 2.3-2.7 ms in 4: about 300 us per large
 * message where the socket's figure is 60. */
#define RCOLL_COST_SHARED_BIG 5.0

/* How much longer a byte takes where ranks outnumber cores, for an
 * algorithm whose every rank moves several whole vectors at once (recursive
 * doubling, the star's hub and its n-1 peers): R^0.75 with R ranks per core
 * (prm.ranks_per_core) on one node; 1 where each rank has a core, and
 * across nodes. The other costs for shared cores were measured on
 * algorithms that move about two vectors per rank (ring, Rabenseifner,
 * hier) and keep full-speed bytes; without this, recursive doubling's extra
 * vectors looked nearly free. Fitted on shm processes on 2 cores:
 * recursive doubling's time grew with the vector at 1.3, 2.0 and 2.9 times
 * its full-speed rate on 4, 6 and 8 ranks (R = 2, 3, 4); with R itself the
 * tuner left it at 16 KiB on 16 ranks, where it took 261 us and
 * Rabenseifner 344. Across nodes it kept winning where the factor would
 * have moved the choice: 2 namespaces x 4 ranks on 2 cores, 32 KiB, 219 us
 * against Rabenseifner's 276 (8 alternating rounds); 2 x 2 ranks, 58 against
 * 78 (5 rounds, the old build against one with the factor there). */
double rcoll_cost_shared_bytes(const rcoll_tuner_t *t);
/* us per byte at gbps GB/s. */
double rcoll_cost_beta(double gbps);
/* Overhead of one message of `bytes` over l. */
double rcoll_cost_msg_us(rcoll_cost_link_t l, double bytes);
/* The link a step runs at: the slower class when anything crosses nodes,
 * with `share` ranks of a node sending across together. */
rcoll_cost_link_t rcoll_cost_link(const rcoll_tuner_t *t, int cross, int share);
/* The least time per chunk a pipeline of k chunks over a link of latency
 * lat can keep up: a window's worth per round trip, once there are more
 * chunks than fit in one window (fewer all go at once). */
double rcoll_cost_window_slot(const rcoll_tuner_t *t, double lat, double k);
/* Chunks of `chunk` bytes in `bytes` (at least 1). */
double rcoll_cost_chunks(double bytes, size_t chunk);
/* A pipeline: the first chunk's path latency, then k + hops - 1 chunk slots
 * at the busiest link. */
double rcoll_cost_pipeline(double path_us, double k, int hops, double slot);

/* The ring rank -> rank+1: `phases` passes of n - 1 steps (2 for
 * all-reduce), each moving a segment of m / n bytes; `reduce`: each step
 * adds what it received. */
double rcoll_cost_ring(const rcoll_tuner_t *t, double m, size_t c, int phases, int reduce);
/* The chain 0 -> 1 -> ... -> n-1: `laps` passes (2 when results come
 * back, so that a rank sends two chunks per slot), `extra` hops beyond;
 * `reduce`: each hop adds what it received. */
double rcoll_cost_chain(const rcoll_tuner_t *t, double m, size_t c, int laps, int extra, int reduce);

/* Gather or scatter by direct messages: the root exchanges a block of
 * m / n bytes with each of the n - 1 others, all in flight. */
double rcoll_cost_fan(const rcoll_tuner_t *t, double m, size_t c);
/* Gather or scatter through the binomial tree of lib/tree.h: blocks of
 * m / n bytes, a subtree that fits a chunk as one message. */
double rcoll_cost_binomial(const rcoll_tuner_t *t, double m, size_t c);

#endif
