/* The static table of transports, best first. A transport is added here and
 * nowhere else in lib/. */
#include "net.h"

#include <stdatomic.h>
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

#define NBUILTIN ((int)(sizeof transports / sizeof transports[0]))

/* One more, from a test: a wrapper that claims what this machine lacks. */
static _Atomic(const rcoll_transport_ops_t *) test_transport;

void rcoll_net_add_for_tests(const rcoll_transport_ops_t *ops) {
  atomic_store(&test_transport, ops);
}

int rcoll_net_count(void) { return NBUILTIN + (atomic_load(&test_transport) != NULL); }

const rcoll_transport_ops_t *rcoll_net_at(int i) {
  if (i == NBUILTIN)
    return atomic_load(&test_transport);
  return (i >= 0 && i < NBUILTIN) ? transports[i] : NULL;
}

int rcoll_net_index(const char *name) {
  for (int i = 0; i < rcoll_net_count(); i++)
    if (name != NULL && !strcasecmp(rcoll_net_at(i)->name, name))
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
    if (!strcasecmp(rcoll_net_at(i)->name, name))
      return rcoll_net_at(i);
  return NULL;
}
