/* RCOLL_TOPO_DUMP_FILE: each process appends what it sees of its machine
 * (once) and, for each communicator, what each of its ranks uses: the
 * transports, the NIC or directory behind each with its PCI path and NUMA
 * node. An operator compares it with the machine's real layout when a job
 * runs slower than the hardware should allow. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "device.h"
#include "hwtopo.h"
#include "log.h"

/* "mlx5_0:1" -> "mlx5_0": hwloc knows devices, not ports. */
static void device_of(const char *name, char *buf, size_t len) {
  snprintf(buf, len, "%.*s", (int)strcspn(name, ":"), name);
}

static void dump_rank(const struct rcollComm *c, FILE *f) {
  fprintf(f, "comm %p: rank %d of %d on %s, node %d of %d\n", (const void *)c, c->rank, c->nranks,
          rcoll_bootstrap_host(c->bootstrap, c->rank), c->topo.node, c->topo.nnodes);
  uint32_t used = 0;
  for (int p = 0; p < c->nranks; p++)
    if (p != c->rank)
      used |= 1u << c->peers[p].net;
  for (int t = 0; t < RCOLL_MAX_NETS; t++) {
    const rcoll_comm_net_t *n = &c->nets[t];
    rcoll_net_props_t props;
    if (n->ops == NULL || n->ops->get_properties(n->ctx, 0, &props) != rcollSuccess)
      continue;
    const char *role = (used & (1u << t)) ? "used" : "open, no peer uses it";
    if (props.pci_path[0] == '\0') {
      fprintf(f, "  %s (%s): %s\n", n->ops->name, role, props.detail);
      continue;
    }
    char dev[64];
    rcoll_hwtopo_locality_t loc;
    device_of(props.name, dev, sizeof dev);
    rcoll_hwtopo_locality_of_netdev(dev, &loc);
    fprintf(f, "  %s (%s): %s %s, PCI %s; %s\n", n->ops->name, role, props.name, props.detail,
            props.pci_path, loc.where);
  }
  int gpu = rcoll_device_ops.comm_device(c);
  if (gpu >= 0)
    fprintf(f, "  GPU: CUDA device %d\n", gpu);
  else
    fprintf(f, "  GPU: none yet (a communicator binds its device at its first device call)\n");
}

void rcoll_comm_topo_dump(const struct rcollComm *c) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static int machine_done;
  char path[4096], host[64];
  const char *pattern = c->settings.topo_dump_file;
  if (pattern[0] == '\0')
    return;
  if (gethostname(host, sizeof host) != 0)
    snprintf(host, sizeof host, "?");
  host[sizeof host - 1] = '\0';
  FILE *f = NULL;
  if (rcoll_log_expand_path(pattern, host, (int)getpid(), path, sizeof path) == 0)
    f = fopen(path, "ae");
  if (f == NULL) {
    RCOLL_WARN("RCOLL_TOPO_DUMP_FILE=%s: cannot open it: %s", pattern, strerror(errno));
    return;
  }
  /* One writer at a time, its buffer flushed before the next, so that ranks
   * of one process do not interleave. */
  pthread_mutex_lock(&lock);
  if (!machine_done) {
    fprintf(f, "# rcoll topology of %s, process %d\n", host, (int)getpid());
    rcoll_hwtopo_dump(f);
    machine_done = 1;
  }
  dump_rank(c, f);
  fclose(f);
  pthread_mutex_unlock(&lock);
}
