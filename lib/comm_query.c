/* What a communicator runs on, for tools and benchmarks: the transport this
 * rank uses to a peer, and the algorithm and chunk the tuner picks for a call.
 * The bench programs print both in their header and JSON, as an operator reading a
 * result needs to know what produced it. Not in NCCL, which tells this only
 * through NCCL_DEBUG=INFO. */
#include <stdio.h>
#include <string.h>

#include "algo.h"
#include "comm.h"
#include "error.h"
#include "net.h"
#include "tuner.h"

RCOLL_API rcollResult_t rcollCommPeerTransport(rcollComm_t comm, int peer, int *sameNode, char *buf,
                                               size_t len) {
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollCommPeerTransport"));
  if (buf == NULL || len == 0 || sameNode == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollCommPeerTransport: buf or sameNode is NULL, or "
                       "len is 0");
  if (peer < 0 || peer >= comm->nranks)
    return rcoll_error(rcollInvalidArgument, "rcollCommPeerTransport: peer %d is not in 0..%d", peer,
                       comm->nranks - 1);
  const rcoll_comm_net_t *n = &comm->nets[comm->peers[peer].net];
  if (n->ops == NULL)
    return rcoll_error(rcollInternalError, "rcollCommPeerTransport: rank %d has no transport to %d",
                       comm->rank, peer);
  *sameNode = comm->topo.node_of[peer] == comm->topo.node;
  rcoll_net_props_t props;
  memset(&props, 0, sizeof props);
  /* The device only where it says more than the transport's name (a NIC,
   * an HCA), with its speed when the transport knows it. */
  if (n->ops->get_properties(n->ctx, 0, &props) != rcollSuccess || props.name[0] == '\0' ||
      strcmp(props.name, n->ops->name) == 0)
    snprintf(buf, len, "%s", n->ops->name);
  else if (props.speed_mbps > 0)
    snprintf(buf, len, "%s %s %d Mb/s", n->ops->name, props.name, props.speed_mbps);
  else
    snprintf(buf, len, "%s %s", n->ops->name, props.name);
  return rcollSuccess;
}

RCOLL_API rcollResult_t rcollCommAlgorithm(rcollComm_t comm, const char *coll, size_t bytes,
                                           char *algo, size_t len, size_t *chunk) {
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollCommAlgorithm"));
  if (coll == NULL || algo == NULL || len == 0 || chunk == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollCommAlgorithm: a NULL argument");
  int kind = -1;
  for (int k = 0; k < RCOLL_COLL_NKINDS; k++)
    if (strcmp(coll, rcoll_coll_name(k)) == 0)
      kind = k;
  if (kind < 0 || kind == RCOLL_COLL_SEND || kind == RCOLL_COLL_RECV) {
    char known[256];
    size_t used = 0;
    for (int k = 0; k < RCOLL_COLL_NKINDS && used < sizeof known; k++)
      if (k != RCOLL_COLL_SEND && k != RCOLL_COLL_RECV)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", used ? ", " : "",
                                 rcoll_coll_name(k));
    return rcoll_error(rcollInvalidArgument, "rcollCommAlgorithm: '%s' is not a collective (%s)", coll,
                       known);
  }
  if (comm->plan.tuner == NULL)
    return rcoll_error(rcollInternalError, "rcollCommAlgorithm: the communicator has no tuner");
  /* As a call plans itself (lib/coll.c): the tuner's choice, the chunk
   * capped by the communicator's. */
  rcoll_tune_choice_t ch = rcoll_tune_choose(comm->plan.tuner, kind, bytes);
  const rcoll_algorithm_t *a = ch.desc;
  if (a == NULL)
    return rcoll_error(rcollInternalError, "rcollCommAlgorithm: no algorithm implements %s", coll);
  snprintf(algo, len, "%s", a->name);
  *chunk = ch.chunk < comm->chunk_bytes ? ch.chunk : comm->chunk_bytes;
  return rcollSuccess;
}
