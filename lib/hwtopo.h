/* The machine's hardware topology (hwloc): which CPUs sit near a NIC or a
 * GPU, how many NUMA nodes there are, and where this thread may run. It is
 * used to pin progress threads next to the device they drive and to place
 * shared-memory rings on the receiver's NUMA node; later GPU and NIC
 * selection will ask it for PCI distances too.
 *
 * The topology is loaded once per process, lazily and thread-safely, with
 * PCI and OS devices kept. Without hwloc (RCOLL_HAVE_HWLOC 0) every device
 * has no locality, there is one NUMA node, and pinning never happens: the
 * library behaves as it did before this module existed. */
#ifndef RCOLL_HWTOPO_H
#define RCOLL_HWTOPO_H

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>

#define RCOLL_HWTOPO_WHERE_MAX 160

/* The CPUs near a device. When valid is 0 the device has no usable locality
 * and `where` says why (unknown device, no PCI path, outside our CPUs). */
typedef struct rcoll_hwtopo_locality {
  int valid;
  cpu_set_t cpus; /* the device's node, intersected with the caller's CPUs */
  int numa;       /* OS index of the nearest NUMA node, -1 when not one node */
  char where[RCOLL_HWTOPO_WHERE_MAX];
} rcoll_hwtopo_locality_t;

/* Locality of a network interface ("eth0") or RDMA device ("mlx5_0"), or of
 * a PCI device by bus id ("0000:3b:00.0", CUDA's "00000000:3B:00.0" too).
 * Returns 1 and fills *out when there is one; 0 with out->where saying why. */
int rcoll_hwtopo_locality_of_netdev(const char *name, rcoll_hwtopo_locality_t *out);
int rcoll_hwtopo_locality_of_pci(const char *busid, rcoll_hwtopo_locality_t *out);

/* Binds a freshly created progress thread to `loc` (NULL: no locality),
 * unless RCOLL_PIN_THREADS=0 or the thread's inherited binding (the user's,
 * or an MPI launcher's -bind-to) is already as narrow: a pinned thread never
 * leaves the CPUs it inherited. Logs the decision at INFO (INIT, NET), naming
 * `who`. Returns 1 when the thread was re-bound, 0 when it keeps its CPUs. */
int rcoll_hwtopo_pin_thread(pthread_t thread, const rcoll_hwtopo_locality_t *loc, const char *who);

/* NUMA nodes of the machine (1 without hwloc or when it cannot load). */
int rcoll_hwtopo_numa_count(void);

/* Binds [addr, addr+len) to the NUMA node the calling thread is bound
 * within, moving pages already there, when the machine has more than one
 * node. Returns the node's OS index, or -1 when nothing was placed (one
 * node, a thread spanning nodes, or the kernel refused); logs why at INFO. */
int rcoll_hwtopo_place_area(void *addr, size_t len, const char *who);

/* "0-3,8" for a CPU set, into buf; returns buf. */
char *rcoll_hwtopo_cpus_str(const cpu_set_t *cpus, char *buf, size_t len);

/* Writes what rcoll sees of the machine (RCOLL_TOPO_DUMP_FILE): NUMA nodes
 * with their CPUs, NICs and GPUs with their PCI paths, and the NIC nearest
 * each GPU. */
void rcoll_hwtopo_dump(FILE *f);

/* Test hook: use the topology described by `xml` (an hwloc XML document)
 * instead of this machine's; NULL goes back to the machine. Returns 0, or
 * -1 when the XML does not load (or hwloc is absent). */
int rcoll_hwtopo_use_xml(const char *xml);

#endif
