/* The UCX transport tests' common set-up (tests/test_ucx.c and
 * tests/test_ucx_death.c): settings on loopback, a connected pair under a
 * given UCX_TLS, and waits that progress both workers. One binary per test
 * file, so the LeakSanitizer hook below is defined once in each. */
#ifndef RCOLL_TESTS_UCX_PAIR_H
#define RCOLL_TESTS_UCX_PAIR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../transports/ucx/ucx.h"
#include "../transports/ucx/ucx_priv.h"
#include "error.h"
#include "transport_harness.h"

#define SECRET TH_SECRET
#define MIB TH_MIB

/* Under LeakSanitizer: tests that close with transfers stuck in flight make
 * the transport leave the UCX worker allocated on purpose (ucx.c,
 * ucx_worker_quiesce), and UCX keeps some state until exit. Only leaks whose
 * stack passes through UCX's own libraries are suppressed; rcoll's remain
 * reported. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libucs.so\nleak:libucp.so\nleak:libuct.so\n"; }

static const rcoll_transport_ops_t *const ops = &ucx_ops;
#define NTLS 2

typedef th_pair_t pair_t;

static inline int64_t now_ms(void) { return rcoll_now_ms(); }

static inline void settings(rcoll_settings_t *s, int timeout) {
  memset(s, 0, sizeof *s);
  snprintf(s->socket_ifname, sizeof s->socket_ifname, "lo");
  snprintf(s->socket_family, sizeof s->socket_family, "AF_INET");
  s->timeout = timeout;
}

/* Like the engine, accept is called until the connect is done too: the
 * sender's endpoint finishes its wire-up through the receiver's worker,
 * which accept progresses. */
static inline void pair_connect(pair_t *p) {
  char what[64];
  snprintf(what, sizeof what, "UCX_TLS=%s", getenv("UCX_TLS"));
  th_pair_connect(p, 10000, 1, what);
}

/* force_peer: the sender asks for peer failure handling although the peer
 * is on this host (the test hook in ucx_ctx_t). */
static inline void pair_open(pair_t *p, const char *tls, int timeout, int force_peer) {
  memset(p, 0, sizeof *p);
  setenv("UCX_TLS", tls, 1);
  settings(&p->set, timeout);
  p->sctx = th_ctx_new(ops, &p->set, SECRET);
  th_pair_listen(p, ops);
  ((ucx_ctx_t *)p->sctx)->force_peer_mode = force_peer;
  pair_connect(p);
}

/* th_wait_req for a test that drives both ends from one thread, as the
 * engine does for a group of communicators: the peer's worker must progress
 * too (a rendezvous needs both). */
static inline rcollResult_t wait_both(pair_t *p, void *req, size_t *size, int64_t ms) {
  int64_t end = now_ms() + ms;
  int done = 0;
  while (now_ms() < end) {
    rcollResult_t r = ops->test(req, &done, size);
    if (r != rcollSuccess || done)
      return r;
    ucp_worker_progress(((ucx_ctx_t *)p->sctx)->worker);
    ucp_worker_progress(((ucx_ctx_t *)p->rctx)->worker);
  }
  return rcollInProgress;
}

/* Receives are posted `extra` bytes larger than the sends; returns how often
 * either side met a NULL request. */
static inline int exchange(pair_t *p, int n, const size_t *sizes, size_t extra) { return th_exchange(p, n, sizes, extra, 1); }

#endif
