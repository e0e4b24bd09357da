/* The NCCL net plugin's core: everything that does not depend on the ABI
 * version. It picks one rcoll transport per process (RCOLL_NET, or the best
 * one that works here), keeps per-context transport state, wraps comms and
 * requests so that test knows how many sizes to report, and routes rcoll's
 * log lines to the logger NCCL passed to init. The version files
 * (plugin_v11.c, plugin_v8_v10.c) only convert arguments and results.
 *
 * Secrets: NCCL gives a plugin no communicator secret. Each context listens
 * with a fresh random secret, which the listen handle carries, and connects
 * through a transport context opened with secret 0, which presents the
 * secret found in the peer's handle (the socket transport documents this).
 * A stray connection that does not know the handle is dropped. */
#ifndef RCOLL_PLUGIN_H
#define RCOLL_PLUGIN_H

#include <stddef.h>

#include "nccl_net_abi.h"
#include "net.h"

#define RCOLL_PLUGIN_NAME "rcoll"
/* Largest message NCCL may hand us: test reports sizes as int. */
#define RCOLL_PLUGIN_MAX_BYTES ((size_t)1 << 30)
/* Requests one comm keeps in flight: NCCL's limit plus flushes. */
#define RCOLL_PLUGIN_NREQS (2 * NCCL_ABI_MAX_REQUESTS)

_Static_assert(RCOLL_NET_HANDLE_BYTES <= NCCL_ABI_HANDLE_MAXSIZE, "a transport handle must fit NCCL's");

typedef struct rcoll_plugin_ctx rcoll_plugin_ctx_t;
typedef struct rcoll_plugin_comm rcoll_plugin_comm_t;

/* What getProperties reports, in the plugin's terms; name and pci_path
 * point at storage that lives as long as the process. */
typedef struct rcoll_plugin_props {
  char *name;
  char *pci_path;
  int ptr_support; /* NCCL_ABI_PTR_* bits */
  /* Always 0: a transport's registration belongs to one transport context
   * (UCX maps memory per UCP context), and a plugin context holds two, one
   * for its receive comms and one for its send comms (see "Secrets"). So
   * no registration is valid on every comm, and NCCL registers per comm. */
  int reg_is_global;
  int speed_mbps;
  float latency_us;
  int max_recvs;
  int max_comms;
  size_t max_bytes;
} rcoll_plugin_props_t;

/* Between the plugin's files: the transport picked for this process (NULL
 * before the first init), and a comm wrapped around a transport comm. */
const rcoll_transport_ops_t *rcoll_plugin_ops(void);
rcollResult_t rcoll_plugin_comm_wrap(void *tcomm, int is_send, rcoll_plugin_comm_t **out);

/* NCCL's result for an rcoll result (a timeout reads as the peer failing). */
nccl_result_t rcoll_plugin_result(rcollResult_t r);

/* A new context (v11: one per communicator). The first call in a process
 * picks the transport and installs the logger. */
rcollResult_t rcoll_plugin_init(nccl_logger_t logger, rcoll_plugin_ctx_t **ctx);
rcollResult_t rcoll_plugin_finalize(rcoll_plugin_ctx_t *ctx);
/* v8-v10 have no context argument: one shared context, made by the first
 * init and kept for the life of the process. */
rcollResult_t rcoll_plugin_init_shared(nccl_logger_t logger);
rcoll_plugin_ctx_t *rcoll_plugin_shared(void);

rcollResult_t rcoll_plugin_devices(int *ndev);
rcollResult_t rcoll_plugin_properties(int dev, rcoll_plugin_props_t *props);

rcollResult_t rcoll_plugin_listen(rcoll_plugin_ctx_t *ctx, int dev, void *handle, void **listen_comm);
rcollResult_t rcoll_plugin_connect(rcoll_plugin_ctx_t *ctx, int dev, const void *handle,
                                   rcoll_plugin_comm_t **send_comm);
rcollResult_t rcoll_plugin_accept(void *listen_comm, rcoll_plugin_comm_t **recv_comm);
rcollResult_t rcoll_plugin_close_listen(void *listen_comm);
rcollResult_t rcoll_plugin_close(rcoll_plugin_comm_t *comm);

/* type is NCCL_ABI_PTR_HOST or NCCL_ABI_PTR_CUDA. */
rcollResult_t rcoll_plugin_reg_mr(rcoll_plugin_comm_t *comm, void *data, size_t size, int type, void **mhandle);
rcollResult_t rcoll_plugin_dereg_mr(rcoll_plugin_comm_t *comm, void *mhandle);

/* *request is NULL (and the result success) when no slot is free. */
rcollResult_t rcoll_plugin_isend(rcoll_plugin_comm_t *comm, void *data, size_t size, int tag, void *mhandle,
                                 void **request);
rcollResult_t rcoll_plugin_irecv(rcoll_plugin_comm_t *comm, int n, void **data, const size_t *sizes,
                                 const int *tags, void **mhandles, void **request);
rcollResult_t rcoll_plugin_iflush(rcoll_plugin_comm_t *comm, int n, void **data, const size_t *sizes,
                                  void **mhandles, void **request);
/* Once done, sizes (may be NULL) gets one size per buffer of the request. */
rcollResult_t rcoll_plugin_test(void *request, int *done, int *sizes);

/* NCCL-shaped slots that keep one signature from v8 to v11 (plugin_v11.c),
 * shared by every version's table, and v11's properties, of which v9 and v10
 * report a prefix. */
nccl_result_t rcoll_nccl_devices(int *ndev);
nccl_result_t rcoll_nccl_properties_v11(int dev, nccl_props_v11_t *props);
nccl_result_t rcoll_nccl_accept(void *listen_comm, void **recv_comm, nccl_net_device_handle_t **recv_dev_comm);
nccl_result_t rcoll_nccl_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
nccl_result_t rcoll_nccl_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                       void **mhandle);
nccl_result_t rcoll_nccl_dereg_mr(void *comm, void *mhandle);
nccl_result_t rcoll_nccl_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request);
nccl_result_t rcoll_nccl_test(void *request, int *done, int *sizes);
nccl_result_t rcoll_nccl_close(void *comm);
nccl_result_t rcoll_nccl_close_listen(void *listen_comm);

#endif
