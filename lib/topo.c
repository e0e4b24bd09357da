/* Node detection (topo.h). */
#include "topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

void rcoll_topo_hostid(const rcoll_settings_t *s, char out[RCOLL_HOSTID_MAX]) {
  if (s->hostid[0] != '\0') {
    /* Longer identities are cut; ranks cut the same text the same way. */
    memcpy(out, s->hostid, RCOLL_HOSTID_MAX - 1);
    out[RCOLL_HOSTID_MAX - 1] = '\0';
    return;
  }
  char host[48] = "?";
  if (gethostname(host, sizeof host - 1) != 0)
    snprintf(host, sizeof host, "?");
  host[sizeof host - 1] = '\0';
  /* Namespaces share the host name; the namespace inode tells them apart. */
  struct stat st;
  unsigned long ns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long)st.st_ino : 0;
  snprintf(out, RCOLL_HOSTID_MAX, "%s/netns:%lu", host, ns);
}

rcollResult_t rcoll_topo_build(rcoll_topo_t *t, const char *hostids, size_t stride, int nranks,
                               int rank) {
  memset(t, 0, sizeof *t);
  t->nranks = nranks;
  t->rank = rank;
  t->node_of = calloc((size_t)nranks, sizeof(int));
  t->local_rank_of = calloc((size_t)nranks, sizeof(int));
  t->node_first = calloc((size_t)nranks + 1, sizeof(int));
  t->node_ranks = calloc((size_t)nranks, sizeof(int));
  if (!t->node_of || !t->local_rank_of || !t->node_first || !t->node_ranks) {
    rcoll_topo_free(t);
    return rcoll_error(rcollSystemError, "topology: out of memory");
  }
  /* Number nodes by their lowest rank; count ranks per node. */
  int *count = t->node_first + 1; /* count[n] lands in node_first[n + 1] */
  for (int r = 0; r < nranks; r++) {
    const char *id = hostids + (size_t)r * stride;
    int n = 0;
    while (n < t->nnodes && strcmp(id, hostids + (size_t)t->node_ranks[n] * stride) != 0)
      n++;
    if (n == t->nnodes)
      t->node_ranks[t->nnodes++] = r; /* temporarily: first rank of each node */
    t->node_of[r] = n;
    t->local_rank_of[r] = count[n]++;
  }
  for (int n = 0; n < t->nnodes; n++)
    t->node_first[n + 1] += t->node_first[n];
  for (int r = 0; r < nranks; r++)
    t->node_ranks[t->node_first[t->node_of[r]] + t->local_rank_of[r]] = r;
  t->node = t->node_of[rank];
  t->local_rank = t->local_rank_of[rank];
  t->local_nranks = t->node_first[t->node + 1] - t->node_first[t->node];
  return rcollSuccess;
}

int rcoll_topo_rank_at(const rcoll_topo_t *t, int node, int local) {
  if (node < 0 || node >= t->nnodes || local < 0)
    return -1;
  int i = t->node_first[node] + local;
  return i < t->node_first[node + 1] ? t->node_ranks[i] : -1;
}

void rcoll_topo_free(rcoll_topo_t *t) {
  free(t->node_of);
  free(t->local_rank_of);
  free(t->node_first);
  free(t->node_ranks);
  memset(t, 0, sizeof *t);
}
