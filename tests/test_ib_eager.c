/* The verbs transport's eager protocol and device memory, driven through its
 * ops table: a sender and a receiver comm in one process over the first RDMA
 * port, one thread driving both.
 *
 * Eager messages are copied by the CPU (into a host landing buffer, and out
 * of it), so they must never touch device memory. There is no GPU under
 * Soft-RoCE; these tests make a context act as if nvidia-peermem were loaded
 * (ctx->gdr), which is what RCOLL_IB_EAGER=auto looks at and what lets
 * reg_mr accept RCOLL_MEM_CUDA: the registration is then host memory made
 * through the same ibv_reg_mr, and the transport treats it as device memory
 * on every path. Such "device" buffers are mprotect'ed PROT_NONE while the
 * transport owns them: the NIC reaches their pinned pages without the CPU's
 * page tables, while any CPU read or write faults and crashes the test.
 *
 * Without an RDMA device the cases that need one skip (init fails), unless
 * RCOLL_TEST_REQUIRE_NET=ib says the device must be there (inside the
 * Soft-RoCE VM, tests/check_rxe.sh step ib-eager): then they fail. */
#include <criterion/criterion.h>

#if RCOLL_HAVE_IBVERBS
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../transports/ib/ib.h"
#include "../transports/ib/ib_priv.h"
#include "support/ib_pair.h"

#define WAIT_MS 10000
#define QUIET_MS 300 /* how long a send that must wait for its credit is watched */
#define NMSG 12
#define SPAN 12288   /* bytes between messages in a buffer region: room for 8 KiB + 1 */

static const rcoll_transport_ops_t *ops = &ib_ops;
/* Sent before the receiver posts anything: empty, 1 byte, the largest
 * eager size and one byte more, three times. */
static const size_t stream[NMSG] = {0, 1, IB_EAGER_BYTES, IB_EAGER_BYTES + 1, 0, 1, IB_EAGER_BYTES,
                                    IB_EAGER_BYTES + 1, 0, 1, IB_EAGER_BYTES, IB_EAGER_BYTES + 1};


/* A connected pair under RCOLL_IB_EAGER=mode (NULL: unset); a context with
 * *_gdr set acts as if it could register device memory. */
static void pair_open(th_pair_t *p, const char *mode, int send_gdr, int recv_gdr) {
  ib_pair_open(p, "RCOLL_IB_EAGER", mode, send_gdr, recv_gdr, WAIT_MS);
  if (!send_gdr && !recv_gdr)
    cr_assert_eq(((ib_ctx_t *)p->sctx)->gdr, IB_GDR_NONE, "this test expects a device without GPUDirect");
}

/* Buffers for NMSG messages in one page-aligned region, message i at i *
 * SPAN. A device region is registered as RCOLL_MEM_CUDA on comm. */
typedef struct region {
  char *p;
  size_t len;
  void *mh;
} region_t;

static void region_new(region_t *r, void *comm, int device) {
  r->len = (size_t)NMSG * SPAN;
  r->p = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(r->p, MAP_FAILED);
  memset(r->p, 0xEE, r->len);
  r->mh = NULL;
  if (device)
    cr_assert_eq(ops->reg_mr(comm, r->p, r->len, RCOLL_MEM_CUDA, &r->mh), rcollSuccess, "%s", rcoll_error_text());
}

/* From here until region_open any CPU access to the region faults. */
static void region_seal(region_t *r) { cr_assert_eq(mprotect(r->p, r->len, PROT_NONE), 0); }
static void region_open(region_t *r) { cr_assert_eq(mprotect(r->p, r->len, PROT_READ | PROT_WRITE), 0); }

static void region_free(region_t *r, void *comm) {
  if (r->mh != NULL)
    ops->dereg_mr(comm, r->mh);
  munmap(r->p, r->len);
}

static void *msg_at(const region_t *r, int i) { return r->p + (size_t)i * SPAN; }

/* Tests req until done, an error or WAIT_MS (rcollInProgress then). */
static rcollResult_t wait_req(void *req, size_t *size) {
  return th_wait_req(ops, req, size, WAIT_MS);
}

/* Posts sends first..last-1 from s (each filled with its pattern before s
 * was sealed). */
static void send_all(th_pair_t *p, region_t *s, int first, int last, void **reqs) {
  for (int i = first; i < last; i++) {
    reqs[i] = NULL;
    cr_assert_eq(ops->isend(p->send, msg_at(s, i), stream[i], i, s->mh, &reqs[i]), rcollSuccess, "%s",
                 rcoll_error_text());
    cr_assert_not_null(reqs[i], "a fresh connection ran out of requests at message %d", i);
  }
}

/* Drives the send side for QUIET_MS (or until every send is done); returns
 * a bit mask of the sends first..last-1 that finished. Finished requests are
 * set to NULL. */
static unsigned drive_sends(void **reqs, int first, int last) {
  unsigned done_mask = 0;
  int64_t end = rcoll_now_ms() + QUIET_MS;
  for (unsigned spin = 0; rcoll_now_ms() < end; spin++) {
    int left = 0;
    for (int i = first; i < last; i++) {
      int done = 0;
      size_t size = 0;
      if (reqs[i] == NULL)
        continue;
      cr_assert_eq(ops->test(reqs[i], &done, &size), rcollSuccess, "send %d: %s", i, rcoll_error_text());
      if (done) {
        cr_assert_eq(size, stream[i]);
        done_mask |= 1u << i;
        reqs[i] = NULL;
      }
      left += !done;
    }
    if (left == 0)
      break;
    if (spin > 64)
      sched_yield();
  }
  return done_mask;
}

/* Posts the receives into r (registered or not), then completes them and
 * the sends still open; every size and byte is checked once r is open. */
static void receive_all(th_pair_t *p, region_t *r, void **sreqs, int sealed) {
  void *rreqs[NMSG];
  size_t got[NMSG], posted = SPAN - 1;
  for (int i = 0; i < NMSG; i++) {
    void *buf = msg_at(r, i), *mh = r->mh;
    int tag = i;
    rreqs[i] = NULL;
    cr_assert_eq(ops->irecv(p->recv, 1, &buf, &posted, &tag, &mh, &rreqs[i]), rcollSuccess, "receive %d: %s", i,
                 rcoll_error_text());
    cr_assert_not_null(rreqs[i]);
  }
  for (int i = 0; i < NMSG; i++) {
    if (sreqs[i] != NULL)
      cr_assert_eq(wait_req(sreqs[i], NULL), rcollSuccess, "send %d: %s", i, rcoll_error_text());
    cr_assert_eq(wait_req(rreqs[i], &got[i]), rcollSuccess, "receive %d: %s", i, rcoll_error_text());
  }
  if (sealed)
    region_open(r);
  for (int i = 0; i < NMSG; i++) {
    cr_assert_eq(got[i], stream[i], "message %d: %zu bytes reported, %zu sent", i, got[i], stream[i]);
    cr_assert_eq(th_check(msg_at(r, i), stream[i], i), -1, "message %d of %zu bytes arrived damaged", i, stream[i]);
    cr_assert_eq((unsigned char)((char *)msg_at(r, i))[stream[i]], 0xEE, "message %d wrote past its end", i);
  }
}

/* The whole stream, sent before any receive is posted, from and into host
 * memory (unregistered: the bounce path) or "device" memory (sealed). Sends
 * of at most IB_EAGER_BYTES finish before the receiver looks iff eager. */
static void run_stream(th_pair_t *p, int eager, int device) {
  ib_comm_t *sc = p->send, *rc = p->recv;
  region_t s, r;
  void *sreqs[NMSG];
  region_new(&s, p->send, device);
  region_new(&r, p->recv, device);
  for (int i = 0; i < NMSG; i++)
    th_fill(msg_at(&s, i), stream[i], i);
  if (device) {
    region_seal(&s);
    region_seal(&r);
  }
  uint32_t sent0 = sc->eager_sent, taken0 = rc->eager_returned;
  send_all(p, &s, 0, NMSG, sreqs);
  unsigned done = drive_sends(sreqs, 0, NMSG), want = 0;
  for (int i = 0; i < NMSG && eager && !device; i++)
    want |= stream[i] <= IB_EAGER_BYTES ? 1u << i : 0;
  cr_assert_eq(done, want, "sends finished before any receive: mask 0x%x, expected 0x%x (eager %d, device %d)",
               done, want, eager, device);
  receive_all(p, &r, sreqs, device);
  unsigned n = (unsigned)__builtin_popcount(want);
  cr_assert_eq(sc->eager_sent - sent0, n, "eager sends: %u, expected %u", sc->eager_sent - sent0, n);
  cr_assert_eq(rc->eager_returned - taken0, n, "eager receives: %u, expected %u", rc->eager_returned - taken0, n);
  if (device)
    region_open(&s);
  region_free(&s, p->send);
  region_free(&r, p->recv);
}

/* Who sends eagerly: RCOLL_IB_EAGER on either side's init (both read the
 * same environment here) and whether the receiving context can register
 * device memory; the receiver's wish travels in the handshake. */
Test(ib_eager, the_setting_and_device_capability_decide, .timeout = 120) {
  static const struct {
    const char *mode;
    int recv_gdr, eager;
  } cases[] = {{NULL, 0, 1}, {"auto", 0, 1}, {"1", 0, 1},  {"on", 1, 1},
               {NULL, 1, 0}, {"auto", 1, 0}, {"0", 0, 0}, {"off", 1, 0}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    th_pair_t p;
    pair_open(&p, cases[k].mode, 0, cases[k].recv_gdr);
    cr_assert_eq(((ib_comm_t *)p.recv)->no_eager, !cases[k].eager, "case %zu: receiver's wish", k);
    cr_assert_eq(((ib_comm_t *)p.send)->no_eager, !cases[k].eager, "case %zu: the sender did not learn it", k);
    run_stream(&p, cases[k].eager, 0);
    cr_log_info("RCOLL_IB_EAGER=%s, receiver %s device memory: eager %s, stream intact", cases[k].mode ? cases[k].mode : "(unset)",
                cases[k].recv_gdr ? "can register" : "cannot register", cases[k].eager ? "on" : "off");
    th_pair_close(&p);
  }
}

/* A send from device memory waits for its credit even when eager is on and
 * the message is tiny; a host send behind it still goes eagerly. */
Test(ib_eager, device_sends_wait_for_their_credit, .timeout = 60) {
  th_pair_t p;
  pair_open(&p, NULL, 1, 0);
  ib_comm_t *sc = p.send;
  cr_assert_eq(sc->no_eager, 0, "the receiver cannot register device memory: eager stays on");
  region_t d, h, r; /* device sends, host sends, host receives */
  void *sreqs[NMSG];
  region_new(&d, p.send, 1);
  region_new(&h, p.send, 0);
  region_new(&r, p.recv, 0);
  for (int i = 0; i < NMSG; i++) {
    th_fill(msg_at(&d, i), stream[i], i);
    th_fill(msg_at(&h, i), stream[i], i);
  }
  region_seal(&d);
  send_all(&p, &d, 0, 3, sreqs); /* 0 B, 1 B, 8 KiB from device memory */
  cr_assert_eq(drive_sends(sreqs, 0, 3), 0u, "a device send finished before its receive was posted");
  cr_assert_eq(sc->eager_sent, 0u, "a device send went eagerly");
  send_all(&p, &h, 3, NMSG, sreqs); /* 8 KiB + 1 and on: host memory, unregistered */
  unsigned done = drive_sends(sreqs, 3, NMSG);
  cr_assert_eq(done, 0x770u, "host sends of at most 8 KiB (4..6, 8..10) go eagerly; got 0x%x", done);
  cr_assert_eq(sc->eager_sent, 6u);
  receive_all(&p, &r, sreqs, 0); /* the device sends are written from d while it is sealed */
  region_open(&d);
  region_free(&d, p.send);
  region_free(&h, p.send);
  region_free(&r, p.recv);
  th_pair_close(&p);
}

/* NCCL's case: both ends device memory, the receiving context able to
 * register it (auto: no eager), every size sent before its receive. */
Test(ib_eager, device_to_device_with_receives_posted_late, .timeout = 60) {
  th_pair_t p;
  pair_open(&p, NULL, 1, 1);
  run_stream(&p, 0, 1);
  th_pair_close(&p);
}

/* A receive into device memory that meets an eager message (the receiver
 * forced RCOLL_IB_EAGER=1, standing in for a peer that ignores its wish)
 * fails the connection naming the peer, and never writes the buffer. With
 * `early`, the message was taken in before the receive was posted (the
 * unexpected queue); else it is found while the receive is being posted. */
static void eager_into_device(int early) {
  th_pair_t p;
  pair_open(&p, "1", 0, 1);
  ib_comm_t *rc = p.recv;
  char src[8];
  th_fill(src, 1, 0);
  void *sreq = NULL, *rreq = NULL;
  cr_assert_eq(ops->isend(p.send, src, 1, 0, NULL, &sreq), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_eq(wait_req(sreq, NULL), rcollSuccess, "the eager send did not finish: %s", rcoll_error_text());
  for (int64_t end = rcoll_now_ms() + WAIT_MS; early && rc->unexp_head == rc->unexp_tail && rcoll_now_ms() < end;)
    if (ib_progress(rc) == 0)
      sched_yield();
  cr_assert(!early || rc->unexp_head != rc->unexp_tail, "the eager message never arrived");
  region_t r;
  region_new(&r, p.recv, 1);
  region_seal(&r);
  void *buf = r.p, *mh = r.mh;
  size_t size = 64;
  int tag = 0;
  rcollResult_t res = ops->irecv(p.recv, 1, &buf, &size, &tag, &mh, &rreq);
  if (res == rcollSuccess) { /* not arrived yet inside irecv: test must fail */
    cr_assert(!early);
    cr_assert_not_null(rreq);
    res = wait_req(rreq, NULL);
  }
  cr_assert_eq(res, rcollInvalidUsage, "an eager message into device memory gave %d", res);
  const char *msg = rcoll_error_text();
  cr_assert(strstr(msg, rc->peer) && strstr(msg, "device memory") && strstr(msg, "eager"), "message: %s", msg);
  cr_log_info("%s: %s", early ? "taken in before the receive" : "found while posting", msg);
  cr_assert_neq(ops->irecv(p.recv, 1, &buf, &size, &tag, &mh, &rreq), rcollSuccess, "the connection still works");
  region_open(&r);
  for (size_t i = 0; i < r.len; i++)
    cr_assert_eq((unsigned char)r.p[i], 0xEE, "byte %zu of the device buffer was written", i);
  region_free(&r, p.recv);
  th_pair_close(&p);
}

Test(ib_eager, eager_message_already_here_fails_a_device_receive, .timeout = 60) { eager_into_device(1); }
Test(ib_eager, eager_message_found_while_posting_fails_a_device_receive, .timeout = 60) { eager_into_device(0); }

/* ---- RCOLL_IB_EAGER's values: no device needed ---- */

Test(ib_eager_setting, values) {
  static const struct {
    const char *text;
    int mode;
  } good[] = {{NULL, IB_EAGER_AUTO}, {"", IB_EAGER_AUTO}, {"auto", IB_EAGER_AUTO}, {"Auto", IB_EAGER_AUTO},
              {"0", IB_EAGER_OFF},   {"off", IB_EAGER_OFF}, {"OFF", IB_EAGER_OFF},  {"1", IB_EAGER_ON},
              {"on", IB_EAGER_ON}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    int mode = -1;
    cr_assert_eq(ib_eager_mode_parse(good[i].text, &mode), rcollSuccess, "\"%s\"", good[i].text);
    cr_assert_eq(mode, good[i].mode, "\"%s\" gave %d", good[i].text, mode);
  }
  static const char *bad[] = {"2", "yes", "force", " on", "of"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int mode = -1;
    cr_assert_eq(ib_eager_mode_parse(bad[i], &mode), rcollInvalidArgument, "\"%s\" was accepted", bad[i]);
    cr_assert(strstr(rcoll_error_text(), "RCOLL_IB_EAGER"), "%s", rcoll_error_text());
  }
}

/* The receive side's policy, from the setting and the context's device
 * capability alone. */
Test(ib_eager_setting, refusal_follows_device_capability) {
  ib_ctx_t ctx = {.eager_mode = IB_EAGER_AUTO, .gdr = IB_GDR_NONE};
  cr_assert(!ib_eager_refused(&ctx));
  ctx.gdr = IB_GDR_DMABUF;
  cr_assert(ib_eager_refused(&ctx));
  ctx.gdr = IB_GDR_PEERMEM;
  cr_assert(ib_eager_refused(&ctx));
  ctx.eager_mode = IB_EAGER_ON;
  cr_assert(!ib_eager_refused(&ctx));
  ctx.eager_mode = IB_EAGER_OFF;
  ctx.gdr = IB_GDR_NONE;
  cr_assert(ib_eager_refused(&ctx));
}

Test(ib_eager_setting, init_refuses_a_bad_value) {
  rcoll_settings_t s;
  setenv("RCOLL_IB_EAGER", "sometimes", 1);
  cr_assert_eq(rcoll_settings_load(&s), rcollInvalidArgument, "the loader knows the words too");
  cr_assert(strstr(rcoll_error_text(), "RCOLL_IB_EAGER=sometimes"), "%s", rcoll_error_text());
  unsetenv("RCOLL_IB_EAGER");
  cr_assert_eq(rcoll_settings_load(&s), rcollSuccess, "%s", rcoll_error_text());
  snprintf(ib_settings(&s)->ib_eager, sizeof ib_settings(&s)->ib_eager, "sometimes"); /* a snapshot made by hand */
  rcoll_net_config_t cfg = {.settings = &s, .secret = 1, .rank = 0};
  void *ctx = NULL;
  cr_assert_eq(ib_ops.init(&cfg, &ctx), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "RCOLL_IB_EAGER=\"sometimes\""), "%s", rcoll_error_text());
}
#else
Test(ib_eager, not_built) { cr_skip_test("built without libibverbs (RCOLL_HAVE_IBVERBS)"); }
#endif
