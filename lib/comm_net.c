/* Choosing transports for a communicator. With RCOLL_NET set, that transport
 * carries everything. Otherwise every transport that describes itself as
 * automatic (a priority of 0 or more) and can start here is opened, every
 * rank learns which ones each other rank has, and each pair of ranks uses
 * the most preferred transport both have that can reach across them: a
 * local-only one (shared memory) only within a node. Both ends of a pair
 * compute the same answer from the same exchanged data. */
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "log.h"

static rcollResult_t net_open_one(struct rcollComm *c, int t, uint64_t secret) {
  const rcoll_transport_ops_t *ops = rcoll_net_at(t);
  rcoll_comm_net_t *n = &c->nets[t];
  rcoll_net_config_t cfg = {.settings = &c->settings, .secret = secret, .rank = c->rank};
  RCOLL_CHECK(ops->init(&cfg, &n->ctx));
  rcollResult_t r = ops->listen(n->ctx, 0, c->infos[c->rank].handles[t], &n->listen_comm);
  if (r != rcollSuccess) {
    ops->finalize(n->ctx);
    n->ctx = NULL;
    return r;
  }
  n->ops = ops;
  c->infos[c->rank].nets |= 1u << t;
  return rcollSuccess;
}

static rcollResult_t net_open_named(struct rcollComm *c, const char *want, uint64_t secret) {
  int t = rcoll_net_index(want);
  if (t < 0) {
    char avail[256] = "";
    for (int i = 0; i < rcoll_net_count(); i++)
      snprintf(avail + strlen(avail), sizeof avail - strlen(avail), "%s%s", i ? ", " : "",
               rcoll_net_at(i)->name);
    return rcoll_settings_error("RCOLL_NET=%s: no such transport (available: %s)", want, avail);
  }
  rcollResult_t r = net_open_one(c, t, secret);
  if (r != rcollSuccess)
    return rcoll_error(r, "RCOLL_NET=%s cannot be used here: %s", want, rcoll_error_text());
  return rcollSuccess;
}

/* A transport that does not open is skipped, and why is kept for the
 * summary line: a silent fall back to TCP is the costliest surprise. */
static void net_open_auto(struct rcollComm *c, uint64_t secret) {
  for (int t = 0; t < rcoll_net_count(); t++) {
    const rcoll_transport_ops_t *ops = rcoll_net_at(t);
    rcoll_comm_net_t *n = &c->nets[t];
    if (rcoll_net_auto_priority(ops) < 0)
      continue;
    /* RCOLL_SHM_DISABLE (NCCL's name) means "nothing node-local". */
    if ((ops->caps & RCOLL_NET_CAP_LOCAL_ONLY) && c->settings.shm_disable) {
      snprintf(n->why_not, sizeof n->why_not, "RCOLL_SHM_DISABLE=1");
      continue;
    }
    if (net_open_one(c, t, secret) != rcollSuccess) {
      snprintf(n->why_not, sizeof n->why_not, "%s", rcoll_error_text());
      RCOLL_INFO(RCOLL_SUB_INIT | RCOLL_SUB_NET, "rank %d: transport %s not used: %s", c->rank,
                 ops->name, rcoll_error_text());
    }
  }
}

/* RCOLL_NET_REQUIRE: each transport named must be built and open here, or
 * the communicator fails instead of running on a slower one. Every rank
 * checks itself, so the pairs across which it is missing fail at both ends. */
static rcollResult_t net_require(struct rcollComm *c) {
  char list[RCOLL_SETTING_STR_MAX], *save = NULL;
  snprintf(list, sizeof list, "%s", c->settings.net_require);
  for (char *name = strtok_r(list, ",", &save); name != NULL; name = strtok_r(NULL, ",", &save)) {
    int t = rcoll_net_index(name);
    if (t < 0)
      return rcoll_error(rcollInvalidArgument, "RCOLL_NET_REQUIRE=%s: %s is not built into this "
                         "library (bench/rcoll_info lists those that are)", c->settings.net_require, name);
    if (c->nets[t].ops != NULL)
      continue;
    const char *why = c->nets[t].why_not[0] ? c->nets[t].why_not
                      : c->settings.net[0] ? "RCOLL_NET names another transport"
                                           : "it runs only when RCOLL_NET names it";
    return rcoll_error(rcollSystemError, "rank %d: RCOLL_NET_REQUIRE=%s, but %s cannot be used here: %s",
                       c->rank, c->settings.net_require, name, why);
  }
  return rcollSuccess;
}

/* The transport for one peer, or -1 when the pair has none in common. */
static int net_for_peer(const struct rcollComm *c, int peer) {
  return rcoll_net_best(c->infos[c->rank].nets & c->infos[peer].nets, c->topo.node_of[peer] == c->topo.node);
}

static rcollResult_t net_pick(struct rcollComm *c) {
  uint32_t used = 0;
  for (int p = 0; p < c->nranks; p++) {
    int t = net_for_peer(c, p);
    if (t < 0) {
      char name[128];
      rcoll_comm_peer_name(c, p, name, sizeof name);
      return rcoll_error(rcollInvalidUsage, "rank %d: no transport reaches %s (ours: 0x%x, theirs: "
                         "0x%x; a local-only RCOLL_NET across nodes?)", c->rank, name,
                         c->infos[c->rank].nets, c->infos[p].nets);
    }
    c->peers[p].net = t;
    used |= 1u << t;
  }
  for (int t = 0; t < rcoll_net_count(); t++)
    if (used & (1u << t))
      snprintf(c->net_summary + strlen(c->net_summary), sizeof c->net_summary - strlen(c->net_summary),
               "%s%s", c->net_summary[0] ? "+" : "", rcoll_net_at(t)->name);
  return rcollSuccess;
}

/* Topology building compares host ids with strcmp: one a peer sent without
 * its terminator would be read past, into the next rank's info or beyond
 * the table (reproduced with tests/fuzz/fuzz_rankinfo.c). Ours are terminated by
 * construction, so cutting the last byte changes no real id. */
void rcoll_comm_infos_check(rcoll_rank_info_t *infos, int nranks) {
  for (int r = 0; r < nranks; r++)
    infos[r].hostid[RCOLL_HOSTID_MAX - 1] = '\0';
}

rcollResult_t rcoll_comm_open_nets(struct rcollComm *c, const char *net_name, uint64_t secret) {
  if (rcoll_net_count() > RCOLL_MAX_NETS)
    return rcoll_error(rcollInternalError, "more transports than RCOLL_MAX_NETS");
  for (int t = 0; t < rcoll_net_count(); t++)
    RCOLL_CHECK(rcoll_net_check_ops(rcoll_net_at(t)));
  const char *want = (net_name && *net_name) ? net_name : c->settings.net;
  snprintf(c->net_request, sizeof c->net_request, "%s", want);
  rcoll_rank_info_t *me = &c->infos[c->rank];
  rcoll_topo_hostid(&c->settings, me->hostid);
  me->flags = c->settings.trace[0] != '\0' ? RCOLL_RANK_TRACING : 0;
  me->flags |= c->settings.fingerprint ? RCOLL_RANK_FINGERPRINT : 0;
  me->flags |= c->settings.cuda_direct && !c->settings.p2p_disable ? RCOLL_RANK_CUDA_DIRECT : 0;
  me->cuda_bounce = (uint32_t)c->settings.cuda_bounce;
  if (want[0] != '\0')
    RCOLL_CHECK(net_open_named(c, want, secret));
  else
    net_open_auto(c, secret);
  if (me->nets == 0)
    return rcoll_error(rcollSystemError, "rank %d: no transport could start: %s", c->rank,
                       rcoll_error_text());
  RCOLL_CHECK(net_require(c));
  RCOLL_CHECK(rcoll_bootstrap_allgather(c->bootstrap, c->infos, sizeof *c->infos));
  rcoll_comm_infos_check(c->infos, c->nranks);
  RCOLL_CHECK(rcoll_topo_build(&c->topo, c->infos[0].hostid, sizeof *c->infos, c->nranks, c->rank));
  return net_pick(c);
}

void rcoll_comm_close_nets(struct rcollComm *c) {
  for (int t = 0; t < RCOLL_MAX_NETS; t++) {
    rcoll_comm_net_t *n = &c->nets[t];
    if (n->ops != NULL && n->listen_comm != NULL)
      n->ops->close_listen(n->listen_comm);
    if (n->ops != NULL && n->ctx != NULL)
      n->ops->finalize(n->ctx);
    memset(n, 0, sizeof *n);
  }
  rcoll_topo_free(&c->topo);
}
