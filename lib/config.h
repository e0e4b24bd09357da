/* Settings: declared once, here, with type, default and help. The environment
 * name is RCOLL_<NAME>; where NCCL has the same knob its NCCL_<NAME> is read
 * as a fallback. `bench/rcoll_info` prints them all. A communicator keeps its
 * own snapshot (rcoll_settings_t), taken when it is created. */
#ifndef RCOLL_CONFIG_H
#define RCOLL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* X(type, field, NAME, nccl_fallback, default, help)
 * type is INT (int64_t) or STR (char[RCOLL_SETTING_STR_MAX]). */
#define RCOLL_SETTINGS(X)                                                                       \
  X(STR, debug, "DEBUG", "NCCL_DEBUG", "WARN", "Log level: NONE, WARN, INFO or TRACE")           \
  X(STR, debug_subsys, "DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS", "ALL",                                \
    "Subsystems to log: INIT,BOOTSTRAP,NET,COLL,P2P,ENV,ALLOC,TUNE or ALL; ^ excludes")          \
  X(INT, timeout, "TIMEOUT", NULL, "300",                                                        \
    "Seconds any wait for a peer may last before the call fails naming that peer")               \
  X(STR, net, "NET", "NCCL_NET", "", "Transport to use (socket); empty picks the best available") \
  X(STR, comm_id, "COMM_ID", "NCCL_COMM_ID", "",                                                 \
    "host:port of the bootstrap root; rank 0 listens there (rcollGetUniqueId, InitFromEnv)")     \
  X(STR, comm_secret, "COMM_SECRET", NULL, "",                                                 \
    "Secret shared by every rank of an environment launch (InitFromEnv); keeps others out")      \
  X(STR, comm_secret_file, "COMM_SECRET_FILE", NULL, "",                                       \
    "File whose contents (trailing newline dropped) are that secret, instead of COMM_SECRET")    \
  X(STR, socket_ifname, "SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "",                               \
    "Interfaces for sockets: prefixes, ^ to exclude, = for exact names (e.g. eth,^docker)")      \
  X(STR, socket_family, "SOCKET_FAMILY", "NCCL_SOCKET_FAMILY", "",                               \
    "Address family for sockets: AF_INET or AF_INET6; empty takes the first found")              \
  X(INT, socket_nthreads, "SOCKET_NTHREADS", "NCCL_SOCKET_NTHREADS", "2",                        \
    "Helper threads per socket connection that move large messages (1..16)")                     \
  X(INT, nsocks_perthread, "NSOCKS_PERTHREAD", "NCCL_NSOCKS_PERTHREAD", "1",                     \
    "Data sockets per helper thread (threads x sockets <= 64)")                                  \
  X(INT, socket_inline, "SOCKET_INLINE", NULL, "65536",                                          \
    "Messages up to this many bytes travel on the control socket, moved by the calling thread")  \
  X(INT, chunk_size, "CHUNK_SIZE", NULL, "4194304",                                               \
    "Pipeline chunk in bytes: collectives move and reduce data in pieces of this size")          \
  X(INT, nslots, "NSLOTS", NULL, "4",                                                            \
    "Staging slots per receiving connection (chunks in flight per peer, 2..16)")                 \
  X(STR, hostid, "HOSTID", "NCCL_HOSTID", "",                                                    \
    "Host identity for grouping ranks into nodes; empty: host name plus network namespace")      \
  X(INT, shm_disable, "SHM_DISABLE", "NCCL_SHM_DISABLE", "0",                                    \
    "1: never use shared memory between ranks of one node")                                      \
  X(INT, shm_slots, "SHM_SLOTS", NULL, "16",                                                     \
    "Slots in each shared-memory ring (one ring per connection; 2..4096)")                       \
  X(INT, shm_slot_size, "SHM_SLOT_SIZE", NULL, "65536",                                          \
    "Bytes per shared-memory ring slot, a 64-byte header line included (256..64M, x64)")         \
  X(INT, shm_cma_threshold, "SHM_CMA_THRESHOLD", NULL, "0",                                      \
    "Between processes, messages of this many bytes or more are read straight from the "         \
    "sender's memory (process_vm_readv) instead of through the ring; 0 disables (the default: "  \
    "on the VMs measured CMA ran at half the ring's speed at every size)")                       \
  X(INT, shm_memcpy_threshold, "SHM_MEMCPY_THRESHOLD", NULL, "16384",                            \
    "Between threads of one process, messages of this many bytes or more are copied straight "   \
    "from the sender's buffer instead of through the ring; 0 disables")                          \
  X(INT, recv_reduce, "RECV_REDUCE", NULL, "1",                                                  \
    "1: a transport that can (shm) reduces a message as it arrives; 0: every reduction reads "   \
    "the message back from a staging slot it was received into")                                \
  X(STR, shm_dir, "SHM_DIR", NULL, "/dev/shm",                                                   \
    "Directory (a tmpfs) where shared-memory rings are created; each is unlinked once mapped")   \
  X(STR, ib_hca, "IB_HCA", "NCCL_IB_HCA", "",                                                   \
    "RDMA devices and ports for ib: name[:port] list, ^ excludes, = exact (e.g. mlx5_0:1,mlx5_1)") \
  X(INT, ib_gid_index, "IB_GID_INDEX", "NCCL_IB_GID_INDEX", "-1",                                \
    "RoCE GID index; -1 chooses: routable over link-local, RoCE v2, IB_ADDR_FAMILY, IB_ADDR_RANGE") \
  X(STR, ib_addr_family, "IB_ADDR_FAMILY", "NCCL_IB_ADDR_FAMILY", "AF_INET",                     \
    "Address family of the RoCE GID to prefer when choosing: AF_INET or AF_INET6")               \
  X(STR, ib_addr_range, "IB_ADDR_RANGE", "NCCL_IB_ADDR_RANGE", "",                               \
    "Only choose RoCE GIDs inside this prefix (e.g. 10.1.0.0/16 or fd00::/64); empty: any")      \
  X(INT, ib_qps_per_connection, "IB_QPS_PER_CONNECTION", "NCCL_IB_QPS_PER_CONNECTION", "1",      \
    "RC queue pairs per ib connection; messages over 64 KiB are split across them (1..16)")      \
  X(INT, ib_sl, "IB_SL", "NCCL_IB_SL", "0", "InfiniBand service level of ib queue pairs (0..15)") \
  X(INT, ib_tc, "IB_TC", "NCCL_IB_TC", "0", "Traffic class (RoCE: DSCP << 2) of ib queue pairs (0..255)") \
  X(INT, ib_timeout, "IB_TIMEOUT", "NCCL_IB_TIMEOUT", "14",                                      \
    "ib ack timeout exponent: 4.096 us x 2^N per retry (14 = 67 ms, survives Soft-RoCE; 1..31)") \
  X(INT, ib_retry_cnt, "IB_RETRY_CNT", "NCCL_IB_RETRY_CNT", "7",                                 \
    "ib retransmissions before a send fails with 'retry exceeded' (0..7)")                       \
  X(STR, ib_flush, "IB_FLUSH", NULL, "auto",                                                     \
    "ib: after a receive into device memory, read it back (RDMA read) so the GPU sees it: auto, " \
    "0/off (never: rely on cuFlushGPUDirectRDMAWrites), force (every registered receive)")       \
  X(STR, ib_eager, "IB_EAGER", NULL, "auto",                                                     \
    "ib messages up to 8 KiB sent eagerly through host buffers: auto (unless the receiving side " \
    "can register device memory), 0/off (never), 1/on (always)")                                 \
  X(STR, algo, "ALGO", "NCCL_ALGO", "",                                                          \
    "Algorithms the tuner may use: ring,tree,hier,rabenseifner,chain,deterministic; ^ excludes")  \
  X(INT, deterministic, "DETERMINISTIC", NULL, "0",                                              \
    "1: reduce every element in rank order 0..n-1 (bit-identical whatever algorithm or placement)") \
  X(STR, tune_alpha, "TUNE_ALPHA", NULL, "",                                                     \
    "Tuner link latency in us per message, by transport or class: e.g. socket=30,shm=1,inter=250") \
  X(STR, tune_bw, "TUNE_BW", NULL, "",                                                           \
    "Tuner link bandwidth in GB/s, by transport or class (intra, inter): e.g. socket=1.2,intra=8") \
  X(STR, tune_reduce_bw, "TUNE_REDUCE_BW", NULL, "8",                                            \
    "Tuner: GB/s at which a rank reduces (adds) received data into its own")                     \
  X(INT, spin_us, "SPIN_US", NULL, "50",                                                         \
    "Microseconds a wait spins before it yields the core, then sleeps")                          \
  X(INT, pin_threads, "PIN_THREADS", NULL, "1", "1: pin progress threads near their NIC or GPU (hwloc); 0: never") \
  X(STR, net_gdr_level, "NET_GDR_LEVEL", "NCCL_NET_GDR_LEVEL", "PHB",                            \
    "GPUDirect RDMA for device buffers: LOC (0) never; PIX, PXB, PHB, SYS (1..5) whenever the "  \
    "transport registers device memory (no PCI distance is computed yet)")                       \
  X(INT, p2p_disable, "P2P_DISABLE", "NCCL_P2P_DISABLE", "0",                                    \
    "1: no CUDA IPC between ranks of one node; device data is staged through host memory")       \
  X(STR, cuda_wait, "CUDA_WAIT", NULL, "auto",                                                   \
    "How a stream waits for a device call: auto or memop (cuStreamWaitValue32), kernel (spin)")

#define RCOLL_SETTING_STR_MAX 256

typedef struct rcoll_settings {
#define RCOLL_SETTING_FIELD_INT(field) int64_t field;
#define RCOLL_SETTING_FIELD_STR(field) char field[RCOLL_SETTING_STR_MAX];
#define RCOLL_SETTING_FIELD(type, field, name, nccl, def, help) RCOLL_SETTING_FIELD_##type(field)
  RCOLL_SETTINGS(RCOLL_SETTING_FIELD)
#undef RCOLL_SETTING_FIELD
} rcoll_settings_t;

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
} rcoll_setting_info_t;

/* Number of settings, and the i-th with its effective value. */
int rcoll_settings_count(void);
void rcoll_settings_describe(int i, rcoll_setting_info_t *info);

#endif
