/* Hardware topology (lib/hwtopo.c): device locality, thread pinning and
 * NUMA placement, against a made-up two-socket machine loaded from XML.
 *
 * The XML machine has two packages, each one NUMA node with two cores of one
 * PU. Its PUs are numbered across the packages (package 0 holds PUs 0 and 2,
 * package 1 holds PUs 1 and 3), as many two-socket servers number them, so
 * that on a real machine with CPUs 0-1 each node meets exactly one real CPU
 * and a thread pinned to a node can be told apart from one left alone. A GPU
 * (PCI 0000:3b:00.0) hangs under node 0 and a NIC (0000:5e:00.0) with the
 * network interface "eth9" under node 1. The NIC also carries "lo", so that
 * the socket transport's real loopback connections look like they run
 * through it. Expected CPU sets are those node sets intersected with the CPUs
 * this test process really has. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../transports/shm/shm.h"
#include "../transports/shm/shm_priv.h"
#include "../transports/socket/socket.h"
#include "hwtopo.h"
#include "support/transport_harness.h"

#define OBJ(type, extra, set, nodes, gp)                                                      \
  "<object type=\"" type "\" " extra " cpuset=\"" set "\" complete_cpuset=\"" set           \
  "\" nodeset=\"" nodes "\" complete_nodeset=\"" nodes "\" gp_index=\"" gp "\""
#define PU(os, set, nodes, gp) OBJ("Core", "os_index=\"" os "\"", set, nodes, gp "0") ">" \
  OBJ("PU", "os_index=\"" os "\"", set, nodes, gp "1") "/></object>"

#if RCOLL_HAVE_HWLOC
static const char topo_xml[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
    "<topology version=\"2.0\">"
    "<object type=\"Machine\" os_index=\"0\" cpuset=\"0x0000000f\" complete_cpuset=\"0x0000000f\" "
    "allowed_cpuset=\"0x0000000f\" nodeset=\"0x00000003\" complete_nodeset=\"0x00000003\" "
    "allowed_nodeset=\"0x00000003\" gp_index=\"1\">"
    OBJ("Package", "os_index=\"0\"", "0x00000005", "0x00000001", "2") ">"
    OBJ("NUMANode", "os_index=\"0\" local_memory=\"1073741824\"", "0x00000005", "0x00000001", "3") "/>"
    PU("0", "0x00000001", "0x00000001", "4") PU("2", "0x00000004", "0x00000001", "5")
    "<object type=\"Bridge\" gp_index=\"6\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[3b-3b]\">"
    "<object type=\"PCIDev\" gp_index=\"7\" pci_busid=\"0000:3b:00.0\" "
    "pci_type=\"0302 [10de:2335] [10de:18be] a1\" pci_link_speed=\"0.000000\"/>"
    "</object></object>"
    OBJ("Package", "os_index=\"1\"", "0x0000000a", "0x00000002", "8") ">"
    OBJ("NUMANode", "os_index=\"1\" local_memory=\"1073741824\"", "0x0000000a", "0x00000002", "9") "/>"
    PU("1", "0x00000002", "0x00000002", "10") PU("3", "0x00000008", "0x00000002", "11")
    "<object type=\"Bridge\" gp_index=\"12\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[5e-5e]\">"
    "<object type=\"PCIDev\" gp_index=\"13\" pci_busid=\"0000:5e:00.0\" "
    "pci_type=\"0200 [8086:1593] [8086:0002] 02\" pci_link_speed=\"0.000000\">"
    "<object type=\"OSDev\" gp_index=\"14\" name=\"eth9\" osdev_type=\"2\"/>"
    "<object type=\"OSDev\" gp_index=\"15\" name=\"lo\" osdev_type=\"2\"/>"
    "</object></object></object>"
    "</object></topology>\n";

static cpu_set_t real_cpus; /* what this process may run on, before any test binds it */

/* {a, b} intersected with the real CPUs. */
static cpu_set_t real_pair(int a, int b) {
  cpu_set_t s, out;
  CPU_ZERO(&s);
  CPU_SET(a, &s);
  CPU_SET(b, &s);
  CPU_AND(&out, &s, &real_cpus);
  return out;
}

static cpu_set_t one_cpu(int c) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(c, &s);
  return s;
}

static void setup(void) {
  cr_assert_eq(sched_getaffinity(0, sizeof real_cpus, &real_cpus), 0);
  if (!CPU_ISSET(0, &real_cpus) || !CPU_ISSET(1, &real_cpus))
    cr_skip_test("needs CPUs 0 and 1");
  cr_assert_eq(rcoll_hwtopo_use_xml(topo_xml), 0, "the test topology does not load");
}

static void teardown(void) { rcoll_hwtopo_use_xml(NULL); }

TestSuite(hwtopo, .init = setup, .fini = teardown, .timeout = 60);

static void assert_cpus(const cpu_set_t *got, const cpu_set_t *want, const char *what) {
  char g[64], w[64];
  cr_assert(CPU_EQUAL(got, want), "%s: CPUs %s, expected %s", what,
            rcoll_hwtopo_cpus_str(got, g, sizeof g), rcoll_hwtopo_cpus_str(want, w, sizeof w));
}

Test(hwtopo, nic_by_interface_name_is_near_node_1) {
  rcoll_hwtopo_locality_t loc;
  cpu_set_t want = real_pair(1, 3);
  cr_assert_eq(rcoll_hwtopo_locality_of_netdev("eth9", &loc), 1, "%s", loc.where);
  cr_assert_eq(loc.valid, 1);
  cr_assert_eq(loc.numa, 1);
  assert_cpus(&loc.cpus, &want, "eth9");
  cr_assert(strstr(loc.where, "NUMA node 1") != NULL, "%s", loc.where);
}

Test(hwtopo, gpu_by_bus_id_is_near_node_0_in_either_spelling) {
  const char *ids[] = {"0000:3b:00.0", "00000000:3B:00.0"}; /* hwloc's, CUDA's */
  cpu_set_t want = real_pair(0, 2);
  for (int i = 0; i < 2; i++) {
    rcoll_hwtopo_locality_t loc;
    cr_assert_eq(rcoll_hwtopo_locality_of_pci(ids[i], &loc), 1, "%s: %s", ids[i], loc.where);
    cr_assert_eq(loc.numa, 0);
    assert_cpus(&loc.cpus, &want, ids[i]);
  }
}

/* RCOLL_TOPO_DUMP_FILE's machine part: both NUMA nodes, the NIC's
 * interfaces and the GPU with their PCI paths, and the NIC nearest the GPU
 * (the only one, across the machine: 7 hops up and down the tree). */
Test(hwtopo, dump_shows_numa_nics_gpus_and_their_pci_paths) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert_not_null(f);
  rcoll_hwtopo_dump(f);
  fclose(f);
  const char *want[] = {"NUMA nodes: 2", "NUMA 0: CPUs", "NUMA 1: CPUs", "eth9: 0000:5e:00.0 < NUMA 1",
                        "GPUs:\n  GPU: 0000:3b:00.0 < NUMA 0", "nearest NIC: eth9"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    cr_assert(strstr(text, want[i]) != NULL, "no \"%s\" in:\n%s", want[i], text);
  free(text);
}

Test(hwtopo, unknown_devices_have_no_locality) {
  rcoll_hwtopo_locality_t loc;
  loc.valid = 1;
  cr_assert_eq(rcoll_hwtopo_locality_of_netdev("nosuch0", &loc), 0);
  cr_assert_eq(loc.valid, 0);
  cr_assert(strstr(loc.where, "nosuch0") != NULL, "%s", loc.where);
  loc.valid = 1;
  cr_assert_eq(rcoll_hwtopo_locality_of_pci("0000:99:00.0", &loc), 0);
  cr_assert_eq(loc.valid, 0);
}

/* This machine: loopback has no PCI device behind it. */
Test(hwtopo, real_machine_loopback_has_no_locality) {
  rcoll_hwtopo_locality_t loc;
  cr_assert_eq(rcoll_hwtopo_use_xml(NULL), 0);
  cr_assert_eq(rcoll_hwtopo_locality_of_netdev("lo", &loc), 0, "%s", loc.where);
  cr_assert_eq(loc.valid, 0);
}

/* As many NUMA nodes as the kernel lists in sysfs. */
Test(hwtopo, real_machine_numa_count_matches_sysfs) {
  int n = 0;
  DIR *d = opendir("/sys/devices/system/node");
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
    n += strncmp(e->d_name, "node", 4) == 0 && e->d_name[4] >= '0' && e->d_name[4] <= '9';
  if (d != NULL)
    closedir(d);
  cr_assert_eq(rcoll_hwtopo_use_xml(NULL), 0);
  cr_assert_eq(rcoll_hwtopo_numa_count(), n > 0 ? n : 1);
}

/* ---- pinning ---- */

/* A thread that waits until told to end, so its affinity can be read. */
static pthread_mutex_t park_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cv = PTHREAD_COND_INITIALIZER;
static int park_done;

static void *park(void *arg) {
  (void)arg;
  pthread_mutex_lock(&park_mu);
  while (!park_done)
    pthread_cond_wait(&park_cv, &park_mu);
  pthread_mutex_unlock(&park_mu);
  return NULL;
}

/* Starts a thread, pins it with `loc`, returns its affinity afterwards and
 * what pin_thread answered. */
static cpu_set_t pinned_affinity(const rcoll_hwtopo_locality_t *loc, int *pinned) {
  pthread_t t;
  cpu_set_t got;
  park_done = 0;
  cr_assert_eq(pthread_create(&t, NULL, park, NULL), 0);
  *pinned = rcoll_hwtopo_pin_thread(t, loc, "test thread");
  cr_assert_eq(pthread_getaffinity_np(t, sizeof got, &got), 0);
  pthread_mutex_lock(&park_mu);
  park_done = 1;
  pthread_cond_broadcast(&park_cv);
  pthread_mutex_unlock(&park_mu);
  pthread_join(t, NULL);
  return got;
}

Test(hwtopo, fresh_thread_is_pinned_to_the_nic_node) {
  rcoll_hwtopo_locality_t loc;
  int pinned;
  cr_assert_eq(rcoll_hwtopo_locality_of_netdev("eth9", &loc), 1);
  cpu_set_t want = real_pair(1, 3);
  cr_assert(!CPU_EQUAL(&want, &real_cpus), "the node must be narrower than the machine");
  cpu_set_t got = pinned_affinity(&loc, &pinned);
  assert_cpus(&got, &want, "thread pinned near eth9");
  cr_assert_eq(pinned, 1);
  rcoll_hwtopo_locality_of_pci("0000:3b:00.0", &loc);
  want = real_pair(0, 2);
  got = pinned_affinity(&loc, &pinned);
  assert_cpus(&got, &want, "thread pinned near the GPU");
}

Test(hwtopo, pinning_off_leaves_threads_alone) {
  rcoll_hwtopo_locality_t loc;
  int pinned;
  cr_assert_eq(rcoll_hwtopo_locality_of_netdev("eth9", &loc), 1);
  setenv("RCOLL_PIN_THREADS", "0", 1);
  cpu_set_t got = pinned_affinity(&loc, &pinned);
  unsetenv("RCOLL_PIN_THREADS");
  assert_cpus(&got, &real_cpus, "RCOLL_PIN_THREADS=0");
  cr_assert_eq(pinned, 0);
}

/* The locality was found while the process was free; then the user binds
 * it. Threads created afterwards inherit that binding and pinning must not
 * take them out of it: a binding to CPU 0 excludes eth9's node (CPU 1), and
 * a binding to CPU 1 is narrower than a locality of CPUs 0-1. */
Test(hwtopo, user_binding_wins_over_the_device_node) {
  rcoll_hwtopo_locality_t eth9, wide = {.valid = 1, .numa = -1, .where = "both CPUs"};
  int pinned;
  cr_assert_eq(rcoll_hwtopo_locality_of_netdev("eth9", &eth9), 1);
  wide.cpus = real_pair(0, 1);
  cpu_set_t cpu0 = one_cpu(0), cpu1 = one_cpu(1);
  cr_assert_eq(sched_setaffinity(0, sizeof cpu0, &cpu0), 0);
  cpu_set_t got = pinned_affinity(&eth9, &pinned);
  assert_cpus(&got, &cpu0, "bound to CPU 0, NIC near CPU 1");
  cr_assert_eq(pinned, 0);
  cr_assert_eq(sched_setaffinity(0, sizeof cpu1, &cpu1), 0);
  got = pinned_affinity(&wide, &pinned);
  assert_cpus(&got, &cpu1, "bound to CPU 1, device near CPUs 0-1");
  cr_assert_eq(pinned, 0);
}

/* ---- the socket transport's helper threads ---- */

#define MAX_TIDS 256

/* Thread ids of this process. */
static int list_tids(pid_t *tids) {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL && n < MAX_TIDS;)
    if (e->d_name[0] != '.')
      tids[n++] = (pid_t)atoi(e->d_name);
  if (d != NULL)
    closedir(d);
  return n;
}

static int has_tid(const pid_t *tids, int n, pid_t t) {
  for (int i = 0; i < n; i++)
    if (tids[i] == t)
      return 1;
  return 0;
}

/* Opens a socket connection over loopback with two helpers per side and
 * checks that each thread it started runs on exactly `want`. */
static void socket_helpers_run_on(const cpu_set_t *want) {
  pid_t before[MAX_TIDS], after[MAX_TIDS];
  int nb = list_tids(before);
  th_pair_t p;
  memset(&p, 0, sizeof p);
  snprintf(p.set.socket_ifname, sizeof p.set.socket_ifname, "lo");
  snprintf(p.set.socket_family, sizeof p.set.socket_family, "AF_INET");
  socket_settings(&p.set)->socket_nthreads = 2;
  socket_settings(&p.set)->nsocks_perthread = 1;
  socket_settings(&p.set)->socket_inline = 4096;
  p.set.timeout = 30;
  p.sctx = th_ctx_new(&socket_ops, &p.set, TH_SECRET);
  th_pair_listen(&p, &socket_ops);
  th_pair_connect(&p, 5000, 0, "loopback");
  int na = list_tids(after), helpers = 0;
  for (int i = 0; i < na; i++) {
    if (has_tid(before, nb, after[i]))
      continue;
    cpu_set_t got;
    cr_assert_eq(sched_getaffinity(after[i], sizeof got, &got), 0);
    assert_cpus(&got, want, "socket helper thread");
    helpers++;
  }
  th_pair_close(&p);
  cr_assert_eq(helpers, 4, "expected 2 helpers per side, found %d new threads", helpers);
}

Test(hwtopo, socket_helpers_are_pinned_near_their_interface) {
  cpu_set_t want = real_pair(1, 3);
  socket_helpers_run_on(&want);
}

Test(hwtopo, socket_helpers_keep_the_process_binding) {
  cpu_set_t cpu0 = one_cpu(0);
  cr_assert_eq(sched_setaffinity(0, sizeof cpu0, &cpu0), 0);
  socket_helpers_run_on(&cpu0);
}

/* ---- NUMA placement ---- */

#define MPOL_PREFERRED_ 1
#define MPOL_F_ADDR_ (1 << 1)

/* The policy of the page at addr, and its node (-1: none). */
static int policy_of(void *addr, int *node) {
  int mode = -1;
  unsigned long mask[16] = {0};
  cr_assert_eq(syscall(SYS_get_mempolicy, &mode, mask, 16 * 64 + 1, addr, MPOL_F_ADDR_), 0, "%s",
               strerror(errno));
  *node = mask[0] != 0 ? __builtin_ctzl(mask[0]) : -1;
  return mode;
}

Test(hwtopo, area_is_placed_on_the_node_the_thread_runs_in) {
  size_t len = 16 * 4096;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(p, MAP_FAILED);
  /* Free to run on both nodes: no node to choose. */
  cr_assert_eq(rcoll_hwtopo_place_area(p, len, "test area"), -1);
  int node;
  cr_assert_neq(policy_of(p, &node), MPOL_PREFERRED_);
  /* On CPU 0, node 0: the kernel really binds it (node 0 exists anywhere). */
  cpu_set_t cpu0 = one_cpu(0);
  cr_assert_eq(sched_setaffinity(0, sizeof cpu0, &cpu0), 0);
  cr_assert_eq(rcoll_hwtopo_place_area(p, len, "test area"), 0);
  cr_assert_eq(policy_of(p + len - 1, &node), MPOL_PREFERRED_);
  cr_assert_eq(node, 0);
  munmap(p, len);
}

/* A shared-memory ring between two threads of a process bound to CPU 0:
 * the receiver's slots end up preferring node 0 and the ring still moves
 * data correctly, though the sender left its slot pages untouched. */
Test(hwtopo, shm_ring_slots_are_placed_by_the_receiver) {
  char dir[64];
  snprintf(dir, sizeof dir, "/dev/shm/rcoll-hwtopo-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  cpu_set_t cpu0 = one_cpu(0);
  cr_assert_eq(sched_setaffinity(0, sizeof cpu0, &cpu0), 0);
  th_pair_t p;
  memset(&p, 0, sizeof p);
  shm_settings(&p.set)->shm_slots = 8;
  shm_settings(&p.set)->shm_slot_size = 65536;
  shm_settings(&p.set)->shm_memcpy_threshold = 0;
  p.set.timeout = 30;
  snprintf(p.set.shm_dir, sizeof p.set.shm_dir, "%s", dir);
  th_pair_listen(&p, &shm_ops);
  p.sctx = th_ctx_new(&shm_ops, &p.set, TH_SECRET);
  th_pair_connect(&p, 5000, 0, "shm");
  shm_conn_t *rx = p.recv;
  int node;
  cr_assert_eq(policy_of(rx->slots, &node), MPOL_PREFERRED_);
  cr_assert_eq(node, 0);
  cr_assert_neq(policy_of(rx->seg, &node), MPOL_PREFERRED_, "the shared header page stays put");
  const size_t sizes[] = {1, 4000, 65536, 1 << 20};
  th_exchange(&p, 4, sizes, 0, 1);
  th_pair_close(&p);
  rmdir(dir);
}

#else
Test(hwtopo, not_built) { cr_skip_test("built without hwloc (RCOLL_HAVE_HWLOC)"); }
#endif
