/* The UCX transport tests' pair set-up and waits (ucx_pair.h). */
#if RCOLL_HAVE_UCX
#include "ucx_pair.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../transports/ucx/ucx_priv.h"

/* Under LeakSanitizer: tests that close with transfers stuck in flight make
 * the transport leave the UCX worker allocated on purpose (ucx.c,
 * ucx_worker_quiesce), and UCX keeps some state until exit. Only leaks whose
 * stack passes through UCX's own libraries are suppressed; rcoll's remain
 * reported. The hook lives here so that only the binaries that use a UCX
 * pair (the linker takes this member from the support archive) get it. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libucs.so\nleak:libucp.so\nleak:libuct.so\n"; }

void ucx_pair_settings(rcoll_settings_t *s, int timeout) {
  memset(s, 0, sizeof *s);
  snprintf(s->socket_ifname, sizeof s->socket_ifname, "lo");
  snprintf(s->socket_family, sizeof s->socket_family, "AF_INET");
  s->timeout = timeout;
}

void ucx_pair_connect(th_pair_t *p) {
  char what[64];
  snprintf(what, sizeof what, "UCX_TLS=%s", getenv("UCX_TLS"));
  th_pair_connect(p, 10000, 1, what);
}

void ucx_pair_open(th_pair_t *p, const char *tls, int timeout, int force_peer) {
  memset(p, 0, sizeof *p);
  setenv("UCX_TLS", tls, 1);
  ucx_pair_settings(&p->set, timeout);
  p->sctx = th_ctx_new(ops, &p->set, SECRET);
  th_pair_listen(p, ops);
  ((ucx_ctx_t *)p->sctx)->force_peer_mode = force_peer;
  ucx_pair_connect(p);
}

rcollResult_t ucx_pair_wait_both(th_pair_t *p, void *req, size_t *size, int64_t ms) {
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

int ucx_pair_exchange(th_pair_t *p, int n, const size_t *sizes, size_t extra) {
  return th_exchange(p, n, sizes, extra, 1);
}
#endif
