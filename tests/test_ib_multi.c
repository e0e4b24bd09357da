/* Grouped receives on the verbs transport (irecv of n > 1 tagged buffers,
 * NCCL's "multi-receive"): one receive consumes the next n sends of the
 * connection, each landing in the buffer posted with its tag whatever order
 * the sends come in, over eager and rendezvous messages alike. A sender and
 * a receiver comm in one process over the first RDMA port. Payloads carry a
 * pattern derived from their tag, so a message in the wrong buffer, cut
 * short or written past its end shows.
 *
 * Without an RDMA device the cases skip (init fails), unless
 * RCOLL_TEST_REQUIRE_NET=ib says the device must be there (inside the
 * Soft-RoCE VM, tests/check_rxe.sh step ib-multi): then they fail. */
#include <criterion/criterion.h>

#if RCOLL_HAVE_IBVERBS
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../transports/ib/ib.h"
#include "../transports/ib/ib_priv.h"
#include "support/ib_pair.h"
#include "support/multi_harness.h"

#define MIB TH_MIB
#define WAIT_MS 20000
#define NMAX RCOLL_NET_MAX_RECVS

static const rcoll_transport_ops_t *ops = &ib_ops;


/* A connected pair under RCOLL_IB_EAGER=mode (NULL: unset); recv_gdr makes
 * the receiving context act as if it could register device memory. */
static void pair_open(th_pair_t *p, const char *mode, int recv_gdr) {
  ib_pair_open(p, "RCOLL_IB_EAGER", mode, 0, recv_gdr, 10000);
}

static char *sbuf_new(size_t size, int tag) {
  char *b = malloc(size + 1);
  th_fill(b, size, tag);
  return b;
}

/* Tests the sends for up to ms, or until all are done. */
static void drive_sends(void **sreq, int *sdone, int ns, int ms) {
  for (int64_t end = rcoll_now_ms() + ms; rcoll_now_ms() < end; usleep(200)) {
    int left = 0;
    for (int i = 0; i < ns; i++)
      if (!sdone[i] && ops->test(sreq[i], &sdone[i], NULL) == rcollSuccess)
        left += !sdone[i];
    if (left == 0)
      return;
  }
}

/* ns sends and one grouped receive of n buffers. With sends_first the sends
 * are posted (and driven for a while: eager ones arrive) before the receive;
 * else the receive is posted first and its credit given time to arrive.
 * Then everything is tested from this thread until the receive is done and
 * the sends too, or the receive fails. Returns the receive's result. */
static rcollResult_t group_run(th_pair_t *p, int sends_first, int ns, char **sbufs, const size_t *ssizes,
                               const int *stags, int n, char **rbufs, const size_t *caps, const int *rtags,
                               void **rmh, size_t *got) {
  void *sreq[NMAX + 2] = {0}, *rreq = NULL;
  int sdone[NMAX + 2] = {0}, rdone = 0;
  for (int phase = 0; phase < 2; phase++) {
    if (phase == !sends_first) {
      for (int i = 0; i < ns; i++) {
        cr_assert_eq(ops->isend(p->send, sbufs[i], ssizes[i], stags[i], NULL, &sreq[i]), rcollSuccess, "%s",
                     rcoll_error_text());
        cr_assert_not_null(sreq[i]);
      }
      drive_sends(sreq, sdone, ns, 50);
    } else {
      rcollResult_t r = ops->irecv(p->recv, n, (void **)rbufs, caps, rtags, rmh, &rreq);
      if (r != rcollSuccess) /* eager messages already here broke the group */
        return r;
      cr_assert_not_null(rreq);
      for (int k = 0; k < 50 && !rdone && r == rcollSuccess; k++, usleep(2000)) /* the credit goes out */
        r = ops->test(rreq, &rdone, got);
      if (r != rcollSuccess)
        return r;
    }
  }
  return th_group_wait(ops, sreq, sdone, ns, rreq, &rdone, got, WAIT_MS);
}

/* Three buffers (tags 10, 11, 12) posted larger than what comes; the sends
 * come in reverse tag order, 100 B (eager-sized), 1 MiB and 5 MiB, posted
 * before the receive (the small one goes eagerly) and after it (its credit
 * is there: all rendezvous). Then single receives still pair in order. */
Test(ib_multi, reverse_tag_order_mixed_sizes, .timeout = 180) {
  const int rtags[3] = {10, 11, 12}, stags[3] = {12, 11, 10};
  const size_t ssizes[3] = {100, MIB, 5 * MIB};
  const size_t want[3] = {5 * MIB, MIB, 100}, caps[3] = {5 * MIB + 4096, MIB, 4096};
  th_pair_t p;
  pair_open(&p, NULL, 0);
  ib_comm_t *sc = p.send;
  for (int round = 0; round < 4; round++) {
    int sends_first = round % 2 == 0;
    char *sbufs[3], *rbufs[3];
    size_t got[3] = {0};
    for (int i = 0; i < 3; i++) {
      sbufs[i] = sbuf_new(ssizes[i], stags[i]);
      rbufs[i] = th_rbuf_new(caps[i]);
    }
    uint32_t eager0 = sc->eager_sent;
    rcollResult_t r = group_run(&p, sends_first, 3, sbufs, ssizes, stags, 3, rbufs, caps, rtags, NULL, got);
    cr_assert_eq(r, rcollSuccess, "round %d: %d: %s", round, r, rcoll_error_text());
    cr_assert_eq(sc->eager_sent - eager0, sends_first ? 1u : 0u, "round %d: %u eager sends", round,
                 sc->eager_sent - eager0);
    for (int i = 0; i < 3; i++) {
      cr_assert_eq(got[i], want[i], "round %d: buffer %d (tag %d) reported %zu bytes, %zu sent", round, i, rtags[i],
                   got[i], want[i]);
      th_rbuf_check(rbufs[i], got[i], caps[i], rtags[i], "grouped buffer");
      free(sbufs[i]);
      free(rbufs[i]);
    }
  }
  const size_t after[] = {7, 8193, 300000};
  th_exchange(&p, 3, after, 5, 1);
  th_pair_close(&p);
}

/* Eight buffers, empty messages among them, tags scrambled, some buffers
 * registered and some not; every send before the receive, then every send
 * after it. */
Test(ib_multi, eight_buffers_with_empty_messages, .timeout = 120) {
  const int rtags[NMAX] = {3, 1, 4, 15, 5, 9, 2, 6}, stags[NMAX] = {6, 15, 2, 9, 5, 1, 4, 3};
  const size_t ssizes[NMAX] = {0, 70000, 1, 8192, 8193, 2 * MIB + 3, 0, 16385};
  th_pair_t p;
  pair_open(&p, NULL, 0);
  for (int round = 0; round < 2; round++) {
    size_t caps[NMAX], got[NMAX], want[NMAX] = {0};
    char *sbufs[NMAX], *rbufs[NMAX];
    void *rmh[NMAX] = {0};
    for (int i = 0; i < NMAX; i++) {
      caps[i] = i % 3 == 0 ? 2 * MIB + 3 : 3 * MIB; /* the cached registration, and reg_mr's */
      rbufs[i] = th_rbuf_new(caps[i]);
      if (i % 2 == 1)
        cr_assert_eq(ops->reg_mr(p.recv, rbufs[i], caps[i], RCOLL_MEM_HOST, &rmh[i]), rcollSuccess);
      sbufs[i] = sbuf_new(ssizes[i], stags[i]);
      for (int k = 0; k < NMAX; k++) /* where send i should land, from the tags alone */
        if (rtags[k] == stags[i])
          want[k] = ssizes[i];
    }
    got[0] = 12345;
    cr_assert_eq(group_run(&p, round == 0, NMAX, sbufs, ssizes, stags, NMAX, rbufs, caps, rtags, rmh, got),
                 rcollSuccess, "round %d: %s", round, rcoll_error_text());
    for (int i = 0; i < NMAX; i++) {
      cr_assert_eq(got[i], want[i], "round %d: buffer %d (tag %d): %zu bytes, %zu expected", round, i, rtags[i],
                   got[i], want[i]);
      th_rbuf_check(rbufs[i], got[i], caps[i], rtags[i], "grouped buffer");
      if (rmh[i] != NULL)
        ops->dereg_mr(p.recv, rmh[i]);
      free(sbufs[i]);
      free(rbufs[i]);
    }
  }
  th_pair_close(&p);
}

/* Two buffers of one tag: which of them a message takes is the transport's
 * choice, but each takes one message of that tag, all of it. */
Test(ib_multi, duplicate_tags_take_one_message_each, .timeout = 60) {
  const int rtags[4] = {7, 8, 7, 8}, stags[4] = {8, 7, 7, 8};
  const size_t ssizes[4] = {300000, 20, 100000, 0};
  th_pair_t p;
  pair_open(&p, NULL, 0);
  for (int round = 0; round < 2; round++) {
    size_t caps[4] = {MIB, MIB, MIB, MIB}, got[4];
    char *sbufs[4], *rbufs[4];
    for (int i = 0; i < 4; i++)
      sbufs[i] = sbuf_new(ssizes[i], stags[i]), rbufs[i] = th_rbuf_new(caps[i]);
    cr_assert_eq(group_run(&p, round == 0, 4, sbufs, ssizes, stags, 4, rbufs, caps, rtags, NULL, got),
                 rcollSuccess, "round %d: %s", round, rcoll_error_text());
    for (int t = 7; t <= 8; t++) { /* buffers k and k + 2 hold tag t's two sizes, in some order */
      int k = t - 7;
      size_t a = t == 7 ? 20 : 300000, b = t == 7 ? 100000 : 0;
      cr_assert((got[k] == a && got[k + 2] == b) || (got[k] == b && got[k + 2] == a),
                "round %d: tag %d buffers got %zu and %zu, sent %zu and %zu", round, t, got[k], got[k + 2], a, b);
    }
    for (int i = 0; i < 4; i++) {
      th_rbuf_check(rbufs[i], got[i], caps[i], rtags[i], "grouped buffer");
      free(sbufs[i]);
      free(rbufs[i]);
    }
  }
  th_pair_close(&p);
}

/* A receiving context that can register device memory asks for no eager
 * messages; a group of "device" buffers (host memory registered as such and
 * sealed: any CPU access faults) is filled by the NIC alone. */
Test(ib_multi, device_buffers_are_never_touched_by_the_cpu, .timeout = 60) {
  const int rtags[3] = {1, 2, 3}, stags[3] = {3, 1, 2};
  const size_t ssizes[3] = {0, 100, 200000}, span = 262144;
  th_pair_t p;
  pair_open(&p, NULL, 1);
  char *region = mmap(NULL, 3 * span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(region, MAP_FAILED);
  memset(region, TH_POISON, 3 * span);
  void *mh = NULL;
  cr_assert_eq(ops->reg_mr(p.recv, region, 3 * span, RCOLL_MEM_CUDA, &mh), rcollSuccess, "%s", rcoll_error_text());
  char *sbufs[3], *rbufs[3];
  size_t caps[3], got[3];
  void *rmh[3] = {mh, mh, mh};
  for (int i = 0; i < 3; i++)
    sbufs[i] = sbuf_new(ssizes[i], stags[i]), rbufs[i] = region + (size_t)i * span, caps[i] = span - 1;
  cr_assert_eq(mprotect(region, 3 * span, PROT_NONE), 0);
  cr_assert_eq(group_run(&p, 1, 3, sbufs, ssizes, stags, 3, rbufs, caps, rtags, rmh, got), rcollSuccess, "%s",
               rcoll_error_text());
  cr_assert_eq(mprotect(region, 3 * span, PROT_READ | PROT_WRITE), 0);
  cr_assert_eq(((ib_comm_t *)p.send)->eager_sent, 0u, "a send went eagerly to a receiver that refused them");
  for (int i = 0; i < 3; i++) {
    size_t w = ssizes[(i + 1) % 3]; /* buffer tag i + 1 <- send (i + 1) % 3 */
    cr_assert_eq(got[i], w, "buffer %d: %zu bytes, %zu sent", i, got[i], w);
    th_rbuf_check(rbufs[i], got[i], caps[i], rtags[i], "device buffer");
    free(sbufs[i]);
  }
  ops->dereg_mr(p.recv, mh);
  munmap(region, 3 * span);
  th_pair_close(&p);
}

/* Sends tag 1 (size1 bytes) then `bad` (size bytes) to a group of tags
 * {1, 2, 3}: the receive fails within a few seconds naming the tag, the peer
 * and the posted tags; nothing is written outside the buffers; the
 * connection stays failed. */
static void expect_tag_error(size_t size1, int bad, size_t size, const char *why) {
  const int rtags[3] = {1, 2, 3}, stags[2] = {1, bad};
  const size_t ssizes[2] = {size1, size};
  const size_t caps[3] = {2 * MIB, 2 * MIB, 2 * MIB};
  char *sbufs[2] = {sbuf_new(ssizes[0], stags[0]), sbuf_new(ssizes[1], stags[1])}, *rbufs[3];
  size_t got[3] = {0};
  for (int i = 0; i < 3; i++)
    rbufs[i] = th_rbuf_new(caps[i]);
  th_pair_t p;
  pair_open(&p, NULL, 0);
  int64_t t0 = rcoll_now_ms();
  rcollResult_t r = group_run(&p, 1, 2, sbufs, ssizes, stags, 3, rbufs, caps, rtags, NULL, got);
  int64_t dt = rcoll_now_ms() - t0;
  char text[RCOLL_ERROR_TEXT_MAX], want[64];
  snprintf(text, sizeof text, "%s", rcoll_error_text());
  cr_assert_eq(r, rcollInvalidUsage, "tag %d of %zu bytes: got %d: %s", bad, size, r, text);
  cr_assert_lt(dt, 5000, "the failure took %lld ms", (long long)dt);
  snprintf(want, sizeof want, "with tag %d from ", bad);
  cr_assert(strstr(text, want) && strstr(text, why) && strstr(text, "(tags 1,2,3)") &&
                strstr(text, ((ib_comm_t *)p.recv)->peer),
            "text: %s", text);
  for (int i = 1; i < 3; i++) /* buffers 2 and 3: no message has their tag */
    th_rbuf_check(rbufs[i], 0, caps[i], rtags[i], "a buffer no message matched");
  cr_assert_eq((unsigned char)rbufs[0][caps[0]], TH_POISON, "written past the end of buffer 0");
  void *req = NULL;
  int tag = 0;
  cr_assert_neq(ops->irecv(p.recv, 1, (void **)rbufs, caps, &tag, NULL, &req), rcollSuccess);
  cr_log_info("tag %d, %zu bytes: failed in %lld ms: %s", bad, size, (long long)dt, text);
  th_pair_close(&p);
  for (int i = 0; i < 3; i++)
    free(rbufs[i]);
  free(sbufs[0]);
  free(sbufs[1]);
}

/* The receiver sees an eager message's tag; a rendezvous message's sender
 * sees that its tag has no buffer left and says so in place of the data. */
Test(ib_multi, tag_matching_no_buffer_fails_naming_it, .timeout = 60) {
  expect_tag_error(50, 7, 100, "matches no buffer of");    /* eager: the receiver sees it */
  expect_tag_error(50, -5, MIB, "matches no buffer left"); /* rendezvous: the sender tells */
}

/* A second message of tag 1 where the group has one buffer of tag 1. */
Test(ib_multi, tag_of_an_already_filled_buffer_fails, .timeout = 60) {
  expect_tag_error(MIB, 1, MIB, "matches no buffer left");               /* both rendezvous: the sender */
  expect_tag_error(50, 1, 100, "matches only already filled buffers");   /* both eager: the receiver */
  /* eager first (it takes the buffer from the back), rendezvous second (the
   * sender picks from the front, not knowing): the receiver sees the write
   * land in a filled buffer */
  expect_tag_error(50, 1, MIB, "matches only already filled buffers");
}

Test(ib_multi, group_sizes_out_of_range_are_refused, .timeout = 30) {
  th_pair_t p;
  pair_open(&p, NULL, 0);
  char b[NMAX + 1][8];
  void *data[NMAX + 1];
  size_t sizes[NMAX + 1];
  int tags[NMAX + 1];
  for (int i = 0; i <= NMAX; i++)
    data[i] = b[i], sizes[i] = sizeof b[i], tags[i] = i;
  void *req = (void *)1;
  cr_assert_eq(ops->irecv(p.recv, NMAX + 1, data, sizes, tags, NULL, &req), rcollInvalidArgument);
  cr_assert_null(req);
  cr_assert(strstr(rcoll_error_text(), "irecv of 9 buffers (max_recvs is 8)"), "text: %s", rcoll_error_text());
  cr_assert_eq(ops->irecv(p.recv, 0, data, sizes, tags, NULL, &req), rcollInvalidArgument);
  rcoll_net_props_t props;
  cr_assert_eq(ops->get_properties(p.rctx, 0, &props), rcollSuccess);
  cr_assert_eq(props.max_recvs, NMAX);
  const size_t one[] = {5, 20000};
  th_exchange(&p, 2, one, 0, 1); /* nothing was taken by the refused calls */
  th_pair_close(&p);
}

/* ---- a stream of groups against a sender thread ---- */

#define NGROUPS 160
#define INFLIGHT_MAX 6
static const size_t stream_sizes[] = {0, 1, 100, 8192, 8193, 16384, 16385, 70000, 300000};
#define NSIZES (sizeof stream_sizes / sizeof stream_sizes[0])

static int group_n(int g) { return g % NMAX + 1; }
static int group_tag(int g, int i) { return g * 16 + i; }
static size_t group_size(int g, int i) { return stream_sizes[(size_t)(g * 3 + i * 5) % NSIZES]; }

typedef struct sender {
  void *comm;
  rcollResult_t result;
  char err[RCOLL_ERROR_TEXT_MAX];
} sender_t;

/* Sends every group's messages in reverse tag order, up to 16 in flight. */
static void *sender_run(void *arg) {
  sender_t *s = arg;
  void *reqs[16];
  char *bufs[16];
  int posted = 0, done = 0, total = 0;
  for (int g = 0; g < NGROUPS; g++)
    total += group_n(g);
  s->result = rcollSuccess;
  for (int g = 0, i = group_n(0) - 1; done < total && s->result == rcollSuccess;) {
    void *req = NULL;
    if (posted < total && posted - done < 16) {
      char *b = malloc(group_size(g, i) + 1);
      th_fill(b, group_size(g, i), group_tag(g, i));
      s->result = ops->isend(s->comm, b, group_size(g, i), group_tag(g, i), NULL, &req);
      if (req != NULL) {
        reqs[posted % 16] = req, bufs[posted++ % 16] = b;
        if (--i < 0 && ++g < NGROUPS)
          i = group_n(g) - 1;
        continue;
      }
      free(b);
    }
    if (s->result == rcollSuccess)
      s->result = th_wait_req(ops, reqs[done % 16], NULL, WAIT_MS);
    if (s->result == rcollSuccess)
      free(bufs[done++ % 16]);
  }
  snprintf(s->err, sizeof s->err, "%s", rcoll_error_text());
  return NULL;
}

typedef struct rgroup {
  void *req;
  char *bufs[NMAX];
  size_t caps[NMAX], got[NMAX];
  int tags[NMAX];
} rgroup_t;

static void rgroup_verify(rgroup_t *r, int g) {
  for (int i = 0; i < group_n(g); i++) {
    cr_assert_eq(r->got[i], group_size(g, i), "group %d of %d, buffer %d: %zu bytes, %zu sent", g, group_n(g), i,
                 r->got[i], group_size(g, i));
    th_rbuf_check(r->bufs[i], r->got[i], r->caps[i], r->tags[i], "streamed group");
    free(r->bufs[i]);
  }
}

/* Groups of 1..8 buffers, `inflight` posted at a time (fewer when the 32
 * request slots run out), against the sender thread; every byte checked.
 * With few posted, the sender runs ahead and small messages go eagerly,
 * before their group is posted. */
static void stream_groups(const char *eager, int inflight) {
  th_pair_t p;
  pair_open(&p, eager, 0);
  sender_t s = {.comm = p.send};
  pthread_t t;
  pthread_create(&t, NULL, sender_run, &s);
  rgroup_t rg[INFLIGHT_MAX];
  int posted = 0, done = 0, nulls = 0;
  while (done < NGROUPS) {
    rgroup_t *r = &rg[posted % INFLIGHT_MAX];
    if (posted < NGROUPS && posted - done < inflight) {
      int n = group_n(posted);
      for (int i = 0; i < n; i++) {
        r->caps[i] = group_size(posted, i) + (size_t)(i % 2) * 7;
        r->tags[i] = group_tag(posted, i);
        r->bufs[i] = th_rbuf_new(r->caps[i]);
      }
      r->req = NULL;
      cr_assert_eq(ops->irecv(p.recv, n, (void **)r->bufs, r->caps, r->tags, NULL, &r->req), rcollSuccess,
                   "group %d: %s", posted, rcoll_error_text());
      if (r->req != NULL) {
        posted++;
        continue;
      }
      nulls++;
      for (int i = 0; i < n; i++)
        free(r->bufs[i]);
      if (posted == done) { /* nothing to wait on: a credit buffer is still busy */
        sched_yield();
        continue;
      }
    }
    r = &rg[done % INFLIGHT_MAX];
    cr_assert_eq(th_wait_req(ops, r->req, r->got, WAIT_MS), rcollSuccess, "group %d of %d: %s", done, group_n(done),
                 rcoll_error_text());
    rgroup_verify(r, done++);
  }
  pthread_join(t, NULL);
  cr_assert_eq(s.result, rcollSuccess, "sender: %s", s.err);
  uint32_t neager = ((ib_comm_t *)p.send)->eager_sent;
  cr_log_info("RCOLL_IB_EAGER=%s, %d posted at a time: %d groups, the receiver out of slots %d times, %u eager "
              "sends", eager ? eager : "(unset)", inflight, NGROUPS, nulls, neager);
  if (eager != NULL && strcmp(eager, "0") == 0)
    cr_assert_eq(neager, 0u, "eager sends with RCOLL_IB_EAGER=0");
  else if (inflight == 1)
    cr_assert_gt(neager, 50u, "the sender ran ahead of one posted group, yet few messages went eagerly");
  const size_t singles[] = {0, 3, 8192, 8193, 65537, MIB};
  th_exchange(&p, 6, singles, 3, 4); /* single receives after the groups */
  th_pair_close(&p);
}

Test(ib_multi, stream_of_groups_against_a_sender_thread, .timeout = 300) {
  stream_groups(NULL, INFLIGHT_MAX);
  stream_groups(NULL, 1); /* the sender runs ahead: eager messages wait for their group */
}

Test(ib_multi, stream_of_groups_with_eager_off, .timeout = 300) {
  stream_groups("0", INFLIGHT_MAX);
  stream_groups("0", 1);
}

#else
Test(ib_multi, no_verbs) { cr_skip_test("rcoll was built without libibverbs"); }
#endif
