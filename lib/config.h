/* Settings: each declared once with type, default and help. The environment
 * name is RCOLL_<NAME>; where NCCL has the same knob its NCCL_<NAME> is read
 * as a fallback. `bench/rcoll_info` prints them all. A communicator keeps its
 * own snapshot (rcoll_settings_t), taken when it is created.
 *
 * The core's settings are declared below. A setting that only one transport
 * reads (RCOLL_SOCKET_NTHREADS, RCOLL_SHM_SLOTS, RCOLL_IB_SL...) is declared
 * in that transport's directory, in the same X(...) form, and reaches this
 * table through its description (net.h, rcoll_transport_desc_t); the loader
 * reads and checks those too, for every transport, used or not. Some
 * settings with a transport's name stay here because the core reads them:
 * SOCKET_IFNAME and SOCKET_FAMILY pick the bootstrap's interface as well as
 * the one that socket, ucx and ib listen on; SHM_DISABLE and RECV_REDUCE
 * choose between transports (by their caps and slots, not their names);
 * SHM_DIR is also where CUDA IPC handles are exchanged (lib/cuda/ipc.c); and
 * P2P_DISABLE and NET_GDR_LEVEL govern device buffers in lib/cuda/. */
#ifndef RCOLL_CONFIG_H
#define RCOLL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* X(type, field, NAME, nccl_fallback, default, help)
 * type is STR (char[RCOLL_SETTING_STR_MAX]), INT (int64_t, any value),
 * INT_IN(lo, hi) (int64_t in lo..hi) or STR_OF("a,b,c") (one of those words,
 * any case, or empty for the default): the loader refuses any other value,
 * naming the variable, its value and what is accepted, so that no reader
 * clamps or guesses silently. */
#define RCOLL_SETTINGS(X)                                                                       \
  X(STR, debug, "DEBUG", "NCCL_DEBUG", "WARN", "Log level: NONE, WARN, INFO or TRACE")           \
  X(STR, debug_subsys, "DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS", "ALL",                                \
    "Subsystems to log: INIT,BOOTSTRAP,NET,COLL,P2P,ENV,ALLOC,TUNE or ALL; ^ excludes")          \
  X(STR, debug_file, "DEBUG_FILE", "NCCL_DEBUG_FILE", "",                                        \
    "Write log lines to this file instead of stderr; %h is the host name, %p the process id")    \
  X(INT_IN(0, 1), debug_timestamp, "DEBUG_TIMESTAMP", NULL, "0",                                 \
    "1: each log line starts with the wall-clock time (UTC, microseconds)")                      \
  X(STR, topo_dump_file, "TOPO_DUMP_FILE", NULL, "",                                             \
    "Each process appends what it sees there: NUMA, NICs, GPUs, PCI paths, each rank's NIC (%h host, %p pid)") \
  X(STR, net_require, "NET_REQUIRE", NULL, "",                                                   \
    "Transports that must carry traffic, comma-separated (e.g. ib): creating a communicator "    \
    "fails, saying why, where one cannot start instead of falling back to a slower one")         \
  X(STR, trace, "TRACE", NULL, "",                                                               \
    "Directory where every rank writes a Trace Event JSON of its calls and steps at comm destroy " \
    "(rcoll-trace-<comm>-rank<R>.json; merge with scripts/rcoll-trace-merge); empty: no trace")  \
  X(INT_IN(1, 2147483647), trace_events, "TRACE_EVENTS", NULL, "1000000",                       \
    "Most events one rank's trace keeps (72 bytes each in memory); later ones are counted, not kept") \
  X(INT_IN(1, 2147483647), timeout, "TIMEOUT", NULL, "300",                                      \
    "Seconds any wait for a peer may last before the call fails naming that peer")               \
  X(INT_IN(0, 1), fingerprint, "FINGERPRINT", NULL, "1",                                        \
    "1: each call sends a 40-byte fingerprint (kind, number, count, type, op, root, algorithm) "  \
    "ahead of its data, so that ranks making different calls fail at once naming both; off "     \
    "unless every rank has it on")                                                               \
  X(INT_IN(0, 1000000), fr_entries, "FR_ENTRIES", NULL, "64",                                   \
    "Flight recorder: the last calls each communicator keeps, dumped on failure, abort and "     \
    "SIGUSR1 (docs/faults.md); 0: off")                                                          \
  X(STR, fr_dump_file, "FR_DUMP_FILE", NULL, "",                                                 \
    "Flight-recorder dumps are appended to this file (%r rank, %h host, %p pid) instead of the " \
    "log; scripts/rcoll-fr-analyze reads them")                                                  \
  X(STR_OF("SIGUSR1,SIGUSR2,none"), fr_signal, "FR_SIGNAL", NULL, "SIGUSR1",                   \
    "The signal that dumps every flight recorder of the process (only where the application "   \
    "has no handler for it: MPICH takes SIGUSR1); none: no signal")                              \
  X(STR, net, "NET", "NCCL_NET", "", "Transport to use; empty picks the best available (bench/rcoll_info lists those built in)") \
  X(STR, comm_id, "COMM_ID", "NCCL_COMM_ID", "",                                                 \
    "host:port of the bootstrap root; rank 0 listens there (rcollGetUniqueId, InitFromEnv)")     \
  X(STR, comm_secret, "COMM_SECRET", NULL, "",                                                 \
    "Secret shared by every rank of an environment launch (InitFromEnv); keeps others out")      \
  X(STR, comm_secret_file, "COMM_SECRET_FILE", NULL, "",                                       \
    "File whose contents (trailing newline dropped) are that secret, instead of COMM_SECRET")    \
  X(STR, socket_ifname, "SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "",                               \
    "Interfaces for sockets: prefixes, ^ to exclude, = for exact names (e.g. eth,^docker)")      \
  X(STR_OF("AF_INET,AF_INET6"), socket_family, "SOCKET_FAMILY", "NCCL_SOCKET_FAMILY", "",        \
    "Address family for sockets: AF_INET or AF_INET6; empty takes the first found")              \
  X(INT_IN(4096, 67108864), chunk_size, "CHUNK_SIZE", NULL, "4194304",                           \
    "Pipeline chunk in bytes: collectives move and reduce data in pieces of this size")          \
  X(INT_IN(2, 16), nslots, "NSLOTS", NULL, "4",                                                  \
    "Staging slots per receiving connection (chunks in flight per peer, 2..16)")                 \
  X(STR, hostid, "HOSTID", "NCCL_HOSTID", "",                                                    \
    "Host identity for grouping ranks into nodes; empty: host name plus network namespace")      \
  X(INT_IN(0, 1), shm_disable, "SHM_DISABLE", "NCCL_SHM_DISABLE", "0",                           \
    "1: never use shared memory between ranks of one node")                                      \
  X(INT_IN(0, 1), recv_reduce, "RECV_REDUCE", NULL, "1",                                         \
    "1: a transport that can (shm) reduces a message as it arrives; 0: every reduction reads "   \
    "the message back from a staging slot it was received into")                                \
  X(STR, shm_dir, "SHM_DIR", NULL, "/dev/shm",                                                   \
    "Directory (a tmpfs) where shared-memory rings are created; each is unlinked once mapped")   \
  X(STR, algo, "ALGO", "NCCL_ALGO", "",                                                          \
    "Algorithms the tuner may use: names from rcoll_info --algorithms, comma-separated; ^ excludes") \
  X(INT_IN(0, 1), deterministic, "DETERMINISTIC", NULL, "0",                                     \
    "1: reduce every element in rank order 0..n-1 (bit-identical whatever algorithm or placement)") \
  X(STR, tune_alpha, "TUNE_ALPHA", NULL, "",                                                     \
    "Tuner link latency in us per message, by transport or class: e.g. socket=30,shm=1,inter=250") \
  X(STR, tune_bw, "TUNE_BW", NULL, "",                                                           \
    "Tuner link bandwidth in GB/s, by transport or class (intra, inter): e.g. socket=1.2,intra=8") \
  X(STR, tune_reduce_bw, "TUNE_REDUCE_BW", NULL, "8",                                            \
    "Tuner: GB/s at which a rank reduces (adds) received data into its own")                     \
  X(INT_IN(0, 4096), flat_max, "FLAT_MAX", NULL, "2048",                                        \
    "All-reduces up to this many bytes between ranks that all share a machine meet on one "     \
    "shared board (one wait per call, rank-order sums); 0: every call runs an algorithm")        \
  X(INT_IN(0, 1000000), spin_us, "SPIN_US", NULL, "50",                                          \
    "Microseconds a wait spins before it yields the core, then sleeps")                          \
  X(INT_IN(0, 1), home_core, "HOME_CORE", NULL, "1",                                             \
    "1: where ranks of one machine talk over the network, one core per rank, each waiting "      \
    "thread returns to its own while in a call; where they outnumber its cores, a call moves a "  \
    "rank off a core that holds 2 more than another (threads nobody bound only); 0: never")      \
  X(INT_IN(0, 1), pin_threads, "PIN_THREADS", NULL, "1", "1: pin progress threads near their NIC or GPU (hwloc); 0: never") \
  X(STR, net_gdr_level, "NET_GDR_LEVEL", "NCCL_NET_GDR_LEVEL", "PHB",                            \
    "GPUDirect RDMA for device buffers: LOC (0) never; PIX, PXB, PHB, SYS (1..5) whenever the "  \
    "transport registers device memory (no PCI distance is computed yet)")                       \
  X(INT_IN(0, 1), p2p_disable, "P2P_DISABLE", "NCCL_P2P_DISABLE", "0",                           \
    "1: no CUDA IPC between ranks of one node; device data is staged through host memory")       \
  X(STR_OF("auto,memop,kernel"), cuda_wait, "CUDA_WAIT", NULL, "auto",                           \
    "How a stream waits for a device call: auto or memop (cuStreamWaitValue32), kernel (spin)")  \
  X(INT_IN(0, 1), cuda_direct, "CUDA_DIRECT", NULL, "0",                                        \
    "1: all-reduces on device buffers between ranks that all share a node run as one kernel "   \
    "launch on the caller's stream, reading each other's buffers through CUDA IPC, no proxy "   \
    "(lib/cuda/direct.c), and so do the other collectives' calls and (once a collective has set " \
    "it up) each call's or group's sends and receives; off unless every rank has it on; not yet " \
    "measured on a GPU")                                                                          \
  X(INT_IN(4096, 268435456), cuda_direct_chunk, "CUDA_DIRECT_CHUNK", NULL, "1048576",           \
    "Bytes one block of the direct all-reduce moves per round; each rank's IPC box holds 32")    \
  X(INT_IN(1, 128), cuda_direct_blocks, "CUDA_DIRECT_BLOCKS", NULL, "32",                        \
    "Most blocks a direct call launches on each rank (one block a multiprocessor: all ranks' "   \
    "must be resident at once, so the GPU's multiprocessors shared by its ranks bound it too; "   \
    "through the regions at most 32); the least over the ranks counts")                          \
  X(INT_IN(0, 1099511627776), cuda_direct_inplace, "CUDA_DIRECT_INPLACE", NULL, "1048576",      \
    "Direct calls whose largest buffer has this many bytes or more read the peers' buffers in "  \
    "place, after a meeting on the host (lib/cuda/direct_meet.h); smaller calls go through the " \
    "IPC boxes; 0: never; rank 0's value counts")                                                 \
  X(INT_IN(0, 16777216), cuda_bounce, "CUDA_BOUNCE", NULL, "65536",                              \
    "Device calls outside a group whose largest buffer is at most this many bytes run as host "  \
    "calls on pinned copies made on the caller's stream (lib/cuda/bounce.h); 0: never; rank 0's " \
    "value counts")                                                                              \
  X(INT_IN(0, 1), cuda_bounce_kernel, "CUDA_BOUNCE_KERNEL", NULL, "0",                           \
    "1: such a call's copies and stream wait are one small kernel that polls host memory "       \
    "(lib/cuda/bounce_kernel.h), not four stream operations; each rank its own; not yet "        \
    "measured on a GPU")

#define RCOLL_SETTING_STR_MAX 256

/* Transports whose own settings a snapshot can hold, and the bytes each may
 * take (a transport checks its struct fits with a _Static_assert). */
#define RCOLL_NET_SETTINGS_MAX 8
#define RCOLL_NET_SETTINGS_BYTES 2048

/* A settings struct's members, generated from an X(...) list like the one
 * above; transports use it for theirs. */
#define RCOLL_SETTING_FIELD_INT(field) int64_t field;
#define RCOLL_SETTING_FIELD_STR(field) char field[RCOLL_SETTING_STR_MAX];
/* INT_IN(lo, hi) pastes to RCOLL_SETTING_FIELD_INT_IN(lo, hi), which becomes
 * RCOLL_SETTING_FIELD_INT and then takes the (field) that follows it. */
#define RCOLL_SETTING_FIELD_INT_IN(lo, hi) RCOLL_SETTING_FIELD_INT
#define RCOLL_SETTING_FIELD_STR_OF(choices) RCOLL_SETTING_FIELD_STR
#define RCOLL_SETTING_FIELD(type, field, name, nccl, def, help) RCOLL_SETTING_FIELD_##type(field)

typedef struct rcoll_settings {
  RCOLL_SETTINGS(RCOLL_SETTING_FIELD)
  /* Each transport's own settings, laid out as its struct, at the index of
   * its description in lib/net.c (read them with rcoll_net_settings). */
  union {
    int64_t align;
    unsigned char bytes[RCOLL_NET_SETTINGS_BYTES];
  } nets[RCOLL_NET_SETTINGS_MAX];
} rcoll_settings_t;

/* One setting's declaration: its member's offset in the struct that holds
 * its value (rcoll_settings_t for the core's, a transport's own otherwise). */
typedef struct rcoll_setting_desc {
  int is_int; /* 1: INT (int64_t), 0: STR (char[RCOLL_SETTING_STR_MAX]) */
  int64_t lo, hi; /* accepted values of an INT (INT64_MIN..INT64_MAX unless INT_IN) */
  const char *choices; /* a STR_OF's accepted words, comma-separated; NULL: any text */
  size_t offset;
  const char *name;
  const char *nccl;
  const char *def;
  const char *help;
} rcoll_setting_desc_t;

/* An X(...) callback that makes a rcoll_setting_desc_t of a member of
 * `owner`, e.g. #define MY_DESC(...) RCOLL_SETTING_DESC_IN(my_settings_t, __VA_ARGS__) */
#define RCOLL_SETTING_KIND_INT 1, INT64_MIN, INT64_MAX, NULL
#define RCOLL_SETTING_KIND_INT_IN(lo, hi) 1, (lo), (hi), NULL
#define RCOLL_SETTING_KIND_STR 0, 0, 0, NULL
#define RCOLL_SETTING_KIND_STR_OF(choices) 0, 0, 0, (choices)
#define RCOLL_SETTING_DESC_IN(owner, type, field, name, nccl, def, help) \
  {RCOLL_SETTING_KIND_##type, offsetof(owner, field), name, nccl, def, help},

/* Fills *s from the environment; a malformed value is an error naming it. */
int rcoll_settings_load(rcoll_settings_t *s);

/* Parses an integer setting value ("64", "1K", "4M", "1G" suffixes allowed).
 * Returns 0 on success, -1 when the text is not a number. */
int rcoll_settings_parse_int(const char *text, int64_t *out);

/* Where a setting's value came from, for the listing tool. */
typedef struct rcoll_setting_info {
  const char *name;     /* without prefix, e.g. "TIMEOUT" */
  const char *nccl;     /* NCCL fallback name or NULL */
  const char *def;
  const char *help;
  const char *value;    /* effective text */
  const char *source;   /* "default", "RCOLL_X" or "NCCL_X" */
  const char *owner;    /* the transport that declares it, or NULL: the core */
  int is_int;
  int64_t lo, hi;       /* accepted values of an INT */
  const char *choices;  /* accepted words of a STR_OF, or NULL */
} rcoll_setting_info_t;

/* Warns, once per process, about each RCOLL_* variable of the environment
 * that names no setting, with the closest name that does (config_env.c). */
void rcoll_settings_warn_unknown(void);
/* The setting name (without RCOLL_) closest to `name` by edit distance, or
 * NULL when none is close enough to be a likely misspelling. */
const char *rcoll_settings_suggest(const char *name);
/* The variable a setting's value comes from, for messages of readers that
 * check it against the machine (an interface that does not exist):
 * "RCOLL_<NAME>", or its NCCL fallback when only that is set. */
const char *rcoll_settings_source(const char *name, char *buf, size_t len);

/* Records rcollInvalidArgument with a message about a setting's value and
 * returns it; the message is logged once per process, not once per
 * communicator or rank that reads the same environment. */
int rcoll_settings_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Number of settings, and the i-th with its effective value: the core's in
 * their table's order, then each transport's, in lib/net.c's order. */
int rcoll_settings_count(void);
void rcoll_settings_describe(int i, rcoll_setting_info_t *info);

#endif
