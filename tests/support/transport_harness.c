/* The transport tests' harness (transport_harness.h): pairs, request waits,
 * streams of patterned messages and the request-slot check, written once for
 * every transport's ops table. */
#include "transport_harness.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

static unsigned char th_pattern(int msg, size_t i) {
  return (unsigned char)(i * 131 + (i >> 12) + msg * 29 + 1);
}

void th_fill(char *b, size_t n, int msg) {
  for (size_t i = 0; i < n; i++)
    b[i] = (char)th_pattern(msg, i);
}

/* Index of the first wrong byte, or -1. */
long th_check(const char *b, size_t n, int msg) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)b[i] != th_pattern(msg, i))
      return (long)i;
  return -1;
}

/* A context, or NULL with the reason printed (usable in forked children). */
void *th_ctx_try(const rcoll_transport_ops_t *ops, const rcoll_settings_t *s, uint64_t secret) {
  rcoll_net_config_t cfg = {.settings = s, .secret = secret, .rank = 0};
  void *ctx = NULL;
  if (ops->init(&cfg, &ctx) != rcollSuccess) {
    fprintf(stderr, "init: %s\n", rcoll_error_text());
    return NULL;
  }
  return ctx;
}

/* A context, asserting that init succeeds. */
void *th_ctx_new(const rcoll_transport_ops_t *ops, const rcoll_settings_t *s, uint64_t secret) {
  rcoll_net_config_t cfg = {.settings = s, .secret = secret, .rank = 0};
  void *ctx = NULL;
  cr_assert_eq(ops->init(&cfg, &ctx), rcollSuccess, "init: %s", rcoll_error_text());
  return ctx;
}

/* The receiving side of a pair: p->set is filled by the caller first. */
void th_pair_listen(th_pair_t *p, const rcoll_transport_ops_t *ops) {
  p->ops = ops;
  p->rctx = th_ctx_new(ops, &p->set, TH_SECRET);
  cr_assert_eq(ops->listen(p->rctx, 0, p->handle, &p->listen), rcollSuccess);
}

/* Polls connect and accept together, as the engine does, until both finish.
 * With keep_accepting, accept is called until the connect is done too (a
 * transport may finish the sender's wire-up through the receiver's
 * progress), and must not produce a second comm. */
void th_pair_connect(th_pair_t *p, int64_t ms, int keep_accepting, const char *what) {
  const rcoll_transport_ops_t *ops = p->ops;
  int64_t end = rcoll_now_ms() + ms;
  while ((p->send == NULL || p->recv == NULL) && rcoll_now_ms() < end) {
    void *extra = NULL;
    if (p->send == NULL)
      cr_assert_eq(ops->connect(p->sctx, 0, p->handle, &p->send), rcollSuccess, "%s", rcoll_error_text());
    if (p->recv == NULL || keep_accepting) {
      cr_assert_eq(ops->accept(p->listen, p->recv == NULL ? &p->recv : &extra), rcollSuccess, "%s",
                   rcoll_error_text());
      cr_assert_null(extra, "one connect gave two accepted comms");
    }
  }
  cr_assert(p->send && p->recv, "connection not made within %lld ms (%s)", (long long)ms, what);
}

void th_pair_close(th_pair_t *p) {
  const rcoll_transport_ops_t *ops = p->ops;
  if (p->send)
    ops->close_send(p->send);
  if (p->recv)
    ops->close_recv(p->recv);
  if (p->listen)
    ops->close_listen(p->listen);
  ops->finalize(p->sctx);
  ops->finalize(p->rctx);
}

/* Accepts for up to ms; NULL when nothing came. */
void *th_accept_for(const rcoll_transport_ops_t *ops, void *listen, int ms) {
  void *comm = NULL;
  for (int64_t end = rcoll_now_ms() + ms; comm == NULL && rcoll_now_ms() < end; usleep(1000))
    cr_assert_eq(ops->accept(listen, &comm), rcollSuccess);
  return comm;
}

/* Tests until done, an error, or the deadline (then rcollInProgress). Spins
 * briefly, then yields: the tests run on two cores. */
rcollResult_t th_wait_req(const rcoll_transport_ops_t *ops, void *req, size_t *size, int64_t ms) {
  int64_t end = rcoll_now_ms() + ms;
  int done = 0;
  for (unsigned spin = 0; rcoll_now_ms() < end; spin++) {
    rcollResult_t r = ops->test(req, &done, size);
    if (r != rcollSuccess || done)
      return r;
    if (spin > 64)
      sched_yield();
  }
  return rcollInProgress;
}

static rcollResult_t th_stream_post(th_stream_t *s, int i, void **req) {
  if (s->is_send)
    return s->ops->isend(s->comm, s->bufs[i], s->sizes[i], i, NULL, req);
  int tag = i;
  return s->ops->irecv(s->comm, 1, (void **)&s->bufs[i], &s->sizes[i], &tag, NULL, req);
}

void *th_stream_run(void *arg) {
  th_stream_t *s = arg;
  void *reqs[TH_MAX_INFLIGHT];
  int posted = 0, completed = 0;
  s->result = rcollSuccess;
  while (completed < s->n) {
    void *req = NULL;
    if (posted < s->n && posted - completed < TH_MAX_INFLIGHT) {
      s->result = th_stream_post(s, posted, &req);
      if (s->result != rcollSuccess)
        break;
      if (req != NULL) {
        reqs[posted++ % TH_MAX_INFLIGHT] = req;
        continue;
      }
      s->nulls++;
    }
    s->result = th_wait_req(s->ops, reqs[completed % TH_MAX_INFLIGHT], &s->got[completed], 20000);
    if (s->result != rcollSuccess)
      break;
    completed++;
  }
  snprintf(s->err, sizeof s->err, "%s", rcoll_error_text());
  return NULL;
}

/* Buffers for n messages: sends filled with the pattern, receives posted
 * `extra` bytes larger and poisoned (0xEE), with a canary byte after the
 * size. With shift > 1 receive i starts i % shift bytes into its allocation,
 * so that receives land at every alignment. One allocation holds the arrays. */
th_stream_t *th_stream_new(const rcoll_transport_ops_t *ops, void *comm, int is_send, int n,
                                         const size_t *sizes, size_t extra, int shift) {
  th_stream_t *s = calloc(1, sizeof *s + (size_t)n * (sizeof(char *) + 2 * sizeof(size_t)));
  *s = (th_stream_t){.ops = ops, .comm = comm, .is_send = is_send, .n = n, .shift = shift, .bufs = (char **)(s + 1)};
  s->sizes = (size_t *)(s->bufs + n);
  s->got = s->sizes + n;
  for (int i = 0; i < n; i++) {
    s->sizes[i] = sizes[i] + (is_send ? 0 : extra);
    s->bufs[i] = (char *)malloc(s->sizes[i] + (size_t)shift) + (is_send ? 0 : i % shift);
    if (is_send)
      th_fill(s->bufs[i], sizes[i], i);
    else
      memset(s->bufs[i], 0xEE, s->sizes[i] + 1);
  }
  return s;
}

void th_stream_free(th_stream_t *s) {
  for (int i = 0; i < s->n; i++)
    free(s->bufs[i] - (s->is_send ? 0 : i % s->shift));
  free(s);
}

/* Checks a finished receive stream (reported size, contents, canary): 0, or
 * the first bad message + 1 with the reason in why. */
int th_stream_verify(const th_stream_t *rx, const size_t *sizes, char *why, size_t len) {
  for (int i = 0; i < rx->n; i++) {
    long bad = th_check(rx->bufs[i], sizes[i], i);
    if (rx->got[i] != sizes[i] || bad >= 0 || (unsigned char)rx->bufs[i][sizes[i]] != 0xEE) {
      snprintf(why, len, "message %d of %zu bytes: reported %zu, first wrong byte %ld, canary %02x", i,
               sizes[i], rx->got[i], bad, (unsigned char)rx->bufs[i][sizes[i]]);
      return i + 1;
    }
  }
  return 0;
}

/* Sends sizes[i] bytes as message i from a second thread while this one
 * receives into buffers `extra` bytes larger; asserts that both sides
 * succeeded and reported the sent sizes and that the receives hold the
 * pattern and stopped at their size. Returns how often the two sides found
 * the transport out of request slots. */
int th_exchange(th_pair_t *p, int n, const size_t *sizes, size_t extra, int shift) {
  th_stream_t *tx = th_stream_new(p->ops, p->send, 1, n, sizes, 0, shift);
  th_stream_t *rx = th_stream_new(p->ops, p->recv, 0, n, sizes, extra, shift);
  pthread_t t;
  pthread_create(&t, NULL, th_stream_run, tx);
  th_stream_run(rx);
  pthread_join(t, NULL);
  cr_assert_eq(tx->result, rcollSuccess, "send failed: %s", tx->err);
  cr_assert_eq(rx->result, rcollSuccess, "recv failed: %s", rx->err);
  char why[256];
  cr_assert_eq(th_stream_verify(rx, sizes, why, sizeof why), 0, "%s", why);
  for (int i = 0; i < n; i++)
    cr_assert_eq(tx->got[i], sizes[i], "send %d reported %zu, sent %zu", i, tx->got[i], sizes[i]);
  int nulls = tx->nulls + rx->nulls;
  th_stream_free(tx);
  th_stream_free(rx);
  return nulls;
}

void *th_late_send_run(void *arg) {
  th_late_send_t *l = arg;
  void *req = NULL;
  usleep((useconds_t)l->delay_ms * 1000);
  if (l->ops->isend(l->comm, l->buf, l->size, 0, NULL, &req) == rcollSuccess && req != NULL)
    th_wait_req(l->ops, req, NULL, 5000);
  return NULL;
}

/* CPU time of the calling thread, to show that a wait sleeps in the kernel. */
double th_thread_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The receive side has exactly nreqs request slots: the next irecv gives a
 * NULL request, and completing the oldest frees a slot. */
void th_expect_slot_pool(th_pair_t *p, int nreqs, th_wait_fn wait) {
  const rcoll_transport_ops_t *ops = p->ops;
  char buf[8];
  size_t sz = sizeof buf;
  int tag = 0;
  void *bp = buf, *req = NULL, *first = NULL;
  int posted = 0;
  for (; posted < 100; posted++) {
    cr_assert_eq(ops->irecv(p->recv, 1, &bp, &sz, &tag, NULL, &req), rcollSuccess);
    if (req == NULL)
      break;
    if (first == NULL)
      first = req;
  }
  cr_assert_eq(posted, nreqs, "pool gave %d requests", posted);
  void *sreq;
  cr_assert_eq(ops->isend(p->send, "abcdefgh", 8, 0, NULL, &sreq), rcollSuccess);
  cr_assert_eq(wait(p, sreq, NULL, 5000), rcollSuccess);
  size_t got = 0;
  cr_assert_eq(wait(p, first, &got, 5000), rcollSuccess);
  cr_assert_eq(got, 8);
  cr_assert_eq(memcmp(buf, "abcdefgh", 8), 0);
  cr_assert_eq(ops->irecv(p->recv, 1, &bp, &sz, &tag, NULL, &req), rcollSuccess);
  cr_assert_not_null(req);
}
