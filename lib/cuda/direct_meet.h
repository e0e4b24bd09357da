/* Where a large direct all-reduce meets on the host to be done in place
 * (direct_kernel.h says what "in place" does on the device).
 *
 * A kernel can read a peer's buffer only once the peer's process handed it
 * over through CUDA IPC and ours mapped it, which only the host can do. So
 * each rank posts its input and output (their allocations' IPC handles and
 * offsets) in a small shared-memory file the ranks of the node mapped at
 * setup, waits for every peer's post of the same call, maps what it has not
 * mapped yet, and says whether it could; the call runs in place only when
 * every rank could, otherwise through the regions, and every rank decides
 * the same from the same posts. Only calls of RCOLL_CUDA_DIRECT_INPLACE
 * bytes or more meet (the limit is rank 0's): for them the meeting's few
 * microseconds are small beside the 2 vectors per rank it saves.
 *
 * Mappings are kept, up to DIRECT_IMPORTS per peer, and the least recently
 * used one is closed once our last kernel is done: a caching allocator
 * (PyTorch's) hands the same allocations back call after call. A peer's
 * freed allocation stays alive here until then. */
#ifndef RCOLL_CUDA_DIRECT_MEET_H
#define RCOLL_CUDA_DIRECT_MEET_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_api.h"
#include "cuda/direct_kernel.h"
#include "rcoll.h"

struct rcollComm;
struct rcoll_cuda_comm;
typedef struct rcoll_direct_meet rcoll_direct_meet_t;

/* Rank 0 at setup: makes the file, empty, for nranks posts; its path in
 * path. 0 when it cannot (the direct path then runs without meetings). */
int rcoll_direct_meet_make(const struct rcollComm *c, char *path, size_t cap);
/* Every rank: maps the file at path (NULL when it cannot). */
rcoll_direct_meet_t *rcoll_direct_meet_open(const struct rcollComm *c, const char *path);
/* Unmaps it and closes the peers' buffers: call once no kernel of ours runs. */
void rcoll_direct_meet_close(rcoll_direct_meet_t *m);

/* Peer q's allocation with IPC handle h, mapped here: from the kept ones,
 * or opened (NULL when it cannot be), closing the least recently used of
 * DIRECT_IMPORTS once our last kernel is done. Used by the meeting (and by
 * tests). */
#define DIRECT_IMPORTS 16
char *rcoll_direct_meet_import(struct rcoll_cuda_comm *cc, int q, const rcoll_cuda_ipc_handle_t *h);

/* One call's meeting: 1 when it runs in place, with a->ins and a->outs
 * filled; 0 when not (through the regions or the proxy: a rank that cannot
 * run it in place passes in = NULL); *r says why it could not meet (a peer
 * that did not come within RCOLL_TIMEOUT, or made another call). */
int rcoll_direct_meet(struct rcoll_cuda_comm *cc, const void *in, void *out, uint64_t sig,
                      rcoll_direct_args_t *a, rcollResult_t *r);

#endif
