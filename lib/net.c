/* The static table of transports, best first. A transport is added here and
 * nowhere else in lib/. */
#include "net.h"

#include <string.h>
#include <strings.h>

#include "../transports/socket/socket.h"
#include "../transports/shm/shm.h"
#if RCOLL_HAVE_UCX
#include "../transports/ucx/ucx.h"
#endif
#if RCOLL_HAVE_IBVERBS
#include "../transports/ib/ib.h"
#endif

static const rcoll_transport_ops_t *const transports[] = {
    &socket_ops,
    &shm_ops,
#if RCOLL_HAVE_UCX
    &ucx_ops,
#endif
#if RCOLL_HAVE_IBVERBS
    &ib_ops,
#endif
};

int rcoll_net_count(void) { return (int)(sizeof transports / sizeof transports[0]); }

const rcoll_transport_ops_t *rcoll_net_at(int i) {
  return (i >= 0 && i < rcoll_net_count()) ? transports[i] : NULL;
}

int rcoll_net_index(const char *name) {
  for (int i = 0; i < rcoll_net_count(); i++)
    if (name != NULL && !strcasecmp(transports[i]->name, name))
      return i;
  return -1;
}

/* Without RCOLL_NET: shared memory within a node, then RDMA, then TCP. UCX
 * is a choice users make (RCOLL_NET=ucx), since it would otherwise shadow the
 * transports above with its own selection. */
int rcoll_net_auto_priority(const rcoll_transport_ops_t *ops) {
  static const char *const order[] = {"shm", "ib", "socket"};
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
    if (!strcasecmp(ops->name, order[i]))
      return (int)i;
  return -1;
}

const rcoll_transport_ops_t *rcoll_net_find(const char *name) {
  if (name == NULL || *name == '\0')
    return transports[0];
  for (int i = 0; i < rcoll_net_count(); i++)
    if (!strcasecmp(transports[i]->name, name))
      return transports[i];
  return NULL;
}
