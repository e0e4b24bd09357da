/* Connections back (net.h, listen_back / connect_back): a pair of ranks that
 * sends both ways shares one control socket, so that the receiver's
 * acknowledgements ride on its own messages. Loopback, one process: A
 * connects to B as usual, B connects back over the connection it accepted.
 * <linux/tcp.h> rather than <netinet/tcp.h>: only it has tcpi_segs_out. */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../transports/socket/socket_priv.h"
#include "clock.h"
#include "comm.h"
#include "error.h"
#include "rcoll.h"
#include "support/socket_pair.h"

/* Both directions of a pair: p is A -> B (made by socket_pair_open), back
 * is B -> A over p's control socket, with A's listener and handle. */
typedef struct both {
  pair_t p, back;
} both_t;

static void both_open(both_t *b, int nt, int ns) {
  memset(b, 0, sizeof *b);
  socket_pair_open(&b->p, "AF_INET", nt, ns, INLINE, 30);
  pair_t *q = &b->back;
  q->ops = ops;
  q->set = b->p.set;
  cr_assert_eq(ops->listen(b->p.sctx, 0, q->handle, &q->listen), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_eq(ops->listen_back(q->listen, b->p.send), rcollSuccess, "%s", rcoll_error_text());
  int64_t end = rcoll_now_ms() + 5000;
  while ((q->send == NULL || q->recv == NULL) && rcoll_now_ms() < end) {
    if (q->send == NULL)
      cr_assert_eq(ops->connect_back(b->p.rctx, q->handle, b->p.recv, &q->send), rcollSuccess, "%s",
                   rcoll_error_text());
    if (q->recv == NULL)
      cr_assert_eq(ops->accept(q->listen, &q->recv), rcollSuccess, "%s", rcoll_error_text());
  }
  cr_assert(q->send && q->recv, "the connection back was not made within 5 s");
}

static void both_close(both_t *b) {
  ops->close_send(b->back.send);
  ops->close_recv(b->back.recv);
  ops->close_listen(b->back.listen);
  b->back.send = b->back.recv = b->back.listen = NULL;
  th_pair_close(&b->p); /* finalizes both contexts */
}

/* "local port, peer port" of a socket: two descriptors of one socket agree. */
static void ends_of(int fd, int out[2]) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0, "%s", strerror(errno));
  out[0] = ntohs(a.sin_port);
  len = sizeof a;
  cr_assert_eq(getpeername(fd, (struct sockaddr *)&a, &len), 0, "%s", strerror(errno));
  out[1] = ntohs(a.sin_port);
}

static unsigned segs_out(int fd) {
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  cr_assert_eq(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len), 0, "%s", strerror(errno));
  return ti.tcpi_segs_out;
}

/* Segments one end sent on its send and recv comms' control sockets,
 * counting a shared socket once. */
static unsigned end_segs_out(const socket_conn_t *s, const socket_conn_t *r) {
  int x[2], y[2];
  ends_of(s->ctrl_fd, x);
  ends_of(r->ctrl_fd, y);
  return segs_out(s->ctrl_fd) + (x[0] == y[0] && x[1] == y[1] ? 0 : segs_out(r->ctrl_fd));
}

/* B's send comm writes on the very socket its recv comm reads (and A's
 * recv comm reads the one its send comm writes), while each data socket
 * still has one comm. */
Test(socket_back, the_connection_back_shares_the_control_socket, .timeout = 30) {
  both_t b;
  both_open(&b, 2, 1);
  const socket_conn_t *ab_s = b.p.send, *ab_r = b.p.recv, *ba_s = b.back.send, *ba_r = b.back.recv;
  int x[2], y[2];
  ends_of(ab_r->ctrl_fd, x);
  ends_of(ba_s->ctrl_fd, y);
  cr_assert(x[0] == y[0] && x[1] == y[1], "B sends back on %d<->%d, receives on %d<->%d", y[0], y[1], x[0], x[1]);
  cr_assert_neq(ab_r->ctrl_fd, ba_s->ctrl_fd, "each comm needs a descriptor of its own");
  ends_of(ab_s->ctrl_fd, x);
  ends_of(ba_r->ctrl_fd, y);
  cr_assert(x[0] == y[0] && x[1] == y[1], "A receives on %d<->%d, sends on %d<->%d", y[0], y[1], x[0], x[1]);
  cr_assert_eq(ba_s->ndata, 2);
  for (int s = 0; s < ba_s->ndata; s++) {
    ends_of(ba_s->data[s].fd, y);
    for (int t = 0; t < ab_r->ndata; t++) {
      ends_of(ab_r->data[t].fd, x);
      cr_assert(x[0] != y[0] || x[1] != y[1], "data socket %d is shared with the other direction", s);
    }
  }
  both_close(&b);
}

/* Messages of every path (inline, just over it, cut over the data sockets)
 * go both ways at once, whole and in order, and either direction closes
 * without breaking the other's last messages. */
Test(socket_back, messages_cross_both_ways_at_once, .timeout = 60) {
  both_t b;
  both_open(&b, 2, 2);
  const size_t sizes[] = {1, 8, INLINE, INLINE + 1, 3 * MIB, 0, 64 * 1024 + 3, 17};
  const int n = (int)(sizeof sizes / sizeof sizes[0]);
  th_stream_t *st[4] = {
      th_stream_new(ops, b.p.send, 1, n, sizes, 0, 1), th_stream_new(ops, b.p.recv, 0, n, sizes, 0, 1),
      th_stream_new(ops, b.back.send, 1, n, sizes, 0, 2), th_stream_new(ops, b.back.recv, 0, n, sizes, 0, 2)};
  pthread_t t[3];
  for (int i = 0; i < 3; i++)
    pthread_create(&t[i], NULL, th_stream_run, st[i]);
  th_stream_run(st[3]);
  for (int i = 0; i < 3; i++)
    pthread_join(t[i], NULL);
  char why[256];
  for (int i = 0; i < 4; i++)
    cr_assert_eq(st[i]->result, rcollSuccess, "stream %d: %s", i, st[i]->err);
  cr_assert_eq(th_stream_verify(st[1], sizes, why, sizeof why), 0, "A -> B: %s", why);
  cr_assert_eq(th_stream_verify(st[3], sizes, why, sizeof why), 0, "B -> A: %s", why);
  for (int i = 0; i < 4; i++)
    th_stream_free(st[i]);
  /* A closes its send comm: its recv comm keeps the shared socket, and B's
   * messages still arrive. */
  ops->close_send(b.p.send);
  b.p.send = NULL;
  const size_t one[] = {8, INLINE + 1};
  th_exchange(&b.back, 2, one, 0, 3);
  both_close(&b);
}

/* The point of it: a ping-pong of small messages takes one segment per
 * message each way, the acknowledgement riding on the reply. On two
 * one-way sockets the receiver's kernel sends a bare ACK for every second
 * message even in delayed-ACK mode (test_socket_tcp.c), 1.5 per message. */
Test(socket_back, acknowledgements_ride_on_the_replies, .timeout = 30) {
  both_t b;
  both_open(&b, 1, 1);
  const int rounds = 400;
  char sb[8], rb[8], *rbp = rb;
  size_t cap = sizeof rb;
  int tag = 0;
  unsigned a0 = end_segs_out(b.p.send, b.back.recv), b0 = end_segs_out(b.back.send, b.p.recv);
  for (int i = 0; i < rounds; i++) {
    pair_t *dir[2] = {&b.p, &b.back};
    for (int d = 0; d < 2; d++) {
      void *sreq, *rreq;
      size_t got = 0;
      memset(sb, 'a' + d, sizeof sb);
      memcpy(sb, &i, sizeof i);
      cr_assert_eq(ops->isend(dir[d]->send, sb, sizeof sb, 0, NULL, &sreq), rcollSuccess);
      cr_assert_eq(ops->irecv(dir[d]->recv, 1, (void **)&rbp, &cap, &tag, NULL, &rreq), rcollSuccess);
      cr_assert_eq(th_wait_req(ops, sreq, NULL, 5000), rcollSuccess);
      cr_assert_eq(th_wait_req(ops, rreq, &got, 5000), rcollSuccess);
      cr_assert(got == sizeof sb && memcmp(rb, sb, sizeof sb) == 0, "round %d, direction %d", i, d);
    }
  }
  unsigned sa = end_segs_out(b.p.send, b.back.recv) - a0, sbb = end_segs_out(b.back.send, b.p.recv) - b0;
  /* A few bare ACKs are allowed: the kernel's delayed-ACK timer may fire. */
  cr_assert_leq(sa, rounds + rounds / 10, "A sent %u segments for %d messages", sa, rounds);
  cr_assert_leq(sbb, rounds + rounds / 10, "B sent %u segments for %d messages", sbb, rounds);
  both_close(&b);
}

/* A watch whose peer never comes back is closed with the listener, and a
 * peer that sends garbage over it is dropped with a warning, leaving our
 * own send comm as it was. */
Test(socket_back, a_watch_without_a_peer_coming_back_is_harmless, .timeout = 30) {
  pair_t p;
  socket_pair_open(&p, "AF_INET", 1, 1, INLINE, 30);
  char handle[RCOLL_NET_HANDLE_BYTES];
  void *listen = NULL, *got = NULL;
  cr_assert_eq(ops->listen(p.sctx, 0, handle, &listen), rcollSuccess);
  cr_assert_eq(ops->listen_back(listen, p.send), rcollSuccess);
  /* B writes 48 bytes that are no hello on its side of the socket. */
  const socket_conn_t *r = p.recv;
  char junk[sizeof(socket_hello_t)];
  memset(junk, 0x5a, sizeof junk);
  cr_assert_eq(send(r->ctrl_fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
  int64_t end = rcoll_now_ms() + 200;
  while (rcoll_now_ms() < end && got == NULL)
    cr_assert_eq(ops->accept(listen, &got), rcollSuccess);
  cr_assert_null(got, "garbage over a watched socket made a connection");
  const size_t sizes[] = {8, INLINE + 1, MIB};
  th_exchange(&p, 3, sizes, 0, 1);
  cr_assert_eq(ops->close_listen(listen), rcollSuccess);
  th_exchange(&p, 3, sizes, 0, 2);
  th_pair_close(&p);
}

/* ---- through the engine (lib/conn.c): who connects back, and when ---- */

static int same_socket(const void *send_comm, const void *recv_comm) {
  int x[2], y[2];
  ends_of(((const socket_conn_t *)send_comm)->ctrl_fd, x);
  ends_of(((const socket_conn_t *)recv_comm)->ctrl_fd, y);
  return x[0] == y[0] && x[1] == y[1];
}

static void init_pair(rcollComm_t comms[2]) {
  setenv("RCOLL_NET", "socket", 1);
  setenv("RCOLL_TIMEOUT", "20", 1);
  cr_assert_eq(rcollCommInitAll(comms, 2, NULL), rcollSuccess, "%s", rcollGetLastError(NULL));
}

static void allreduce_checked(rcollComm_t comms[2], size_t count) {
  float *buf[2];
  cr_assert_eq(rcollGroupStart(), rcollSuccess);
  for (int r = 0; r < 2; r++) {
    buf[r] = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++)
      buf[r][i] = (float)(i % 13) + (float)r;
    cr_assert_eq(rcollAllReduce(buf[r], buf[r], count, rcollFloat32, rcollSum, comms[r], NULL), rcollSuccess,
                 "%s", rcollGetLastError(NULL));
  }
  cr_assert_eq(rcollGroupEnd(), rcollSuccess, "%s", rcollGetLastError(NULL));
  for (int r = 0; r < 2; r++) {
    for (size_t i = 0; i < count; i++)
      cr_assert_eq(buf[r][i], 2.0f * (float)(i % 13) + 1.0f, "rank %d, element %zu", r, i);
    free(buf[r]);
  }
}

/* from -> to only, then checked. */
static void one_way(rcollComm_t comms[2], int from, size_t count) {
  int *s = malloc(count * sizeof *s), *d = calloc(count, sizeof *d);
  for (size_t i = 0; i < count; i++)
    s[i] = (int)i * 7 + from;
  cr_assert_eq(rcollGroupStart(), rcollSuccess);
  cr_assert_eq(rcollSend(s, count, rcollInt32, 1 - from, comms[from], NULL), rcollSuccess, "%s",
               rcollGetLastError(NULL));
  cr_assert_eq(rcollRecv(d, count, rcollInt32, from, comms[1 - from], NULL), rcollSuccess, "%s",
               rcollGetLastError(NULL));
  cr_assert_eq(rcollGroupEnd(), rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_assert_arr_eq(d, s, count * sizeof *s);
  free(s);
  free(d);
}

/* An all-reduce between two ranks needs both directions at once: rank 1
 * waits for rank 0's connection and comes back over it, on both ranks. */
Test(socket_back, an_exchange_between_two_ranks_shares_one_control_socket, .timeout = 60) {
  rcollComm_t comms[2];
  init_pair(comms);
  allreduce_checked(comms, 1000);
  for (int r = 0; r < 2; r++) {
    const rcoll_peer_t *pe = &comms[r]->peers[1 - r];
    cr_assert(pe->send_comm && pe->recv_comm);
    cr_assert(same_socket(pe->send_comm, pe->recv_comm), "rank %d sends and receives on two sockets", r);
  }
  allreduce_checked(comms, 300000);
  for (int r = 0; r < 2; r++)
    cr_assert_eq(rcollCommDestroy(comms[r]), rcollSuccess);
}

/* One direction first: the other, made later, comes back over it when the
 * higher rank is the one that starts sending (it has the connection to
 * come back over), and is a connection of its own when the lower rank is
 * (it cannot wait for one the peer may never make). Neither waits for
 * anything that does not come. */
Test(socket_back, one_way_first_then_the_other_way, .timeout = 60) {
  for (int from = 0; from < 2; from++) {
    rcollComm_t comms[2];
    init_pair(comms);
    one_way(comms, from, 5);
    cr_assert_null(comms[1 - from]->peers[from].send_comm, "from %d: a connection nobody needed", from);
    one_way(comms, 1 - from, 70000);
    allreduce_checked(comms, 33);
    const rcoll_peer_t *pe = &comms[1]->peers[0];
    cr_assert_eq(same_socket(pe->send_comm, pe->recv_comm), from == 0,
                 "rank 0 sent first: rank 1 %s back", from == 0 ? "did not come" : "came");
    for (int r = 0; r < 2; r++)
      cr_assert_eq(rcollCommDestroy(comms[r]), rcollSuccess);
  }
}
