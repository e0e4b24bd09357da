/* The transport layer. A transport moves bytes between registered buffers over
 * unidirectional connections; it knows nothing of ranks or collectives. Its
 * shape follows the ncclNet plugin ABI (listen / connect / accept / reg_mr /
 * isend / irecv / test / flush / close) so that the NCCL net plugin adapter is
 * thin. Every slot is filled: unsupported ones point at a stub that returns
 * rcollInternalError with a message, never NULL.
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
#define RCOLL_NET_OPS_VERSION 1
#define RCOLL_NET_MAX_RECVS 8

/* What a transport can reach (rcoll_transport_ops_t.caps). */
enum rcoll_net_caps {
  RCOLL_NET_CAP_LOCAL_ONLY = 1, /* only peers on the same host (shared memory) */
};

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
} rcoll_net_props_t;

typedef struct rcoll_transport_ops {
  size_t size; /* sizeof(struct rcoll_transport_ops): first, for ABI growth */
  int version; /* RCOLL_NET_OPS_VERSION */
  const char *name;
  unsigned caps; /* RCOLL_NET_CAP_* */

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

/* The static table of transports (lib/net.c). */
const rcoll_transport_ops_t *rcoll_net_find(const char *name);
int rcoll_net_index(const char *name); /* -1 when unknown */
/* Preference when RCOLL_NET is not set: lower is preferred; -1 means the
 * transport is used only when asked for by name. */
int rcoll_net_auto_priority(const rcoll_transport_ops_t *ops);
int rcoll_net_count(void);
const rcoll_transport_ops_t *rcoll_net_at(int i);
/* Tests only: one extra transport at the end of the table (found by name,
 * never chosen automatically), e.g. sockets that claim device memory so
 * that the GPUDirect path runs on the host fake of CUDA. */
void rcoll_net_add_for_tests(const rcoll_transport_ops_t *ops);

#endif
