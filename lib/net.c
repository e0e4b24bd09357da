/* The static tables of transports: their descriptions, and the ops of those
 * built here. A transport is added to lib/ here and nowhere else: its
 * #include, its description and (when built) its ops; everything else the
 * core knows of it comes from those. */
#include "net.h"

#include <stdatomic.h>
#include <string.h>
#include <strings.h>

#include "error.h"

#include "../transports/socket/socket.h"
#include "../transports/shm/shm.h"
#include "../transports/ucx/ucx.h"
#include "../transports/ib/ib.h"

/* Every transport of the source tree, built or not: their settings are read
 * and listed in this order. */
static const rcoll_transport_desc_t *const descs[] = {&socket_desc, &shm_desc, &ucx_desc, &ib_desc};

#define NDESCS ((int)(sizeof descs / sizeof descs[0]))
_Static_assert(sizeof descs / sizeof descs[0] <= RCOLL_NET_SETTINGS_MAX,
               "rcoll_settings_t holds the settings of RCOLL_NET_SETTINGS_MAX transports");

/* The transports built here. The order is not a preference (auto_priority
 * is), except that rcoll_net_find(NULL) and the NCCL net plugin without
 * RCOLL_NET take the first one that works: sockets, which work everywhere. */
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

rcollResult_t rcoll_net_check_ops(const rcoll_transport_ops_t *ops) {
  if (ops == NULL)
    return rcoll_error(rcollInvalidArgument, "transport ops table is NULL");
  /* The size comes first so that it can be read before anything else: a
   * table of another size may not even have the fields below. */
  if (ops->size != sizeof *ops)
    return rcoll_error(rcollInvalidArgument, "transport ops table has size %zu, this library expects "
                       "%zu (built against another lib/net.h?)", ops->size, sizeof *ops);
  const char *name = ops->name != NULL && ops->name[0] != '\0' ? ops->name : NULL;
  if (ops->version != RCOLL_NET_OPS_VERSION)
    return rcoll_error(rcollInvalidArgument, "transport %s: ops table version %d, this library expects %d",
                       name ? name : "(unnamed)", ops->version, RCOLL_NET_OPS_VERSION);
  if (name == NULL)
    return rcoll_error(rcollInvalidArgument, "transport ops table has no name");
  if (ops->desc == NULL)
    return rcoll_error(rcollInvalidArgument, "transport %s: ops table has no description (desc)", name);
#define OPS_SLOT(slot) {#slot, ops->slot == NULL}
  const struct {
    const char *name;
    int missing;
  } slots[] = {
      OPS_SLOT(init),     OPS_SLOT(finalize), OPS_SLOT(devices), OPS_SLOT(get_properties),
      OPS_SLOT(listen),   OPS_SLOT(connect),  OPS_SLOT(accept),  OPS_SLOT(reg_mr),
      OPS_SLOT(dereg_mr), OPS_SLOT(isend),    OPS_SLOT(irecv),   OPS_SLOT(iflush),
      OPS_SLOT(test),     OPS_SLOT(wait),     OPS_SLOT(close_send), OPS_SLOT(close_recv),
      OPS_SLOT(close_listen),
  };
#undef OPS_SLOT
  for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++)
    if (slots[i].missing)
      return rcoll_error(rcollInvalidArgument, "transport %s: ops slot %s is NULL (point it at a stub "
                         "that returns an error)", name, slots[i].name);
  return rcollSuccess;
}

rcollResult_t rcoll_net_add_for_tests(const rcoll_transport_ops_t *ops) {
  if (ops != NULL)
    RCOLL_CHECK(rcoll_net_check_ops(ops));
  atomic_store(&test_transport, ops);
  return rcollSuccess;
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

int rcoll_net_auto_priority(const rcoll_transport_ops_t *ops) {
  if (ops == atomic_load(&test_transport) || ops->desc == NULL)
    return RCOLL_NET_BY_NAME_ONLY;
  return ops->desc->auto_priority < 0 ? RCOLL_NET_BY_NAME_ONLY : ops->desc->auto_priority;
}

int rcoll_net_best(uint32_t have, int same_node) {
  int best = -1, best_prio = 1 << 30;
  for (int t = 0; t < rcoll_net_count(); t++) {
    const rcoll_transport_ops_t *ops = rcoll_net_at(t);
    if (!(have & (1u << t)) || ((ops->caps & RCOLL_NET_CAP_LOCAL_ONLY) && !same_node))
      continue;
    /* One opened only by name is the only one open. */
    int prio = rcoll_net_auto_priority(ops) < 0 ? 0 : rcoll_net_auto_priority(ops);
    if (prio < best_prio)
      best = t, best_prio = prio;
  }
  return best;
}

const rcoll_transport_ops_t *rcoll_net_find(const char *name) {
  if (name == NULL || *name == '\0')
    return transports[0];
  int i = rcoll_net_index(name);
  return i < 0 ? NULL : rcoll_net_at(i);
}

int rcoll_net_desc_count(void) { return NDESCS; }

const rcoll_transport_desc_t *rcoll_net_desc_at(int i) {
  return i >= 0 && i < NDESCS ? descs[i] : NULL;
}

const rcoll_transport_desc_t *rcoll_net_desc_find(const char *name) {
  for (int i = 0; i < NDESCS; i++)
    if (name != NULL && !strcasecmp(descs[i]->name, name))
      return descs[i];
  return NULL;
}

void *rcoll_net_settings(const rcoll_settings_t *s, const rcoll_transport_desc_t *desc) {
  for (int i = 0; i < NDESCS; i++)
    if (descs[i] == desc)
      return (void *)s->nets[i].bytes;
  return NULL;
}
