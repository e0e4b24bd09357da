/* Going on after a rank dies: rcollCommRevoke stops a communicator's calls,
 * and rcollCommShrink makes a new communicator of the ranks that remain,
 * as NCCL 2.28's ncclCommRevoke and ncclCommShrink do.
 *
 * Shrink cannot use the parent's collectives (rcollCommSplit does): a dead
 * rank would never answer. The survivors already know each other's bootstrap
 * listeners, so they form a new bootstrap ring among themselves
 * (bootstrap_shrink.c), and the new communicator is then made over it like
 * any other: new transport connections, topology and tuner. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "log.h"

/* Waits (up to the communicator's timeout) for the calls running in other
 * threads to see the revoked flag and leave the engine; they check it on
 * every pass, so this is quick unless a thread is stuck in a transport. */
static rcollResult_t revoke_wait(struct rcollComm *c, const char *fn) {
  int64_t deadline = rcoll_now_ms() + c->timeout_ms;
  while (c->active > 0 && rcoll_now_ms() < deadline) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  if (c->active > 0)
    return rcoll_error(rcollTimeout, "%s: rank %d: a call on comm %p in another thread did not stop "
                       "within %lld s", fn, c->rank, (void *)c, (long long)(c->timeout_ms / 1000));
  return rcollSuccess;
}

RCOLL_API rcollResult_t rcollCommRevoke(rcollComm_t comm, int revokeFlags) {
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollCommRevoke"));
  if (revokeFlags != RCOLL_REVOKE_DEFAULT)
    return rcoll_error(rcollInvalidArgument, "rcollCommRevoke: revokeFlags 0x%x must be "
                       "RCOLL_REVOKE_DEFAULT (0)", (unsigned)revokeFlags);
  comm->revoked = 1;
  RCOLL_INFO(RCOLL_SUB_INIT, "rcollCommRevoke: rank %d: comm %p revoked", comm->rank, (void *)comm);
  return revoke_wait(comm, "rcollCommRevoke");
}

/* The exclude list: every entry a rank of comm, none twice, not all of
 * them. excluded[r] is set for each; *self when the caller is listed. */
static rcollResult_t shrink_check_list(const struct rcollComm *c, const int *list, int n, uint8_t *excluded) {
  if (n < 0)
    return rcoll_error(rcollInvalidArgument, "rcollCommShrink: excludeRanksCount %d is negative", n);
  if (n > 0 && list == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollCommShrink: excludeRanksList is NULL but "
                       "excludeRanksCount is %d", n);
  for (int i = 0; i < n; i++) {
    if (list[i] < 0 || list[i] >= c->nranks)
      return rcoll_error(rcollInvalidArgument, "rcollCommShrink: excludeRanksList[%d] = %d is not a rank "
                         "of comm (0..%d)", i, list[i], c->nranks - 1);
    if (excluded[list[i]])
      return rcoll_error(rcollInvalidArgument, "rcollCommShrink: excludeRanksList[%d] = %d is listed twice",
                         i, list[i]);
    excluded[list[i]] = 1;
  }
  if (n >= c->nranks)
    return rcoll_error(rcollInvalidArgument, "rcollCommShrink: excludeRanksList excludes every rank "
                       "(%d of %d)", n, c->nranks);
  return rcollSuccess;
}

/* What the new communicator is made with: the config's, or with a NULL
 * config the parent's (its timeout and the transport it asked for). The
 * config is read as every entry reads it (comm_config.c: only as far as
 * its size says it has fields, undefined ones taking their defaults). */
static rcollResult_t shrink_config(const struct rcollComm *c, const rcollConfig_t *config,
                                   const char **net, int64_t *timeout_ms) {
  *net = c->net_request;
  *timeout_ms = c->timeout_ms;
  if (config == NULL)
    return rcollSuccess;
  rcollConfig_t cfg;
  RCOLL_CHECK(rcoll_config_read("rcollCommShrink", config, &cfg));
  *timeout_ms = cfg.timeoutMs > 0 ? cfg.timeoutMs : 0;
  *net = config->size >= offsetof(rcollConfig_t, netName) + sizeof config->netName ? config->netName : NULL;
  return rcollSuccess;
}

/* FNV-1a over the excluded ranks in rank order: the same set gives the
 * same tag whatever order each survivor listed it in. */
static uint64_t shrink_tag(const uint8_t *excluded, int nranks) {
  uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)nranks;
  for (int r = 0; r < nranks; r++)
    if (excluded[r])
      for (int k = 0; k < 4; k++)
        h = (h ^ (((uint32_t)r >> (8 * k)) & 0xff)) * 0x100000001b3ull;
  return h;
}

/* RCOLL_SHRINK_ABORT: the parent's calls are stopped, and its connections
 * closed, so that survivors still blocked in a call on it (waiting for us,
 * not for the dead rank) fail at once and come to the shrink too, instead
 * of waiting out RCOLL_TIMEOUT. The parent is then good only for destroy. */
static rcollResult_t shrink_abort_parent(struct rcollComm *c) {
  c->revoked = 1;
  RCOLL_CHECK(revoke_wait(c, "rcollCommShrink"));
  rcoll_conn_close_all(c);
  return rcollSuccess;
}

static rcollResult_t shrink_make(struct rcollComm *c, const uint8_t *excluded, int nexcluded,
                                 rcollComm_t *newcomm, const char *net, int64_t timeout_ms) {
  int nkeep = 0, newrank = -1;
  int *keep = malloc(sizeof(int) * (size_t)c->nranks);
  if (keep == NULL)
    return rcoll_error(rcollSystemError, "rcollCommShrink: out of memory");
  for (int r = 0; r < c->nranks; r++) {
    if (r == c->rank)
      newrank = nkeep;
    if (!excluded[r])
      keep[nkeep++] = r;
  }
  rcoll_bootstrap_t *b = NULL;
  rcollResult_t r = rcoll_bootstrap_shrink(c->bootstrap, keep, nkeep, newrank,
                                           shrink_tag(excluded, c->nranks), nexcluded, timeout_ms, &b);
  free(keep);
  if (r == rcollSuccess) {
    rcoll_log_set_rank(newrank);
    r = rcoll_comm_create_from(newcomm, nkeep, newrank, b, net, timeout_ms);
  }
  if (r == rcollSuccess)
    RCOLL_INFO(RCOLL_SUB_INIT, "rcollCommShrink: rank %d of %d is rank %d of %d in comm %p", c->rank,
               c->nranks, newrank, nkeep, (void *)*newcomm);
  return r;
}

RCOLL_API rcollResult_t rcollCommShrink(rcollComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                        rcollComm_t *newcomm, rcollConfig_t *config, int shrinkFlags) {
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollCommShrink"));
  if (newcomm == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollCommShrink: newcomm is NULL");
  *newcomm = NULL;
  if (shrinkFlags != RCOLL_SHRINK_DEFAULT && shrinkFlags != RCOLL_SHRINK_ABORT)
    return rcoll_error(rcollInvalidArgument, "rcollCommShrink: shrinkFlags 0x%x is neither "
                       "RCOLL_SHRINK_DEFAULT (0) nor RCOLL_SHRINK_ABORT (1)", (unsigned)shrinkFlags);
  if (comm->in_group)
    return rcoll_error(rcollInvalidUsage, "rcollCommShrink: comm has calls in an open group");
  const char *net;
  int64_t timeout_ms;
  RCOLL_CHECK(shrink_config(comm, config, &net, &timeout_ms));
  uint8_t *excluded = calloc((size_t)comm->nranks, 1);
  if (excluded == NULL)
    return rcoll_error(rcollSystemError, "rcollCommShrink: out of memory");
  rcollResult_t r = shrink_check_list(comm, excludeRanksList, excludeRanksCount, excluded);
  if (r == rcollSuccess && shrinkFlags == RCOLL_SHRINK_ABORT)
    r = shrink_abort_parent(comm);
  else if (r == rcollSuccess && comm->active > 0)
    r = rcoll_error(rcollInvalidUsage, "rcollCommShrink: a call on comm is running in another thread "
                    "(RCOLL_SHRINK_ABORT stops it first)");
  /* An excluded rank that calls anyway gets no communicator, as a rank
   * with RCOLL_SPLIT_NOCOLOR does; it talks to no one. */
  if (r == rcollSuccess && excluded[comm->rank])
    RCOLL_INFO(RCOLL_SUB_INIT, "rcollCommShrink: rank %d is in its own exclude list: no new comm",
               comm->rank);
  else if (r == rcollSuccess)
    r = shrink_make(comm, excluded, excludeRanksCount, newcomm, net, timeout_ms);
  free(excluded);
  return r;
}
