/* Hardware topology through hwloc (hwtopo.h).
 *
 * One topology per process, loaded on first use under a mutex that every
 * query also holds: queries are rare (one per connection or thread), and
 * the mutex lets the test hook swap the topology safely. Binding is done
 * with the kernel's calls (sched affinity, mbind) rather than hwloc's, so
 * that a topology loaded from XML, which hwloc does not consider to be this
 * machine, still drives real bindings in the tests. */
#include "hwtopo.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "log.h"

#if RCOLL_HAVE_HWLOC
#include <hwloc.h>
#endif

#define HWTOPO_SUBSYS (RCOLL_SUB_INIT | RCOLL_SUB_NET)
#define HWTOPO_MPOL_PREFERRED 1     /* linux/mempolicy.h */
#define HWTOPO_MPOL_MF_MOVE (1 << 1)
#define HWTOPO_MAX_NODES 1024

char *rcoll_hwtopo_cpus_str(const cpu_set_t *cpus, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  for (int c = 0; c < CPU_SETSIZE && off < len; c++) {
    if (!CPU_ISSET(c, cpus))
      continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, cpus))
      last++;
    int n = last == c ? snprintf(buf + off, len - off, "%s%d", off ? "," : "", c)
                      : snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", c, last);
    off += n > 0 ? (size_t)n : 0;
    c = last;
  }
  if (off == 0)
    snprintf(buf, len, "none");
  return buf;
}

/* RCOLL_PIN_THREADS, read at each decision through the settings table (its
 * default and help live there): threads are pinned rarely, and tests flip it. */
static int pin_enabled(void) {
  for (int i = 0; i < rcoll_settings_count(); i++) {
    rcoll_setting_info_t info;
    rcoll_settings_describe(i, &info);
    if (strcmp(info.name, "PIN_THREADS") != 0)
      continue;
    int64_t v = 1;
    return rcoll_settings_parse_int(info.value, &v) != 0 || v != 0;
  }
  return 1;
}

/* The CPUs the calling thread may run on: a device's locality is only
 * useful where it meets them. */
static void caller_cpus(cpu_set_t *out) {
  CPU_ZERO(out);
  if (sched_getaffinity(0, sizeof *out, out) != 0)
    for (int c = 0; c < CPU_SETSIZE; c++)
      CPU_SET(c, out);
}

static int locality_none(rcoll_hwtopo_locality_t *out, const char *fmt, const char *name) {
  out->valid = 0;
  out->numa = -1;
  CPU_ZERO(&out->cpus);
  snprintf(out->where, sizeof out->where, fmt, name);
  return 0;
}

#if RCOLL_HAVE_HWLOC

static pthread_mutex_t topo_mu = PTHREAD_MUTEX_INITIALIZER;
static hwloc_topology_t topo;
static int topo_tried;

/* I/O objects are filtered out by default; keeping the important ones (PCI
 * devices of network, GPU and accelerator classes, and their OS devices)
 * is what lets a NIC or GPU be found by name or bus id. The libpciaccess
 * component is left out: it leaks its table of device names (LeakSanitizer
 * then fails every test that loads the topology), and the Linux component
 * reads the same bus ids, classes and NUMA affinities from sysfs. */
static hwloc_topology_t topo_new(const char *xml) {
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0)
    return NULL;
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
#if HWLOC_API_VERSION >= 0x00020100
  hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
#endif
  if ((xml != NULL && hwloc_topology_set_xmlbuffer(t, xml, (int)strlen(xml) + 1) != 0) ||
      hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    return NULL;
  }
  return t;
}

static void topo_log(hwloc_topology_t t) {
  cpu_set_t mine;
  char a[64];
  caller_cpus(&mine);
  RCOLL_INFO(HWTOPO_SUBSYS, "hwloc: %d packages, %d NUMA nodes, %d cores, %d PUs, %d PCI devices kept; "
             "this process may run on CPUs %s", hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE),
             hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE), hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE),
             hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU), hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PCI_DEVICE),
             rcoll_hwtopo_cpus_str(&mine, a, sizeof a));
}

/* Called with topo_mu held; NULL when hwloc cannot load this machine. */
static hwloc_topology_t topo_get(void) {
  if (!topo_tried) {
    topo_tried = 1;
    topo = topo_new(NULL);
    if (topo == NULL)
      RCOLL_INFO(HWTOPO_SUBSYS, "hwloc: cannot load this machine's topology (%s): no pinning or "
                 "placement", strerror(errno));
    else
      topo_log(topo);
  }
  return topo;
}

static void bitmap_to_cpus(hwloc_const_bitmap_t b, cpu_set_t *out) {
  CPU_ZERO(out);
  for (int c = hwloc_bitmap_first(b); c >= 0 && c < CPU_SETSIZE; c = hwloc_bitmap_next(b, c))
    CPU_SET(c, out);
}

/* The locality of an I/O object: the cpuset of its first non-I/O ancestor
 * (the package or NUMA node its host bridge hangs from). A device attached
 * to the machine as a whole (virtual, or firmware that gives no NUMA
 * affinity) has none: pinning to every CPU would say nothing. */
static int locality_of_obj(hwloc_topology_t t, hwloc_obj_t dev, const char *name,
                           rcoll_hwtopo_locality_t *out) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, dev);
  hwloc_obj_t root = hwloc_get_root_obj(t);
  if (anc == NULL || anc->cpuset == NULL || hwloc_bitmap_isequal(anc->cpuset, root->cpuset))
    return locality_none(out, "%s has no PCI locality (attached to the whole machine)", name);
  cpu_set_t near, mine;
  char a[64], b[64];
  bitmap_to_cpus(anc->cpuset, &near);
  caller_cpus(&mine);
  CPU_AND(&out->cpus, &near, &mine);
  out->numa = hwloc_bitmap_weight(anc->nodeset) == 1 ? hwloc_bitmap_first(anc->nodeset) : -1;
  rcoll_hwtopo_cpus_str(&near, a, sizeof a);
  if (CPU_COUNT(&out->cpus) == 0) {
    out->valid = 0;
    snprintf(out->where, sizeof out->where, "%s is near CPUs %s, none of which this thread may use (%s)",
             name, a, rcoll_hwtopo_cpus_str(&mine, b, sizeof b));
    return 0;
  }
  out->valid = 1;
  if (out->numa >= 0)
    snprintf(out->where, sizeof out->where, "%s on NUMA node %d (CPUs %s)", name, out->numa, a);
  else
    snprintf(out->where, sizeof out->where, "%s near CPUs %s", name, a);
  return 1;
}

int rcoll_hwtopo_locality_of_netdev(const char *name, rcoll_hwtopo_locality_t *out) {
  int r = 0;
  pthread_mutex_lock(&topo_mu);
  hwloc_topology_t t = topo_get();
  hwloc_obj_t o = NULL;
  while (t != NULL && (o = hwloc_get_next_osdev(t, o)) != NULL)
    if (o->name != NULL && strcmp(o->name, name) == 0)
      break;
  if (o != NULL)
    r = locality_of_obj(t, o, name, out);
  else
    locality_none(out, t != NULL ? "%s is no PCI device in the topology (virtual or loopback?)"
                                 : "%s: no topology", name);
  pthread_mutex_unlock(&topo_mu);
  return r;
}

int rcoll_hwtopo_locality_of_pci(const char *busid, rcoll_hwtopo_locality_t *out) {
  int r = 0;
  pthread_mutex_lock(&topo_mu);
  hwloc_topology_t t = topo_get();
  hwloc_obj_t o = t != NULL ? hwloc_get_pcidev_by_busidstring(t, busid) : NULL;
  if (o != NULL)
    r = locality_of_obj(t, o, busid, out);
  else
    locality_none(out, "PCI device %s is not in the topology", busid);
  pthread_mutex_unlock(&topo_mu);
  return r;
}

int rcoll_hwtopo_numa_count(void) {
  pthread_mutex_lock(&topo_mu);
  hwloc_topology_t t = topo_get();
  int n = t != NULL ? hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE) : 1;
  pthread_mutex_unlock(&topo_mu);
  return n > 1 ? n : 1;
}

/* The NUMA node whose CPUs contain all of `cpus`, or -1 when they span
 * several nodes (or none). Called with topo_mu held. */
static int numa_of_cpus(hwloc_topology_t t, const cpu_set_t *cpus) {
  int found = -1, n = 0;
  hwloc_obj_t node = NULL;
  while ((node = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, node)) != NULL) {
    cpu_set_t near, both;
    bitmap_to_cpus(node->cpuset, &near);
    CPU_AND(&both, &near, cpus);
    if (CPU_COUNT(&both) > 0) {
      found = (int)node->os_index;
      n++;
    }
  }
  return n == 1 ? found : -1;
}

int rcoll_hwtopo_use_xml(const char *xml) {
  pthread_mutex_lock(&topo_mu);
  if (topo != NULL)
    hwloc_topology_destroy(topo);
  topo = xml != NULL ? topo_new(xml) : NULL;
  topo_tried = xml != NULL;
  int ok = xml == NULL || topo != NULL;
  pthread_mutex_unlock(&topo_mu);
  return ok ? 0 : -1;
}

/* "0000:3b:00.0 < 0000:3a:00.0 < NUMA 1": the device's PCI bus id, the
 * bridges above it, and the non-I/O object it hangs from. */
static void dump_pci_path(hwloc_topology_t t, hwloc_obj_t osdev, char *buf, size_t len) {
  buf[0] = '\0';
  for (hwloc_obj_t o = osdev->type == HWLOC_OBJ_OS_DEVICE ? osdev->parent : osdev; o != NULL && hwloc_obj_type_is_io(o->type); o = o->parent)
    if (o->type == HWLOC_OBJ_PCI_DEVICE || (o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type ==
                                                                            HWLOC_OBJ_BRIDGE_PCI))
      snprintf(buf + strlen(buf), len - strlen(buf), "%s%04x:%02x:%02x.%x", buf[0] ? " < " : "",
               o->attr->pcidev.domain, o->attr->pcidev.bus, o->attr->pcidev.dev, o->attr->pcidev.func);
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, osdev);
  int numa = anc != NULL && anc->nodeset != NULL && hwloc_bitmap_weight(anc->nodeset) == 1
                 ? hwloc_bitmap_first(anc->nodeset) : -1;
  if (numa >= 0)
    snprintf(buf + strlen(buf), len - strlen(buf), "%sNUMA %d", buf[0] ? " < " : "", numa);
  else
    snprintf(buf + strlen(buf), len - strlen(buf), "%smachine", buf[0] ? " < " : "");
}

static int dump_is_nic(hwloc_obj_t o) {
  return o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK || o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
}

/* A GPU is a PCI display controller (class 03xx) or processing
 * accelerator (12xx): without hwloc's CUDA plugin it has no OS device. */
static int dump_is_gpu(hwloc_obj_t o) {
  unsigned cls = o->attr->pcidev.class_id >> 8;
  return cls == 0x03 || cls == 0x12;
}

/* Hops from a to the nearest ancestor it shares with b, plus b's: the
 * fewer, the closer the two sit on the PCI tree. */
static int dump_hops(hwloc_obj_t a, hwloc_obj_t b) {
  int up_a = 0;
  for (hwloc_obj_t x = a; x != NULL; x = x->parent, up_a++) {
    int up_b = 0;
    for (hwloc_obj_t y = b; y != NULL; y = y->parent, up_b++)
      if (x == y)
        return up_a + up_b;
  }
  return 1 << 20;
}

/* The NIC nearest each GPU: the one a rank driving that GPU should use. */
static void dump_nearest_nic(hwloc_topology_t t, hwloc_obj_t gpu, FILE *f) {
  hwloc_obj_t best = NULL;
  int best_hops = 1 << 20;
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_osdev(t, o)) != NULL;)
    if (dump_is_nic(o) && dump_hops(gpu, o) < best_hops)
      best = o, best_hops = dump_hops(gpu, o);
  if (best != NULL)
    fprintf(f, "    nearest NIC: %s (%d hops on the tree)\n", best->name, best_hops);
  else
    fprintf(f, "    nearest NIC: none in the topology\n");
}

void rcoll_hwtopo_dump(FILE *f) {
  char path[256], cpus[256];
  pthread_mutex_lock(&topo_mu);
  hwloc_topology_t t = topo_get();
  if (t == NULL) {
    fprintf(f, "topology: hwloc cannot load this machine's (%s)\n", strerror(errno));
    pthread_mutex_unlock(&topo_mu);
    return;
  }
  fprintf(f, "NUMA nodes: %d\n", hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE));
  for (hwloc_obj_t n = NULL; (n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, n)) != NULL;) {
    cpu_set_t set;
    bitmap_to_cpus(n->cpuset, &set);
    fprintf(f, "  NUMA %u: CPUs %s, %llu MiB\n", n->os_index, rcoll_hwtopo_cpus_str(&set, cpus, sizeof cpus),
            (unsigned long long)(n->attr->numanode.local_memory >> 20));
  }
  fprintf(f, "NICs:\n");
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_osdev(t, o)) != NULL;)
    if (dump_is_nic(o)) {
      dump_pci_path(t, o, path, sizeof path);
      fprintf(f, "  %s: %s\n", o->name, path);
    }
  fprintf(f, "GPUs:\n");
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_pcidev(t, o)) != NULL;)
    if (dump_is_gpu(o)) {
      dump_pci_path(t, o, path, sizeof path);
      const char *name = o->io_first_child != NULL && o->io_first_child->type == HWLOC_OBJ_OS_DEVICE
                             ? o->io_first_child->name : "GPU";
      fprintf(f, "  %s: %s\n", name, path);
      dump_nearest_nic(t, o, f);
    }
  pthread_mutex_unlock(&topo_mu);
}

#else /* no hwloc: nothing has a locality and there is one NUMA node */

void rcoll_hwtopo_dump(FILE *f) { fprintf(f, "topology: built without hwloc\n"); }

int rcoll_hwtopo_locality_of_netdev(const char *name, rcoll_hwtopo_locality_t *out) {
  return locality_none(out, "%s: built without hwloc", name);
}

int rcoll_hwtopo_locality_of_pci(const char *busid, rcoll_hwtopo_locality_t *out) {
  return locality_none(out, "%s: built without hwloc", busid);
}

int rcoll_hwtopo_numa_count(void) { return 1; }

int rcoll_hwtopo_use_xml(const char *xml) { return xml == NULL ? 0 : -1; }

#endif

int rcoll_hwtopo_pin_thread(pthread_t thread, const rcoll_hwtopo_locality_t *loc, const char *who) {
  cpu_set_t cur, target;
  char a[64], b[64];
  if (!pin_enabled()) {
    RCOLL_INFO(HWTOPO_SUBSYS, "%s: not pinned (RCOLL_PIN_THREADS=0)", who);
    return 0;
  }
  if (pthread_getaffinity_np(thread, sizeof cur, &cur) != 0) {
    RCOLL_INFO(HWTOPO_SUBSYS, "%s: not pinned: cannot read its CPU binding", who);
    return 0;
  }
  rcoll_hwtopo_cpus_str(&cur, a, sizeof a);
  if (loc == NULL || !loc->valid) {
    RCOLL_INFO(HWTOPO_SUBSYS, "%s: keeps the CPUs it inherited (%s): %s", who, a,
               loc != NULL ? loc->where : "no device to be near");
    return 0;
  }
  /* A thread starts with its creator's binding: whatever the user or the
   * launcher chose. Pinning only ever narrows it. */
  CPU_AND(&target, &cur, &loc->cpus);
  if (CPU_COUNT(&target) == 0) {
    RCOLL_INFO(HWTOPO_SUBSYS, "%s: keeps its binding to CPUs %s, which excludes %s (the user's "
               "binding wins)", who, a, loc->where);
    return 0;
  }
  if (CPU_EQUAL(&target, &cur)) {
    RCOLL_INFO(HWTOPO_SUBSYS, "%s: keeps its binding to CPUs %s, already within %s", who, a, loc->where);
    return 0;
  }
  int e = pthread_setaffinity_np(thread, sizeof target, &target);
  if (e != 0) {
    RCOLL_INFO(HWTOPO_SUBSYS, "%s: keeps CPUs %s: binding to %s failed: %s", who, a,
               rcoll_hwtopo_cpus_str(&target, b, sizeof b), strerror(e));
    return 0;
  }
  RCOLL_INFO(HWTOPO_SUBSYS, "%s: pinned to CPUs %s near %s (was %s)", who,
             rcoll_hwtopo_cpus_str(&target, b, sizeof b), loc->where, a);
  return 1;
}

/* Binds whole pages only: a partial page at either end belongs to whatever
 * shares it. MPOL_PREFERRED rather than BIND, so that a full node costs
 * speed instead of a SIGBUS; MPOL_MF_MOVE moves pages already allocated
 * that only this process maps. */
static int mbind_node(void *addr, size_t len, int node) {
  unsigned long mask[HWTOPO_MAX_NODES / (8 * sizeof(unsigned long))] = {0};
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t beg = ((uintptr_t)addr + page - 1) & ~(page - 1);
  uintptr_t end = ((uintptr_t)addr + len) & ~(page - 1);
  if (node < 0 || node >= HWTOPO_MAX_NODES) {
    errno = EINVAL;
    return -1;
  }
  if (end <= beg)
    return 0;
  mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
  return (int)syscall(SYS_mbind, (void *)beg, (unsigned long)(end - beg), HWTOPO_MPOL_PREFERRED,
                      mask, (unsigned long)HWTOPO_MAX_NODES + 1, (unsigned)HWTOPO_MPOL_MF_MOVE);
}

int rcoll_hwtopo_place_area(void *addr, size_t len, const char *who) {
  int node = -1, nodes = 1;
  cpu_set_t mine;
  char a[64];
  caller_cpus(&mine);
#if RCOLL_HAVE_HWLOC
  pthread_mutex_lock(&topo_mu);
  hwloc_topology_t t = topo_get();
  nodes = t != NULL ? hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE) : 1;
  if (nodes > 1)
    node = numa_of_cpus(t, &mine);
  pthread_mutex_unlock(&topo_mu);
#endif
  if (nodes <= 1) {
    /* Said once at INFO: every ring of the process would repeat it. */
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&said))
      RCOLL_INFO(HWTOPO_SUBSYS, "%s: not placed: one NUMA node (so are all later ones)", who);
    return -1;
  }
  rcoll_hwtopo_cpus_str(&mine, a, sizeof a);
  if (node < 0) {
    RCOLL_INFO(HWTOPO_SUBSYS, "%s: not placed: this thread runs on CPUs %s, which span NUMA nodes",
               who, a);
    return -1;
  }
  if (mbind_node(addr, len, node) != 0) {
    RCOLL_INFO(HWTOPO_SUBSYS, "%s: placing %zu KiB on NUMA node %d failed: %s", who, len >> 10, node,
               strerror(errno));
    return -1;
  }
  RCOLL_INFO(HWTOPO_SUBSYS, "%s: %zu KiB placed on NUMA node %d, where this thread runs (CPUs %s)",
             who, len >> 10, node, a);
  return node;
}
