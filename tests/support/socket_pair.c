/* The socket transport tests' pair set-up (socket_pair.h). */
#include "socket_pair.h"

#include <stdio.h>
#include <string.h>

void socket_pair_settings(rcoll_settings_t *s, const char *family, int nt, int ns, int inl, int timeout) {
  memset(s, 0, sizeof *s);
  snprintf(s->socket_ifname, sizeof s->socket_ifname, "lo");
  snprintf(s->socket_family, sizeof s->socket_family, "%s", family);
  socket_settings(s)->socket_nthreads = nt;
  socket_settings(s)->nsocks_perthread = ns;
  socket_settings(s)->socket_inline = inl;
  socket_settings(s)->socket_lane = 1024; /* the default; only test_socket_lane.c pairs */
  s->timeout = timeout;
}

void socket_pair_open(pair_t *p, const char *family, int nt, int ns, int inl, int timeout) {
  memset(p, 0, sizeof *p);
  socket_pair_settings(&p->set, family, nt, ns, inl, timeout);
  p->sctx = th_ctx_new(ops, &p->set, SECRET);
  th_pair_listen(p, ops);
  char what[64];
  snprintf(what, sizeof what, "%s %dx%d", family, nt, ns);
  th_pair_connect(p, 5000, 0, what);
}

void socket_pair_exchange(pair_t *p, int n, const size_t *sizes, size_t extra) {
  th_exchange(p, n, sizes, extra, 1);
}
