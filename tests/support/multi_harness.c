/* Grouped receives driven the same way for every transport
 * (multi_harness.h). */
#include "multi_harness.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

/* Receive buffers: cap bytes poisoned, plus one canary byte. */
char *th_rbuf_new(size_t cap) {
  char *b = malloc(cap + 1);
  memset(b, TH_POISON, cap + 1);
  return b;
}

/* The received bytes carry the pattern of their tag, and nothing past them
 * (up to the canary after the posted size) was written. */
void th_rbuf_check(const char *b, size_t got, size_t cap, int tag, const char *what) {
  long bad = th_check(b, got, tag);
  cr_assert_eq(bad, -1, "%s (tag %d): wrong byte at %ld of %zu", what, tag, bad, got);
  for (size_t i = got; i <= cap; i++)
    cr_assert_eq((unsigned char)b[i], TH_POISON, "%s (tag %d): byte %zu written past the %zu received", what,
                 tag, i, got);
}

/* Tests the sends and the group from this thread until the group is done
 * and the sends too, or the group fails (its result is returned; the sends
 * may fail once it has), or ms pass (rcollInProgress). */
rcollResult_t th_group_wait(const rcoll_transport_ops_t *ops, void **sreq, int *sdone, int ns,
                                          void *rreq, int *rdone, size_t *got, int64_t ms) {
  for (int64_t end = rcoll_now_ms() + ms; rcoll_now_ms() < end; sched_yield()) {
    int pending = 0;
    for (int i = 0; i < ns; i++)
      if (!sdone[i] && ops->test(sreq[i], &sdone[i], NULL) == rcollSuccess)
        pending += !sdone[i];
    rcollResult_t r = *rdone ? rcollSuccess : ops->test(rreq, rdone, got);
    if (r != rcollSuccess || (*rdone && pending == 0))
      return r;
  }
  return rcollInProgress;
}

/* Posts the ns sends (in the order given), then one group of n buffers, and
 * waits for them as th_group_wait does (10 s). */
rcollResult_t th_group_run(th_pair_t *p, int ns, char **sbufs, const size_t *ssizes,
                                         const int *stags, int n, char **rbufs, const size_t *caps,
                                         const int *rtags, size_t *got) {
  const rcoll_transport_ops_t *ops = p->ops;
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
  return th_group_wait(ops, sreq, sdone, ns, rreq, &rdone, got, 10000);
}

/* Three buffers (tags 10, 11, 12) posted larger than what comes; the sends
 * come in reverse tag order, 100 B, 1 MiB and 5 MiB (small and large paths
 * both), twice. `what` names the configuration in failures. */
void th_multi_reverse_order(th_pair_t *p, const char *what) {
  const int rtags[3] = {10, 11, 12}, stags[3] = {12, 11, 10};
  const size_t ssizes[3] = {100, TH_MIB, 5 * TH_MIB}; /* tag 12: 100 B, tag 11: 1 MiB, tag 10: 5 MiB */
  const size_t want[3] = {5 * TH_MIB, TH_MIB, 100}, caps[3] = {5 * TH_MIB + 4096, TH_MIB, 4096};
  for (int round = 0; round < 2; round++) {
    char *sbufs[3], *rbufs[3];
    size_t got[3] = {0};
    for (int i = 0; i < 3; i++) {
      sbufs[i] = malloc(ssizes[i]);
      th_fill(sbufs[i], ssizes[i], stags[i]);
      rbufs[i] = th_rbuf_new(caps[i]);
    }
    rcollResult_t r = th_group_run(p, 3, sbufs, ssizes, stags, 3, rbufs, caps, rtags, got);
    cr_assert_eq(r, rcollSuccess, "%s round %d: %d: %s", what, round, r, rcoll_error_text());
    for (int i = 0; i < 3; i++) {
      cr_assert_eq(got[i], want[i], "%s: buffer %d (tag %d) reported %zu bytes, %zu sent", what, i, rtags[i],
                   got[i], want[i]);
      th_rbuf_check(rbufs[i], got[i], caps[i], rtags[i], "grouped buffer");
      free(sbufs[i]);
      free(rbufs[i]);
    }
  }
}

/* All eight buffers at once, with empty messages and duplicate tags among
 * them (sizes from the caller: around its small-message limits): a message
 * takes the first unfilled buffer of its tag. */
void th_multi_eight(th_pair_t *p, const size_t ssizes[RCOLL_NET_MAX_RECVS], const char *what) {
  enum { N = RCOLL_NET_MAX_RECVS };
  const int rtags[N] = {3, 1, 4, 1, 5, 9, 2, 6}, stags[N] = {6, 1, 2, 9, 5, 1, 4, 3};
  size_t caps[N], got[N], want[N] = {0};
  char *sbufs[N], *rbufs[N];
  int filled[N] = {0};
  for (int i = 0; i < N; i++) {
    caps[i] = 2 * TH_MIB + 3;
    rbufs[i] = th_rbuf_new(caps[i]);
    sbufs[i] = malloc(ssizes[i] + 1);
    th_fill(sbufs[i], ssizes[i], stags[i]);
  }
  for (int s = 0; s < N; s++) /* where each send should land, computed apart from the transport */
    for (int i = 0; i < N; i++)
      if (rtags[i] == stags[s] && !filled[i]) {
        filled[i] = 1, want[i] = ssizes[s];
        break;
      }
  cr_assert_eq(th_group_run(p, N, sbufs, ssizes, stags, N, rbufs, caps, rtags, got), rcollSuccess, "%s: %s", what,
               rcoll_error_text());
  for (int i = 0; i < N; i++) {
    cr_assert_eq(got[i], want[i], "%s: buffer %d (tag %d): %zu bytes, %zu expected", what, i, rtags[i], got[i],
                 want[i]);
    th_rbuf_check(rbufs[i], got[i], caps[i], rtags[i], "grouped buffer");
    free(sbufs[i]);
    free(rbufs[i]);
  }
}

/* After a failed group its sends may still be in flight (a transport's
 * helper thread reading their buffers: ThreadSanitizer saw the socket
 * transport's send() read a buffer these functions had just freed). A send
 * buffer may be freed once its send completed or its comm was closed, so the
 * send side is closed first; th_pair_close skips it then. */
static void close_sends(th_pair_t *p) {
  p->ops->close_send(p->send);
  p->send = NULL;
}

/* Sends tags 1 then `bad` of `size` bytes to a receive of tags {1, 2, 3}:
 * the receive fails within 3 s, naming the tag (and `why`), nothing is
 * written outside the buffer the first message filled, and the connection
 * stays failed. */
void th_multi_tag_error(th_pair_t *p, int bad, size_t size, const char *why) {
  const int rtags[3] = {1, 2, 3}, stags[2] = {1, bad};
  const size_t ssizes[2] = {50, size}, caps[3] = {2 * TH_MIB, 2 * TH_MIB, 2 * TH_MIB};
  char *sbufs[2] = {malloc(50), malloc(size)}, *rbufs[3];
  size_t got[3] = {0};
  th_fill(sbufs[0], 50, 1);
  th_fill(sbufs[1], size, bad);
  for (int i = 0; i < 3; i++)
    rbufs[i] = th_rbuf_new(caps[i]);
  int64_t t0 = rcoll_now_ms();
  rcollResult_t r = th_group_run(p, 2, sbufs, ssizes, stags, 3, rbufs, caps, rtags, got);
  int64_t dt = rcoll_now_ms() - t0;
  cr_assert_eq(r, rcollInvalidUsage, "tag %d of %zu bytes: got %d: %s", bad, size, r, rcoll_error_text());
  cr_assert_lt(dt, 3000, "the failure took %lld ms", (long long)dt);
  char want[64];
  snprintf(want, sizeof want, "with tag %d from ", bad);
  cr_assert(strstr(rcoll_error_text(), want) && strstr(rcoll_error_text(), why) &&
                strstr(rcoll_error_text(), "tags 1,2,3"),
            "text: %s", rcoll_error_text());
  th_rbuf_check(rbufs[0], 50, caps[0], 1, "the buffer filled before the failure");
  for (int i = 1; i < 3; i++)
    th_rbuf_check(rbufs[i], 0, caps[i], rtags[i], "a buffer no message matched");
  void *req = NULL;
  int tag = 0;
  cr_assert_neq(p->ops->irecv(p->recv, 1, (void **)rbufs, caps, &tag, NULL, &req), rcollSuccess);
  close_sends(p);
  for (int i = 0; i < 3; i++)
    free(rbufs[i]);
  free(sbufs[0]);
  free(sbufs[1]);
}

/* A message larger than the buffer of its tag fails the group, naming the
 * sizes, and writes nothing into that buffer. */
void th_multi_too_large(th_pair_t *p) {
  const int rtags[2] = {1, 2}, stags[2] = {2, 1};
  const size_t ssizes[2] = {10, 300000}, caps[2] = {200000, 4096};
  char *sbufs[2] = {calloc(1, 10), calloc(1, 300000)}, *rbufs[2] = {th_rbuf_new(caps[0]), th_rbuf_new(caps[1])};
  size_t got[2];
  rcollResult_t r = th_group_run(p, 2, sbufs, ssizes, stags, 2, rbufs, caps, rtags, got);
  cr_assert_eq(r, rcollInvalidUsage, "got %d: %s", r, rcoll_error_text());
  cr_assert(strstr(rcoll_error_text(), "message of 300000 bytes") &&
                strstr(rcoll_error_text(), "larger than posted receive of 200000"),
            "text: %s", rcoll_error_text());
  th_rbuf_check(rbufs[0], 0, caps[0], 1, "the buffer the large message named");
  close_sends(p);
  for (int i = 0; i < 2; i++)
    free(sbufs[i]), free(rbufs[i]);
}

/* A group takes one request slot per buffer, all or none: with nreqs - 2
 * single receives posted a group of 3 gets a NULL request; once one single
 * is done it is posted behind the others, and everything arrives in order.
 * free_slots (may be NULL) reads the receive side's free slots: none left
 * with the group posted, all back at the end. */
void th_multi_slots(th_pair_t *p, int nreqs, th_wait_fn wait, int (*free_slots)(void *recv)) {
  const rcoll_transport_ops_t *ops = p->ops;
  enum { MAXS = 64 };
  int singles = nreqs - 2;
  cr_assert(singles > 0 && singles <= MAXS);
  char small[MAXS][16], *rbufs[3], *sb[3];
  size_t cap = sizeof small[0], caps[3] = {TH_MIB, TH_MIB, TH_MIB}, got[3];
  void *sreq[MAXS], *rreq[MAXS], *greq = NULL, *bp, *req[3];
  int tag = 0, gtags[3] = {40, 41, 42};
  for (int i = 0; i < singles; i++) {
    bp = small[i];
    cr_assert_eq(ops->irecv(p->recv, 1, &bp, &cap, &tag, NULL, &rreq[i]), rcollSuccess);
    cr_assert_not_null(rreq[i]);
  }
  for (int i = 0; i < 3; i++)
    rbufs[i] = th_rbuf_new(caps[i]);
  cr_assert_eq(ops->irecv(p->recv, 3, (void **)rbufs, caps, gtags, NULL, &greq), rcollSuccess);
  cr_assert_null(greq, "a grouped receive of 3 was posted with 2 slots free");
  for (int i = 0; i < singles; i++) {
    /* Written into room for any int and copied, since the compiler cannot
     * see that i < MAXS (-Wformat-truncation; under -fsanitize=thread not
     * even through i % MAXS); the message stays 16 bytes. */
    char msg[16] = {0}, text[24];
    snprintf(text, sizeof text, "single %d", i);
    memcpy(msg, text, sizeof msg - 1);
    cr_assert_eq(ops->isend(p->send, msg, sizeof msg, 99, NULL, &sreq[i]), rcollSuccess);
    cr_assert_eq(wait(p, sreq[i], NULL, 5000), rcollSuccess);
    if (i == 0) { /* one single done: 3 slots free */
      cr_assert_eq(wait(p, rreq[0], NULL, 5000), rcollSuccess);
      cr_assert_eq(ops->irecv(p->recv, 3, (void **)rbufs, caps, gtags, NULL, &greq), rcollSuccess);
      cr_assert_not_null(greq);
      if (free_slots != NULL)
        cr_assert_eq(free_slots(p->recv), 0);
    }
  }
  for (int k = 2; k >= 0; k--) {
    size_t n = (size_t)(k + 1) * 300000;
    sb[k] = malloc(n);
    th_fill(sb[k], n, gtags[k]);
    cr_assert_eq(ops->isend(p->send, sb[k], n, gtags[k], NULL, &req[k]), rcollSuccess);
  }
  for (int i = 1; i < singles; i++) {
    char want[24];
    snprintf(want, sizeof want, "single %d", i);
    cr_assert_eq(wait(p, rreq[i], NULL, 5000), rcollSuccess);
    cr_assert_str_eq(small[i], want);
  }
  cr_assert_eq(wait(p, greq, got, 10000), rcollSuccess, "%s", rcoll_error_text());
  for (int k = 0; k < 3; k++) {
    cr_assert_eq(wait(p, req[k], NULL, 5000), rcollSuccess);
    free(sb[k]);
  }
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(got[i], (size_t)(i + 1) * 300000);
    th_rbuf_check(rbufs[i], got[i], caps[i], gtags[i], "grouped buffer");
    free(rbufs[i]);
  }
  if (free_slots != NULL)
    cr_assert_eq(free_slots(p->recv), nreqs, "slots left taken after the group completed");
}

/* A stream of n messages (message i has tag i and sizes[i] bytes, sent in
 * order by a sender thread) received in groups of 1..RCOLL_NET_MAX_RECVS
 * buffers, up to `window` groups in flight. Each group lists its tags
 * reversed, so every message lands away from its arrival position. rb[i]
 * holds sizes[i] + extra bytes (th_rbuf_new). Returns how many groups had
 * more than one buffer. */
typedef struct th_inflight {
  void *req;
  int m0, n; /* messages m0 .. m0 + n - 1 */
} th_inflight_t;

int th_group_stream(th_pair_t *p, int n, const size_t *sizes, char **rb, size_t extra,
                                  int window, const char *what) {
  const rcoll_transport_ops_t *ops = p->ops;
  th_stream_t *tx = th_stream_new(ops, p->send, 1, n, sizes, 0, 1);
  pthread_t thr;
  pthread_create(&thr, NULL, th_stream_run, tx);
  th_inflight_t win[16];
  cr_assert_leq(window, 16);
  int m = 0, posted = 0, completed = 0, groups = 0;
  while (m < n || completed < posted) {
    if (m < n && posted - completed < window) {
      int k = 1 + posted % RCOLL_NET_MAX_RECVS, tags[RCOLL_NET_MAX_RECVS];
      k = k < n - m ? k : n - m;
      void *bufs[RCOLL_NET_MAX_RECVS], *req = NULL;
      size_t caps[RCOLL_NET_MAX_RECVS];
      for (int j = 0; j < k; j++) {
        tags[j] = m + k - 1 - j;
        bufs[j] = rb[tags[j]];
        caps[j] = sizes[tags[j]] + extra;
      }
      cr_assert_eq(ops->irecv(p->recv, k, bufs, caps, tags, NULL, &req), rcollSuccess, "%s: %s", what,
                   rcoll_error_text());
      if (req != NULL) {
        win[posted++ % window] = (th_inflight_t){req, m, k};
        m += k;
        groups += k > 1;
        continue;
      }
      cr_assert_gt(posted, completed, "%s: a NULL request with no receive in flight", what);
    }
    size_t got[RCOLL_NET_MAX_RECVS];
    const th_inflight_t *g = &win[completed++ % window];
    cr_assert_eq(th_wait_req(ops, g->req, got, 20000), rcollSuccess, "%s: %s", what, rcoll_error_text());
    for (int j = 0; j < g->n; j++) {
      int tag = g->m0 + g->n - 1 - j;
      cr_assert_eq(got[j], sizes[tag], "%s: message %d: %zu bytes reported, %zu sent", what, tag, got[j],
                   sizes[tag]);
      th_rbuf_check(rb[tag], got[j], sizes[tag] + extra, tag, "streamed group");
      memset(rb[tag], TH_POISON, sizes[tag] + extra + 1);
    }
  }
  pthread_join(thr, NULL);
  cr_assert_eq(tx->result, rcollSuccess, "%s: sender: %s", what, tx->err);
  th_stream_free(tx);
  return groups;
}
