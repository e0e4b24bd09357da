/* Private to lib/bootstrap*.c: the rank side's state, shared by the ring
 * (bootstrap.c) and the survivors' new ring (bootstrap_shrink.c). */
#ifndef RCOLL_BOOTSTRAP_PRIV_H
#define RCOLL_BOOTSTRAP_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap.h"
#include "bootstrap_wire.h"

typedef char rcoll_bootstrap_host_t[RCOLL_BOOTSTRAP_HOST_MAX];

struct rcoll_bootstrap {
  int rank, nranks;
  uint64_t secret;
  int64_t timeout_ms;
  int left_fd, right_fd;
  int broken; /* a ring operation failed: the ring's byte streams are out of step */
  rcoll_bootstrap_host_t *hosts;
  /* Kept for rcoll_bootstrap_shrink: our ring listener, open for the
   * bootstrap's life, and every rank's listener address. */
  int listen_fd;
  rcoll_sockaddr_t *addrs;
  uint32_t shrinks; /* shrinks made from this bootstrap: tells a stale try's intro apart */
};

/* An empty bootstrap (no connections) for rank of nranks. */
rcollResult_t rcoll_bootstrap_new(int64_t timeout_ms, uint64_t secret, int rank, int nranks,
                                  rcoll_bootstrap_t **out);
/* Records "<what>: <cause>", the cause being the text sockutil just
 * recorded. It is copied first: rcoll_error() rewrites that same buffer. */
__attribute__((format(printf, 2, 3))) rcollResult_t rcoll_bootstrap_fail(rcollResult_t rc,
                                                                       const char *fmt, ...);

/* The rank side's steps that the several-ids join (bootstrap_ids.c,
 * rcollCommInitRankScalable) shares with the one-root join. */
/* Our ring listener's address, reachable from the root's side. */
rcollResult_t rcoll_rank_listen_addr(const rcoll_settings_t *s, const rcoll_sockaddr_t *root,
                                     rcoll_sockaddr_t *out);
/* Our hello (wire order) for the communicator's rank, nranks and secret. */
void rcoll_rank_hello(const rcoll_bootstrap_t *b, const rcoll_sockaddr_t *listen_addr,
                      rcoll_bootstrap_hello_t *h);
/* Receives a root's reply and its table of n entries, entry i being rank
 * (first + i) mod nranks, whose host names it keeps. */
rcollResult_t rcoll_rank_answer(rcoll_bootstrap_t *b, int fd, rcoll_bootstrap_hello_t *table, int n,
                                uint64_t secret, int first, int64_t deadline, const char *root_str);
rcollResult_t rcoll_ring_connect_right(rcoll_bootstrap_t *b, const rcoll_sockaddr_t *addr, int64_t deadline);
rcollResult_t rcoll_ring_accept_left(rcoll_bootstrap_t *b, int listen_fd, int64_t deadline);
rcollResult_t rcoll_ring_allgather(rcoll_bootstrap_t *b, char *data, size_t bytes, const char *what);

#endif
