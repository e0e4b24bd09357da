/* The UCX transport tests' common set-up (tests/test_ucx.c,
 * test_ucx_death.c, test_ucx_multi.c): settings on loopback, a connected pair
 * under a given UCX_TLS, and waits that progress both workers. ucx_pair.c is
 * empty in a build without UCX (RCOLL_HAVE_UCX); include this header inside
 * the same guard. */
#ifndef RCOLL_TESTS_SUPPORT_UCX_PAIR_H
#define RCOLL_TESTS_SUPPORT_UCX_PAIR_H

#include "../../transports/ucx/ucx.h"
#include "clock.h"
#include "transport_harness.h"

/* Short names the three test files share: constants and one inline, no code
 * worth compiling once. */
#define SECRET TH_SECRET
#define MIB TH_MIB
#define NTLS 2
static const rcoll_transport_ops_t *const ops = &ucx_ops;
typedef th_pair_t pair_t;
static inline int64_t now_ms(void) { return rcoll_now_ms(); }

/* Loopback (lo, AF_INET) and the given timeout in seconds; the rest zero. */
void ucx_pair_settings(rcoll_settings_t *s, int timeout);

/* Like the engine, accept is called until the connect is done too: the
 * sender's endpoint finishes its wire-up through the receiver's worker,
 * which accept progresses. */
void ucx_pair_connect(th_pair_t *p);

/* A connected pair under UCX_TLS=tls. force_peer: the sender asks for peer
 * failure handling although the peer is on this host (the test hook in
 * ucx_ctx_t). */
void ucx_pair_open(th_pair_t *p, const char *tls, int timeout, int force_peer);

/* th_wait_req for a test that drives both ends from one thread, as the
 * engine does for a group of communicators: the peer's worker must progress
 * too (a rendezvous needs both). */
rcollResult_t ucx_pair_wait_both(th_pair_t *p, void *req, size_t *size, int64_t ms);

/* th_exchange with receives `extra` bytes larger than the sends; returns how
 * often either side met a NULL request. */
int ucx_pair_exchange(th_pair_t *p, int n, const size_t *sizes, size_t extra);

#endif
