/* rcollCommSplit: a new communicator for each color. Every rank learns every
 * (color, key) through the parent's bootstrap; the first rank of each new
 * group, in (key, rank) order, starts a bootstrap root, and a second exchange
 * hands its unique id to the group's members, who then join as usual. */
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "log.h"

typedef struct split_entry {
  int32_t color, key;
} split_entry_t;

/* Position of `rank` among the ranks of its color, ordered by (key, rank);
 * also the group's size and its first member. */
static int split_place(const split_entry_t *e, int nranks, int rank, int *size, int *first) {
  int pos = 0, n = 0, best = -1;
  for (int r = 0; r < nranks; r++) {
    if (e[r].color != e[rank].color)
      continue;
    n++;
    if (e[r].key < e[rank].key || (e[r].key == e[rank].key && r < rank))
      pos++;
    if (best < 0 || e[r].key < e[best].key || (e[r].key == e[best].key && r < best))
      best = r;
  }
  *size = n;
  *first = best;
  return pos;
}

RCOLL_API rcollResult_t rcollCommSplit(rcollComm_t comm, int color, int key, rcollComm_t *newcomm,
                                       rcollConfig_t *config) {
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollCommSplit"));
  if (newcomm == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollCommSplit: newcomm is NULL");
  *newcomm = NULL;
  if (color < RCOLL_SPLIT_NOCOLOR)
    return rcoll_error(rcollInvalidArgument, "rcollCommSplit: color %d is negative", color);
  int n = comm->nranks;
  split_entry_t *e = calloc((size_t)n, sizeof *e);
  rcollUniqueId *ids = calloc((size_t)n, sizeof *ids);
  rcollResult_t r = (e && ids) ? rcollSuccess
                               : rcoll_error(rcollSystemError, "rcollCommSplit: out of memory");
  int size = 0, first = -1, pos = 0;
  if (r == rcollSuccess) {
    e[comm->rank] = (split_entry_t){color, key};
    r = rcoll_bootstrap_allgather(comm->bootstrap, e, sizeof *e);
  }
  if (r == rcollSuccess) {
    pos = split_place(e, n, comm->rank, &size, &first);
    if (color != RCOLL_SPLIT_NOCOLOR && first == comm->rank)
      r = rcollGetUniqueId(&ids[comm->rank]);
  }
  /* Everyone takes part in the exchange, even ranks that join no group. */
  rcollResult_t r2 = rcoll_bootstrap_allgather(comm->bootstrap, ids, sizeof *ids);
  if (r == rcollSuccess)
    r = r2;
  if (r == rcollSuccess && color != RCOLL_SPLIT_NOCOLOR) {
    RCOLL_INFO(RCOLL_SUB_INIT, "rcollCommSplit: rank %d color %d key %d -> rank %d of %d", comm->rank,
               color, key, pos, size);
    r = rcollCommInitRankConfig(newcomm, size, ids[first], pos, config);
  }
  free(e);
  free(ids);
  return r;
}
