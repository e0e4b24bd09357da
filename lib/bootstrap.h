/* Bootstrap: how ranks first find each other. rcollGetUniqueId starts a root
 * (a thread listening on an address) and puts that address and a random
 * secret into the id. Each rank connects to the root with the secret, its
 * rank and its own listening address; the root answers every rank with the
 * table of all addresses. Ranks then form a ring of TCP connections used for
 * out-of-band exchange (allgather of transport handles, barriers). The root
 * and the ring listeners read first messages from all their connections at
 * once (hello_pending.h): connections from strangers that stay silent, send
 * garbage or flood the port cost the ranks nothing. */
#ifndef RCOLL_BOOTSTRAP_H
#define RCOLL_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "rcoll.h"
#include "sockutil.h"

/* Layout of rcollUniqueId's bytes. */
typedef struct rcoll_bootstrap_id {
  uint64_t magic;  /* RCOLL_BOOTSTRAP_ID_MAGIC: catches garbage ids */
  uint64_t secret; /* presented by every connection of the communicator */
  rcoll_sockaddr_t root;
} rcoll_bootstrap_id_t;

#define RCOLL_BOOTSTRAP_ID_MAGIC 0x31444c4c4f435221ull /* "!RCOLLD1" */

typedef struct rcoll_bootstrap rcoll_bootstrap_t;

/* Starts a root listening on `listen_at` (port 0: any) or, when NULL, on the
 * address picked from the settings; fills id. The root thread exits once all
 * ranks have been answered, or after the timeout. */
rcollResult_t rcoll_bootstrap_root_start(const rcoll_settings_t *s, const rcoll_sockaddr_t *listen_at,
                                         uint64_t secret, rcollUniqueId *id);
/* Validates and decodes an id (magic check). */
rcollResult_t rcoll_bootstrap_id_decode(const rcollUniqueId *id, rcoll_bootstrap_id_t *out);

/* Joins as `rank` of `nranks`; blocks until every rank has joined or the
 * timeout passes (error names the ranks still missing when known). Also
 * gathers each rank's host name. */
rcollResult_t rcoll_bootstrap_init(const rcoll_settings_t *s, const rcollUniqueId *id, int rank,
                                   int nranks, rcoll_bootstrap_t **out);
/* The same with nid unique ids (rcollCommInitRankScalable): rank r meets at
 * ids[rcoll_bootstrap_block_of(r, nranks, nid)], so each root serves one
 * block of about nranks / nid ranks (bootstrap.c says how the blocks join).
 * nid == 1 is rcoll_bootstrap_init. */
rcollResult_t rcoll_bootstrap_init_ids(const rcoll_settings_t *s, const rcollUniqueId *ids, int nid, int rank,
                                       int nranks, rcoll_bootstrap_t **out);
/* NCCL's blocks: block k holds ranks first..first+count-1; the first
 * nranks % nid blocks hold one rank more. */
void rcoll_bootstrap_block(int nranks, int nid, int k, int *first, int *count);
int rcoll_bootstrap_block_of(int rank, int nranks, int nid);
/* data holds nranks blocks of `bytes`; block `rank` is ours on entry, every
 * block is filled on return. */
rcollResult_t rcoll_bootstrap_allgather(rcoll_bootstrap_t *b, void *data, size_t bytes);
rcollResult_t rcoll_bootstrap_barrier(rcoll_bootstrap_t *b);
/* How far the left neighbour's clock (now_ns) is ahead of ours, from the
 * shortest of `rounds` ping-pongs over the ring (collective: every rank
 * calls it). rtt_ns is that round trip. Execution traces (trace.c) chain
 * the neighbours' offsets into offsets to rank 0. */
rcollResult_t rcoll_bootstrap_clock_left(rcoll_bootstrap_t *b, int rounds, int64_t (*now_ns)(void),
                                         int64_t *offset_ns, int64_t *rtt_ns);
/* The survivors' bootstrap (bootstrap_shrink.c), formed without a root and
 * without the excluded ranks: keep[0..nkeep) are the parent ranks that stay,
 * in order, and this rank is keep[newrank]. Each survivor connects to its new
 * right neighbour's parent listener; its intro carries `tag` (a hash of the
 * exclude list) and nexcluded, so a survivor that passed another list is
 * refused at once, with an error at both ends, instead of a hang. Every wait
 * has timeout_ms (the parent's when <= 0) and names the peer. */
rcollResult_t rcoll_bootstrap_shrink(rcoll_bootstrap_t *parent, const int *keep, int nkeep, int newrank,
                                     uint64_t tag, int nexcluded, int64_t timeout_ms,
                                     rcoll_bootstrap_t **out);
/* The secret every connection of this bootstrap's communicator presents. */
uint64_t rcoll_bootstrap_secret(const rcoll_bootstrap_t *b);
/* Host name of a rank, as it reported it ("?" when unknown). */
const char *rcoll_bootstrap_host(const rcoll_bootstrap_t *b, int rank);
/* Closes connections; safe on NULL and after a failure. Abort-safe: never blocks. */
void rcoll_bootstrap_close(rcoll_bootstrap_t *b);

/* Wire format of the first message a rank sends the root (exported for the
 * parsing tests). All integers little-endian on the wire. */
typedef struct rcoll_bootstrap_hello {
  uint64_t secret;
  int32_t rank;
  int32_t nranks;
  rcoll_sockaddr_t listen_addr;
  char host[64];
} rcoll_bootstrap_hello_t;

/* Checks a hello against the expected secret and the first rank's nranks
 * (expected_nranks <= 0 accepts any). Returns rcollSuccess or an error with a
 * message saying what was wrong. */
rcollResult_t rcoll_bootstrap_hello_check(const rcoll_bootstrap_hello_t *h, uint64_t secret,
                                          int expected_nranks);

#endif
