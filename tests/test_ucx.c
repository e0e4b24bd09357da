/* The UCX transport, driven through its ops table as the engine drives it,
 * under UCX_TLS=tcp,self and UCX_TLS=posix,cma,self (each test sets UCX_TLS
 * before it creates contexts; Criterion runs every test in a process of its
 * own). Sender and receiver are two threads of one process, or two processes
 * where a peer must die. Payloads carry a pattern that depends on the message
 * number and offset, so a lost, reordered or truncated message shows.
 *
 * Set-up shared with the peer-death tests (tests/test_ucx_death.c) is in
 * tests/support/ucx_pair.h.
 */
#if RCOLL_HAVE_UCX

#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../transports/ucx/ucx_priv.h"
#include "support/ucx_pair.h"

static const char *const tls_list[] = {"tcp,self", "posix,cma,self"};

Test(ucx, sizes_under_both_transport_sets, .timeout = 180) {
  /* Eager, eager/rendezvous boundary region, rendezvous, and 64 MiB. */
  const size_t sizes[] = {0, 1, 4095, 8192 + 1, 65536, MIB + 13, 64 * MIB};
  for (int t = 0; t < NTLS; t++) {
    pair_t p;
    ucx_pair_open(&p, tls_list[t], 30, 0);
    ucx_pair_exchange(&p, 7, sizes, 0);
    ucx_pair_exchange(&p, 7, sizes, 3 * 65536 + 7); /* receives posted larger than the send */
    th_pair_close(&p);
  }
}

/* The log names the transports the endpoint ended up on: they must be the
 * ones UCX_TLS allows, and shared memory between processes of one host.
 * Peer failure handling is used unless it would exclude shared memory. */
Test(ucx, endpoint_uses_the_transports_ucx_tls_allows) {
  const char *want[NTLS] = {"tcp/", "posix/"};
  const char *never[NTLS] = {"posix/", "tcp/"};
  const int want_mode[NTLS] = {1, 0};
  for (int t = 0; t < NTLS; t++) {
    pair_t p;
    char lanes[256];
    ucx_pair_open(&p, tls_list[t], 30, 0);
    ucx_conn_t *c = p.send;
    ucx_lanes_summary(c->ep, lanes, sizeof lanes);
    cr_assert(strstr(lanes, want[t]) && !strstr(lanes, never[t]), "UCX_TLS=%s gave lanes '%s'", tls_list[t],
              lanes);
    cr_assert_eq(c->peer_mode, want_mode[t], "UCX_TLS=%s: peer failure handling %d", tls_list[t], c->peer_mode);
    cr_assert_eq(((ucx_ctx_t *)p.sctx)->has_shm, t == 1, "UCX_TLS=%s: shared memory misjudged", tls_list[t]);
    th_pair_close(&p);
  }
}

/* Peer failure handling forced for a local peer: TCP supports it; shared
 * memory does not, and the transport falls back. */
Test(ucx, peer_failure_mode_and_its_fallback, .timeout = 60) {
  const int want_mode[NTLS] = {1, 0};
  const size_t sizes[] = {3, 100000, 5 * MIB};
  for (int t = 0; t < NTLS; t++) {
    pair_t p;
    ucx_pair_open(&p, tls_list[t], 30, 1);
    cr_assert_eq(((ucx_conn_t *)p.send)->peer_mode, want_mode[t], "UCX_TLS=%s", tls_list[t]);
    ucx_pair_exchange(&p, 3, sizes, 0);
    th_pair_close(&p);
  }
}

/* More messages than request slots, of mixed sizes, in flight at once: both
 * sides meet NULL requests and order must hold. */
Test(ucx, many_in_flight_keep_order, .timeout = 120) {
  enum { N = 300 };
  size_t sizes[N];
  for (int i = 0; i < N; i++)
    sizes[i] = (i % 7 == 0) ? (size_t)(200000 + i * 977) : (size_t)((i * 37) % 9000);
  for (int t = 0; t < NTLS; t++) {
    pair_t p;
    ucx_pair_open(&p, tls_list[t], 30, 0);
    int nulls = ucx_pair_exchange(&p, N, sizes, 11);
    cr_assert_gt(nulls, 0, "300 messages never ran out of %d slots", UCX_NREQS);
    th_pair_close(&p);
  }
}

Test(ucx, out_of_slots_gives_null_request) {
  pair_t p;
  ucx_pair_open(&p, tls_list[0], 30, 0);
  th_expect_slot_pool(&p, UCX_NREQS, ucx_pair_wait_both);
  th_pair_close(&p);
}

static void expect_larger_error(const char *tls, size_t sent, size_t posted) {
  pair_t p;
  char *sb = calloc(1, sent), *rb = calloc(1, posted);
  void *sreq, *rreq, *rbp = rb;
  int tag = 0;
  ucx_pair_open(&p, tls, 30, 0);
  cr_assert_eq(ops->isend(p.send, sb, sent, 0, NULL, &sreq), rcollSuccess);
  cr_assert_eq(ops->irecv(p.recv, 1, &rbp, &posted, &tag, NULL, &rreq), rcollSuccess);
  rcollResult_t r = ucx_pair_wait_both(&p, rreq, NULL, 5000);
  cr_assert_eq(r, rcollInvalidUsage, "got %d: %s", r, rcoll_error_text());
  cr_assert(strstr(rcoll_error_text(), "larger than posted receive"), "text: %s", rcoll_error_text());
  /* The connection is dead now: later operations fail at once. */
  cr_assert_neq(ops->irecv(p.recv, 1, &rbp, &posted, &tag, NULL, &rreq), rcollSuccess);
  /* The sender's side of a truncated message is not waited for here: with
   * the rendezvous protocol it never completes, and close must not hang. */
  int64_t t0 = now_ms();
  th_pair_close(&p);
  cr_assert_lt(now_ms() - t0, 5000);
  free(sb);
  free(rb);
}

Test(ucx, message_larger_than_posted_receive_fails, .timeout = 60) {
  for (int t = 0; t < NTLS; t++) {
    expect_larger_error(tls_list[t], 1000, 999);
    expect_larger_error(tls_list[t], MIB, MIB / 2);
  }
}

static int raw_connect(const ucx_handle_t *h) {
  int fd = socket(h->addr.sa.sa_family, SOCK_STREAM, 0);
  cr_assert_eq(connect(fd, &h->addr.sa, rcoll_sockaddr_len(&h->addr)), 0);
  return fd;
}

/* A connection with the wrong secret and a stray one speaking another
 * protocol are dropped (the wrong secret learns it at connect) while the
 * right one is accepted, and only that one. */
Test(ucx, wrong_secret_is_dropped, .timeout = 60) {
  for (int t = 0; t < NTLS; t++) {
    pair_t p = {.ops = ops};
    setenv("UCX_TLS", tls_list[t], 1);
    ucx_pair_settings(&p.set, 30);
    p.rctx = th_ctx_new(ops, &p.set, SECRET);
    p.sctx = th_ctx_new(ops, &p.set, SECRET);
    void *bad_ctx = th_ctx_new(ops, &p.set, SECRET + 1), *bad = NULL, *dummy = NULL;
    cr_assert_eq(ops->listen(p.rctx, 0, p.handle, &p.listen), rcollSuccess);
    ucx_handle_t h;
    memcpy(&h, p.handle, sizeof h);
    int stray = raw_connect(&h);
    cr_assert_eq(send(stray, "GET / HTTP/1.0\r\n\r\n......", 24, 0), 24);
    rcollResult_t r = rcollSuccess;
    int64_t end = now_ms() + 5000;
    while (r == rcollSuccess && bad == NULL && now_ms() < end) {
      r = ops->connect(bad_ctx, 0, p.handle, &bad);
      cr_assert_eq(ops->accept(p.listen, &dummy), rcollSuccess);
      cr_assert_null(dummy, "the wrong secret was accepted");
    }
    cr_assert_eq(r, rcollRemoteError, "wrong-secret connect gave %d: %s", r, rcoll_error_text());
    cr_assert_null(bad);
    cr_assert(strstr(rcoll_error_text(), "wrong secret"), "text: %s", rcoll_error_text());
    /* The stray was closed by the listener. */
    char c;
    cr_assert_eq(recv(stray, &c, 1, 0), 0);
    ucx_pair_connect(&p);
    cr_assert_null(th_accept_for(ops, p.listen, 300), "a second connection was accepted");
    const size_t sizes[] = {5, 300000};
    ucx_pair_exchange(&p, 2, sizes, 0);
    close(stray);
    ops->finalize(bad_ctx);
    th_pair_close(&p);
  }
}

Test(ucx, properties_registration_and_flush) {
  pair_t p;
  rcoll_net_props_t props;
  int ndev = 0;
  ucx_pair_open(&p, tls_list[0], 30, 0);
  cr_assert_eq(ops->size, sizeof(rcoll_transport_ops_t));
  cr_assert_str_eq(ops->name, "ucx");
  cr_assert_eq(ops->devices(p.sctx, &ndev), rcollSuccess);
  cr_assert_eq(ndev, 1);
  cr_assert_eq(ops->get_properties(p.sctx, 0, &props), rcollSuccess);
  cr_assert_str_eq(props.name, "ucx:tcp,self");
  int cuda = (((ucx_ctx_t *)p.sctx)->mem_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  cr_assert_eq(props.ptr_support, RCOLL_PTR_HOST | (cuda ? RCOLL_PTR_CUDA : 0));
  cr_assert_eq(props.max_recvs, RCOLL_NET_MAX_RECVS);
  cr_assert_eq(props.reg_is_global, 1);
  cr_assert_neq(ops->get_properties(p.sctx, 1, &props), rcollSuccess);
  /* A registered buffer is used for a real transfer (UCX checks the handle
   * against the buffer), then unregistered. */
  size_t n = 3 * MIB;
  char *sbuf = malloc(n), *rbuf = malloc(n + 64);
  th_fill(sbuf, n, 9);
  void *smh = NULL, *rmh = NULL, *sreq, *rreq, *rbp = rbuf + 64, *empty = NULL;
  size_t rsz = n, got = 0;
  int tag = 0;
  cr_assert_eq(ops->reg_mr(p.send, sbuf, n, RCOLL_MEM_HOST, &smh), rcollSuccess);
  cr_assert_eq(ops->reg_mr(p.recv, rbuf, n + 64, RCOLL_MEM_HOST, &rmh), rcollSuccess);
  cr_assert_eq(ops->reg_mr(p.recv, rbuf, 0, RCOLL_MEM_HOST, &empty), rcollSuccess);
  cr_assert_eq(ops->isend(p.send, sbuf, n, 0, smh, &sreq), rcollSuccess);
  cr_assert_eq(ops->irecv(p.recv, 1, &rbp, &rsz, &tag, &rmh, &rreq), rcollSuccess);
  cr_assert_eq(ucx_pair_wait_both(&p, rreq, &got, 10000), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_eq(ucx_pair_wait_both(&p, sreq, NULL, 10000), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_eq(got, n);
  cr_assert_eq(th_check(rbuf + 64, n, 9), -1);
  cr_assert_eq(ops->dereg_mr(p.send, smh), rcollSuccess);
  cr_assert_eq(ops->dereg_mr(p.recv, rmh), rcollSuccess);
  cr_assert_eq(ops->dereg_mr(p.recv, empty), rcollSuccess);
  void *mh = NULL, *req = NULL;
  if (!cuda) {
    cr_assert_eq(ops->reg_mr(p.recv, rbuf, 64, RCOLL_MEM_CUDA, &mh), rcollInvalidUsage);
    cr_assert(strstr(rcoll_error_text(), "cannot register device memory"));
  }
  cr_assert_eq(ops->reg_mr(p.recv, rbuf, 64, 7, &mh), rcollInvalidArgument);
  int done = 0;
  cr_assert_eq(ops->iflush(p.recv, 1, &rbp, &rsz, &mh, &req), rcollSuccess);
  cr_assert_not_null(req, "a NULL flush request would read as 'out of slots'");
  cr_assert_eq(ops->test(req, &done, NULL), rcollSuccess);
  cr_assert_eq(done, 1);
  /* Grouped receives of 0 buffers, or of more than max_recvs, are refused
   * (tests/test_ucx_multi.c has the rest). */
  void *bufs[RCOLL_NET_MAX_RECVS + 1];
  size_t sizes[RCOLL_NET_MAX_RECVS + 1];
  int tags[RCOLL_NET_MAX_RECVS + 1];
  for (int i = 0; i <= RCOLL_NET_MAX_RECVS; i++)
    bufs[i] = rbuf, sizes[i] = 8, tags[i] = i;
  req = NULL;
  cr_assert_eq(ops->irecv(p.recv, RCOLL_NET_MAX_RECVS + 1, bufs, sizes, tags, NULL, &req), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "irecv of 9 buffers"), "text: %s", rcoll_error_text());
  cr_assert_null(req);
  cr_assert_eq(ops->irecv(p.recv, 0, bufs, sizes, tags, NULL, &req), rcollInvalidArgument);
  th_pair_close(&p);
  free(sbuf);
  free(rbuf);
}

/* wait sleeps in the kernel while nothing happens (little CPU over a long
 * timeout) and wakes when data arrives, long before its timeout. */
Test(ucx, wait_sleeps_and_wakes, .timeout = 60) {
  for (int t = 0; t < NTLS; t++) {
    pair_t p;
    ucx_pair_open(&p, tls_list[t], 30, 0);
    char buf[16];
    void *bp = buf, *rreq;
    size_t sz = sizeof buf;
    int tag = 0, done = 0;
    cr_assert_eq(ops->irecv(p.recv, 1, &bp, &sz, &tag, NULL, &rreq), rcollSuccess);
    cr_assert_eq(ops->test(rreq, &done, NULL), rcollSuccess);
    double c0 = th_thread_cpu_ms() / 1e3;
    int64_t t0 = now_ms();
    for (int i = 0; i < 5; i++)
      ops->wait(&p.recv, 1, 100000);
    int64_t slept = now_ms() - t0;
    double cpu = th_thread_cpu_ms() / 1e3 - c0;
    cr_assert_lt(cpu, 0.1, "UCX_TLS=%s: 5 idle waits of 100 ms used %.3f s of CPU", tls_list[t], cpu);
    cr_assert_geq(slept, 100, "UCX_TLS=%s: idle waits returned after %lld ms", tls_list[t], (long long)slept);
    th_late_send_t d = {.ops = ops, .comm = p.send, .delay_ms = 200, .size = 16};
    memcpy(d.buf, "wake up, rank!!", 16);
    pthread_t th;
    pthread_create(&th, NULL, th_late_send_run, &d);
    int64_t end = now_ms() + 5000;
    t0 = now_ms();
    while (!done && now_ms() < end) {
      ops->wait(&p.recv, 1, 5000000); /* 5 s: the data must end it */
      cr_assert_eq(ops->test(rreq, &done, NULL), rcollSuccess);
    }
    pthread_join(th, NULL);
    cr_assert_eq(done, 1);
    cr_assert_lt(now_ms() - t0, 2000, "UCX_TLS=%s: data took %lld ms to wake the wait", tls_list[t],
                 (long long)(now_ms() - t0));
    cr_assert_eq(memcmp(buf, "wake up, rank!!", 16), 0);
    th_pair_close(&p);
  }
}

/* Closing connections with a 64 MiB transfer in flight returns promptly. */
Test(ucx, close_never_hangs, .timeout = 60) {
  for (int t = 0; t < NTLS; t++) {
    pair_t p;
    size_t n = 64 * MIB;
    char *sb = calloc(1, n), *rb = malloc(n);
    void *sreq, *rreq, *rbp = rb;
    int tag = 0, done = 0;
    ucx_pair_open(&p, tls_list[t], 30, 0);
    cr_assert_eq(ops->isend(p.send, sb, n, 0, NULL, &sreq), rcollSuccess);
    cr_assert_eq(ops->irecv(p.recv, 1, &rbp, &n, &tag, NULL, &rreq), rcollSuccess);
    ops->test(rreq, &done, NULL);
    ops->test(sreq, &done, NULL);
    int64_t t0 = now_ms();
    ops->close_recv(p.recv);
    ops->close_send(p.send);
    p.send = p.recv = NULL;
    cr_assert_lt(now_ms() - t0, 3000, "UCX_TLS=%s: closing took %lld ms", tls_list[t], (long long)(now_ms() - t0));
    th_pair_close(&p);
    free(sb);
    free(rb);
  }
}

Test(ucx, bad_settings_are_rejected) {
  rcoll_settings_t s;
  rcoll_net_config_t cfg = {.settings = &s, .secret = 1};
  void *ctx = NULL;
  ucx_pair_settings(&s, 0);
  cr_assert_eq(ops->init(&cfg, &ctx), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "RCOLL_TIMEOUT"));
  ucx_pair_settings(&s, 30);
  snprintf(s.socket_ifname, sizeof s.socket_ifname, "=no-such-interface0");
  cr_assert_neq(ops->init(&cfg, &ctx), rcollSuccess);
  cr_assert_null(ctx);
  /* A handle of another transport is refused, not misread. */
  char handle[RCOLL_NET_HANDLE_BYTES] = {0};
  void *send = NULL;
  ucx_pair_settings(&s, 30);
  ctx = th_ctx_new(ops, &s, 1);
  cr_assert_eq(ops->connect(ctx, 0, handle, &send), rcollInvalidArgument);
  cr_assert_null(send);
  ops->finalize(ctx);
}

#else
/* Built without UCX: nothing to test, and Criterion still wants a test. */
#include <criterion/criterion.h>
Test(ucx, not_built) { cr_skip_test("rcoll was configured without UCX"); }
#endif
