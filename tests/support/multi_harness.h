/* Grouped receives (an irecv of up to RCOLL_NET_MAX_RECVS tagged buffers,
 * NCCL's multi-receive), driven the same way for every transport that has
 * them (tests/test_socket_multi.c, test_ucx_multi.c, test_ib_multi.c):
 * poisoned receive buffers with a canary, the check that a buffer holds its
 * tag's pattern and nothing past it, and a run of sends plus one group.
 * Everything here asserts with Criterion. */
#ifndef RCOLL_TESTS_SUPPORT_MULTI_HARNESS_H
#define RCOLL_TESTS_SUPPORT_MULTI_HARNESS_H

#include "transport_harness.h"

#define TH_POISON 0xEE

/* Receive buffers: cap bytes poisoned, plus one canary byte. */
char *th_rbuf_new(size_t cap);

/* The received bytes carry the pattern of their tag, and nothing past them
 * (up to the canary after the posted size) was written. */
void th_rbuf_check(const char *b, size_t got, size_t cap, int tag, const char *what);

/* Tests the sends and the group from this thread until the group is done
 * and the sends too, or the group fails (its result is returned; the sends
 * may fail once it has), or ms pass (rcollInProgress). */
rcollResult_t th_group_wait(const rcoll_transport_ops_t *ops, void **sreq, int *sdone, int ns, void *rreq,
                            int *rdone, size_t *got, int64_t ms);

/* Posts the ns sends (in the order given), then one group of n buffers, and
 * waits for them as th_group_wait does (10 s). */
rcollResult_t th_group_run(th_pair_t *p, int ns, char **sbufs, const size_t *ssizes, const int *stags, int n,
                           char **rbufs, const size_t *caps, const int *rtags, size_t *got);

/* Three buffers (tags 10, 11, 12) posted larger than what comes; the sends
 * come in reverse tag order, 100 B, 1 MiB and 5 MiB, twice. `what` names the
 * configuration in failures. */
void th_multi_reverse_order(th_pair_t *p, const char *what);

/* All eight buffers at once, with empty messages and duplicate tags among
 * them (sizes from the caller: around its small-message limits). */
void th_multi_eight(th_pair_t *p, const size_t ssizes[RCOLL_NET_MAX_RECVS], const char *what);

/* Sends tags 1 then `bad` of `size` bytes to a receive of tags {1, 2, 3}:
 * the receive fails within 3 s, naming the tag (and `why`), and nothing is
 * written outside the buffer the first message filled. */
void th_multi_tag_error(th_pair_t *p, int bad, size_t size, const char *why);

/* A message larger than the buffer of its tag fails the group, naming the
 * sizes, and writes nothing into that buffer. */
void th_multi_too_large(th_pair_t *p);

/* A group takes one request slot per buffer, all or none (nreqs slots on
 * the receive side). free_slots (may be NULL) reads the receive side's free
 * slots. */
void th_multi_slots(th_pair_t *p, int nreqs, th_wait_fn wait, int (*free_slots)(void *recv));

/* A stream of n messages (message i has tag i and sizes[i] bytes, sent in
 * order by a sender thread) received in groups of 1..RCOLL_NET_MAX_RECVS
 * buffers, up to `window` (at most 16) groups in flight. rb[i] holds
 * sizes[i] + extra bytes (th_rbuf_new). Returns how many groups had more
 * than one buffer. */
int th_group_stream(th_pair_t *p, int n, const size_t *sizes, char **rb, size_t extra, int window,
                    const char *what);

#endif
