/* The rank side of the bootstrap: join through the root, then keep a ring of
 * TCP connections (one to the right neighbour, one from the left) for
 * allgathers and barriers. The root itself lives in bootstrap_root.c. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap.h"
#include "bootstrap_wire.h"
#include "error.h"
#include "hello_pending.h"
#include "log.h"

#include "bootstrap_priv.h"

rcollResult_t rcoll_bootstrap_fail(rcollResult_t rc, const char *fmt, ...) {
  char what[256], cause[RCOLL_ERROR_TEXT_MAX];
  va_list ap;
  snprintf(cause, sizeof(cause), "%s", rcoll_error_text());
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  return rcoll_error(rc, "%s: %s", what, cause);
}

static int rcoll_ring_left(const rcoll_bootstrap_t *b) {
  return (b->rank + b->nranks - 1) % b->nranks;
}
static int rcoll_ring_right(const rcoll_bootstrap_t *b) { return (b->rank + 1) % b->nranks; }

const char *rcoll_bootstrap_host(const rcoll_bootstrap_t *b, int rank) {
  if (!b || !b->hosts || rank < 0 || rank >= b->nranks)
    return "?";
  return b->hosts[rank];
}

void rcoll_bootstrap_close(rcoll_bootstrap_t *b) {
  if (!b)
    return;
  /* shutdown first so that a neighbour blocked on us sees EOF at once. */
  if (b->left_fd >= 0) {
    shutdown(b->left_fd, SHUT_RDWR);
    close(b->left_fd);
  }
  if (b->right_fd >= 0) {
    shutdown(b->right_fd, SHUT_RDWR);
    close(b->right_fd);
  }
  if (b->listen_fd >= 0)
    close(b->listen_fd);
  free(b->hosts);
  free(b->addrs);
  free(b);
}

/* ------------------------------------------------------------------ */
/* Joining through the root                                             */

static int rcoll_addr_is_loopback(const rcoll_sockaddr_t *a) {
  if (a->sa.sa_family == AF_INET)
    return (ntohl(a->sin.sin_addr.s_addr) >> 24) == 127;
  return a->sa.sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&a->sin6.sin6_addr);
}

/* Our listening address: loopback when the root is on loopback (a
 * single-host job), else the interface the settings pick, in the root's
 * family unless the settings name one, so that every rank can reach us. */
rcollResult_t rcoll_rank_listen_addr(const rcoll_settings_t *s, const rcoll_sockaddr_t *root,
                                            rcoll_sockaddr_t *out) {
  char ifname[RCOLL_IFNAME_MAX];
  const char *fam = s->socket_family;
  if (rcoll_addr_is_loopback(root)) {
    memset(out, 0, sizeof(*out));
    out->sa.sa_family = root->sa.sa_family;
    if (root->sa.sa_family == AF_INET)
      out->sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else
      out->sin6.sin6_addr = in6addr_loopback;
    return rcollSuccess;
  }
  if (fam[0] == '\0')
    fam = root->sa.sa_family == AF_INET6 ? "AF_INET6" : "AF_INET";
  return rcoll_socket_pick_addr(s->socket_ifname, fam, out, ifname);
}

void rcoll_rank_hello(const rcoll_bootstrap_t *b, const rcoll_sockaddr_t *listen_addr,
                             rcoll_bootstrap_hello_t *h) {
  char name[48] = "?";
  memset(h, 0, sizeof(*h));
  h->secret = b->secret;
  h->rank = b->rank;
  h->nranks = b->nranks;
  h->listen_addr = *listen_addr;
  (void)gethostname(name, sizeof(name) - 1);
  snprintf(h->host, sizeof(h->host), "%s:%d", name, (int)getpid());
  rcoll_bootstrap_hello_swap(h);
}

/* Checks the root's table and keeps the host names: entry i is rank
 * first + i (wrapping: a block's extra entry, see bootstrap_ids.c). */
static rcollResult_t rcoll_rank_table(rcoll_bootstrap_t *b, rcoll_bootstrap_hello_t *table, int n,
                                      uint64_t secret, int first, const char *root_str) {
  if (rcoll_bootstrap_table_decode(table, sizeof(*table) * (size_t)n, secret, n, b->hosts, first,
                                   b->nranks) != rcollSuccess)
    return rcoll_bootstrap_fail(rcollRemoteError, "bootstrap: rank %d: the root at %s sent a bad table",
                                b->rank, root_str);
  return rcollSuccess;
}

/* Receives the root's reply and its table of n entries (entry i: rank
 * first + i) over fd. */
rcollResult_t rcoll_rank_answer(rcoll_bootstrap_t *b, int fd, rcoll_bootstrap_hello_t *table, int n,
                                       uint64_t secret, int first, int64_t deadline, const char *root_str) {
  rcoll_bootstrap_reply_t reply;
  /* The root's verdict (which ranks are missing) says more than our own
   * timeout would, and the root times out at about the same moment. */
  rcollResult_t rc = rcoll_socket_recv_all(fd, &reply, sizeof(reply), deadline + RCOLL_BOOTSTRAP_VERDICT_MS);
  if (rc != rcollSuccess)
    return rcoll_bootstrap_fail(rc, "bootstrap: rank %d: no answer from the root at %s", b->rank,
                                root_str);
  rcollResult_t status;
  char text[RCOLL_BOOTSTRAP_REPLY_TEXT];
  RCOLL_CHECK(rcoll_bootstrap_reply_decode(&reply, sizeof(reply), &status, text));
  if (status != rcollSuccess)
    return rcoll_error(status, "bootstrap: rank %d: the root at %s says: %s", b->rank, root_str,
                       text);
  rc = rcoll_socket_recv_all(fd, table, sizeof(*table) * (size_t)n, deadline);
  if (rc != rcollSuccess)
    return rcoll_bootstrap_fail(rc, "bootstrap: rank %d: receiving the table from the root at %s",
                                b->rank, root_str);
  return rcoll_rank_table(b, table, n, secret, first, root_str);
}

/* Sends our hello and receives the reply and the table over fd. */
static rcollResult_t rcoll_rank_ask_root(rcoll_bootstrap_t *b, int fd,
                                         const rcoll_bootstrap_hello_t *hello,
                                         rcoll_bootstrap_hello_t *table, int64_t deadline,
                                         const char *root_str) {
  rcollResult_t rc = rcoll_socket_send_all(fd, hello, sizeof(*hello), deadline);
  if (rc != rcollSuccess)
    return rcoll_bootstrap_fail(rc, "bootstrap: rank %d: no answer from the root at %s", b->rank,
                                root_str);
  return rcoll_rank_answer(b, fd, table, b->nranks, b->secret, 0, deadline, root_str);
}

static rcollResult_t rcoll_rank_join(rcoll_bootstrap_t *b, const rcoll_sockaddr_t *root,
                                     const rcoll_sockaddr_t *listen_addr,
                                     rcoll_bootstrap_hello_t *table, int64_t deadline) {
  rcoll_bootstrap_hello_t hello;
  char root_str[80];
  rcollResult_t rc;
  rcoll_sockaddr_str(root, root_str, sizeof(root_str));
  int fd = rcoll_socket_connect(root, deadline);
  if (fd < 0)
    return rcoll_bootstrap_fail(errno == ETIMEDOUT ? rcollTimeout : rcollSystemError,
                                "bootstrap: rank %d cannot reach the root", b->rank);
  rcoll_rank_hello(b, listen_addr, &hello);
  rc = rcoll_rank_ask_root(b, fd, &hello, table, deadline, root_str);
  close(fd);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Forming the ring                                                     */

rcollResult_t rcoll_ring_connect_right(rcoll_bootstrap_t *b, const rcoll_sockaddr_t *addr,
                                              int64_t deadline) {
  int right = rcoll_ring_right(b);
  rcoll_bootstrap_intro_t in = {.secret = b->secret, .rank = b->rank};
  b->right_fd = rcoll_socket_connect(addr, deadline);
  if (b->right_fd < 0)
    return rcoll_bootstrap_fail(errno == ETIMEDOUT ? rcollTimeout : rcollSystemError,
                                "bootstrap: rank %d cannot connect to rank %d (%s)", b->rank, right,
                                b->hosts[right]);
  rcoll_bootstrap_intro_swap(&in);
  if (rcoll_socket_send_all(b->right_fd, &in, sizeof(in), deadline) != rcollSuccess)
    return rcoll_bootstrap_fail(rcollRemoteError,
                                "bootstrap: rank %d: introducing itself to rank %d (%s)", b->rank,
                                right, b->hosts[right]);
  return rcollSuccess;
}

/* The pending set's callback: keeps the connection of our left neighbour of
 * this job and refuses any other. */
static const char *rcoll_ring_take(void *arg, int fd, const rcoll_sockaddr_t *addr,
                                   const void *intro) {
  rcoll_bootstrap_t *b = arg;
  int rank = -1;
  (void)addr;
  const char *why =
      rcoll_bootstrap_intro_decode(intro, sizeof(rcoll_bootstrap_intro_t), b->secret, &rank);
  if (why != NULL)
    return why;
  if (rank != rcoll_ring_left(b) || b->left_fd >= 0)
    return "right secret, but not this rank's left neighbour";
  b->left_fd = fd;
  return NULL;
}

/* Accepts until the left neighbour shows up. Intros are read from every
 * connection at once (hello_pending.h), so strangers cannot delay it. */
rcollResult_t rcoll_ring_accept_left(rcoll_bootstrap_t *b, int listen_fd, int64_t deadline) {
  int left = rcoll_ring_left(b);
  rcoll_pending_t pend;
  char who[64];
  snprintf(who, sizeof(who), "bootstrap: rank %d's ring listener", b->rank);
  RCOLL_CHECK(rcoll_pending_init(&pend, who, sizeof(rcoll_bootstrap_intro_t), 0,
                                 RCOLL_BOOTSTRAP_FIRST_MSG_MS, rcoll_ring_take, b));
  rcollResult_t rc = rcollSuccess;
  while (b->left_fd < 0 && rc == rcollSuccess && rcoll_now_ms() < deadline) {
    rcoll_pending_wait(&pend, listen_fd, deadline);
    rc = rcoll_pending_progress(&pend, listen_fd);
  }
  rcoll_pending_free(&pend);
  if (b->left_fd >= 0)
    return rcollSuccess;
  if (rc != rcollSuccess)
    return rcoll_bootstrap_fail(rc, "bootstrap: rank %d: waiting for rank %d (%s)", b->rank, left,
                                b->hosts[left]);
  return rcoll_error(rcollTimeout, "bootstrap: rank %d: rank %d (%s) never connected within %lld s",
                     b->rank, left, b->hosts[left], (long long)(b->timeout_ms / 1000));
}

/* Connecting before accepting cannot deadlock: the kernel queues the
 * neighbour's connection in our listen backlog until we accept it. */
static rcollResult_t rcoll_ring_form(rcoll_bootstrap_t *b, int listen_fd,
                                     const rcoll_bootstrap_hello_t *table, int64_t deadline) {
  if (b->nranks == 1)
    return rcollSuccess;
  RCOLL_CHECK(rcoll_ring_connect_right(b, &table[rcoll_ring_right(b)].listen_addr, deadline));
  return rcoll_ring_accept_left(b, listen_fd, deadline);
}

/* ------------------------------------------------------------------ */
/* Init                                                                 */

rcollResult_t rcoll_bootstrap_new(int64_t timeout_ms, uint64_t secret, int rank, int nranks,
                                  rcoll_bootstrap_t **out) {
  rcoll_bootstrap_t *b = calloc(1, sizeof(*b));
  if (b) {
    b->hosts = calloc((size_t)nranks, sizeof(*b->hosts));
    b->addrs = calloc((size_t)nranks, sizeof(*b->addrs));
  }
  if (!b || !b->hosts || !b->addrs) {
    if (b) {
      free(b->hosts);
      free(b->addrs);
    }
    free(b);
    return rcoll_error(rcollSystemError, "bootstrap: out of memory for %d ranks", nranks);
  }
  b->rank = rank;
  b->nranks = nranks;
  b->secret = secret;
  b->timeout_ms = timeout_ms;
  b->left_fd = b->right_fd = b->listen_fd = -1;
  *out = b;
  return rcollSuccess;
}

static rcollResult_t rcoll_bootstrap_connect_all(rcoll_bootstrap_t *b, const rcoll_settings_t *s,
                                                 const rcoll_sockaddr_t *root) {
  int64_t deadline = rcoll_now_ms() + b->timeout_ms;
  rcoll_sockaddr_t listen_addr;
  rcollResult_t rc;
  RCOLL_CHECK(rcoll_rank_listen_addr(s, root, &listen_addr));
  /* A deep backlog: strays queued there must not crowd out the neighbour. */
  int listen_fd = rcoll_socket_listen(&listen_addr, 1024);
  if (listen_fd < 0)
    return rcollSystemError;
  char where[80];
  RCOLL_INFO(RCOLL_SUB_BOOTSTRAP, "bootstrap: rank %d's ring listener on %s", b->rank,
             rcoll_sockaddr_str(&listen_addr, where, sizeof(where)));
  rcoll_bootstrap_hello_t *table = calloc((size_t)b->nranks, sizeof(*table));
  if (!table)
    rc = rcoll_error(rcollSystemError, "bootstrap: out of memory for %d ranks", b->nranks);
  else
    rc = rcoll_rank_join(b, root, &listen_addr, table, deadline);
  if (rc == rcollSuccess)
    rc = rcoll_ring_form(b, listen_fd, table, deadline);
  /* The listener stays open, and every rank's address is kept: the
   * survivors of a dead rank build their new ring through them
   * (bootstrap_shrink.c), with no root and without the dead. */
  for (int i = 0; rc == rcollSuccess && i < b->nranks; i++)
    b->addrs[i] = table[i].listen_addr;
  free(table);
  if (rc == rcollSuccess)
    b->listen_fd = listen_fd;
  else
    close(listen_fd);
  return rc;
}

rcollResult_t rcoll_bootstrap_init(const rcoll_settings_t *s, const rcollUniqueId *id, int rank,
                                   int nranks, rcoll_bootstrap_t **out) {
  rcoll_bootstrap_id_t dec;
  rcoll_bootstrap_t *b = NULL;
  if (!s || !id || !out)
    return rcoll_error(rcollInvalidArgument, "bootstrap init: settings, id or out is NULL");
  if (nranks < 1 || nranks > RCOLL_BOOTSTRAP_MAX_RANKS || rank < 0 || rank >= nranks)
    return rcoll_error(rcollInvalidArgument, "bootstrap init: rank %d of nranks %d is out of range",
                       rank, nranks);
  RCOLL_CHECK(rcoll_bootstrap_id_decode(id, &dec));
  RCOLL_CHECK(rcoll_bootstrap_new(rcoll_bootstrap_timeout_ms(s), dec.secret, rank, nranks, &b));
  rcollResult_t rc = rcoll_bootstrap_connect_all(b, s, &dec.root);
  if (rc != rcollSuccess) {
    rcoll_bootstrap_close(b);
    return rc;
  }
  RCOLL_INFO(RCOLL_SUB_BOOTSTRAP, "bootstrap: rank %d of %d joined (left %d, right %d)", rank,
             nranks, rcoll_ring_left(b), rcoll_ring_right(b));
  *out = b;
  return rcollSuccess;
}


/* ------------------------------------------------------------------ */
/* Allgather and barrier                                                */

/* The state of one ring step: sbuf goes to the right, rbuf comes from the left. */
typedef struct rcoll_ring_io {
  const char *sbuf;
  char *rbuf;
  size_t bytes, sent, got;
} rcoll_ring_io_t;

static rcollResult_t rcoll_ring_fail(const rcoll_bootstrap_t *b, int peer, int err,
                                     const char *what) {
  if (err == 0 || err == EPIPE || err == ECONNRESET)
    return rcoll_error(rcollRemoteError, "bootstrap: rank %d (%s) closed the connection during %s",
                       peer, b->hosts[peer], what);
  return rcoll_error(rcollSystemError, "bootstrap: rank %d: %s with rank %d (%s): %s", b->rank,
                     what, peer, b->hosts[peer], strerror(err));
}

/* Moves what the sockets take without blocking; sets *moved when anything did. */
static rcollResult_t rcoll_ring_try(const rcoll_bootstrap_t *b, rcoll_ring_io_t *io, int *moved,
                                    const char *what) {
  if (io->sent < io->bytes) {
    ssize_t n =
        send(b->right_fd, io->sbuf + io->sent, io->bytes - io->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      io->sent += (size_t)n;
      *moved = 1;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return rcoll_ring_fail(b, rcoll_ring_right(b), errno, what);
    }
  }
  if (io->got < io->bytes) {
    ssize_t n = recv(b->left_fd, io->rbuf + io->got, io->bytes - io->got, MSG_DONTWAIT);
    if (n > 0) {
      io->got += (size_t)n;
      *moved = 1;
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      return rcoll_ring_fail(b, rcoll_ring_left(b), n == 0 ? 0 : errno, what);
    }
  }
  return rcollSuccess;
}

/* One ring step. Both directions move together, so large blocks cannot
 * deadlock on full socket buffers the way a blocking send-then-receive would. */
static rcollResult_t rcoll_ring_step(const rcoll_bootstrap_t *b, rcoll_ring_io_t *io,
                                     int64_t deadline, const char *what) {
  while (io->sent < io->bytes || io->got < io->bytes) {
    int moved = 0;
    RCOLL_CHECK(rcoll_ring_try(b, io, &moved, what));
    if (moved)
      continue;
    struct pollfd p[2] = {{.fd = b->right_fd, .events = io->sent < io->bytes ? POLLOUT : 0},
                          {.fd = b->left_fd, .events = io->got < io->bytes ? POLLIN : 0}};
    int64_t left = deadline - rcoll_now_ms();
    if (left <= 0) {
      /* Name whoever we still wait for; the left neighbour when it is both. */
      int peer = io->got < io->bytes ? rcoll_ring_left(b) : rcoll_ring_right(b);
      return rcoll_error(rcollTimeout,
                         "bootstrap: rank %d timed out after %lld s in %s waiting for rank %d (%s)",
                         b->rank, (long long)(b->timeout_ms / 1000), what, peer, b->hosts[peer]);
    }
    (void)poll(p, 2, left > 1000 ? 1000 : (int)left);
  }
  return rcollSuccess;
}

rcollResult_t rcoll_ring_allgather(rcoll_bootstrap_t *b, char *data, size_t bytes,
                                          const char *what) {
  int64_t deadline = rcoll_now_ms() + b->timeout_ms;
  if (b->broken)
    return rcoll_error(rcollInvalidUsage, "bootstrap: rank %d: %s after an earlier ring failure",
                       b->rank, what);
  /* Step i forwards the block that arrived in step i-1 (our own first). */
  for (int i = 0; i < b->nranks - 1; i++) {
    int sblk = (b->rank - i + b->nranks) % b->nranks;
    int rblk = (b->rank - i - 1 + b->nranks) % b->nranks;
    rcoll_ring_io_t io = {
        .sbuf = data + (size_t)sblk * bytes, .rbuf = data + (size_t)rblk * bytes, .bytes = bytes};
    rcollResult_t rc = rcoll_ring_step(b, &io, deadline, what);
    if (rc != rcollSuccess) {
      b->broken = 1;
      return rc;
    }
  }
  return rcollSuccess;
}

rcollResult_t rcoll_bootstrap_allgather(rcoll_bootstrap_t *b, void *data, size_t bytes) {
  if (!b || (!data && bytes > 0))
    return rcoll_error(rcollInvalidArgument, "bootstrap allgather: bootstrap or data is NULL");
  return rcoll_ring_allgather(b, data, bytes, "allgather");
}

rcollResult_t rcoll_bootstrap_barrier(rcoll_bootstrap_t *b) {
  char *bytes;
  rcollResult_t rc;
  if (!b)
    return rcoll_error(rcollInvalidArgument, "bootstrap barrier: bootstrap is NULL");
  bytes = calloc((size_t)b->nranks, 1);
  if (!bytes)
    return rcoll_error(rcollSystemError, "bootstrap barrier: out of memory");
  rc = rcoll_ring_allgather(b, bytes, 1, "barrier");
  free(bytes);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Clock offsets (for execution traces, lib/trace.c)                    */

/* How long a clock exchange spins before it sleeps: the default RCOLL_SPIN_US. */
#define CLOCK_SPIN_US 50

/* Sends or receives all of an 8-byte message on a socket before the deadline. */
static rcollResult_t rcoll_clock_io(const rcoll_bootstrap_t *b, int fd, int peer, int64_t *v,
                                    int out, int64_t deadline) {
  char *p = (char *)v;
  size_t done = 0;
  int64_t spin_until = -1;
  while (done < sizeof *v) {
    ssize_t n = out ? send(fd, p + done, sizeof *v - done, MSG_DONTWAIT | MSG_NOSIGNAL)
                    : recv(fd, p + done, sizeof *v - done, MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      return rcoll_ring_fail(b, peer, n == 0 ? 0 : errno, "clock exchange");
    /* Spin (yielding) before sleeping, as the engine's waits do: a rank
     * asleep in poll is woken on the core its peer sent from, and two ranks
     * of two namespaces then share one core while the other idles. Round
     * trips in that state measured 33 us where the link's are 7-9 (2
     * namespaces over veth; the engine's 8-byte all-reduce there: 5 us). */
    int64_t t = rcoll_now_us();
    if (spin_until < 0)
      spin_until = t + CLOCK_SPIN_US;
    if (t < spin_until) {
      sched_yield();
      continue;
    }
    int64_t left = deadline - rcoll_now_ms();
    if (left <= 0)
      return rcoll_error(rcollTimeout, "bootstrap: rank %d timed out in the clock exchange with "
                         "rank %d (%s)", b->rank, peer, b->hosts[peer]);
    struct pollfd pf = {.fd = fd, .events = out ? POLLOUT : POLLIN};
    (void)poll(&pf, 1, left > 1000 ? 1000 : (int)left);
  }
  return rcollSuccess;
}

/* Answers one ping of the right neighbour with our clock. */
static rcollResult_t rcoll_clock_serve(const rcoll_bootstrap_t *b, int64_t (*now_ns)(void),
                                       int64_t deadline) {
  int64_t ping = 0;
  RCOLL_CHECK(rcoll_clock_io(b, b->right_fd, rcoll_ring_right(b), &ping, 0, deadline));
  int64_t mine = now_ns();
  return rcoll_clock_io(b, b->right_fd, rcoll_ring_right(b), &mine, 1, deadline);
}

/* Pings the left neighbour once; keeps the sample if its round trip is the
 * shortest so far. */
static rcollResult_t rcoll_clock_ping(const rcoll_bootstrap_t *b, int64_t (*now_ns)(void),
                                      int64_t deadline, int64_t *best, int64_t *offset_ns) {
  int64_t t1 = now_ns(), t2 = 0;
  RCOLL_CHECK(rcoll_clock_io(b, b->left_fd, rcoll_ring_left(b), &t1, 1, deadline));
  RCOLL_CHECK(rcoll_clock_io(b, b->left_fd, rcoll_ring_left(b), &t2, 0, deadline));
  int64_t t3 = now_ns();
  if (t3 - t1 < *best) {
    *best = t3 - t1;
    *offset_ns = t2 - t1 - (t3 - t1) / 2;
  }
  return rcollSuccess;
}

/* Every rank pings its left neighbour `rounds` times (the ring's sockets
 * carry bytes both ways) and answers each ping of its right neighbour with
 * its clock. Odd ranks ping first and even ranks serve first, so that a ping
 * usually finds its neighbour waiting for it and a round takes a few round
 * trips whatever the number of ranks. With an odd number of ranks the last
 * one is even, like its right neighbour 0; it pings first too, so that no
 * cycle of ranks waits on one another. The sample with the shortest round
 * trip is kept, as NTP does: its two one-way delays are the most nearly
 * equal. */
rcollResult_t rcoll_bootstrap_clock_left(rcoll_bootstrap_t *b, int rounds, int64_t (*now_ns)(void),
                                         int64_t *offset_ns, int64_t *rtt_ns) {
  *offset_ns = 0;
  *rtt_ns = 0;
  if (b->nranks == 1)
    return rcollSuccess;
  if (b->broken)
    return rcoll_error(rcollInvalidUsage, "bootstrap: rank %d: clock exchange after an earlier "
                       "ring failure", b->rank);
  int64_t deadline = rcoll_now_ms() + b->timeout_ms, best = INT64_MAX;
  rcollResult_t rc = rcollSuccess;
  int ping_first = b->rank % 2 == 1 || (b->nranks % 2 == 1 && b->rank == b->nranks - 1);
  for (int i = 0; i < rounds && rc == rcollSuccess; i++) {
    if (!ping_first)
      rc = rcoll_clock_serve(b, now_ns, deadline);
    if (rc == rcollSuccess)
      rc = rcoll_clock_ping(b, now_ns, deadline, &best, offset_ns);
    if (rc == rcollSuccess && ping_first)
      rc = rcoll_clock_serve(b, now_ns, deadline);
  }
  if (rc != rcollSuccess) {
    b->broken = 1;
    return rc;
  }
  *rtt_ns = best;
  return rcollSuccess;
}
