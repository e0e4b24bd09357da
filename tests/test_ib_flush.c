/* The verbs transport's iflush (GPUDirect RDMA flush), driven through its
 * ops table: a sender and a receiver comm in one process over the first RDMA
 * port, one thread driving both. There is no GPU under Soft-RoCE, so the
 * tests set RCOLL_IB_FLUSH=force, which reads back host receives exactly as
 * device ones: one RDMA READ of the received buffer on a queue pair
 * connected to itself. The read-back bytes land in the comm's flush buffer,
 * so a test can see that the READ really ran, at the right address.
 *
 * Without an RDMA device every case that needs one skips (init fails), unless
 * RCOLL_TEST_REQUIRE_NET=ib says the device must be there (inside the
 * Soft-RoCE VM, tests/check_rxe.sh): then it fails. The setting's parsing
 * needs no device and runs everywhere. */
#include <criterion/criterion.h>

#if RCOLL_HAVE_IBVERBS
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../transports/ib/ib.h"
#include "../transports/ib/ib_priv.h"
#include "support/ib_pair.h"

#define WAIT_MS 10000

static const rcoll_transport_ops_t *ops = &ib_ops;


/* A connected pair under RCOLL_IB_FLUSH=mode (NULL: unset), or a skip. */
static void pair_open(th_pair_t *p, const char *mode) {
  ib_pair_open(p, "RCOLL_IB_FLUSH", mode, 0, 0, WAIT_MS);
}

/* Tests req (and the other side's, which may need driving) until done, an
 * error or WAIT_MS: rcollInProgress then. */
static rcollResult_t wait_req(void *req, size_t *size, void *other, size_t *osize) {
  int done = 0, odone = other == NULL;
  int64_t end = rcoll_now_ms() + WAIT_MS;
  for (unsigned spin = 0; rcoll_now_ms() < end; spin++) {
    rcollResult_t r = done ? rcollSuccess : ops->test(req, &done, size);
    if (r == rcollSuccess && !odone)
      r = ops->test(other, &odone, osize);
    if (r != rcollSuccess || (done && odone))
      return r;
    if (spin > 64)
      sched_yield();
  }
  return rcollInProgress;
}

/* Message `msg` of `size` bytes from an unregistered buffer into rbuf
 * (registered as rmh); asserts the size reported and the contents. */
static void move(th_pair_t *p, int msg, size_t size, char *rbuf, void *rmh) {
  char *sbuf = malloc(size + 1);
  th_fill(sbuf, size, msg);
  void *sreq = NULL, *rreq = NULL;
  int tag = 0;
  cr_assert_eq(ops->irecv(p->recv, 1, (void **)&rbuf, &size, &tag, &rmh, &rreq), rcollSuccess, "%s",
               rcoll_error_text());
  cr_assert_eq(ops->isend(p->send, sbuf, size, 0, NULL, &sreq), rcollSuccess, "%s", rcoll_error_text());
  cr_assert(sreq && rreq, "a fresh connection ran out of requests");
  size_t got = 0, sent = 0;
  cr_assert_eq(wait_req(rreq, &got, sreq, &sent), rcollSuccess, "message %d of %zu bytes: %s", msg, size,
               rcoll_error_text());
  cr_assert_eq(got, size);
  cr_assert_eq(th_check(rbuf, size, msg), -1, "message %d of %zu bytes arrived damaged", msg, size);
  free(sbuf);
}

/* Flushes buf (registered as mh) and waits; returns the bytes the READ
 * brought back, asserting that a READ ran. */
static const char *flush(th_pair_t *p, char *buf, size_t size, void *mh) {
  void *req = NULL;
  ib_comm_t *c = p->recv;
  /* Cleared first: the READ may finish inside iflush (rxe runs it at once).
   * A new flush buffer starts zeroed. */
  if (c->flush != NULL)
    memset(c->flush->buf, 0, (size_t)IB_NFLUSH * IB_FLUSH_BYTES);
  cr_assert_eq(ops->iflush(p->recv, 1, (void **)&buf, &size, &mh, &req), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_not_null(req);
  cr_assert_not_null(c->flush, "no flush queue pair after a forced flush");
  ib_req_t *r = req;
  cr_assert_eq(r->kind, IB_REQ_FLUSH, "a forced flush of a registered buffer returned no READ");
  int slot = (int)(r - c->flush->reqs);
  cr_assert(slot >= 0 && slot < IB_NFLUSH);
  cr_assert_eq(wait_req(req, NULL, NULL, NULL), rcollSuccess, "flush: %s", rcoll_error_text());
  return c->flush->buf + (size_t)slot * IB_FLUSH_BYTES;
}

static void *reg(th_pair_t *p, void *buf, size_t size) {
  void *mh = NULL;
  cr_assert_eq(ops->reg_mr(p->recv, buf, size, RCOLL_MEM_HOST, &mh), rcollSuccess, "%s", rcoll_error_text());
  return mh;
}

Test(ib_flush, receive_then_flush_reads_back_the_data, .timeout = 120) {
  const size_t sizes[] = {1, 7, 8, 4096, 8193, 65537, 1 << 20};
  th_pair_t p;
  pair_open(&p, "force");
  char *buf = malloc((1 << 20) + 64);
  void *mh = reg(&p, buf, (1 << 20) + 64);
  for (int i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++) {
    move(&p, i, sizes[i], buf, mh);
    const char *back = flush(&p, buf, sizes[i], mh);
    size_t n = sizes[i] < IB_FLUSH_BYTES ? sizes[i] : IB_FLUSH_BYTES;
    cr_assert_eq(memcmp(back, buf, n), 0, "the flush READ of message %d did not read the received bytes", i);
    cr_assert_eq(th_check(buf, sizes[i], i), -1, "message %d changed under its flush", i);
  }
  ops->dereg_mr(p.recv, mh);
  th_pair_close(&p);
  free(buf);
}

Test(ib_flush, a_thousand_flushes_and_a_full_window, .timeout = 120) {
  th_pair_t p;
  pair_open(&p, "force");
  char buf[4096];
  void *mh = reg(&p, buf, sizeof buf);
  move(&p, 3, sizeof buf, buf, mh);
  int64_t t0 = rcoll_now_us();
  for (int i = 0; i < 1000; i++) {
    char *at = buf + (i * 8) % (sizeof buf - 8);
    cr_assert_eq(memcmp(flush(&p, at, 8, mh), at, 8), 0, "flush %d read the wrong bytes", i);
  }
  cr_log_info("1000 flushes in %.1f ms", (double)(rcoll_now_us() - t0) / 1000.0);
  /* IB_NFLUSH outstanding at once; one more is refused, not queued. */
  void *reqs[IB_NFLUSH], *extra = NULL, *b = buf, *m = mh;
  size_t sz = sizeof buf;
  for (int i = 0; i < IB_NFLUSH; i++)
    cr_assert_eq(ops->iflush(p.recv, 1, &b, &sz, &m, &reqs[i]), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_eq(ops->iflush(p.recv, 1, &b, &sz, &m, &extra), rcollInvalidUsage);
  cr_assert(strstr(rcoll_error_text(), "outstanding"), "%s", rcoll_error_text());
  for (int i = IB_NFLUSH - 1; i >= 0; i--) /* any order */
    cr_assert_eq(wait_req(reqs[i], NULL, NULL, NULL), rcollSuccess, "%s", rcoll_error_text());
  flush(&p, buf, sizeof buf, mh);
  move(&p, 4, sizeof buf, buf, mh);
  ops->dereg_mr(p.recv, mh);
  th_pair_close(&p);
}

/* auto and off leave host memory alone: no READ, no queue pair; force
 * skips what has no registration to read through and empty buffers. */
Test(ib_flush, host_memory_is_not_flushed_unless_forced, .timeout = 60) {
  const char *modes[] = {NULL, "auto", "0", "off", "force"};
  for (int k = 0; k < 5; k++) {
    th_pair_t p;
    pair_open(&p, modes[k]);
    char buf[256];
    void *mh = reg(&p, buf, sizeof buf), *none = NULL, *req = NULL, *b = buf;
    size_t sz = sizeof buf, zero = 0;
    move(&p, k, sizeof buf, buf, mh);
    int forced = k == 4;
    if (!forced) {
      cr_assert_eq(ops->iflush(p.recv, 1, &b, &sz, &mh, &req), rcollSuccess);
      cr_assert_eq(req, &ib_flush_token, "RCOLL_IB_FLUSH=%s flushed host memory", modes[k]);
    }
    cr_assert_eq(ops->iflush(p.recv, 1, &b, &sz, &none, &req), rcollSuccess);
    cr_assert_eq(req, &ib_flush_token, "an unregistered buffer was flushed");
    cr_assert_eq(ops->iflush(p.recv, 1, &b, &zero, &mh, &req), rcollSuccess);
    cr_assert_eq(req, &ib_flush_token, "an empty buffer was flushed");
    int done = 0;
    cr_assert_eq(ops->test(req, &done, NULL), rcollSuccess);
    cr_assert(done);
    cr_assert_null(((ib_comm_t *)p.recv)->flush, "a flush queue pair made with nothing to flush");
    if (forced)
      cr_assert_eq(memcmp(flush(&p, buf, sizeof buf, mh), buf, IB_FLUSH_BYTES), 0);
    ops->dereg_mr(p.recv, mh);
    th_pair_close(&p);
  }
}

/* A READ the NIC refuses (a registration without remote read) fails the
 * connection with a message naming the flush and the peer; every later
 * flush on it fails at once instead of waiting. */
Test(ib_flush, a_failed_read_fails_the_connection, .timeout = 60) {
  th_pair_t p;
  pair_open(&p, "force");
  ib_comm_t *c = p.recv;
  char *buf = aligned_alloc(4096, 8192);
  void *mh = reg(&p, buf, 4096);
  move(&p, 1, 4096, buf, mh);
  ib_mr_t *local_only = NULL;
  cr_assert_eq(ib_mr_get(c->ctx, buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE, RCOLL_MEM_HOST, &local_only),
               rcollSuccess, "%s", rcoll_error_text());
  void *b = buf + 4096, *m = local_only, *req = NULL;
  size_t sz = 64;
  cr_assert_eq(ops->iflush(p.recv, 1, &b, &sz, &m, &req), rcollSuccess, "%s", rcoll_error_text());
  rcollResult_t r = wait_req(req, NULL, NULL, NULL);
  cr_assert(r != rcollSuccess && r != rcollInProgress, "a READ without remote-read access succeeded");
  const char *msg = rcoll_error_text();
  cr_assert(strstr(msg, "flush") && strstr(msg, c->peer) && strstr(msg, "remote reads"), "message: %s", msg);
  cr_log_info("the failed flush said: %s", msg);
  int64_t t0 = rcoll_now_ms();
  b = buf, m = mh, sz = 4096;
  cr_assert_neq(ops->iflush(p.recv, 1, &b, &sz, &m, &req), rcollSuccess, "a flush on a failed connection");
  cr_assert(strstr(rcoll_error_text(), c->peer), "%s", rcoll_error_text());
  cr_assert_lt(rcoll_now_ms() - t0, 1000);
  ib_mr_put(c->ctx, local_only);
  ops->dereg_mr(p.recv, mh);
  th_pair_close(&p);
  free(buf);
}

/* The sender going away with a receive pending fails the connection (the
 * handshake socket closes); a flush then returns that error. */
Test(ib_flush, flush_after_the_peer_closed_returns_an_error, .timeout = 60) {
  th_pair_t p;
  pair_open(&p, "force");
  char buf[4096];
  void *mh = reg(&p, buf, sizeof buf), *b = buf, *req = NULL, *rreq = NULL;
  size_t sz = sizeof buf;
  int tag = 0, done = 0;
  move(&p, 2, sz, buf, mh);
  flush(&p, buf, sz, mh);
  cr_assert_eq(ops->irecv(p.recv, 1, &b, &sz, &tag, &mh, &rreq), rcollSuccess);
  ops->close_send(p.send);
  p.send = NULL;
  rcollResult_t r = rcollSuccess;
  for (int64_t end = rcoll_now_ms() + WAIT_MS; r == rcollSuccess && rcoll_now_ms() < end;) {
    r = ops->test(rreq, &done, NULL);
    cr_assert(!done, "a receive completed without a sender");
    ops->wait(&p.recv, 1, 10000);
  }
  cr_assert_eq(r, rcollRemoteError, "the receive did not fail within %d ms", WAIT_MS);
  cr_assert_neq(ops->iflush(p.recv, 1, &b, &sz, &mh, &req), rcollSuccess, "a flush on a failed connection");
  cr_assert(strstr(rcoll_error_text(), ((ib_comm_t *)p.recv)->peer), "%s", rcoll_error_text());
  ops->dereg_mr(p.recv, mh);
  th_pair_close(&p);
}
#endif

/* ---- RCOLL_IB_FLUSH's values: no device needed ---- */

#if RCOLL_HAVE_IBVERBS
Test(ib_flush_setting, values) {
  static const struct { const char *text; int mode; } good[] = {
      {NULL, IB_FLUSH_AUTO}, {"", IB_FLUSH_AUTO},  {"auto", IB_FLUSH_AUTO},   {"AUTO", IB_FLUSH_AUTO},
      {"0", IB_FLUSH_OFF},   {"off", IB_FLUSH_OFF}, {"force", IB_FLUSH_FORCE}, {"Force", IB_FLUSH_FORCE}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    int mode = -1;
    cr_assert_eq(ib_flush_mode_parse(good[i].text, &mode), rcollSuccess, "\"%s\"", good[i].text);
    cr_assert_eq(mode, good[i].mode, "\"%s\" gave %d", good[i].text, mode);
  }
  static const char *bad[] = {"1", "yes", "on", "forced", " auto"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int mode = -1;
    cr_assert_eq(ib_flush_mode_parse(bad[i], &mode), rcollInvalidArgument, "\"%s\" was accepted", bad[i]);
    cr_assert(strstr(rcoll_error_text(), "RCOLL_IB_FLUSH"), "%s", rcoll_error_text());
  }
}

/* init refuses a bad value before it looks for a device. */
Test(ib_flush_setting, init_refuses_a_bad_value) {
  rcoll_settings_t s;
  setenv("RCOLL_IB_FLUSH", "sometimes", 1);
  cr_assert_eq(rcoll_settings_load(&s), rcollInvalidArgument, "the loader knows the words too");
  cr_assert(strstr(rcoll_error_text(), "RCOLL_IB_FLUSH=sometimes"), "%s", rcoll_error_text());
  unsetenv("RCOLL_IB_FLUSH");
  cr_assert_eq(rcoll_settings_load(&s), rcollSuccess, "%s", rcoll_error_text());
  snprintf(ib_settings(&s)->ib_flush, sizeof ib_settings(&s)->ib_flush, "sometimes"); /* a snapshot made by hand */
  rcoll_net_config_t cfg = {.settings = &s, .secret = 1, .rank = 0};
  void *ctx = NULL;
  cr_assert_eq(ib_ops.init(&cfg, &ctx), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "RCOLL_IB_FLUSH=\"sometimes\""), "%s", rcoll_error_text());
}
#else
Test(ib_flush, not_built) { cr_skip_test("built without libibverbs (RCOLL_HAVE_IBVERBS)"); }
#endif
