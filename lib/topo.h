/* Topology: which ranks share a node. A node is a host identity: the host
 * name plus the network namespace (so each namespace of a test acts as its
 * own node), or RCOLL_HOSTID when set. Nodes are numbered in order of their
 * lowest rank. */
#ifndef RCOLL_TOPO_H
#define RCOLL_TOPO_H

#include "config.h"
#include "rcoll.h"

#define RCOLL_HOSTID_MAX 64

typedef struct rcoll_topo {
  int nranks, rank;
  int nnodes, node;           /* node count, and ours */
  int local_rank, local_nranks;
  int *node_of;               /* rank -> node */
  int *local_rank_of;         /* rank -> index among its node's ranks */
  int *node_first;            /* nnodes + 1 offsets into node_ranks */
  int *node_ranks;            /* ranks grouped by node, ascending within a node */
} rcoll_topo_t;

/* This process's host identity (RCOLL_HOSTID, else "hostname/netns:<inode>"). */
void rcoll_topo_hostid(const rcoll_settings_t *s, char out[RCOLL_HOSTID_MAX]);
/* Builds the tables from every rank's host identity (hostids[r]). */
rcollResult_t rcoll_topo_build(rcoll_topo_t *t, const char *hostids, size_t stride, int nranks,
                               int rank);
void rcoll_topo_free(rcoll_topo_t *t);
/* Rank with local index `local` on `node`, or -1 when that node has fewer. */
int rcoll_topo_rank_at(const rcoll_topo_t *t, int node, int local);

#endif
