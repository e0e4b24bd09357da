/* Joining through several unique ids (rcollCommInitRankScalable); the
 * one-root join and the ring are bootstrap.c's. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "bootstrap.h"
#include "bootstrap_priv.h"
#include "bootstrap_wire.h"
#include "error.h"
#include "log.h"

/* ---- several unique ids (rcollCommInitRankScalable) ----
 * NCCL 2.28.9's rule (bootstrap.cc): the ranks are cut in order into nid
 * blocks, the first nranks % nid of them one rank larger, and block k meets
 * at ids[k]. Each root then serves about nranks / nid ranks and sends tables
 * that long. The ring needs one address more: block k's last rank connects
 * to block k+1's first, so that first rank also joins block k's root, as its
 * extra last entry. Both hellos go out before either answer is awaited (a
 * root answers only once its whole block is in, so waiting in between could
 * chain every block into a cycle). With the ring formed, the host names are
 * allgathered over it; the ring itself speaks with ids[0]'s secret. */
void rcoll_bootstrap_block(int nranks, int nid, int k, int *first, int *count) {
  int per = nranks / nid, rest = nranks % nid;
  *first = k * per + (k < rest ? k : rest);
  *count = per + (k < rest);
}

int rcoll_bootstrap_block_of(int rank, int nranks, int nid) {
  int per = nranks / nid, rest = nranks % nid, big = rest * (per + 1);
  return rank < big ? rank / (per + 1) : rest + (rank - big) / per;
}

typedef struct block_join {
  rcoll_bootstrap_id_t id;
  int first, index, size; /* entry 0 is rank `first`; ours is `index` of `size` */
  int fd;
  char where[80];
} block_join_t;

static void block_join_at(const rcoll_bootstrap_t *b, const rcoll_bootstrap_id_t *ids, int nid, int k,
                          int index, block_join_t *j) {
  int count;
  j->id = ids[k];
  rcoll_bootstrap_block(b->nranks, nid, k, &j->first, &count);
  j->index = index < 0 ? count : index;
  j->size = count + (nid > 1);
  j->fd = -1;
  rcoll_sockaddr_str(&j->id.root, j->where, sizeof(j->where));
}

static rcollResult_t block_hello(rcoll_bootstrap_t *b, block_join_t *j, const rcoll_sockaddr_t *listen_addr,
                                 int64_t deadline) {
  rcoll_bootstrap_hello_t h;
  j->fd = rcoll_socket_connect(&j->id.root, deadline);
  if (j->fd < 0)
    return rcoll_bootstrap_fail(errno == ETIMEDOUT ? rcollTimeout : rcollSystemError,
                                "bootstrap: rank %d cannot reach the root at %s", b->rank, j->where);
  rcoll_rank_hello(b, listen_addr, &h);
  rcoll_bootstrap_hello_swap(&h); /* back to host order to set the block's fields */
  h.secret = j->id.secret;
  h.rank = j->index;
  h.nranks = j->size;
  rcoll_bootstrap_hello_swap(&h);
  if (rcoll_socket_send_all(j->fd, &h, sizeof(h), deadline) != rcollSuccess)
    return rcoll_bootstrap_fail(rcollRemoteError, "bootstrap: rank %d: sending its hello to the root at %s",
                                b->rank, j->where);
  return rcollSuccess;
}

static rcollResult_t block_connect_all(rcoll_bootstrap_t *b, const rcoll_settings_t *s,
                                       const rcoll_bootstrap_id_t *ids, int nid) {
  int64_t deadline = rcoll_now_ms() + b->timeout_ms;
  int k = rcoll_bootstrap_block_of(b->rank, b->nranks, nid), first, count;
  rcoll_bootstrap_block(b->nranks, nid, k, &first, &count);
  block_join_t own, prev;
  block_join_at(b, ids, nid, k, b->rank - first, &own);
  int has_prev = nid > 1 && b->rank == first; /* also the previous block's extra entry */
  if (has_prev)
    block_join_at(b, ids, nid, (k + nid - 1) % nid, -1, &prev);
  rcoll_sockaddr_t listen_addr;
  RCOLL_CHECK(rcoll_rank_listen_addr(s, &own.id.root, &listen_addr));
  int listen_fd = rcoll_socket_listen(&listen_addr, 1024);
  if (listen_fd < 0)
    return rcollSystemError;
  rcoll_bootstrap_hello_t *table = calloc((size_t)own.size + (has_prev ? (size_t)prev.size : 0), sizeof(*table));
  rcollResult_t rc = table ? rcollSuccess : rcoll_error(rcollSystemError, "bootstrap: out of memory");
  if (rc == rcollSuccess)
    rc = block_hello(b, &own, &listen_addr, deadline);
  if (rc == rcollSuccess && has_prev)
    rc = block_hello(b, &prev, &listen_addr, deadline);
  if (rc == rcollSuccess)
    rc = rcoll_rank_answer(b, own.fd, table, own.size, own.id.secret, own.first, deadline, own.where);
  if (rc == rcollSuccess && has_prev)
    rc = rcoll_rank_answer(b, prev.fd, table + own.size, prev.size, prev.id.secret, prev.first, deadline,
                           prev.where);
  /* Our right neighbour is the entry after ours: the block's extra entry
   * when we are its last rank (with one id, the table wraps as usual). */
  if (rc == rcollSuccess && b->nranks > 1)
    rc = rcoll_ring_connect_right(b, &table[(own.index + 1) % own.size].listen_addr, deadline);
  if (rc == rcollSuccess && b->nranks > 1)
    rc = rcoll_ring_accept_left(b, listen_fd, deadline);
  if (rc == rcollSuccess)
    rc = rcoll_ring_allgather(b, (char *)b->hosts, sizeof(b->hosts[0]), "allgather of host names");
  /* As after a one-root join: every rank's listener address is kept, and
   * ours stays open, for the survivors' ring of rcollCommShrink
   * (bootstrap_shrink.c). */
  if (rc == rcollSuccess) {
    b->addrs[b->rank] = listen_addr;
    rc = rcoll_ring_allgather(b, (char *)b->addrs, sizeof(b->addrs[0]), "allgather of listener addresses");
  }
  if (own.fd >= 0)
    close(own.fd);
  if (has_prev && prev.fd >= 0)
    close(prev.fd);
  free(table);
  if (rc == rcollSuccess)
    b->listen_fd = listen_fd;
  else
    close(listen_fd);
  return rc;
}

rcollResult_t rcoll_bootstrap_init_ids(const rcoll_settings_t *s, const rcollUniqueId *ids, int nid, int rank,
                                       int nranks, rcoll_bootstrap_t **out) {
  if (nid == 1)
    return rcoll_bootstrap_init(s, ids, rank, nranks, out);
  if (!s || !ids || !out || nid < 1 || nid > nranks || nranks > RCOLL_BOOTSTRAP_MAX_RANKS || rank < 0 ||
      rank >= nranks)
    return rcoll_error(rcollInvalidArgument, "bootstrap init: rank %d of %d with %d ids is out of range", rank,
                       nranks, nid);
  rcoll_bootstrap_id_t *dec = calloc((size_t)nid, sizeof(*dec));
  if (!dec)
    return rcoll_error(rcollSystemError, "bootstrap: out of memory for %d ids", nid);
  rcollResult_t rc = rcollSuccess;
  for (int i = 0; i < nid && rc == rcollSuccess; i++)
    rc = rcoll_bootstrap_id_decode(&ids[i], &dec[i]);
  rcoll_bootstrap_t *b = NULL;
  if (rc == rcollSuccess)
    rc = rcoll_bootstrap_new(rcoll_bootstrap_timeout_ms(s), dec[0].secret, rank, nranks, &b);
  if (rc == rcollSuccess)
    rc = block_connect_all(b, s, dec, nid);
  free(dec);
  if (rc != rcollSuccess) {
    rcoll_bootstrap_close(b);
    return rc;
  }
  RCOLL_INFO(RCOLL_SUB_BOOTSTRAP, "bootstrap: rank %d of %d joined through unique id %d of %d", rank, nranks,
             rcoll_bootstrap_block_of(rank, nranks, nid), nid);
  *out = b;
  return rcollSuccess;
}
