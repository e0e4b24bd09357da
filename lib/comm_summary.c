/* The one line rank 0 prints at the default log level when a communicator
 * is created: how many ranks and nodes, which transport carries each class
 * of peer (within a node, between nodes) and where (interface and address,
 * HCA and GID, directory), and, when a transport preferred over the one
 * used did not open, why. The pain it answers: a job that ran at TCP speed
 * for days because the RDMA transport failed to start without a word. */
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "log.h"

enum { CLASS_INTRA, CLASS_INTER, NCLASSES };

/* Transports rank 0 uses for the peers of each class, as bit masks. */
static void classes_used(const struct rcollComm *c, uint32_t used[NCLASSES]) {
  used[CLASS_INTRA] = used[CLASS_INTER] = 0;
  for (int p = 0; p < c->nranks; p++)
    if (p != c->rank)
      used[c->topo.node_of[p] == c->topo.node ? CLASS_INTRA : CLASS_INTER] |= 1u << c->peers[p].net;
}

/* "socket (eth0 10.0.0.1)", "shm (/dev/shm)", "ib (mlx5_0:1 GID 3 ...)". */
static void append_where(const struct rcollComm *c, int t, char *buf, size_t len) {
  const rcoll_comm_net_t *n = &c->nets[t];
  rcoll_net_props_t props;
  size_t at = strlen(buf);
  if (n->ops->get_properties(n->ctx, 0, &props) != rcollSuccess)
    snprintf(buf + at, len - at, "%s", n->ops->name);
  else if (props.detail[0] != '\0' && strcmp(props.name, n->ops->name) != 0)
    snprintf(buf + at, len - at, "%s (%s %s)", n->ops->name, props.name, props.detail);
  else if (props.detail[0] != '\0')
    snprintf(buf + at, len - at, "%s (%s)", n->ops->name, props.detail);
  else
    snprintf(buf + at, len - at, "%s", n->ops->name);
}

static void append_class(const struct rcollComm *c, const char *label, uint32_t used, char *buf, size_t len) {
  if (used == 0)
    return;
  snprintf(buf + strlen(buf), len - strlen(buf), "; %s ", label);
  int first = 1;
  for (int t = 0; t < rcoll_net_count(); t++)
    if (used & (1u << t)) {
      if (!first)
        snprintf(buf + strlen(buf), len - strlen(buf), " + ");
      append_where(c, t, buf, len);
      first = 0;
    }
}

/* Why automatic transport t, preferred over what a class uses, carries none
 * of it: it did not open here, or some peer of the class lacks it. */
static const char *why_unused(const struct rcollComm *c, int t, int cls, char *buf, size_t len) {
  if (c->nets[t].ops == NULL)
    return c->nets[t].why_not[0] ? c->nets[t].why_not : "did not open";
  for (int p = 0; p < c->nranks; p++)
    if (p != c->rank && (c->topo.node_of[p] == c->topo.node) == (cls == CLASS_INTRA) &&
        !(c->infos[p].nets & (1u << t))) {
      char name[128];
      snprintf(buf, len, "%s could not open it", rcoll_comm_peer_name(c, p, name, sizeof name));
      return buf;
    }
  return "not chosen";
}

static int best_prio(uint32_t used) {
  int best = 1 << 30;
  for (int t = 0; t < rcoll_net_count(); t++)
    if ((used & (1u << t)) && rcoll_net_auto_priority(rcoll_net_at(t)) < best)
      best = rcoll_net_auto_priority(rcoll_net_at(t));
  return best;
}

/* Each transport once, with the reason for the first class it would have
 * served. With RCOLL_NET set the choice was the operator's: nothing to say. */
static void append_unused(const struct rcollComm *c, const uint32_t used[NCLASSES], char *buf, size_t len) {
  uint32_t told = 0;
  if (c->settings.net[0] != '\0')
    return;
  for (int cls = 0; cls < NCLASSES; cls++)
    for (int t = 0; t < rcoll_net_count(); t++) {
      const rcoll_transport_ops_t *ops = rcoll_net_at(t);
      int prio = rcoll_net_auto_priority(ops);
      if (used[cls] == 0 || prio < 0 || prio >= best_prio(used[cls]) || (told & (1u << t)) ||
          (cls == CLASS_INTER && (ops->caps & RCOLL_NET_CAP_LOCAL_ONLY)))
        continue;
      char why[160];
      const char *text = why_unused(c, t, cls, why, sizeof why);
      size_t name_len = strlen(ops->name);
      if (strncmp(text, ops->name, name_len) == 0 && strncmp(text + name_len, ": ", 2) == 0)
        text += name_len + 2; /* "ib not used: no RDMA devices", not "ib: no RDMA..." twice */
      snprintf(buf + strlen(buf), len - strlen(buf), "; %s not used: %.160s", ops->name, text);
      told |= 1u << t;
    }
}

void rcoll_comm_summary(const struct rcollComm *c) {
  if (c->rank != 0)
    return;
  char line[1024];
  uint32_t used[NCLASSES];
  classes_used(c, used);
  snprintf(line, sizeof line, "comm %p%s%.64s%s: %d rank%s on %d node%s", (const void *)c,
           c->name ? " \"" : "", c->name ? c->name : "", c->name ? "\"" : "", c->nranks,
           c->nranks == 1 ? "" : "s", c->topo.nnodes, c->topo.nnodes == 1 ? "" : "s");
  append_class(c, "within a node", used[CLASS_INTRA], line, sizeof line);
  append_class(c, "between nodes", used[CLASS_INTER], line, sizeof line);
  append_unused(c, used, line, sizeof line);
  rcoll_log_note("%s", line);
}
