/* Connections to peers, made on first use. A plan names the peers it sends
 * to and receives from; before it runs, every missing connection is made,
 * connects and accepts polled together so that no order of calls between
 * ranks can deadlock. The first message on every connection is a hello that
 * carries the sender's rank: one listening endpoint per rank serves all
 * peers, and the hello tells the accepting side whose connection it is. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "clock.h"
#include "comm.h"
#include "device.h"
#include "flat.h"
#include "log.h"

#define HELLO_MAGIC 0x6f6c6c65686c6c63ull

enum { NEED_SEND = 1, NEED_RECV = 2 };

/* Staging for receive-reduce steps, made when a plan first reduces data from
 * this peer (point-to-point peers never need it) and touched now so that no
 * later call pays for page faults. */
static rcollResult_t peer_staging(struct rcollComm *c, int peer) {
  rcoll_peer_t *pe = &c->peers[peer];
  /* aligned_alloc wants a multiple of the alignment. */
  size_t bytes = ((size_t)c->nslots * c->chunk_bytes + 4095) & ~(size_t)4095;
  pe->staging = aligned_alloc(4096, bytes);
  if (pe->staging == NULL)
    return rcoll_error(rcollSystemError, "rank %d: cannot allocate %zu bytes of staging", c->rank,
                       bytes);
  memset(pe->staging, 0, bytes);
  return rcoll_peer_net(c, peer)->reg_mr(pe->recv_comm, pe->staging, bytes, RCOLL_MEM_HOST,
                                         &pe->staging_mh);
}

/* Once both directions to a peer exist, a transport that can share a link
 * between them is told which end this is (net.h, pair). Called where either
 * comm appears: the second call finds both, and only it goes through. Never
 * for a rank's connection to itself: both ends are this rank, so the one
 * call would set up only the writing end of a shared link (the socket
 * lane's), and its small messages would go where nobody reads. */
static rcollResult_t conn_pair(struct rcollComm *c, int peer) {
  rcoll_peer_t *pe = &c->peers[peer];
  rcoll_comm_net_t *n = &c->nets[pe->net];
  if (n->ops->pair == NULL || pe->send_comm == NULL || pe->recv_comm == NULL || peer == c->rank)
    return rcollSuccess;
  return n->ops->pair(n->ctx, pe->send_comm, pe->recv_comm, c->rank < peer);
}

/* One step of making the send connection to a peer, never waiting: connect,
 * post the hello, see it delivered; each happens in the round where it can.
 * A transport may complete a send only once the receiver has posted its
 * receive, and the peer posts that while polling its own connections, so
 * waiting here for delivery could hold both ranks until the timeout. */
static rcollResult_t try_connect(struct rcollComm *c, int peer) {
  rcoll_peer_t *pe = &c->peers[peer];
  rcoll_comm_net_t *n = &c->nets[pe->net];
  if (pe->hello_comm == NULL) {
    RCOLL_CHECK(n->ops->connect(n->ctx, 0, c->infos[peer].handles[pe->net], &pe->hello_comm));
    if (pe->hello_comm == NULL)
      return rcollSuccess;
  }
  if (pe->hello_req == NULL) {
    if (c->hello.magic != HELLO_MAGIC) /* written once: earlier sends may still read it */
      c->hello = (rcoll_conn_hello_t){.magic = HELLO_MAGIC, .rank = c->rank};
    RCOLL_CHECK(n->ops->isend(pe->hello_comm, &c->hello, sizeof c->hello, 0, NULL, &pe->hello_req));
    if (pe->hello_req == NULL)
      return rcollSuccess; /* no send slot yet */
  }
  int done = 0;
  RCOLL_CHECK(n->ops->test(pe->hello_req, &done, NULL));
  if (!done)
    return rcollSuccess;
  pe->send_comm = pe->hello_comm;
  pe->hello_comm = NULL;
  pe->hello_req = NULL;
  RCOLL_INFO(RCOLL_SUB_NET | RCOLL_SUB_INIT, "rank %d -> rank %d (%s): connected via %s", c->rank,
             peer, rcoll_bootstrap_host(c->bootstrap, peer), n->ops->name);
  return conn_pair(c, peer);
}

/* Accepts whatever has arrived on every open transport. */
static rcollResult_t accept_new(struct rcollComm *c) {
  for (int t = 0; t < RCOLL_MAX_NETS; t++) {
    rcoll_comm_net_t *n = &c->nets[t];
    if (n->ops == NULL)
      continue;
    void *rc = NULL;
    RCOLL_CHECK(n->ops->accept(n->listen_comm, &rc));
    if (rc == NULL)
      continue;
    /* Entries never move: a posted hello receive points into its entry. */
    struct rcoll_pending_accept *pa = NULL;
    for (int i = 0; i < c->maxpending && pa == NULL; i++)
      if (c->pending[i].recv_comm == NULL)
        pa = &c->pending[i];
    if (pa == NULL)
      return rcoll_error(rcollInternalError, "rank %d: too many unidentified connections", c->rank);
    memset(pa, 0, sizeof *pa);
    c->npending++;
    pa->net = t;
    pa->recv_comm = rc;
  }
  return rcollSuccess;
}

/* Files an accepted connection under the rank its hello names, or drops it. */
static rcollResult_t accept_file(struct rcollComm *c, struct rcoll_pending_accept *pa) {
  const rcoll_transport_ops_t *ops = c->nets[pa->net].ops;
  int64_t r = pa->hello.rank;
  if (pa->hello.magic != HELLO_MAGIC || r < 0 || r >= c->nranks || c->peers[r].recv_comm ||
      c->peers[r].net != pa->net) {
    RCOLL_WARN("rank %d: dropping a %s connection with a bad hello (rank %lld)", c->rank, ops->name,
               (long long)r);
    return ops->close_recv(pa->recv_comm);
  }
  c->peers[r].recv_comm = pa->recv_comm;
  RCOLL_INFO(RCOLL_SUB_NET | RCOLL_SUB_INIT, "rank %d <- rank %d (%s): accepted via %s", c->rank,
             (int)r, rcoll_bootstrap_host(c->bootstrap, (int)r), ops->name);
  return conn_pair(c, (int)r);
}

/* Accepts whatever has arrived and files connections whose hello came. */
static rcollResult_t try_accept(struct rcollComm *c) {
  RCOLL_CHECK(accept_new(c));
  for (int i = 0; i < c->maxpending && c->npending > 0; i++) {
    struct rcoll_pending_accept *pa = &c->pending[i];
    if (pa->recv_comm == NULL)
      continue;
    const rcoll_transport_ops_t *ops = c->nets[pa->net].ops;
    if (pa->request == NULL) {
      void *buf = &pa->hello;
      size_t size = sizeof pa->hello;
      int tag = 0;
      RCOLL_CHECK(ops->irecv(pa->recv_comm, 1, &buf, &size, &tag, NULL, &pa->request));
      if (pa->request == NULL)
        continue;
    }
    int done = 0;
    RCOLL_CHECK(ops->test(pa->request, &done, NULL));
    if (!done)
      continue;
    rcollResult_t r = accept_file(c, pa);
    memset(pa, 0, sizeof *pa);
    c->npending--;
    RCOLL_CHECK(r);
  }
  return rcollSuccess;
}

/* Marks the connections the plan needs that do not exist yet; returns how many. */
static int conn_missing(struct rcollComm *c, const rcoll_plan_t *p) {
  int missing = 0;
  memset(c->need, 0, (size_t)c->nranks);
  for (int i = 0; i < p->nsteps; i++) {
    const rcoll_step_t *st = &p->steps[i];
    if (st->kind == RCOLL_STEP_COPY)
      continue;
    rcoll_peer_t *pe = &c->peers[st->peer];
    int want = st->kind == RCOLL_STEP_SEND ? NEED_SEND : NEED_RECV;
    void *have = want == NEED_SEND ? pe->send_comm : pe->recv_comm;
    if (have == NULL && !(c->need[st->peer] & want)) {
      c->need[st->peer] |= (uint8_t)want;
      missing++;
    }
  }
  return missing;
}

/* " in allreduce #17 (...)" for a host plan, so that a failure to connect
 * names the call that needed the connection (the CUDA proxy's plans carry
 * no call records). */
static const char *conn_where(const rcoll_plan_t *p, char *buf, size_t len) {
  buf[0] = '\0';
  if (p == &p->comm->plan && !rcoll_device_ops.executing(p->comm))
    rcoll_calls_where(p->comm, buf, len);
  return buf;
}

static rcollResult_t conn_timeout(const rcoll_plan_t *p) {
  struct rcollComm *c = p->comm;
  char name[128], where[320];
  conn_where(p, where, sizeof where);
  for (int peer = 0; peer < c->nranks; peer++) {
    rcoll_peer_t *pe = &c->peers[peer];
    int send = (c->need[peer] & NEED_SEND) && pe->send_comm == NULL;
    if (send || ((c->need[peer] & NEED_RECV) && pe->recv_comm == NULL)) {
      rcoll_comm_peer_name(c, peer, name, sizeof name);
      /* With RCOLL_CUDA_DIRECT a peer may run its calls as kernels and never
       * connect: then this rank's group held them for two communicators and
       * the peer's did not (group.c). */
      return rcoll_error(rcollTimeout, "rank %d: could not %s %s within %lld ms%s (before any of "
                         "its data moved)%s", c->rank, send ? "connect to" : "get a connection from",
                         name, (long long)c->timeout_ms, where,
                         c->cuda_direct ? "; with RCOLL_CUDA_DIRECT a device collective is a kernel that "
                                          "needs no connection, but in a group that holds them for two "
                                          "communicators: group such calls alike on every rank"
                                        : "");
    }
  }
  return rcoll_error(rcollTimeout, "rank %d: connection set-up timed out%s", c->rank, where);
}

static rcollResult_t conn_staging(struct rcollComm *c, const rcoll_plan_t *p) {
  for (int i = 0; i < p->nsteps; i++) {
    const rcoll_step_t *st = &p->steps[i];
    const rcoll_peer_t *pe = &c->peers[st->peer];
    /* A transport that reduces on arrival (engine.c) needs no staging. */
    if (st->kind == RCOLL_STEP_RECV_REDUCE && pe->staging == NULL &&
        !(c->nets[pe->net].ops->irecv_reduce != NULL && c->settings.recv_reduce))
      RCOLL_CHECK(peer_staging(c, st->peer));
  }
  return rcollSuccess;
}

/* One non-blocking round for one communicator: connects, accepts, files
 * hellos. *done is set once every connection the plan needs exists. */
static rcollResult_t conn_round(struct rcollComm *c, const rcoll_plan_t *p, int *done) {
  for (int peer = 0; peer < c->nranks; peer++) {
    if (!(c->need[peer] & NEED_SEND) || c->peers[peer].send_comm != NULL)
      continue;
    rcollResult_t r = try_connect(c, peer);
    if (r != rcollSuccess) {
      char name[128], where[320];
      rcoll_comm_peer_name(c, peer, name, sizeof name);
      return rcoll_error(r, "rank %d: connecting to %s failed%s: %s", c->rank, name,
                         conn_where(p, where, sizeof where), rcoll_error_text());
    }
  }
  RCOLL_CHECK(try_accept(c));
  *done = conn_missing(c, p) == 0;
  return *done ? conn_staging(c, p) : rcollSuccess;
}

/* Plans of several communicators may be driven by one thread (a group over
 * the communicators of rcollCommInitAll): their connections are made in one
 * loop, or a rank would wait to accept from a peer whose connect comes later
 * in the same thread. */
rcollResult_t rcoll_conn_ensure(rcoll_plan_t **plans, int nplans) {
  int missing = 0;
  for (int i = 0; i < nplans; i++)
    missing += conn_missing(plans[i]->comm, plans[i]) > 0;
  if (missing == 0) {
    for (int i = 0; i < nplans; i++)
      RCOLL_CHECK(conn_staging(plans[i]->comm, plans[i]));
    return rcollSuccess;
  }
  int64_t start = rcoll_now_ms(), deadline = start + plans[0]->comm->timeout_ms, flat_checked = start;
  for (;;) {
    int all = 1;
    for (int i = 0; i < nplans; i++) {
      struct rcollComm *c = plans[i]->comm;
      int done = 0;
      if (c->flat != NULL && plans[i] == &c->plan)
        rcoll_flat_post_early(plans[i]);
      RCOLL_CHECK(conn_round(c, plans[i], &done));
      all &= done;
      if (c->aborted || c->revoked) {
        char where[320];
        return rcoll_error(rcollInvalidUsage, "rank %d: communicator %s%s", c->rank,
                           c->aborted ? "aborted" : "revoked", conn_where(plans[i], where, sizeof where));
      }
    }
    if (all)
      return rcollSuccess;
    int64_t now = rcoll_now_ms();
    if (now > deadline)
      for (int i = 0; i < nplans; i++)
        if (conn_missing(plans[i]->comm, plans[i]) > 0)
          return conn_timeout(plans[i]);
    /* A peer that does not accept may sit on the flat board in another call. */
    if (now - start > RCOLL_FLAT_CHECK_AFTER_MS && now - flat_checked >= RCOLL_FLAT_CHECK_MS) {
      flat_checked = now;
      RCOLL_CHECK(rcoll_flat_check_plans(plans, nplans));
    }
    sched_yield();
  }
}

void rcoll_conn_close_all(struct rcollComm *c) {
  for (int i = 0; c->pending != NULL && i < c->maxpending; i++)
    if (c->pending[i].recv_comm != NULL) {
      c->nets[c->pending[i].net].ops->close_recv(c->pending[i].recv_comm);
      c->pending[i].recv_comm = NULL; /* rcollCommShrink closes before destroy does */
    }
  c->npending = 0;
  for (int peer = 0; c->peers != NULL && peer < c->nranks; peer++) {
    rcoll_peer_t *pe = &c->peers[peer];
    const rcoll_transport_ops_t *ops = c->nets[pe->net].ops;
    if (ops != NULL && pe->staging_mh != NULL)
      ops->dereg_mr(pe->recv_comm, pe->staging_mh);
    if (ops != NULL && pe->send_comm != NULL)
      ops->close_send(pe->send_comm);
    if (ops != NULL && pe->hello_comm != NULL) /* closing it ends its hello request */
      ops->close_send(pe->hello_comm);
    if (ops != NULL && pe->recv_comm != NULL)
      ops->close_recv(pe->recv_comm);
    free(pe->staging);
    int net = pe->net;
    memset(pe, 0, sizeof *pe);
    pe->net = net;
  }
}
