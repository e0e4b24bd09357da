/* Communicator life cycle: creation from a unique id, queries, the sticky
 * error state, finalize, destroy and abort. */
#include "comm.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "call.h"
#include "device.h"
#include "flat.h"
#include "flight_recorder.h"
#include "home_core.h"
#include "log.h"
#include "memtype.h"
#include "plan_cache.h"
#include "redop.h"
#include "trace.h"
#include "tuner.h"

rcollResult_t rcoll_comm_check(const struct rcollComm *comm, const char *fn) {
  if (comm == NULL)
    return rcoll_error(rcollInvalidArgument, "%s: comm is NULL", fn);
  switch (rcoll_comm_registry_state(comm)) {
  case RCOLL_COMM_DESTROYED:
    return rcoll_error(rcollInvalidUsage, "%s: comm %p was already destroyed (or aborted)", fn,
                       (const void *)comm);
  case RCOLL_COMM_UNKNOWN:
    return rcoll_error(rcollInvalidArgument, "%s: comm %p is not a valid communicator", fn,
                       (const void *)comm);
  default:
    break;
  }
  /* Live in the registry: the memory is ours, and the magic only guards
   * against the library's own bugs. */
  if (comm->magic != RCOLL_COMM_MAGIC)
    return rcoll_error(rcollInternalError, "%s: comm %p is registered but corrupt", fn, (const void *)comm);
  return rcollSuccess;
}

int rcoll_comm_set_error(struct rcollComm *comm, rcollResult_t r) {
  int expected = rcollSuccess;
  return atomic_compare_exchange_strong(&comm->async_error, &expected, (int)r);
}

/* FNV-1a of the unique id: the same on every rank of the communicator. */
static uint64_t comm_id_hash(const rcollUniqueId *id) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < sizeof id->internal; i++)
    h = (h ^ (unsigned char)id->internal[i]) * 0x100000001b3ull;
  return h;
}

/* What every rank must agree on. Fingerprints are sent only when every rank
 * sends them: a rank without them would read another's fingerprint as data. */
static void comm_agreed_policies(struct rcollComm *c) {
  c->fingerprint = 1;
  for (int r = 0; r < c->nranks; r++)
    c->fingerprint &= (c->infos[r].flags & RCOLL_RANK_FINGERPRINT) != 0;
  if (!c->fingerprint && c->settings.fingerprint && c->rank == 0)
    RCOLL_WARN("RCOLL_FINGERPRINT is off on some ranks: no call fingerprints on this communicator");
  /* The direct device all-reduce is another protocol on the wire: all ranks
   * of one node take it, or none does. */
  int direct = c->nranks > 1 && c->topo.nnodes == 1;
  for (int r = 0; r < c->nranks; r++)
    direct &= (c->infos[r].flags & RCOLL_RANK_CUDA_DIRECT) != 0;
  c->cuda_direct = direct;
  /* Small device calls run as host plans (lib/cuda/bounce.h), which send
   * other messages than device plans: one limit for all. */
  c->cuda_bounce = c->infos[0].cuda_bounce;
  if (!direct && c->settings.cuda_direct && c->rank == 0)
    RCOLL_WARN("RCOLL_CUDA_DIRECT: not every rank has it on with CUDA IPC allowed, or the ranks "
               "span several nodes: device all-reduces go through the proxy");
}

const char *rcoll_comm_peer_name(const struct rcollComm *comm, int peer, char *buf, size_t len) {
  snprintf(buf, len, "rank %d (%s)", peer,
           comm->bootstrap ? rcoll_bootstrap_host(comm->bootstrap, peer) : "?");
  return buf;
}

/* Chunk, slot and scratch sizes from the settings. Their ranges are
 * declared with them (config.h: CHUNK_SIZE 4096..64M, NSLOTS 2..16, the
 * latter RCOLL_MAX_SLOTS) and the loader refuses a value outside. */
static void comm_sizes(struct rcollComm *c) {
  c->chunk_bytes = (size_t)c->settings.chunk_size & ~(size_t)63; /* every element size divides 64 */
  c->nslots = (int)c->settings.nslots;
  c->nscratch = 2 * c->nslots;
}

/* RCOLL_SOCKET_IFNAME is checked whatever carries the data: on one node the
 * bootstrap runs over loopback and shared memory never reads it, and a name
 * that matches nothing would pass unnoticed until the job spans nodes. */
static rcollResult_t comm_check_ifname(const struct rcollComm *c) {
  rcoll_sockaddr_t addr;
  char ifname[RCOLL_IFNAME_MAX];
  if (c->settings.socket_ifname[0] == '\0')
    return rcollSuccess;
  return rcoll_socket_pick_addr(c->settings.socket_ifname, c->settings.socket_family, &addr, ifname);
}

static rcollResult_t comm_alloc(struct rcollComm *c) {
  c->peers = calloc((size_t)c->nranks, sizeof *c->peers);
  c->infos = calloc((size_t)c->nranks, sizeof *c->infos);
  c->need = calloc((size_t)c->nranks, 1);
  c->maxpending = 2 * c->nranks + 8;
  c->pending = calloc((size_t)c->maxpending, sizeof *c->pending);
  c->scratch_reader = calloc((size_t)c->nscratch, sizeof(int));
  if (!c->peers || !c->infos || !c->need || !c->pending || !c->scratch_reader)
    return rcoll_error(rcollSystemError, "rank %d: out of memory creating the communicator",
                       c->rank);
  return rcollSuccess;
}

static void comm_free(struct rcollComm *c) {
  rcoll_fr_close(c); /* first: the SIGUSR1 dumper reads the comm */
  rcoll_device_ops.comm_destroy(c); /* its proxy may still use the connections */
  rcoll_trace_close(c);
  rcoll_reg_free_all(c);
  rcoll_flat_close(c);
  rcoll_conn_close_all(c);
  rcoll_comm_close_nets(c);
  rcoll_bootstrap_close(c->bootstrap);
  rcoll_plan_free(&c->plan);
  rcoll_plan_cache_free(c);
  rcoll_redop_free(c);
  rcoll_calls_free(c);
  free(c->peers);
  free(c->infos);
  free(c->need);
  free(c->pending);
  free(c->scratch_reader);
  free(c->scratch);
  free(c->name);
  rcoll_comm_registry_remove(c);
  c->magic = 0;
  free(c);
}

int rcoll_comm_same_machine(const struct rcollComm *c, int r) {
  const char *me = rcoll_bootstrap_host(c->bootstrap, c->rank);
  size_t len = strcspn(me, ":");
  const char *h = rcoll_bootstrap_host(c->bootstrap, r);
  return strncmp(h, me, len) == 0 && (h[len] == ':' || h[len] == '\0');
}

int rcoll_comm_ranks_on_machine(const struct rcollComm *c) {
  int n = 0;
  for (int r = 0; r < c->nranks; r++)
    n += rcoll_comm_same_machine(c, r);
  return n;
}

/* A pure spin only helps when every rank has a core: with more ranks than
 * cores it keeps the rank it waits for off the CPU (4 ranks on 2 cores,
 * 8-byte all-reduce: 210 us with a 50 us spin, 114 us without). There the
 * spin yields the core on every pass instead, which beats sleeping at once
 * as well: processes over shm, 3 rounds each, medians (us):
 *
 *   ranks  bytes   sleep at once   yielding 20 us   yielding 200 us   Open MPI
 *     4       8        21.1             6.7              10.3            5.4
 *     4    1024        26.2            13.7              11.8           10.2
 *     4   65536        56.1            44.3              51.3           79.7
 *     8       8        66.0            28.3              36.1           18.9
 *     8    1024        92.4            38.3              36.2           36.9
 *     8   65536       239.3           200.9             192.2          221.7
 *
 * (Open MPI with --oversubscribe yields the same way.) With a core for
 * every rank and a peer behind the kernel's network stack, the spin yields
 * only where it reads the clock (every ENGINE_CLOCK_EVERY passes): often
 * enough for a softirq thread to get the core, while a yield on every pass
 * cost an 8-byte all-reduce over loopback TCP 7% (2 processes, 9
 * alternating rounds: 7.79 us yielding every pass, 7.21 never). An
 * explicit RCOLL_SPIN_US is always obeyed. */
static void comm_spin_policy(struct rcollComm *c) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int local = rcoll_comm_ranks_on_machine(c);
  c->spin_us = c->settings.spin_us;
  /* Yielding while spinning lets the kernel's softirq thread deliver network
   * packets (engine.c); shared memory needs no kernel, and there a yield
   * only adds microseconds (8-byte all-reduce 0.27 vs 0.73 us). */
  c->spin_yield = RCOLL_YIELD_NEVER;
  for (int p = 0; p < c->nranks; p++)
    if (!(rcoll_peer_net(c, p)->caps & RCOLL_NET_CAP_LOCAL_ONLY))
      c->spin_yield = RCOLL_YIELD_AT_CLOCK;
  if (cpus > 0 && local > cpus)
    c->spin_yield = RCOLL_YIELD_EVERY_PASS;
}

/* A home core (home_core.c) for each rank of this machine, in rank order,
 * where at least one other rank here is reached over the network (another
 * network namespace: shared memory and its flat board wait without the
 * kernel) and every rank can have a core of its own. Where the ranks
 * outnumber the cores instead, an even spread of them (flat.h:
 * rcoll_flat_balance). Either only for threads that nobody bound. */
static void comm_home_policy(struct rcollComm *c) {
  c->home_cpu = -1;
  c->balance = 0;
  cpu_set_t mask;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (!c->settings.home_core || online <= 0 || sched_getaffinity(0, sizeof mask, &mask) != 0)
    return;
  if (c->spin_yield == RCOLL_YIELD_EVERY_PASS) {
    c->balance = CPU_COUNT(&mask) == online;
    c->home_cores = CPU_COUNT(&mask);
    return;
  }
  if (c->spin_yield != RCOLL_YIELD_AT_CLOCK)
    return;
  int index = 0, n = 0, over_net = 0;
  for (int r = 0; r < c->nranks; r++) {
    if (!rcoll_comm_same_machine(c, r))
      continue;
    index += r < c->rank;
    n++;
    over_net |= r != c->rank && !(rcoll_peer_net(c, r)->caps & RCOLL_NET_CAP_LOCAL_ONLY);
  }
  if (!over_net)
    return;
  c->home_cpu = rcoll_home_core_choose(index, n, &mask, (int)online);
  c->home_cores = CPU_COUNT(&mask);
  if (c->home_cpu >= 0)
    RCOLL_INFO(RCOLL_SUB_INIT, "rank %d: home core %d (rank %d of %d on this machine, a peer here "
               "over the network)", c->rank, c->home_cpu, index, n);
}

/* The parts of a new communicator that come before its bootstrap. NULL
 * only when even the struct could not be had; otherwise *r says whether the
 * rest worked, and comm_finish frees on failure. */
static struct rcollComm *comm_begin(int nranks, int rank, int64_t timeout_ms, rcollResult_t *r) {
  struct rcollComm *c = calloc(1, sizeof *c);
  if (c == NULL) {
    *r = rcoll_error(rcollSystemError, "out of memory creating a communicator");
    return NULL;
  }
  c->magic = RCOLL_COMM_MAGIC;
  if ((*r = rcoll_comm_registry_add(c)) != rcollSuccess) {
    free(c);
    return NULL;
  }
  c->rank = rank;
  c->nranks = nranks;
  c->cuda_dev = rcoll_device_ops.current_device();
  *r = rcoll_settings_load(&c->settings);
  if (*r == rcollSuccess) {
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : c->settings.timeout * 1000;
    comm_sizes(c);
    *r = comm_check_ifname(c);
  }
  if (*r == rcollSuccess)
    *r = comm_alloc(c);
  return c;
}

/* Everything after the bootstrap: transports, topology, trace, tuner. */
static rcollResult_t comm_finish(struct rcollComm *c, rcollResult_t r, const char *net_name,
                                 uint64_t secret, const rcollUniqueId *id, struct rcollComm **out) {
  if (r == rcollSuccess)
    r = rcoll_comm_open_nets(c, net_name, secret);
  if (r == rcollSuccess) {
    comm_spin_policy(c);
    comm_home_policy(c);
    comm_agreed_policies(c);
    c->id_hash = comm_id_hash(id);
  }
  if (r == rcollSuccess)
    r = rcoll_trace_open(c, id);
  /* Now, not at the first call: the tuner agrees its figures with every
   * rank over the bootstrap, and a first call may be a send that only two
   * ranks make. */
  if (r == rcollSuccess) /* collective too: every rank maps the board, or none (the tuner prices it) */
    r = rcoll_flat_open(c);
  if (r == rcollSuccess)
    r = rcoll_tuner_create(c, &c->plan.tuner);
  if (r != rcollSuccess) {
    comm_free(c);
    return r;
  }
  rcoll_plan_reset(&c->plan, c);
  rcoll_fr_open(c);
  RCOLL_INFO(RCOLL_SUB_INIT, "comm %p rank %d of %d on %s (node %d of %d, local rank %d of %d): "
             "transports %s, chunk %zu B, %d slots", (void *)c, c->rank, c->nranks,
             rcoll_bootstrap_host(c->bootstrap, c->rank), c->topo.node, c->topo.nnodes,
             c->topo.local_rank, c->topo.local_nranks, c->net_summary, c->chunk_bytes, c->nslots);
  rcoll_comm_summary(c);
  rcoll_comm_topo_dump(c);
  *out = c;
  return rcollSuccess;
}

rcollResult_t rcoll_comm_create(struct rcollComm **out, int nranks, const rcollUniqueId *id, int rank,
                                const rcollConfig_t *config) {
  return rcoll_comm_create_ids(out, nranks, id, 1, rank, config);
}

/* ids[0] gives the communicator its secret and trace name whatever nid is. */
rcollResult_t rcoll_comm_create_ids(struct rcollComm **out, int nranks, const rcollUniqueId *ids, int nid,
                                    int rank, const rcollConfig_t *config) {
  rcoll_bootstrap_id_t bid;
  RCOLL_CHECK(rcoll_bootstrap_id_decode(&ids[0], &bid));
  rcollResult_t r;
  /* timeoutMs undefined is INT_MIN, which comm_begin takes as RCOLL_TIMEOUT. */
  struct rcollComm *c = comm_begin(nranks, rank, config != NULL ? config->timeoutMs : 0, &r);
  if (c == NULL)
    return r;
  if (r == rcollSuccess && config != NULL && config->commName != NULL &&
      (c->name = strdup(config->commName)) == NULL)
    r = rcoll_error(rcollSystemError, "out of memory for the communicator's name");
  if (r == rcollSuccess)
    r = rcoll_bootstrap_init_ids(&c->settings, ids, nid, rank, nranks, &c->bootstrap);
  return comm_finish(c, r, config ? config->netName : NULL, bid.secret, &ids[0], out);
}

rcollResult_t rcoll_comm_create_from(struct rcollComm **out, int nranks, int rank, rcoll_bootstrap_t *b,
                                     const char *net_name, int64_t timeout_ms) {
  rcollResult_t r;
  struct rcollComm *c = comm_begin(nranks, rank, timeout_ms, &r);
  if (c == NULL) {
    rcoll_bootstrap_close(b);
    return r;
  }
  c->bootstrap = b;
  /* The trace names a communicator by a hash of its unique id; this one
   * has none, and its bootstrap's secret is as unique. */
  rcollUniqueId id;
  uint64_t secret = rcoll_bootstrap_secret(b);
  memset(&id, 0, sizeof id);
  memcpy(id.internal, &secret, sizeof secret);
  return comm_finish(c, r, net_name, secret, &id, out);
}

RCOLL_API rcollResult_t rcollCommFinalize(rcollComm_t comm) {
  /* Calls on host buffers complete before they return; device calls queued
   * on the proxy are waited for. The error state is what finalize reports. */
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollCommFinalize"));
  if (comm->revoked) /* as NCCL: a revoked communicator is destroyed, not finalized */
    return rcoll_error(rcollInvalidUsage, "rcollCommFinalize: comm was revoked; destroy or abort it");
  RCOLL_CHECK(rcoll_device_ops.comm_drain(comm));
  return (rcollResult_t)comm->async_error;
}

RCOLL_API rcollResult_t rcollCommDestroy(rcollComm_t comm) {
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollCommDestroy"));
  if (comm->in_group)
    return rcoll_error(rcollInvalidUsage, "rcollCommDestroy: comm has calls in an open group");
  if (comm->home_cpu >= 0)
    RCOLL_INFO(RCOLL_SUB_INIT, "rank %d: calls moved their thread to its home core %llu times",
               comm->rank, (unsigned long long)comm->home_moves);
  comm_free(comm);
  return rcollSuccess;
}

/* Abort never blocks for long: it stops a call running in another thread (the
 * engine checks the flag each pass and naps at most half a millisecond), then
 * tears everything down without talking to peers. */
RCOLL_API rcollResult_t rcollCommAbort(rcollComm_t comm) {
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollCommAbort"));
  /* The flight recorder shows what the abort interrupted; to the log only
   * when it interrupts something (a failure dumped already, and aborting a
   * healthy communicator at the end of a job is routine). */
  int interrupts = comm->active > 0 || comm->in_group;
  comm->aborted = 1;
  rcoll_comm_set_error(comm, rcollInvalidUsage);
  if (comm->fr != NULL && (interrupts || comm->settings.fr_dump_file[0] != '\0'))
    rcoll_fr_dump(comm, "abort");
  for (int spins = 0; comm->active > 0 && spins < 20000; spins++) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  if (comm->active > 0) {
    /* A thread is still inside a call (stuck in the transport): leak the
     * communicator rather than free memory under it. */
    RCOLL_WARN("rcollCommAbort: a call is still running on comm %p; its memory is left", (void *)comm);
    rcoll_comm_registry_remove(comm); /* the handle is gone for the user all the same */
    return rcollSuccess;
  }
  comm_free(comm);
  return rcollSuccess;
}

RCOLL_API rcollResult_t rcollCommGetAsyncError(rcollComm_t comm, rcollResult_t *asyncError) {
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollCommGetAsyncError"));
  if (asyncError == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollCommGetAsyncError: asyncError is NULL");
  *asyncError = (rcollResult_t)comm->async_error;
  return rcollSuccess;
}

RCOLL_API rcollResult_t rcollCommCount(const rcollComm_t comm, int *count) {
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollCommCount"));
  if (count == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollCommCount: count is NULL");
  *count = comm->nranks;
  return rcollSuccess;
}

RCOLL_API rcollResult_t rcollCommUserRank(const rcollComm_t comm, int *rank) {
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollCommUserRank"));
  if (rank == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollCommUserRank: rank is NULL");
  *rank = comm->rank;
  return rcollSuccess;
}

RCOLL_API rcollResult_t rcollCommCuDevice(const rcollComm_t comm, int *device) {
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollCommCuDevice"));
  if (device == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollCommCuDevice: device is NULL");
  /* As NCCL: the device that was current when the communicator was made
   * (rcollCommInitAll: its devlist entry). Without a CUDA device NCCL cannot
   * make a communicator at all; rcoll can, and says -1. */
  *device = comm->cuda_dev >= 0 ? comm->cuda_dev : rcoll_device_ops.comm_device(comm);
  return rcollSuccess;
}

RCOLL_API const char *rcollGetLastError(rcollComm_t comm) {
  if (comm != NULL && rcoll_comm_registry_state(comm) == RCOLL_COMM_LIVE && comm->last_error[0] != '\0')
    return comm->last_error;
  return rcoll_error_text();
}
