/* Grouped receives on the socket transport (irecv of n > 1 buffers, NCCL's
 * "multi-receive"): one receive consumes the next n sends of the connection,
 * each landing in the buffer posted with its tag whatever the order the sends
 * come in. Real sockets on loopback; payloads carry a pattern derived from
 * their tag, so a message in the wrong buffer, or cut short, shows. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../transports/socket/socket.h"
#include "../transports/socket/socket_priv.h"
#include "error.h"
#include "transport_harness.h"

#define INLINE 4096
#define MIB TH_MIB
#define POISON 0xEE

static const rcoll_transport_ops_t *ops = &socket_ops;

static void pair_open(th_pair_t *p, int nt, int ns, int timeout) {
  memset(p, 0, sizeof *p);
  snprintf(p->set.socket_ifname, sizeof p->set.socket_ifname, "lo");
  snprintf(p->set.socket_family, sizeof p->set.socket_family, "AF_INET");
  p->set.socket_nthreads = nt;
  p->set.nsocks_perthread = ns;
  p->set.socket_inline = INLINE;
  p->set.timeout = timeout;
  p->sctx = th_ctx_new(ops, &p->set, TH_SECRET);
  th_pair_listen(p, ops);
  th_pair_connect(p, 5000, 0, "multi");
}

/* Receive buffers: cap bytes poisoned, plus one canary byte. */
static char *rbuf_new(size_t cap) {
  char *b = malloc(cap + 1);
  memset(b, POISON, cap + 1);
  return b;
}

/* The received bytes carry the pattern of their tag, and nothing past them
 * (up to the canary after the posted size) was written. */
static void rbuf_check(const char *b, size_t got, size_t cap, int tag, const char *what) {
  long bad = th_check(b, got, tag);
  cr_assert_eq(bad, -1, "%s (tag %d): wrong byte at %ld of %zu", what, tag, bad, got);
  for (size_t i = got; i <= cap; i++)
    cr_assert_eq((unsigned char)b[i], POISON, "%s (tag %d): byte %zu written past the %zu received", what,
                 tag, i, got);
}

/* Posts the sends (in the order given) and one grouped receive, then tests
 * all of them from this thread until every one is done or one fails. The
 * receive's result is returned; the sends may fail once it has. */
static rcollResult_t group_run(th_pair_t *p, int ns, char **sbufs, const size_t *ssizes, const int *stags, int n,
                               char **rbufs, const size_t *caps, const int *rtags, size_t *got) {
  void *sreq[RCOLL_NET_MAX_RECVS] = {0}, *rreq = NULL;
  int sdone[RCOLL_NET_MAX_RECVS] = {0}, rdone = 0;
  for (int i = 0; i < ns; i++) {
    cr_assert_eq(ops->isend(p->send, sbufs[i], ssizes[i], stags[i], NULL, &sreq[i]), rcollSuccess, "%s",
                 rcoll_error_text());
    cr_assert_not_null(sreq[i]);
  }
  cr_assert_eq(ops->irecv(p->recv, n, (void **)rbufs, caps, rtags, NULL, &rreq), rcollSuccess, "%s",
               rcoll_error_text());
  cr_assert_not_null(rreq);
  for (int64_t end = rcoll_now_ms() + 10000; rcoll_now_ms() < end; sched_yield()) {
    int pending = 0;
    for (int i = 0; i < ns; i++)
      if (!sdone[i] && ops->test(sreq[i], &sdone[i], NULL) == rcollSuccess)
        pending += !sdone[i];
    rcollResult_t r = rdone ? rcollSuccess : ops->test(rreq, &rdone, got);
    if (r != rcollSuccess || (rdone && pending == 0))
      return r;
  }
  return rcollInProgress;
}

static const struct { int nt, ns; } configs[] = {{1, 1}, {2, 1}, {4, 2}};

/* Three buffers (tags 10, 11, 12) posted larger than what comes; the sends
 * come in reverse tag order with sizes that go inline, and through the
 * helpers. Afterwards the connection still carries single receives in order. */
Test(socket_multi, reverse_tag_order_mixed_sizes, .timeout = 120) {
  const int rtags[3] = {10, 11, 12}, stags[3] = {12, 11, 10};
  const size_t ssizes[3] = {100, MIB, 5 * MIB}; /* tag 12: 100 B, tag 11: 1 MiB, tag 10: 5 MiB */
  const size_t want[3] = {5 * MIB, MIB, 100}, caps[3] = {5 * MIB + 4096, MIB, 4096};
  for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
    th_pair_t p;
    pair_open(&p, configs[c].nt, configs[c].ns, 30);
    for (int round = 0; round < 2; round++) {
      char *sbufs[3], *rbufs[3];
      size_t got[3] = {0};
      for (int i = 0; i < 3; i++) {
        sbufs[i] = malloc(ssizes[i]);
        th_fill(sbufs[i], ssizes[i], stags[i]);
        rbufs[i] = rbuf_new(caps[i]);
      }
      rcollResult_t r = group_run(&p, 3, sbufs, ssizes, stags, 3, rbufs, caps, rtags, got);
      cr_assert_eq(r, rcollSuccess, "config %dx%d round %d: %d: %s", configs[c].nt, configs[c].ns, round, r,
                   rcoll_error_text());
      for (int i = 0; i < 3; i++) {
        cr_assert_eq(got[i], want[i], "buffer %d (tag %d) reported %zu bytes, %zu sent", i, rtags[i], got[i],
                     want[i]);
        rbuf_check(rbufs[i], got[i], caps[i], rtags[i], "grouped buffer");
        free(sbufs[i]);
        free(rbufs[i]);
      }
    }
    const size_t after[] = {7, INLINE + 1, 300000};
    th_exchange(&p, 3, after, 5, 1);
    th_pair_close(&p);
  }
}

/* All eight buffers at once, zero-length and duplicate tags among them: a
 * message takes the first unfilled buffer of its tag. */
Test(socket_multi, eight_buffers_with_empty_and_duplicate_tags, .timeout = 60) {
  enum { N = RCOLL_NET_MAX_RECVS };
  const int rtags[N] = {3, 1, 4, 1, 5, 9, 2, 6}, stags[N] = {6, 1, 2, 9, 5, 1, 4, 3};
  const size_t ssizes[N] = {0, 70000, 1, INLINE, INLINE + 1, 2 * MIB + 3, 0, 200000};
  size_t caps[N], got[N], want[N] = {0};
  char *sbufs[N], *rbufs[N];
  int filled[N] = {0};
  for (int i = 0; i < N; i++) {
    caps[i] = 2 * MIB + 3;
    rbufs[i] = rbuf_new(caps[i]);
    sbufs[i] = malloc(ssizes[i] + 1);
    th_fill(sbufs[i], ssizes[i], stags[i]);
  }
  for (int s = 0; s < N; s++) /* where each send should land, computed apart from the transport */
    for (int i = 0; i < N; i++)
      if (rtags[i] == stags[s] && !filled[i]) {
        filled[i] = 1, want[i] = ssizes[s];
        break;
      }
  th_pair_t p;
  pair_open(&p, 2, 2, 30);
  cr_assert_eq(group_run(&p, N, sbufs, ssizes, stags, N, rbufs, caps, rtags, got), rcollSuccess, "%s",
               rcoll_error_text());
  for (int i = 0; i < N; i++) {
    cr_assert_eq(got[i], want[i], "buffer %d (tag %d): %zu bytes, %zu expected", i, rtags[i], got[i], want[i]);
    rbuf_check(rbufs[i], got[i], caps[i], rtags[i], "grouped buffer");
    free(sbufs[i]);
    free(rbufs[i]);
  }
  th_pair_close(&p);
}

/* Sends tags 1 then `bad` of `size` bytes to a receive of tags {1, 2, 3}:
 * the receive fails within the timeout, naming the tag, and nothing is
 * written outside the buffers. */
static void expect_tag_error(int bad, size_t size, const char *why) {
  const int rtags[3] = {1, 2, 3}, stags[2] = {1, bad};
  const size_t ssizes[2] = {50, size}, caps[3] = {2 * MIB, 2 * MIB, 2 * MIB};
  char *sbufs[2] = {malloc(50), malloc(size)}, *rbufs[3];
  size_t got[3] = {0};
  th_fill(sbufs[0], 50, 1);
  th_fill(sbufs[1], size, bad);
  for (int i = 0; i < 3; i++)
    rbufs[i] = rbuf_new(caps[i]);
  th_pair_t p;
  pair_open(&p, 2, 1, 30);
  int64_t t0 = rcoll_now_ms();
  rcollResult_t r = group_run(&p, 2, sbufs, ssizes, stags, 3, rbufs, caps, rtags, got);
  int64_t dt = rcoll_now_ms() - t0;
  cr_assert_eq(r, rcollInvalidUsage, "tag %d of %zu bytes: got %d: %s", bad, size, r, rcoll_error_text());
  cr_assert_lt(dt, 3000, "the failure took %lld ms", (long long)dt);
  char want[64];
  snprintf(want, sizeof want, "message with tag %d from 127.0.0.1:", bad);
  cr_assert(strstr(rcoll_error_text(), want) && strstr(rcoll_error_text(), why) &&
                strstr(rcoll_error_text(), "tags 1,2,3"),
            "text: %s", rcoll_error_text());
  rbuf_check(rbufs[0], 50, 50, 1, "the buffer filled before the failure");
  for (int i = 1; i < 3; i++)
    rbuf_check(rbufs[i], 0, caps[i], rtags[i], "a buffer no message matched");
  /* The connection stays failed: a later receive fails at once. */
  void *req = NULL;
  int tag = 0;
  cr_assert_neq(ops->irecv(p.recv, 1, (void **)rbufs, caps, &tag, NULL, &req), rcollSuccess);
  th_pair_close(&p);
  for (int i = 0; i < 3; i++)
    free(rbufs[i]);
  free(sbufs[0]);
  free(sbufs[1]);
}

Test(socket_multi, tag_matching_no_buffer_fails_naming_it, .timeout = 30) {
  expect_tag_error(7, 100, "matches no buffer");
  expect_tag_error(-5, MIB, "matches no buffer"); /* announced for the helpers: none may start */
}

Test(socket_multi, tag_of_an_already_filled_buffer_fails, .timeout = 30) {
  expect_tag_error(1, 100, "matches only already filled buffers");
  expect_tag_error(1, 3 * MIB, "matches only already filled buffers");
}

Test(socket_multi, message_larger_than_its_buffer_fails, .timeout = 30) {
  const int rtags[2] = {1, 2}, stags[2] = {2, 1};
  const size_t ssizes[2] = {10, 300000}, caps[2] = {200000, 4096};
  char *sbufs[2] = {calloc(1, 10), calloc(1, 300000)}, *rbufs[2] = {rbuf_new(caps[0]), rbuf_new(caps[1])};
  size_t got[2];
  th_pair_t p;
  pair_open(&p, 1, 1, 30);
  rcollResult_t r = group_run(&p, 2, sbufs, ssizes, stags, 2, rbufs, caps, rtags, got);
  cr_assert_eq(r, rcollInvalidUsage, "got %d: %s", r, rcoll_error_text());
  cr_assert(strstr(rcoll_error_text(), "message of 300000 bytes") &&
                strstr(rcoll_error_text(), "larger than posted receive of 200000"),
            "text: %s", rcoll_error_text());
  rbuf_check(rbufs[0], 0, caps[0], 1, "the buffer the large message named");
  th_pair_close(&p);
  for (int i = 0; i < 2; i++)
    free(sbufs[i]), free(rbufs[i]);
}

/* A grouped receive takes one request slot per buffer, all or none: with
 * fewer free than it needs it gets a NULL request, and once enough are free
 * it is posted behind the single receives before it. */
Test(socket_multi, needs_one_slot_per_buffer, .timeout = 30) {
  enum { SINGLES = SOCKET_NREQS - 2 };
  th_pair_t p;
  pair_open(&p, 1, 1, 30);
  char small[SINGLES][16], *rbufs[3], *sbuf = malloc(MIB);
  size_t cap = sizeof small[0], caps[3] = {MIB, MIB, MIB}, got[3];
  void *sreq[SINGLES], *rreq[SINGLES], *greq = NULL, *bp;
  int tag = 0, gtags[3] = {40, 41, 42};
  for (int i = 0; i < SINGLES; i++) {
    bp = small[i];
    cr_assert_eq(ops->irecv(p.recv, 1, &bp, &cap, &tag, NULL, &rreq[i]), rcollSuccess);
    cr_assert_not_null(rreq[i]);
  }
  for (int i = 0; i < 3; i++)
    rbufs[i] = rbuf_new(caps[i]);
  cr_assert_eq(ops->irecv(p.recv, 3, (void **)rbufs, caps, gtags, NULL, &greq), rcollSuccess);
  cr_assert_null(greq, "a grouped receive of 3 was posted with 2 slots free");
  for (int i = 0; i < SINGLES; i++) {
    char msg[16];
    snprintf(msg, sizeof msg, "single %d", i);
    cr_assert_eq(ops->isend(p.send, msg, sizeof msg, 0, NULL, &sreq[i]), rcollSuccess);
    cr_assert_eq(th_wait_req(ops, sreq[i], NULL, 5000), rcollSuccess);
    if (i == 0) { /* one single done: 3 slots free */
      cr_assert_eq(th_wait_req(ops, rreq[0], NULL, 5000), rcollSuccess);
      cr_assert_eq(ops->irecv(p.recv, 3, (void **)rbufs, caps, gtags, NULL, &greq), rcollSuccess);
      cr_assert_not_null(greq);
    }
  }
  for (int k = 2; k >= 0; k--) {
    void *req;
    th_fill(sbuf, (size_t)(k + 1) * 300000, gtags[k]);
    cr_assert_eq(ops->isend(p.send, sbuf, (size_t)(k + 1) * 300000, gtags[k], NULL, &req), rcollSuccess);
    cr_assert_eq(th_wait_req(ops, req, NULL, 5000), rcollSuccess);
  }
  for (int i = 1; i < SINGLES; i++) {
    char want[16];
    snprintf(want, sizeof want, "single %d", i);
    cr_assert_eq(th_wait_req(ops, rreq[i], NULL, 5000), rcollSuccess);
    cr_assert_str_eq(small[i], want);
  }
  cr_assert_eq(th_wait_req(ops, greq, got, 5000), rcollSuccess, "%s", rcoll_error_text());
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(got[i], (size_t)(i + 1) * 300000);
    rbuf_check(rbufs[i], got[i], caps[i], gtags[i], "grouped buffer");
    free(rbufs[i]);
  }
  free(sbuf);
  th_pair_close(&p);
}

/* A stream of groups of 1..8 buffers, several in flight, against a sender
 * thread that sends message i with tag i in order: each group lists its
 * tags reversed, so every message lands away from its arrival position,
 * while helpers move the large ones concurrently. */
typedef struct inflight {
  void *req;
  int m0, n; /* messages m0 .. m0 + n - 1 */
} inflight_t;

Test(socket_multi, stream_of_groups_against_a_sender_thread, .timeout = 120) {
  enum { N = 400, W = 6, EXTRA = 9 };
  size_t sizes[N];
  char *rb[N];
  for (int i = 0; i < N; i++) {
    sizes[i] = i % 7 == 0 ? 0 : i % 5 == 0 ? (size_t)(150000 + i * 331) : (size_t)((i * 53) % (INLINE + 300));
    rb[i] = rbuf_new(sizes[i] + EXTRA);
  }
  for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
    th_pair_t p;
    pair_open(&p, configs[c].nt, configs[c].ns, 30);
    th_stream_t *tx = th_stream_new(ops, p.send, 1, N, sizes, 0, 1);
    pthread_t t;
    pthread_create(&t, NULL, th_stream_run, tx);
    inflight_t win[W];
    int m = 0, posted = 0, completed = 0;
    while (m < N || completed < posted) {
      if (m < N && posted - completed < W) {
        int n = 1 + posted % RCOLL_NET_MAX_RECVS, tags[RCOLL_NET_MAX_RECVS];
        n = n < N - m ? n : N - m;
        void *bufs[RCOLL_NET_MAX_RECVS], *req = NULL;
        size_t caps[RCOLL_NET_MAX_RECVS];
        for (int j = 0; j < n; j++) {
          tags[j] = m + n - 1 - j;
          bufs[j] = rb[tags[j]];
          caps[j] = sizes[tags[j]] + EXTRA;
        }
        cr_assert_eq(ops->irecv(p.recv, n, bufs, caps, tags, NULL, &req), rcollSuccess, "%s", rcoll_error_text());
        if (req != NULL) {
          win[posted++ % W] = (inflight_t){req, m, n};
          m += n;
          continue;
        }
        cr_assert_gt(posted, completed, "a NULL request with no receive in flight");
      }
      size_t got[RCOLL_NET_MAX_RECVS];
      const inflight_t *g = &win[completed++ % W];
      cr_assert_eq(th_wait_req(ops, g->req, got, 20000), rcollSuccess, "%s", rcoll_error_text());
      for (int j = 0; j < g->n; j++) {
        int tag = g->m0 + g->n - 1 - j;
        cr_assert_eq(got[j], sizes[tag], "message %d: %zu bytes reported, %zu sent", tag, got[j], sizes[tag]);
        rbuf_check(rb[tag], got[j], sizes[tag] + EXTRA, tag, "streamed group");
        memset(rb[tag], POISON, sizes[tag] + EXTRA + 1);
      }
    }
    pthread_join(t, NULL);
    cr_assert_eq(tx->result, rcollSuccess, "sender: %s", tx->err);
    th_stream_free(tx);
    th_pair_close(&p);
  }
  for (int i = 0; i < N; i++)
    free(rb[i]);
}
