/* The survivors' new ring (rcollCommShrink). No root is needed, nor any
 * excluded rank: every rank kept its ring listener open and knows every
 * other rank's address from the parent (bootstrap_priv.h). Each survivor
 * connects to the parent listener of its new right neighbour and introduces
 * itself with the exclude list's hash; the neighbour answers with an ack
 * that says whether its own list is the same. Then the new ring exchanges
 * the new listeners' addresses (for a later shrink of the new
 * communicator) and a fresh secret chosen by the new rank 0. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap_priv.h"
#include "bootstrap_wire.h"
#include "error.h"
#include "hello_pending.h"
#include "log.h"

/* The intro on a parent listener, and the answer to it. Little-endian. */
typedef struct shrink_intro {
  uint64_t secret; /* the parent's */
  uint64_t tag;    /* hash of the exclude list */
  uint32_t epoch;  /* this shrink's number among the parent's shrinks */
  int32_t old_rank, new_rank, nexcluded;
} shrink_intro_t;

typedef struct shrink_ack {
  int32_t status; /* 0: same list; else an rcollResult_t */
  int32_t old_rank;
  int32_t nexcluded;
  uint32_t epoch;
  uint64_t tag;
} shrink_ack_t;

static void shrink_intro_swap(shrink_intro_t *in) {
  in->secret = htole64(in->secret);
  in->tag = htole64(in->tag);
  in->epoch = htole32(in->epoch);
  in->old_rank = (int32_t)htole32((uint32_t)in->old_rank);
  in->new_rank = (int32_t)htole32((uint32_t)in->new_rank);
  in->nexcluded = (int32_t)htole32((uint32_t)in->nexcluded);
}

static void shrink_ack_swap(shrink_ack_t *a) {
  a->status = (int32_t)htole32((uint32_t)a->status);
  a->old_rank = (int32_t)htole32((uint32_t)a->old_rank);
  a->nexcluded = (int32_t)htole32((uint32_t)a->nexcluded);
  a->epoch = htole32(a->epoch);
  a->tag = htole64(a->tag);
}

/* One survivor's side of the ring formation. */
typedef struct shrink_ctx {
  const rcoll_bootstrap_t *parent;
  rcoll_bootstrap_t *b;
  shrink_intro_t mine;  /* host order */
  int left_old;         /* parent rank of the new left neighbour */
  int64_t deadline;
  int64_t timeout_ms; /* the shrink's config's, else the parent's */
  char mismatch[RCOLL_ERROR_TEXT_MAX]; /* set when a survivor passed another list */
} shrink_ctx_t;

static int shrink_same(const shrink_ctx_t *x, uint64_t tag, int nexcluded, uint32_t epoch) {
  return tag == x->mine.tag && nexcluded == x->mine.nexcluded && epoch == x->mine.epoch;
}

static void shrink_answer(const shrink_ctx_t *x, int fd, int32_t status) {
  shrink_ack_t a = {.status = status, .old_rank = x->mine.old_rank, .nexcluded = x->mine.nexcluded,
                    .epoch = x->mine.epoch, .tag = x->mine.tag};
  shrink_ack_swap(&a);
  (void)rcoll_socket_send_all(fd, &a, sizeof a, rcoll_now_ms() + 1000);
}

/* The pending set's callback on the parent listener. */
static const char *shrink_take(void *arg, int fd, const rcoll_sockaddr_t *addr, const void *hello) {
  shrink_ctx_t *x = arg;
  shrink_intro_t in;
  (void)addr;
  memcpy(&in, hello, sizeof in);
  shrink_intro_swap(&in);
  if (in.secret != x->parent->secret)
    return "wrong secret (another job, or a stale unique id)";
  if (in.epoch < x->mine.epoch)
    return "an intro from an earlier shrink of this communicator";
  if (in.old_rank < 0 || in.old_rank >= x->parent->nranks)
    return "a shrink intro from a rank out of range";
  if (!shrink_same(x, in.tag, in.nexcluded, in.epoch)) {
    snprintf(x->mismatch, sizeof x->mismatch,
             "rcollCommShrink: rank %d: rank %d (%s) passed a different exclude list (%d ranks, "
             "shrink #%u) from this rank's (%d ranks, shrink #%u): every survivor must pass the same",
             x->parent->rank, in.old_rank, x->parent->hosts[in.old_rank], in.nexcluded, in.epoch,
             x->mine.nexcluded, x->mine.epoch);
    shrink_answer(x, fd, rcollInvalidUsage);
    return "a survivor with another exclude list";
  }
  if (in.old_rank != x->left_old || x->b->left_fd >= 0)
    return "right list, but not this rank's new left neighbour";
  shrink_answer(x, fd, rcollSuccess);
  x->b->left_fd = fd;
  return NULL;
}

static rcollResult_t shrink_connect_right(shrink_ctx_t *x, int right_old) {
  rcoll_bootstrap_t *b = x->b;
  const char *host = x->parent->hosts[right_old];
  b->right_fd = rcoll_socket_connect(&x->parent->addrs[right_old], x->deadline);
  if (b->right_fd < 0)
    return rcoll_bootstrap_fail(errno == ETIMEDOUT ? rcollTimeout : rcollSystemError,
                                "rcollCommShrink: rank %d cannot reach rank %d (%s)", x->parent->rank,
                                right_old, host);
  shrink_intro_t in = x->mine;
  shrink_intro_swap(&in);
  if (rcoll_socket_send_all(b->right_fd, &in, sizeof in, x->deadline) != rcollSuccess)
    return rcoll_bootstrap_fail(rcollRemoteError, "rcollCommShrink: rank %d: introducing itself to rank %d (%s)",
                                x->parent->rank, right_old, host);
  return rcollSuccess;
}

static rcollResult_t shrink_accept_left(shrink_ctx_t *x) {
  rcoll_pending_t pend;
  char who[64];
  snprintf(who, sizeof who, "rcollCommShrink: rank %d's ring listener", x->parent->rank);
  RCOLL_CHECK(rcoll_pending_init(&pend, who, sizeof(shrink_intro_t), 0, RCOLL_BOOTSTRAP_FIRST_MSG_MS,
                                 shrink_take, x));
  rcollResult_t rc = rcollSuccess;
  while (x->b->left_fd < 0 && !x->mismatch[0] && rc == rcollSuccess && rcoll_now_ms() < x->deadline) {
    rcoll_pending_wait(&pend, x->parent->listen_fd, x->deadline);
    rc = rcoll_pending_progress(&pend, x->parent->listen_fd);
  }
  rcoll_pending_free(&pend);
  if (x->mismatch[0])
    return rcoll_error(rcollInvalidUsage, "%s", x->mismatch);
  if (x->b->left_fd >= 0)
    return rcollSuccess;
  if (rc != rcollSuccess)
    return rcoll_bootstrap_fail(rc, "rcollCommShrink: rank %d: waiting for rank %d (%s)", x->parent->rank,
                                x->left_old, x->parent->hosts[x->left_old]);
  return rcoll_error(rcollTimeout, "rcollCommShrink: rank %d: rank %d (%s) never joined the shrink within "
                     "%lld s (did it call rcollCommShrink with the same exclude list?)", x->parent->rank,
                     x->left_old, x->parent->hosts[x->left_old], (long long)(x->timeout_ms / 1000));
}

/* Waits for the ack on the right while watching the left: a survivor that
 * fails (another list, say) closes its sockets, and its right neighbour,
 * which already took its intro, must hear of it now rather than wait for
 * an ack that may never come. Failures so travel around the ring. */
static rcollResult_t shrink_wait_ack(shrink_ctx_t *x, int right_old) {
  int watch_left = 1; /* until the left sends ring data: then it has its ack, and is well */
  for (;;) {
    struct pollfd p[2] = {{.fd = x->b->right_fd, .events = POLLIN},
                          {.fd = watch_left ? x->b->left_fd : -1, .events = POLLIN}};
    int64_t left = x->deadline - rcoll_now_ms();
    if (left <= 0)
      return rcoll_error(rcollTimeout, "rcollCommShrink: rank %d: rank %d (%s) did not answer within "
                         "%lld s", x->parent->rank, right_old, x->parent->hosts[right_old],
                         (long long)(x->timeout_ms / 1000));
    (void)poll(p, 2, left > 1000 ? 1000 : (int)left);
    if (p[0].revents)
      return rcollSuccess;
    char c;
    ssize_t n = p[1].revents ? recv(x->b->left_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) : -1;
    watch_left = n <= 0;
    /* Also name the right: when it is the one that never came, the left
     * gives up at about the same moment we would, and whichever goes first
     * decides which error this rank gets. */
    if (n == 0 || (n < 0 && p[1].revents && errno != EAGAIN && errno != EINTR))
      return rcoll_error(rcollRemoteError, "rcollCommShrink: rank %d: rank %d (%s) gave up the shrink "
                         "(its own error says why) while this rank still waited for rank %d (%s) to "
                         "answer", x->parent->rank, x->left_old, x->parent->hosts[x->left_old],
                         right_old, x->parent->hosts[right_old]);
  }
}

/* The right neighbour's verdict on our intro. */
static rcollResult_t shrink_read_ack(shrink_ctx_t *x, int right_old) {
  shrink_ack_t a;
  const char *host = x->parent->hosts[right_old];
  RCOLL_CHECK(shrink_wait_ack(x, right_old));
  if (rcoll_socket_recv_all(x->b->right_fd, &a, sizeof a, x->deadline) != rcollSuccess)
    return rcoll_bootstrap_fail(rcollRemoteError, "rcollCommShrink: rank %d: no answer from rank %d (%s)",
                                x->parent->rank, right_old, host);
  shrink_ack_swap(&a);
  if (a.status == rcollSuccess)
    return rcollSuccess;
  return rcoll_error(rcollInvalidUsage, "rcollCommShrink: rank %d: rank %d (%s) passed a different exclude "
                     "list (%d ranks, shrink #%u) from this rank's (%d ranks, shrink #%u): every survivor "
                     "must pass the same", x->parent->rank, right_old, host, a.nexcluded, a.epoch,
                     x->mine.nexcluded, x->mine.epoch);
}

/* Connecting before accepting cannot deadlock (the kernel queues the
 * connection), and an ack is sent as soon as an intro is taken, before
 * waiting for our own. */
static rcollResult_t shrink_ring(shrink_ctx_t *x, const int *keep, int nkeep) {
  int right_old = keep[(x->b->rank + 1) % nkeep];
  RCOLL_CHECK(shrink_connect_right(x, right_old));
  RCOLL_CHECK(shrink_accept_left(x));
  return shrink_read_ack(x, right_old);
}

/* Our new listener (for a shrink of the new communicator), at the parent
 * listener's address, and every survivor's through the new ring; then the
 * new secret, from the new rank 0. */
static rcollResult_t shrink_exchange(rcoll_bootstrap_t *b, const rcoll_sockaddr_t *at) {
  rcoll_sockaddr_t addr = *at;
  if (addr.sa.sa_family == AF_INET6)
    addr.sin6.sin6_port = 0;
  else
    addr.sin.sin_port = 0;
  b->listen_fd = rcoll_socket_listen(&addr, 1024);
  if (b->listen_fd < 0)
    return rcollSystemError;
  b->addrs[b->rank] = addr;
  rcoll_bootstrap_addr_swap(&b->addrs[b->rank]);
  RCOLL_CHECK(rcoll_bootstrap_allgather(b, b->addrs, sizeof *b->addrs));
  for (int i = 0; i < b->nranks; i++)
    rcoll_bootstrap_addr_swap(&b->addrs[i]);
  uint64_t *secrets = calloc((size_t)b->nranks, sizeof *secrets);
  if (secrets == NULL)
    return rcoll_error(rcollSystemError, "rcollCommShrink: out of memory");
  if (getrandom(&secrets[b->rank], sizeof *secrets, 0) != sizeof *secrets)
    secrets[b->rank] = (uint64_t)rcoll_now_us() * 0x9e3779b97f4a7c15ull;
  rcollResult_t rc = rcoll_bootstrap_allgather(b, secrets, sizeof *secrets);
  b->secret = le64toh(secrets[0]) | 1;
  free(secrets);
  return rc;
}

rcollResult_t rcoll_bootstrap_shrink(rcoll_bootstrap_t *parent, const int *keep, int nkeep, int newrank,
                                     uint64_t tag, int nexcluded, int64_t timeout_ms,
                                     rcoll_bootstrap_t **out) {
  rcoll_bootstrap_t *b = NULL;
  if (timeout_ms <= 0)
    timeout_ms = parent != NULL ? parent->timeout_ms : 0;
  if (parent == NULL || parent->listen_fd < 0 || parent->addrs == NULL)
    return rcoll_error(rcollInternalError, "rcollCommShrink: the parent's bootstrap kept no listener");
  RCOLL_CHECK(rcoll_bootstrap_new(timeout_ms, parent->secret, newrank, nkeep, &b));
  for (int i = 0; i < nkeep; i++)
    memcpy(b->hosts[i], parent->hosts[keep[i]], sizeof b->hosts[i]);
  shrink_ctx_t x = {.parent = parent, .b = b, .left_old = keep[(newrank + nkeep - 1) % nkeep],
                    .deadline = rcoll_now_ms() + timeout_ms, .timeout_ms = timeout_ms};
  x.mine = (shrink_intro_t){.secret = parent->secret, .tag = tag, .epoch = ++parent->shrinks,
                            .old_rank = parent->rank, .new_rank = newrank, .nexcluded = nexcluded};
  rcollResult_t rc = nkeep > 1 ? shrink_ring(&x, keep, nkeep) : rcollSuccess;
  if (rc == rcollSuccess)
    rc = shrink_exchange(b, &parent->addrs[parent->rank]);
  if (rc != rcollSuccess) {
    rcoll_bootstrap_close(b);
    return rc;
  }
  RCOLL_INFO(RCOLL_SUB_BOOTSTRAP, "rcollCommShrink: parent rank %d is rank %d of %d (shrink #%u)",
             parent->rank, newrank, nkeep, x.mine.epoch);
  *out = b;
  return rcollSuccess;
}

uint64_t rcoll_bootstrap_secret(const rcoll_bootstrap_t *b) { return b->secret; }
