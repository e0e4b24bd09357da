/* The transport layer. A transport moves bytes between registered buffers over
 * unidirectional connections; it knows nothing of ranks or collectives. Its
 * shape follows the ncclNet plugin ABI (listen / connect / accept / reg_mr /
 * isend / irecv / test / flush / close) so that the NCCL net plugin adapter is
 * thin. Every slot but irecv_reduce, isend_single and pair is filled: unsupported
 * ones point at a stub that returns rcollInternalError with a message, never
 * NULL (rcoll_net_check_ops refuses a table that leaves one NULL).
 *
 * Besides its ops, each transport describes itself (rcoll_transport_desc_t,
 * in transports/<name>/<name>_desc.c, compiled whether or not the transport
 * is): its priority, the tuner's figures for it, and its own settings. The
 * core reads these and never a transport's name.
 *
 * Contract for every transport:
 * - connect/accept never block: they return rcollSuccess with *comm == NULL
 *   until the connection is ready, and are called again.
 * - Messages on one connection are matched in order: the k-th isend matches
 *   the k-th irecv; the receive may be posted larger than the send, and test
 *   reports the size that arrived.
 * - isend/irecv may return rcollSuccess with *request == NULL when out of
 *   request slots; the caller retries after testing older requests.
 * - test returns *done = 1 once the request finished (and then frees it); an
 *   error means the connection failed: the message says why (the caller adds
 *   which peer it was).
 * - A connection presents the communicator's secret while connecting; the
 *   accepting side drops connections that do not. */
#ifndef RCOLL_NET_H
#define RCOLL_NET_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "rcoll.h"

#define RCOLL_NET_HANDLE_BYTES 128
/* 2: the table points at its transport's description (desc). */
#define RCOLL_NET_OPS_VERSION 2
#define RCOLL_NET_MAX_RECVS 8

/* What a transport can reach (rcoll_transport_ops_t.caps). */
enum rcoll_net_caps {
  RCOLL_NET_CAP_LOCAL_ONLY = 1, /* only peers on the same host (shared memory) */
};

/* rcoll_transport_desc_t.auto_priority of a transport that the core opens
 * only when RCOLL_NET names it. */
#define RCOLL_NET_BY_NAME_ONLY (-1)

/* What the tuner assumes of a transport's link until the transport reports
 * better (get_properties: latency and speed) or settings override it. */
typedef struct rcoll_net_link {
  double alpha_us;  /* latency of one message */
  double gbps;      /* GB/s of one connection */
  double msg_us;    /* overhead of each message over 64 KiB (helper threads, registration) */
  size_t chunk_cap; /* largest chunk worth cutting (0: any) */
  double each_us;   /* overhead of every message, whatever its size (system calls) */
} rcoll_net_link_t;

/* A transport's description of itself. It needs nothing the transport
 * depends on (a library, a device), so that the settings of a transport not
 * built here are still listed and checked, and its figures still known to
 * bench/rcoll_tune. */
typedef struct rcoll_transport_desc {
  const char *name;
  /* Preference when RCOLL_NET is not set: every transport with a priority
   * of 0 or more is opened, and each pair of ranks uses the lowest one both
   * have. RCOLL_NET_BY_NAME_ONLY: only when RCOLL_NET names it. */
  int auto_priority;
  rcoll_net_link_t link;
  /* 1: it carries messages over the TCP/IP network the bootstrap uses, so
   * the latency measured round the bootstrap ring is a floor for its own
   * between nodes. */
  int bootstrap_latency;
  /* Its own settings, held in a struct of settings_size bytes of its own
   * (rcoll_net_settings finds it in a snapshot); NULL and 0 for none. */
  const rcoll_setting_desc_t *settings;
  int nsettings;
  size_t settings_size;
} rcoll_transport_desc_t;

enum rcoll_mem_type { RCOLL_MEM_HOST = 0, RCOLL_MEM_CUDA = 1 };
enum rcoll_ptr_support { RCOLL_PTR_HOST = 1, RCOLL_PTR_CUDA = 2, RCOLL_PTR_DMABUF = 4 };

/* What a transport is given when a communicator opens it. */
typedef struct rcoll_net_config {
  const rcoll_settings_t *settings;
  uint64_t secret; /* presented by every connection of this communicator */
  int rank;        /* for log lines only */
} rcoll_net_config_t;

typedef struct rcoll_net_props {
  char name[64];     /* device name, e.g. "eth0" */
  char pci_path[256];/* sysfs path or "" */
  int ptr_support;   /* RCOLL_PTR_* bits */
  int speed_mbps;
  float latency_us;
  int max_recvs;     /* buffers one irecv may take */
  int reg_is_global; /* a registration is valid on every comm of the context */
  char detail[96];   /* what else an operator checks, for the summary line: the
                      * address, GID or directory used; "" for nothing */
} rcoll_net_props_t;

typedef struct rcoll_transport_ops {
  size_t size; /* sizeof(struct rcoll_transport_ops): first, for ABI growth */
  int version; /* RCOLL_NET_OPS_VERSION */
  const char *name;
  unsigned caps; /* RCOLL_NET_CAP_* */
  const rcoll_transport_desc_t *desc;

  /* Per-communicator context. An error from init means "not usable here"
   * (no device, no /dev/shm): the communicator then goes without it unless
   * the user asked for it by name. */
  rcollResult_t (*init)(const rcoll_net_config_t *cfg, void **ctx);
  rcollResult_t (*finalize)(void *ctx);
  rcollResult_t (*devices)(void *ctx, int *ndev);
  rcollResult_t (*get_properties)(void *ctx, int dev, rcoll_net_props_t *props);

  /* handle: RCOLL_NET_HANDLE_BYTES bytes, filled by listen, passed to the
   * peer's connect through the bootstrap. */
  rcollResult_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
  rcollResult_t (*connect)(void *ctx, int dev, const void *handle, void **send_comm);
  rcollResult_t (*accept)(void *listen_comm, void **recv_comm);

  rcollResult_t (*reg_mr)(void *comm, void *data, size_t size, int mem_type, void **mhandle);
  rcollResult_t (*dereg_mr)(void *comm, void *mhandle);

  rcollResult_t (*isend)(void *send_comm, const void *data, size_t size, int tag, void *mhandle,
                         void **request);
  /* Up to max_recvs buffers, each with its own tag; one request for all. */
  rcollResult_t (*irecv)(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
                         void **mhandles, void **request);
  /* Makes data received into device memory visible; host transports finish at once. */
  rcollResult_t (*iflush)(void *recv_comm, int n, void **data, const size_t *sizes, void **mhandles,
                          void **request);
  /* Optional (NULL when absent): receives the connection's next message,
   * which must be `bytes` long, and reduces it as it arrives: dst = src (op)
   * message, elements of rcollDataType_t dtype, rcollRedOp_t op; dst may be
   * src. Host memory only. The engine then needs no staging slot and reads
   * the message once instead of copying it and reading it back. test reports
   * it as an irecv of one buffer. */
  rcollResult_t (*irecv_reduce)(void *recv_comm, void *dst, const void *src, size_t bytes, int dtype,
                                int op, void **request);
  /* Optional (NULL when absent): isend of one half of an exchange, whose
   * peer sends to us at the same time, so that both ends are busy copying.
   * A transport that can let the receiver copy the message straight from
   * data (shm: process_vm_readv) should, from a smaller size than it would
   * for a plain isend: there a copy at each end through a buffer between
   * them costs each rank two copies per byte, the receiver's single copy
   * one. Matched, completed and tested as an isend. */
  rcollResult_t (*isend_single)(void *send_comm, const void *data, size_t size, int tag, void *mhandle,
                                void **request);
  /* Optional (NULL when absent): send_comm and recv_comm connect this rank
   * and one peer both ways; `lower` is 1 on the end with the lower rank,
   * and each end calls it once, as soon as it has both comms (never for a
   * rank's connection to itself, which has one end). The transport
   * may then carry messages of one direction over the other's link (socket:
   * small ones, so that acknowledgements ride on messages). Every comm
   * stays usable on its own, from any thread, and is closed as before. */
  rcollResult_t (*pair)(void *ctx, void *send_comm, void *recv_comm, int lower);
  /* sizes (may be NULL) gets the received size of each buffer of an irecv. */
  rcollResult_t (*test)(void *request, int *done, size_t *sizes);

  /* Blocks up to timeout_us until one of these send/recv comms may be able to
   * progress (data or room on a socket, a helper finished a piece, the peer
   * failed). May return early and spuriously; the engine calls it only after
   * a pass in which nothing moved, so that waiting ranks sleep in the kernel
   * instead of spinning (more ranks than cores is the normal case). */
  rcollResult_t (*wait)(void *const *comms, int n, int64_t timeout_us);

  rcollResult_t (*close_send)(void *send_comm);
  rcollResult_t (*close_recv)(void *recv_comm);
  rcollResult_t (*close_listen)(void *listen_comm);
} rcoll_transport_ops_t;

/* The static table of transports built here (lib/net.c), socket first;
 * rcoll_net_find(NULL or "") gives that first one. */
const rcoll_transport_ops_t *rcoll_net_find(const char *name);
int rcoll_net_index(const char *name); /* -1 when unknown */
/* The desc's auto_priority; RCOLL_NET_BY_NAME_ONLY for the tests' extra one. */
int rcoll_net_auto_priority(const rcoll_transport_ops_t *ops);
/* Of the transports whose bit (1 << index) is set in `have`, the one a pair
 * of ranks uses: the lowest priority, one opened by name counting as 0; a
 * local-only one only when `same_node`. -1 when none. */
int rcoll_net_best(uint32_t have, int same_node);
int rcoll_net_count(void);
const rcoll_transport_ops_t *rcoll_net_at(int i);
/* rcollSuccess when ops is a table this library can use (size, version,
 * name, description, every slot but irecv_reduce, isend_single and pair);
 * otherwise an error naming what is wrong. */
rcollResult_t rcoll_net_check_ops(const rcoll_transport_ops_t *ops);
/* Tests only: one extra transport at the end of the table (found by name,
 * never chosen automatically), e.g. sockets that claim device memory so
 * that the GPUDirect path runs on the host fake of CUDA. NULL removes it;
 * a table rcoll_net_check_ops refuses is not added. */
rcollResult_t rcoll_net_add_for_tests(const rcoll_transport_ops_t *ops);

/* Every transport this source describes, built here or not (the settings,
 * rcoll_info and the tuner's figures by name read them). */
int rcoll_net_desc_count(void);
const rcoll_transport_desc_t *rcoll_net_desc_at(int i);
/* The description named `name` (case-insensitive), or NULL. */
const rcoll_transport_desc_t *rcoll_net_desc_find(const char *name);
/* desc's own settings in snapshot s (a pointer to its struct), NULL when
 * desc is not in the table. As with strchr, the result may be written to
 * when s may: tests set a transport's settings this way. */
void *rcoll_net_settings(const rcoll_settings_t *s, const rcoll_transport_desc_t *desc);

#endif
