/* The communicator: who the ranks are, the transport and its connections to
 * each peer, the settings snapshot, and the error state. */
#ifndef RCOLL_COMM_H
#define RCOLL_COMM_H

#include <stdatomic.h>
#include <stdint.h>

#include "bootstrap.h"
#include "config.h"
#include "error.h"
#include "net.h"
#include "plan.h"
#include "rcoll.h"
#include "topo.h"

#define RCOLL_COMM_MAGIC 0x6d6d6f636c6c6f63ull /* alive */
#define RCOLL_MAX_SLOTS 16
#define RCOLL_MAX_NETS 8 /* transports in lib/net.c's table */

/* When the engine's spin yields the core (comm.c: comm_spin_policy). */
typedef enum rcoll_spin_yield {
  RCOLL_YIELD_NEVER = 0,       /* every peer over shared memory, a core per rank */
  RCOLL_YIELD_AT_CLOCK = 1,    /* a peer behind the kernel's network stack: every 8th pass */
  RCOLL_YIELD_EVERY_PASS = 2,  /* more local ranks than cores */
} rcoll_spin_yield_t;

/* One transport opened by this communicator. */
typedef struct rcoll_comm_net {
  const rcoll_transport_ops_t *ops; /* NULL: not opened */
  void *ctx;
  void *listen_comm;
  char why_not[160]; /* an automatic transport that did not open here: why */
} rcoll_comm_net_t;

/* What every rank tells the others at creation. */
typedef struct rcoll_rank_info {
  char hostid[RCOLL_HOSTID_MAX];
  uint32_t nets;  /* bit t: transport t of the table is open, handles[t] valid */
  uint32_t flags; /* RCOLL_RANK_TRACING: RCOLL_TRACE is set (trace.c syncs clocks if all do) */
  uint32_t cuda_bounce; /* RCOLL_CUDA_BOUNCE: rank 0's is the communicator's */
  char handles[RCOLL_MAX_NETS][RCOLL_NET_HANDLE_BYTES];
} rcoll_rank_info_t;

#define RCOLL_RANK_TRACING 1u
#define RCOLL_RANK_FINGERPRINT 2u /* RCOLL_FINGERPRINT is on (call.h) */
#define RCOLL_RANK_CUDA_DIRECT 4u /* RCOLL_CUDA_DIRECT is on and CUDA IPC allowed (lib/cuda/direct.c) */

/* The first message on every connection: who sent it (conn.c). */
typedef struct rcoll_conn_hello {
  uint64_t magic;
  int64_t rank;
} rcoll_conn_hello_t;

/* An accepted connection waiting for its hello (conn.c). */
struct rcoll_pending_accept {
  int net;
  void *recv_comm;
  void *request;
  rcoll_conn_hello_t hello;
};

/* Both directions of the link to one peer. Connections are made on first use. */
typedef struct rcoll_peer {
  int net; /* index of the transport used with this peer (comm.c: comm_pick_nets) */
  void *send_comm;
  void *recv_comm;
  /* A send connection made, its hello not yet delivered (conn.c): it
   * becomes send_comm once the hello's request completes. */
  void *hello_comm;
  void *hello_req;
  /* Messages planned and posted per direction; the engine posts in plan order. */
  uint64_t send_planned, send_posted;
  uint64_t recv_planned, recv_posted;
  /* Staging for RECV_REDUCE: nslots slots of chunk_bytes, allocated and
   * touched once when the receiving connection is made. */
  char *staging;
  void *staging_mh;
  unsigned slot_next;
  uint8_t slot_busy[RCOLL_MAX_SLOTS];
  /* Sends to and receives from this peer so far (call.h: their numbers). */
  uint64_t p2p_sent, p2p_recvd;
} rcoll_peer_t;

struct rcollComm {
  uint64_t magic;
  int rank;
  int nranks;
  char *name; /* rcollConfig_t's commName (NULL: none), for the log */
  int cuda_dev; /* the current CUDA device at init (NCCL binds it there); -1 without one */
  rcoll_settings_t settings;
  int64_t timeout_ms;
  size_t chunk_bytes;
  int nslots;
  int64_t spin_us; /* engine spin before sleeping (comm.c: comm_spin_policy) */
  int spin_yield;  /* rcoll_spin_yield_t: when a spin yields the core (comm_spin_policy) */
  int home_cpu;    /* core the calling thread returns to while it waits; -1: none (home_core.h) */
  int home_cores;  /* cores in the creating thread's affinity, the whole machine's */
  uint64_t home_moves; /* times a call moved its thread home (engine.c) */
  int balance;     /* ranks here outnumber the cores: calls even out their spread (flat.h) */

  rcoll_bootstrap_t *bootstrap;
  rcoll_topo_t topo;
  rcoll_comm_net_t nets[RCOLL_MAX_NETS]; /* indexed like lib/net.c's table */
  char net_summary[64];                  /* e.g. "shm+socket", for log lines */
  rcoll_rank_info_t *infos;              /* every rank's host id and listen handles */
  rcoll_peer_t *peers;
  /* What this rank's hellos say; the send requests point here. */
  rcoll_conn_hello_t hello;
  /* Accepted connections whose hello (the sender's rank) has not arrived. */
  struct rcoll_pending_accept *pending;
  int npending;
  int maxpending;
  /* Per-peer flags of the connections a plan needs (conn.c), kept to avoid
   * allocating per call. */
  uint8_t *need;

  /* Scratch ring for intermediate results (plan.h): nscratch pieces of
   * chunk_bytes, and the plan step that last read each piece. */
  char *scratch;
  int nscratch;
  int *scratch_reader;
  int scratch_next;

  rcoll_plan_t plan;   /* reused by every call: no allocation on the hot path */
  struct rcoll_plan_cache *plan_cache; /* the last call's plan, for a repeat (plan_cache.h) */
  int in_group;        /* plan holds steps of an open group */

  /* Device buffers: made by the first device call. Opaque to the core, which
   * reaches it only through the device ops (lib/device.h); lib/cuda owns it. */
  struct rcoll_cuda_comm *cuda;
  /* Buffers registered with rcollCommRegister (memtype.h). */
  struct rcoll_reg *regs;
  /* Ops made by rcollRedOpCreatePreMulSum, and the scaled copies of inputs
   * that the plan's calls read (redop.h). */
  struct rcoll_user_op *user_ops;
  void **premul_bufs;
  int npremul, premul_cap;

  /* Execution trace (trace.h); NULL unless RCOLL_TRACE is set: the
   * engine's only cost when tracing is off is testing this. */
  struct rcoll_trace *trace;

  /* The calls of the plan (call.h): their numbers, fingerprints and
   * flight-recorder entries. Fingerprints live in blocks that never move,
   * since plan steps point at them. */
  uint64_t coll_seq;      /* collectives called so far */
  struct rcoll_call *calls;
  int ncalls, calls_cap;
  struct rcoll_fp_slot **fp_blocks;
  int fp_nblocks, fp_used;
  int *fp_peers;          /* scratch of rcoll_fp_insert: the peers a call touches, */
  int *fp_mark;           /* and each one's place in that list plus 1 (0: not touched) */
  int fingerprint;        /* every rank sends fingerprints (RCOLL_FINGERPRINT) */
  int cuda_direct;        /* every rank runs device all-reduces as one kernel (RCOLL_CUDA_DIRECT) */
  size_t cuda_bounce;     /* device calls this small run as host calls (lib/cuda/bounce.h) */
  uint64_t id_hash;       /* names the communicator in dumps: the same on all its ranks */
  struct rcoll_fr *fr;    /* flight recorder (flight_recorder.h); NULL when off */
  struct rcoll_flat *flat; /* the flat board (flat.h); NULL when the ranks do not share one */

  _Atomic int async_error; /* rcollResult_t; sticky once set */
  _Atomic int aborted;
  _Atomic int revoked;     /* rcollCommRevoke: calls stop and are refused (shrink.c) */
  char net_request[RCOLL_SETTING_STR_MAX]; /* the transport asked for ("": automatic), for shrink */
  _Atomic int active;      /* threads inside the engine: abort waits for them */
  char last_error[RCOLL_ERROR_TEXT_MAX];
};

/* Reads the user's config (NULL: all defaults) into *out, a full struct,
 * only up to its size, and checks its values; fn names the caller in errors
 * (comm_config.c). */
rcollResult_t rcoll_config_read(const char *fn, const rcollConfig_t *user, rcollConfig_t *out);
/* Creates this rank's communicator (init.c validates the arguments; config
 * is a full one from rcoll_config_read). */
rcollResult_t rcoll_comm_create(struct rcollComm **out, int nranks, const rcollUniqueId *id, int rank,
                                const rcollConfig_t *config);
/* The same, meeting through nid unique ids (rcollCommInitRankScalable). */
rcollResult_t rcoll_comm_create_ids(struct rcollComm **out, int nranks, const rcollUniqueId *ids, int nid,
                                    int rank, const rcollConfig_t *config);
/* The same over a bootstrap already formed (rcollCommShrink's survivors),
 * which the communicator takes over, or closes when it fails; the
 * transports use the bootstrap's secret. net_name NULL: RCOLL_NET;
 * timeout_ms 0: RCOLL_TIMEOUT. */
rcollResult_t rcoll_comm_create_from(struct rcollComm **out, int nranks, int rank, rcoll_bootstrap_t *b,
                                     const char *net_name, int64_t timeout_ms);
/* Validates a handle passed by the user; errors name the calling function.
 * It asks the registry first, so a destroyed handle is never read. */
rcollResult_t rcoll_comm_check(const struct rcollComm *comm, const char *fn);

/* The registry of live handles (comm_registry.c). */
typedef enum { RCOLL_COMM_UNKNOWN, RCOLL_COMM_LIVE, RCOLL_COMM_DESTROYED } rcoll_comm_state_t;
rcoll_comm_state_t rcoll_comm_registry_state(const void *comm);
rcollResult_t rcoll_comm_registry_add(const void *comm);
/* Marks the handle destroyed; called before its memory is freed. */
void rcoll_comm_registry_remove(const void *comm);
/* The transport used with a peer. */
static inline const rcoll_transport_ops_t *rcoll_peer_net(const struct rcollComm *c, int peer) {
  return c->nets[c->peers[peer].net].ops;
}

/* Opens the transports (RCOLL_NET, or every automatic one that works here),
 * exchanges handles and host ids, builds the topology and picks one
 * transport per peer (comm_net.c). */
rcollResult_t rcoll_comm_open_nets(struct rcollComm *c, const char *net_name, uint64_t secret);
/* Makes the infos allgathered from every rank safe to read: each host id
 * terminated (a peer's may not be). */
void rcoll_comm_infos_check(rcoll_rank_info_t *infos, int nranks);
/* Whether rank r shares this rank's machine's cores: same host name,
 * whatever their network namespace (test "nodes" are namespaces of one
 * machine); and how many ranks of c do (comm.c). */
int rcoll_comm_same_machine(const struct rcollComm *c, int r);
int rcoll_comm_ranks_on_machine(const struct rcollComm *c);
void rcoll_comm_close_nets(struct rcollComm *c);
/* Rank 0's line at the default log level: ranks, nodes, the transport for
 * each class of peer and where it runs, and why a faster one was not used
 * (comm_summary.c). */
void rcoll_comm_summary(const struct rcollComm *c);
/* RCOLL_TOPO_DUMP_FILE: appends the machine (once per process) and this
 * rank's transports with their devices, PCI paths and NUMA nodes
 * (comm_topo_dump.c). */
void rcoll_comm_topo_dump(const struct rcollComm *c);

/* Records a failure as the communicator's sticky async error; returns 1
 * when this was the first. */
int rcoll_comm_set_error(struct rcollComm *comm, rcollResult_t r);
/* "rank 3 (host:pid)" for error messages. */
const char *rcoll_comm_peer_name(const struct rcollComm *comm, int peer, char *buf, size_t len);

/* Makes the connections the plans need (connect and accept polled together);
 * errors name the peer that did not answer within the timeout. */
rcollResult_t rcoll_conn_ensure(rcoll_plan_t **plans, int nplans);
void rcoll_conn_close_all(struct rcollComm *comm);

/* Runs plans of one or more communicators to completion (the calling thread
 * drives progress). On failure every involved communicator gets the error.
 * Plans of device calls (a group's, at rcollGroupEnd) are handed to the
 * communicators' CUDA proxy instead, and host plans first wait for device
 * work queued on their communicators. */
rcollResult_t rcoll_engine_run(rcoll_plan_t **plans, int nplans);
/* The same without those hooks: what the CUDA proxy thread runs. */
rcollResult_t rcoll_engine_run_now(rcoll_plan_t **plans, int nplans);

#endif
