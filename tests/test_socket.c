/* The socket transport, driven through its ops table as the engine drives it:
 * a sender thread and a receiver thread in one process over loopback (IPv4,
 * and IPv6 where ::1 exists). Payloads carry a pattern that depends on the
 * message number and offset, so a lost, reordered or truncated piece shows. */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../transports/socket/socket_priv.h"
#include "error.h"
#include "support/socket_pair.h"

static int64_t now_ms(void) { return rcoll_now_ms(); }

static int have_ipv6(void) {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (fd >= 0)
    close(fd);
  return ok;
}

static const struct { int nt, ns; } configs[] = {{1, 1}, {2, 1}, {4, 2}};

Test(socket, sizes_across_configs_and_families, .timeout = 120) {
  const size_t sizes[] = {0, 1, 4095, INLINE, INLINE + 1, MIB + 13, 64 * MIB};
  const char *fams[] = {"AF_INET", "AF_INET6"};
  for (int f = 0; f < 1 + have_ipv6(); f++)
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
      pair_t p;
      socket_pair_open(&p, fams[f], configs[c].nt, configs[c].ns, INLINE, 30);
      socket_pair_exchange(&p, 7, sizes, 0);
      socket_pair_exchange(&p, 7, sizes, 3 * 65536 + 7); /* receives posted larger than the send */
      th_pair_close(&p);
    }
}

Test(socket, ipv6_loopback_is_used_when_asked) {
  if (!have_ipv6())
    cr_skip_test("no ::1 on this machine");
  pair_t p;
  socket_pair_open(&p, "AF_INET6", 1, 1, INLINE, 30);
  socket_handle_t h;
  memcpy(&h, p.handle, sizeof h);
  cr_assert_eq(h.addr.sa.sa_family, AF_INET6);
  cr_assert(IN6_IS_ADDR_LOOPBACK(&h.addr.sin6.sin6_addr));
  cr_assert_neq(rcoll_sockaddr_port(&h.addr), 0);
  th_pair_close(&p);
}

/* More messages than request slots, of mixed sizes, in flight at once: both
 * sides meet NULL requests and order must hold. */
Test(socket, many_in_flight_keep_order, .timeout = 60) {
  enum { N = 300 };
  size_t sizes[N];
  for (int i = 0; i < N; i++)
    sizes[i] = (i % 7 == 0) ? (size_t)(200000 + i * 977) : (size_t)((i * 37) % (INLINE + 100));
  for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
    pair_t p;
    socket_pair_open(&p, "AF_INET", configs[c].nt, configs[c].ns, INLINE, 30);
    socket_pair_exchange(&p, N, sizes, 11);
    th_pair_close(&p);
  }
}

static rcollResult_t wait_one(pair_t *p, void *req, size_t *size, int64_t ms) {
  return th_wait_req(p->ops, req, size, ms);
}

Test(socket, out_of_slots_gives_null_request) {
  pair_t p;
  socket_pair_open(&p, "AF_INET", 1, 1, INLINE, 30);
  th_expect_slot_pool(&p, SOCKET_NREQS, wait_one);
  th_pair_close(&p);
}

static void expect_larger_error(size_t sent, size_t posted) {
  pair_t p;
  char *sb = calloc(1, sent), *rb = calloc(1, posted);
  void *sreq, *rreq, *rbp = rb;
  int tag = 0;
  socket_pair_open(&p, "AF_INET", 2, 1, INLINE, 30);
  cr_assert_eq(ops->isend(p.send, sb, sent, 0, NULL, &sreq), rcollSuccess);
  cr_assert_eq(ops->irecv(p.recv, 1, &rbp, &posted, &tag, NULL, &rreq), rcollSuccess);
  rcollResult_t r = th_wait_req(ops, rreq, NULL, 5000);
  cr_assert_eq(r, rcollInvalidUsage, "got %d: %s", r, rcoll_error_text());
  char want[128];
  snprintf(want, sizeof want, "message of %zu bytes", sent);
  cr_assert(strstr(rcoll_error_text(), want) && strstr(rcoll_error_text(), "larger than posted receive"),
            "text: %s", rcoll_error_text());
  /* The connection is dead now: later operations fail at once. */
  cr_assert_neq(ops->irecv(p.recv, 1, &rbp, &posted, &tag, NULL, &rreq), rcollSuccess);
  th_pair_close(&p);
  free(sb);
  free(rb);
}

Test(socket, message_larger_than_posted_receive_fails) {
  expect_larger_error(1000, 999);
  expect_larger_error(MIB, MIB / 2);
}

/* The sender queues 64 MiB (more than the socket buffers hold), then closes
 * mid-transfer; the receiver must fail with a remote error, not hang. */
Test(socket, peer_close_mid_transfer_fails_receiver, .timeout = 30) {
  pair_t p;
  size_t n = 64 * MIB;
  char *sb = malloc(n), *rb = malloc(n);
  void *sreq, *rreq, *rbp = rb;
  int tag = 0;
  th_fill(sb, n, 0);
  socket_pair_open(&p, "AF_INET", 1, 1, INLINE, 30);
  cr_assert_eq(ops->isend(p.send, sb, n, 0, NULL, &sreq), rcollSuccess);
  usleep(100 * 1000); /* the helper fills the socket buffers and blocks */
  int64_t t0 = now_ms();
  ops->close_send(p.send);
  p.send = NULL;
  cr_assert_lt(now_ms() - t0, 1000, "close_send took %lld ms", (long long)(now_ms() - t0));
  cr_assert_eq(ops->irecv(p.recv, 1, &rbp, &n, &tag, NULL, &rreq), rcollSuccess);
  t0 = now_ms();
  rcollResult_t r = th_wait_req(ops, rreq, NULL, 10000);
  cr_assert_eq(r, rcollRemoteError, "got %d: %s", r, rcoll_error_text());
  cr_assert_lt(now_ms() - t0, 5000);
  cr_assert(strstr(rcoll_error_text(), "closed by peer"), "text: %s", rcoll_error_text());
  cr_assert(strstr(rcoll_error_text(), "127.0.0.1:"), "text names no address: %s", rcoll_error_text());
  th_pair_close(&p);
  free(sb);
  free(rb);
}

/* The receiver goes away without reading: the sender's request fails. */
Test(socket, peer_close_fails_sender, .timeout = 30) {
  pair_t p;
  size_t n = 64 * MIB;
  char *sb = calloc(1, n);
  void *sreq;
  socket_pair_open(&p, "AF_INET", 2, 1, INLINE, 30);
  cr_assert_eq(ops->isend(p.send, sb, n, 0, NULL, &sreq), rcollSuccess);
  usleep(50 * 1000);
  int64_t t0 = now_ms();
  ops->close_recv(p.recv);
  p.recv = NULL;
  cr_assert_lt(now_ms() - t0, 1000);
  rcollResult_t r = th_wait_req(ops, sreq, NULL, 10000);
  cr_assert_eq(r, rcollRemoteError, "got %d: %s", r, rcoll_error_text());
  void *req2;
  cr_assert_eq(ops->isend(p.send, sb, 10, 0, NULL, &req2), rcollRemoteError, "later ops must fail fast");
  th_pair_close(&p);
  free(sb);
}

/* A raw peer speaking the wire format: announces a message, sends part of it
 * and stalls, so the receiver must time out. */
static int raw_connect(const socket_handle_t *h) {
  int fd = socket(h->addr.sa.sa_family, SOCK_STREAM, 0);
  cr_assert_eq(connect(fd, &h->addr.sa, rcoll_sockaddr_len(&h->addr)), 0);
  return fd;
}

static void raw_hello(int fd, uint64_t secret, uint64_t id, int index) {
  socket_hello_t hello = {.magic = SOCKET_MAGIC, .secret = secret, .conn_id = id, .inline_max = INLINE,
                          .index = (uint16_t)index, .nsocks_total = 2, .nthreads = 1, .nsocks_per = 1};
  cr_assert_eq(send(fd, &hello, sizeof hello, 0), (ssize_t)sizeof hello);
}

Test(socket, stalled_sender_times_out, .timeout = 30) {
  rcoll_settings_t s;
  char handle[RCOLL_NET_HANDLE_BYTES];
  void *listen;
  socket_pair_settings(&s, "AF_INET", 1, 1, INLINE, 1);
  void *ctx = th_ctx_new(ops, &s, SECRET);
  cr_assert_eq(ops->listen(ctx, 0, handle, &listen), rcollSuccess);
  socket_handle_t h;
  memcpy(&h, handle, sizeof h);
  int ctrl = raw_connect(&h), data = raw_connect(&h);
  raw_hello(data, SECRET, 42, 1);
  raw_hello(ctrl, SECRET, 42, 0);
  void *recv = th_accept_for(ops, listen, 3000);
  cr_assert_not_null(recv);
  size_t n = MIB;
  char *rb = malloc(n);
  void *rbp = rb, *rreq;
  int tag = 0;
  socket_msg_hdr_t hdr = {.size = n, .tag = 0, .seq = 0};
  cr_assert_eq(send(ctrl, &hdr, sizeof hdr, 0), (ssize_t)sizeof hdr);
  cr_assert_eq(send(data, rb, 100000, 0), 100000);
  cr_assert_eq(ops->irecv(recv, 1, &rbp, &n, &tag, NULL, &rreq), rcollSuccess);
  int64_t t0 = now_ms();
  rcollResult_t r = th_wait_req(ops, rreq, NULL, 10000);
  int64_t dt = now_ms() - t0;
  cr_assert_eq(r, rcollTimeout, "got %d: %s", r, rcoll_error_text());
  cr_assert(dt >= 900 && dt < 3000, "timed out after %lld ms, configured 1 s", (long long)dt);
  ops->close_recv(recv);
  close(ctrl);
  close(data);
  ops->close_listen(listen);
  ops->finalize(ctx);
  free(rb);
}

/* A connection with the wrong secret and a stray one with a bad magic are
 * dropped while the right one is accepted, and only that one. */
Test(socket, wrong_secret_is_dropped, .timeout = 30) {
  pair_t p = {.ops = ops};
  socket_pair_settings(&p.set, "AF_INET", 2, 1, INLINE, 30);
  p.rctx = th_ctx_new(ops, &p.set, SECRET);
  p.sctx = th_ctx_new(ops, &p.set, SECRET);
  void *bad_ctx = th_ctx_new(ops, &p.set, SECRET + 1), *bad = NULL;
  cr_assert_eq(ops->listen(p.rctx, 0, p.handle, &p.listen), rcollSuccess);
  socket_handle_t h;
  memcpy(&h, p.handle, sizeof h);
  int stray = raw_connect(&h); /* half a connection: a control socket alone */
  raw_hello(stray, SECRET, 7, 0);
  int stray2 = raw_connect(&h);
  cr_assert_eq(send(stray2, "GET / HTTP/1.0\r\n\r\n......................................", 48, 0), 48);
  int64_t end = now_ms() + 5000;
  while ((bad == NULL || p.send == NULL) && now_ms() < end) {
    if (bad == NULL)
      cr_assert_eq(ops->connect(bad_ctx, 0, p.handle, &bad), rcollSuccess);
    if (p.send == NULL)
      cr_assert_eq(ops->connect(p.sctx, 0, p.handle, &p.send), rcollSuccess);
  }
  cr_assert(bad && p.send);
  p.recv = th_accept_for(ops, p.listen, 3000);
  cr_assert_not_null(p.recv);
  cr_assert_null(th_accept_for(ops, p.listen, 300), "a second connection was accepted");
  /* The stray with a bad magic was closed by the listener. */
  char c;
  cr_assert_eq(recv(stray2, &c, 1, 0), 0);
  const size_t sizes[] = {5, 300000};
  socket_pair_exchange(&p, 2, sizes, 0);
  /* The dropped connection learns it when its data is refused. */
  char *big = calloc(1, 32 * MIB);
  void *req;
  cr_assert_eq(ops->isend(bad, big, 32 * MIB, 0, NULL, &req), rcollSuccess);
  cr_assert_eq(th_wait_req(ops, req, NULL, 10000), rcollRemoteError);
  ops->close_send(bad);
  ops->finalize(bad_ctx);
  close(stray);
  close(stray2);
  th_pair_close(&p);
  free(big);
}

Test(socket, properties_registration_and_flush) {
  pair_t p;
  rcoll_net_props_t props;
  int ndev = 0;
  socket_pair_open(&p, "AF_INET", 1, 1, INLINE, 30);
  cr_assert_eq(ops->size, sizeof(rcoll_transport_ops_t));
  cr_assert_str_eq(ops->name, "socket");
  cr_assert_eq(ops->devices(p.sctx, &ndev), rcollSuccess);
  cr_assert_eq(ndev, 1);
  cr_assert_eq(ops->get_properties(p.sctx, 0, &props), rcollSuccess);
  cr_assert_str_eq(props.name, "lo");
  cr_assert_eq(props.ptr_support, RCOLL_PTR_HOST);
  cr_assert_eq(props.max_recvs, RCOLL_NET_MAX_RECVS);
  cr_assert_eq(props.reg_is_global, 1);
  cr_assert_gt(props.speed_mbps, 0);
  cr_assert_neq(ops->get_properties(p.sctx, 1, &props), rcollSuccess);
  char buf[64];
  void *mh = NULL, *req = NULL, *bp = buf;
  size_t sz = sizeof buf;
  int done = 0;
  cr_assert_eq(ops->reg_mr(p.recv, buf, sizeof buf, RCOLL_MEM_HOST, &mh), rcollSuccess);
  cr_assert_not_null(mh);
  cr_assert_eq(ops->dereg_mr(p.recv, mh), rcollSuccess);
  cr_assert_eq(ops->reg_mr(p.recv, buf, sizeof buf, RCOLL_MEM_CUDA, &mh), rcollInvalidUsage);
  cr_assert(strstr(rcoll_error_text(), "cannot register device memory"));
  cr_assert_eq(ops->iflush(p.recv, 1, &bp, &sz, &mh, &req), rcollSuccess);
  cr_assert_not_null(req, "a NULL flush request would read as 'out of slots'");
  cr_assert_eq(ops->test(req, &done, NULL), rcollSuccess);
  cr_assert_eq(done, 1);
  /* Grouped receives: 0 buffers, or more than max_recvs, are refused. */
  void *bufs[RCOLL_NET_MAX_RECVS + 1];
  size_t sizes[RCOLL_NET_MAX_RECVS + 1];
  int tags[RCOLL_NET_MAX_RECVS + 1];
  for (int i = 0; i <= RCOLL_NET_MAX_RECVS; i++)
    bufs[i] = buf, sizes[i] = 8, tags[i] = i;
  cr_assert_eq(ops->irecv(p.recv, RCOLL_NET_MAX_RECVS + 1, bufs, sizes, tags, NULL, &req), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "irecv of 9 buffers"), "text: %s", rcoll_error_text());
  cr_assert_null(req);
  cr_assert_eq(ops->irecv(p.recv, 0, bufs, sizes, tags, NULL, &req), rcollInvalidArgument);
  th_pair_close(&p);
}

Test(socket, bad_settings_are_rejected) {
  rcoll_settings_t s;
  rcoll_net_config_t cfg = {.settings = &s, .secret = 1};
  void *ctx = NULL;
  socket_pair_settings(&s, "AF_INET", 0, 1, INLINE, 30);
  cr_assert_eq(ops->init(&cfg, &ctx), rcollInvalidArgument);
  socket_pair_settings(&s, "AF_INET", 16, 8, INLINE, 30);
  cr_assert_eq(ops->init(&cfg, &ctx), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "NSOCKS_PERTHREAD"));
  socket_pair_settings(&s, "AF_INET", 2, 1, -1, 30);
  cr_assert_eq(ops->init(&cfg, &ctx), rcollInvalidArgument);
  socket_pair_settings(&s, "AF_INET", 2, 1, INLINE, 30);
  socket_settings(&s)->socket_sndbuf = -1;
  cr_assert_eq(ops->init(&cfg, &ctx), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "RCOLL_SOCKET_SNDBUF=-1 is out of range"), "text: %s", rcoll_error_text());
  cr_assert_null(ctx);
}

/* Closing a connection whose helpers are blocked (sender with a full socket,
 * receiver waiting for data) returns promptly. */
Test(socket, close_never_hangs, .timeout = 30) {
  pair_t p;
  size_t n = 64 * MIB;
  char *sb = calloc(1, n), *rb = malloc(n);
  void *sreq, *rreq, *rbp = rb;
  int tag = 0;
  socket_pair_open(&p, "AF_INET", 4, 2, INLINE, 30);
  cr_assert_eq(ops->isend(p.send, sb, n, 0, NULL, &sreq), rcollSuccess);
  cr_assert_eq(ops->irecv(p.recv, 1, &rbp, &n, &tag, NULL, &rreq), rcollSuccess);
  int done = 0;
  ops->test(rreq, &done, NULL);
  int64_t t0 = now_ms();
  ops->close_recv(p.recv);
  ops->close_send(p.send);
  p.send = p.recv = NULL;
  cr_assert_lt(now_ms() - t0, 1000, "closing took %lld ms", (long long)(now_ms() - t0));
  th_pair_close(&p);
  free(sb);
  free(rb);
}

/* A receive is read by its first test, not when posted; the engine's wait
 * must still wake for it: a posted, never-tested receive whose message has
 * arrived makes socket_wait return long before its timeout. */
Test(socket, wait_wakes_for_a_posted_receive, .timeout = 30) {
  pair_t p;
  char sb[8] = "8 bytes", rb[8] = "", *rbp = rb;
  size_t cap = sizeof rb, got = 0;
  void *sreq, *rreq;
  int tag = 0;
  socket_pair_open(&p, "AF_INET", 1, 1, INLINE, 30);
  cr_assert_eq(ops->irecv(p.recv, 1, (void **)&rbp, &cap, &tag, NULL, &rreq), rcollSuccess);
  cr_assert_not_null(rreq);
  cr_assert_eq(ops->isend(p.send, sb, sizeof sb, 0, NULL, &sreq), rcollSuccess);
  cr_assert_eq(th_wait_req(ops, sreq, NULL, 5000), rcollSuccess);
  int64_t t0 = now_ms();
  cr_assert_eq(ops->wait(&p.recv, 1, 10 * 1000 * 1000), rcollSuccess);
  cr_assert_lt(now_ms() - t0, 5000, "wait slept %lld ms with a message pending", (long long)(now_ms() - t0));
  cr_assert_eq(th_wait_req(ops, rreq, &got, 5000), rcollSuccess);
  cr_assert_eq(got, sizeof sb);
  cr_assert_arr_eq(rb, sb, sizeof sb);
  th_pair_close(&p);
}

/* A helper rings the eventfd when it finishes a large message while the
 * caller waits; wait drains the ring only when poll saw it. A ring left
 * behind may end one later wait early, never every later one: once the
 * message is done, one of two idle waits must sleep its whole timeout. */
Test(socket, wait_doorbell_does_not_stay_rung, .timeout = 60) {
  pair_t p;
  size_t n = 8 * MIB, got = 0;
  char *sb = malloc(n), *rb = malloc(n), *rbp = rb;
  void *sreq, *rreq;
  int tag = 0, done = 0;
  th_fill(sb, n, 3);
  socket_pair_open(&p, "AF_INET", 2, 1, INLINE, 30);
  cr_assert_eq(ops->irecv(p.recv, 1, (void **)&rbp, &n, &tag, NULL, &rreq), rcollSuccess);
  cr_assert_eq(ops->isend(p.send, sb, n, 0, NULL, &sreq), rcollSuccess);
  for (int64_t t0 = now_ms(); !done && now_ms() - t0 < 20000;) {
    cr_assert_eq(ops->test(rreq, &done, &got), rcollSuccess, "%s", rcoll_error_text());
    if (!done)
      ops->wait(&p.recv, 1, 1000 * 1000);
  }
  cr_assert(done, "8 MiB did not arrive in 20 s");
  cr_assert_eq(th_check(rb, n, 3), -1);
  cr_assert_eq(th_wait_req(ops, sreq, NULL, 5000), rcollSuccess);
  int64_t slept = 0;
  for (int i = 0; i < 2 && slept < 150; i++) {
    int64_t t0 = now_ms();
    ops->wait(&p.recv, 1, 200 * 1000);
    slept = now_ms() - t0;
  }
  cr_assert_geq(slept, 150, "two idle waits of 200 ms both returned early (%lld ms)", (long long)slept);
  th_pair_close(&p);
  free(sb);
  free(rb);
}

/* The inline path's edge: a peer announces a message just under the inline
 * threshold, sends part of its payload on the control socket and dies. The
 * receive fails with a remote error naming the peer's address and the
 * message, instead of waiting for bytes that will never come. */
Test(socket, peer_dies_mid_inline_message, .timeout = 30) {
  rcoll_settings_t s;
  char handle[RCOLL_NET_HANDLE_BYTES];
  void *listen;
  socket_pair_settings(&s, "AF_INET", 1, 1, INLINE, 30);
  void *ctx = th_ctx_new(ops, &s, SECRET);
  cr_assert_eq(ops->listen(ctx, 0, handle, &listen), rcollSuccess);
  socket_handle_t h;
  memcpy(&h, handle, sizeof h);
  int ctrl = raw_connect(&h), data = raw_connect(&h);
  raw_hello(data, SECRET, 43, 1);
  raw_hello(ctrl, SECRET, 43, 0);
  void *recv = th_accept_for(ops, listen, 3000);
  cr_assert_not_null(recv);
  size_t n = INLINE - 1;
  char rb[INLINE], part[100] = {0};
  void *rbp = rb, *rreq;
  int tag = 0;
  cr_assert_eq(ops->irecv(recv, 1, &rbp, &n, &tag, NULL, &rreq), rcollSuccess);
  socket_msg_hdr_t hdr = {.size = n, .tag = 0, .seq = 0};
  cr_assert_eq(send(ctrl, &hdr, sizeof hdr, 0), (ssize_t)sizeof hdr);
  cr_assert_eq(send(ctrl, part, sizeof part, 0), (ssize_t)sizeof part);
  close(ctrl);
  close(data);
  int64_t t0 = now_ms();
  rcollResult_t r = th_wait_req(ops, rreq, NULL, 10000);
  cr_assert_eq(r, rcollRemoteError, "got %d: %s", r, rcoll_error_text());
  cr_assert_lt(now_ms() - t0, 5000);
  char want[64];
  snprintf(want, sizeof want, "while receiving %zu bytes", n);
  cr_assert(strstr(rcoll_error_text(), "closed by peer") && strstr(rcoll_error_text(), want),
            "text: %s", rcoll_error_text());
  cr_assert(strstr(rcoll_error_text(), "127.0.0.1:"), "text names no address: %s", rcoll_error_text());
  ops->close_recv(recv);
  ops->close_listen(listen);
  ops->finalize(ctx);
}
