/* The ncclNet plugin ABI, versions 8 to 11, stated as facts in our own words:
 * the exported symbol names, the order and signatures of the slots, the
 * layout of the property structs and the values of the constants. Sources:
 * NCCL's published ext-net headers (net_v8.h .. net_v11.h, nccl_net.h,
 * err.h, debug types), with the v11 layout checked against the machine code
 * of the NCCL 2.28.9 installed here (its internal socket net writes
 * maxMultiRequestSize at offset 0x68 of a 0x70-byte struct, and it calls
 * finalize through slot offset 0xa0). Names are ours (snake_case) so that
 * this header can sit beside NCCL's own nccl.h without clashing; only the
 * layout is shared with NCCL.
 *
 * Facts a plugin must honour (NCCL 2.28.9):
 * - NCCL dlopens libnccl-net-<NCCL_NET_PLUGIN>.so and looks up
 *   ncclNetPlugin_v12, then _v11, ... _v6; the first found is used.
 * - v11: init is called once per communicator and returns a context; the
 *   same context comes back to listen, connect and finalize. finalize must
 *   not be NULL: NCCL calls it for every context. NCCL calls v8-v10 init
 *   once per process through a compatibility layer and never finalizes.
 * - connect and accept must not block: success with a NULL comm means "call
 *   again".
 * - isend/irecv may return success with a NULL request ("no slot, retry").
 *   NCCL may pass *request == NCCL_ABI_OPTIONAL_RECV_COMPLETION into irecv as
 *   a hint; the plugin overwrites it.
 * - irecv takes up to maxRecvs buffers with one tag each; a receive may be
 *   posted larger than the matching send; test reports the received sizes
 *   (one int per buffer, in every version).
 * - v8 message sizes are int; v9 and later are size_t (test and iflush keep
 *   int sizes in every version).
 * - NULL in makeVDevice, getDeviceMr, irecvConsumed and setNetAttr means
 *   "not offered"; NCCL checks before calling those. */
#ifndef RCOLL_PLUGIN_NCCL_NET_ABI_H
#define RCOLL_PLUGIN_NCCL_NET_ABI_H

#include <stddef.h>
#include <stdint.h>

/* ncclResult_t: an int-sized enum. */
typedef enum nccl_result {
  NCCL_ABI_SUCCESS = 0,
  NCCL_ABI_UNHANDLED_CUDA_ERROR = 1,
  NCCL_ABI_SYSTEM_ERROR = 2,
  NCCL_ABI_INTERNAL_ERROR = 3,
  NCCL_ABI_INVALID_ARGUMENT = 4,
  NCCL_ABI_INVALID_USAGE = 5,
  NCCL_ABI_REMOTE_ERROR = 6,
  NCCL_ABI_IN_PROGRESS = 7,
} nccl_result_t;

/* ncclDebugLogLevel and the subsystem flags the logger takes. */
enum nccl_log_level {
  NCCL_ABI_LOG_NONE = 0,
  NCCL_ABI_LOG_VERSION = 1,
  NCCL_ABI_LOG_WARN = 2,
  NCCL_ABI_LOG_INFO = 3,
  NCCL_ABI_LOG_ABORT = 4,
  NCCL_ABI_LOG_TRACE = 5,
};
#define NCCL_ABI_LOG_INIT 0x1ul
#define NCCL_ABI_LOG_NET 0x10ul

typedef void (*nccl_logger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt,
                              ...);
/* The profiler callback NCCL passes to v10/v11 init; this plugin does not
 * report profiler events. */
typedef nccl_result_t (*nccl_profiler_cb_t)(void **event, int type, void *parent, int64_t plugin_id,
                                            void *ext_data);

#define NCCL_ABI_HANDLE_MAXSIZE 128
#define NCCL_ABI_PTR_HOST 0x1
#define NCCL_ABI_PTR_CUDA 0x2
#define NCCL_ABI_PTR_DMABUF 0x4
#define NCCL_ABI_MAX_REQUESTS 32 /* requests NCCL keeps in flight per comm */
#define NCCL_ABI_MAX_DEVS_PER_NIC 4
#define NCCL_ABI_OPTIONAL_RECV_COMPLETION ((void *)0x1)
#define NCCL_ABI_NET_DEVICE_HOST 0 /* ncclNetDeviceType: no device offload */
#define NCCL_ABI_NET_DEVICE_INVALID_VERSION 0
#define NCCL_ABI_TRAFFIC_CLASS_UNDEF (-1)

/* Device offload handle: this plugin never offers one, so it stays opaque. */
typedef struct nccl_net_device_handle nccl_net_device_handle_t;

typedef struct nccl_vdevice_props {
  int ndevs;
  int devs[NCCL_ABI_MAX_DEVS_PER_NIC];
} nccl_vdevice_props_t;

typedef struct nccl_comm_config {
  int traffic_class;
} nccl_comm_config_t;

/* ncclNetProperties_v8_t */
typedef struct nccl_props_v8 {
  char *name;
  char *pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int speed; /* Mb/s */
  int port;
  float latency; /* microseconds */
  int max_comms;
  int max_recvs;
  int net_device_type;
  int net_device_version;
} nccl_props_v8_t;

/* ncclNetProperties_v9_t; v10 has the same layout. */
typedef struct nccl_props_v9 {
  char *name;
  char *pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int force_flush;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  int net_device_type;
  int net_device_version;
  nccl_vdevice_props_t vprops;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
} nccl_props_v9_t;
typedef nccl_props_v9_t nccl_props_v10_t;

/* ncclNetProperties_v11_t: v10 plus the multi-request limit. */
typedef struct nccl_props_v11 {
  char *name;
  char *pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int force_flush;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  int net_device_type;
  int net_device_version;
  nccl_vdevice_props_t vprops;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
  int max_multi_request_size;
} nccl_props_v11_t;

_Static_assert(sizeof(nccl_props_v8_t) == 64, "ncclNetProperties_v8_t layout");
_Static_assert(sizeof(nccl_props_v9_t) == 104, "ncclNetProperties_v9_t layout");
_Static_assert(offsetof(nccl_props_v11_t, max_p2p_bytes) == 0x58, "v11 layout (NCCL 2.28.9)");
_Static_assert(offsetof(nccl_props_v11_t, max_multi_request_size) == 0x68, "v11 layout (NCCL 2.28.9)");
_Static_assert(sizeof(nccl_props_v11_t) == 0x70, "v11 layout (NCCL 2.28.9)");

/* Slots that keep one signature from v8 to v11. */
typedef nccl_result_t (*nccl_devices_fn)(int *ndev);
typedef nccl_result_t (*nccl_accept_fn)(void *listen_comm, void **recv_comm,
                                        nccl_net_device_handle_t **recv_dev_comm);
typedef nccl_result_t (*nccl_reg_mr_fn)(void *comm, void *data, size_t size, int type, void **mhandle);
typedef nccl_result_t (*nccl_reg_mr_dmabuf_fn)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                               int fd, void **mhandle);
typedef nccl_result_t (*nccl_dereg_mr_fn)(void *comm, void *mhandle);
typedef nccl_result_t (*nccl_iflush_fn)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                                        void **request);
typedef nccl_result_t (*nccl_test_fn)(void *request, int *done, int *sizes);
typedef nccl_result_t (*nccl_close_fn)(void *comm);
typedef nccl_result_t (*nccl_get_device_mr_fn)(void *comm, void *mhandle, void **dptr_mhandle);
typedef nccl_result_t (*nccl_irecv_consumed_fn)(void *recv_comm, int n, void *request);
typedef nccl_result_t (*nccl_make_vdevice_fn)(int *dev, nccl_vdevice_props_t *props);

/* ncclNet_v8_t */
typedef struct nccl_net_v8 {
  const char *name;
  nccl_result_t (*init)(nccl_logger_t logger);
  nccl_devices_fn devices;
  nccl_result_t (*get_properties)(int dev, nccl_props_v8_t *props);
  nccl_result_t (*listen)(int dev, void *handle, void **listen_comm);
  nccl_result_t (*connect)(int dev, void *handle, void **send_comm, nccl_net_device_handle_t **send_dev_comm);
  nccl_accept_fn accept;
  nccl_reg_mr_fn reg_mr;
  nccl_reg_mr_dmabuf_fn reg_mr_dmabuf;
  nccl_dereg_mr_fn dereg_mr;
  nccl_result_t (*isend)(void *send_comm, void *data, int size, int tag, void *mhandle, void **request);
  nccl_result_t (*irecv)(void *recv_comm, int n, void **data, int *sizes, int *tags, void **mhandles,
                         void **request);
  nccl_iflush_fn iflush;
  nccl_test_fn test;
  nccl_close_fn close_send;
  nccl_close_fn close_recv;
  nccl_close_fn close_listen;
  nccl_get_device_mr_fn get_device_mr;
  nccl_irecv_consumed_fn irecv_consumed;
} nccl_net_v8_t;

/* ncclNet_v9_t: size_t message sizes, and makeVDevice. */
typedef struct nccl_net_v9 {
  const char *name;
  nccl_result_t (*init)(nccl_logger_t logger);
  nccl_devices_fn devices;
  nccl_result_t (*get_properties)(int dev, nccl_props_v9_t *props);
  nccl_result_t (*listen)(int dev, void *handle, void **listen_comm);
  nccl_result_t (*connect)(int dev, void *handle, void **send_comm, nccl_net_device_handle_t **send_dev_comm);
  nccl_accept_fn accept;
  nccl_reg_mr_fn reg_mr;
  nccl_reg_mr_dmabuf_fn reg_mr_dmabuf;
  nccl_dereg_mr_fn dereg_mr;
  nccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request);
  nccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                         void **request);
  nccl_iflush_fn iflush;
  nccl_test_fn test;
  nccl_close_fn close_send;
  nccl_close_fn close_recv;
  nccl_close_fn close_listen;
  nccl_get_device_mr_fn get_device_mr;
  nccl_irecv_consumed_fn irecv_consumed;
  nccl_make_vdevice_fn make_vdevice;
} nccl_net_v9_t;

/* ncclNet_v10_t: a profiler callback at init, a comm config at connect,
 * profiler handles on isend/irecv. */
typedef struct nccl_net_v10 {
  const char *name;
  nccl_result_t (*init)(nccl_logger_t logger, nccl_profiler_cb_t profiler);
  nccl_devices_fn devices;
  nccl_result_t (*get_properties)(int dev, nccl_props_v10_t *props);
  nccl_result_t (*listen)(int dev, void *handle, void **listen_comm);
  nccl_result_t (*connect)(int dev, nccl_comm_config_t *config, void *handle, void **send_comm,
                           nccl_net_device_handle_t **send_dev_comm);
  nccl_accept_fn accept;
  nccl_reg_mr_fn reg_mr;
  nccl_reg_mr_dmabuf_fn reg_mr_dmabuf;
  nccl_dereg_mr_fn dereg_mr;
  nccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                         void **request);
  nccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                         void **phandles, void **request);
  nccl_iflush_fn iflush;
  nccl_test_fn test;
  nccl_close_fn close_send;
  nccl_close_fn close_recv;
  nccl_close_fn close_listen;
  nccl_get_device_mr_fn get_device_mr;
  nccl_irecv_consumed_fn irecv_consumed;
  nccl_make_vdevice_fn make_vdevice;
} nccl_net_v10_t;

/* ncclNet_v11 network attributes (hints NCCL may pass to setNetAttr). */
typedef struct nccl_comm_attr {
  int32_t max_concurrent_peers;
  int32_t min_concurrent_peers;
  int32_t max_flows_per_peer;
  int32_t min_flows_per_peer;
} nccl_comm_attr_t;

typedef struct nccl_net_attr {
  nccl_comm_attr_t send_comm_attr;
  nccl_comm_attr_t recv_comm_attr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} nccl_net_attr_t;

/* ncclNet_v11_t: a context per communicator, passed to listen, connect and
 * finalize. */
typedef struct nccl_net_v11 {
  const char *name;
  nccl_result_t (*init)(void **ctx, uint64_t comm_id, nccl_comm_config_t *config, nccl_logger_t logger,
                        nccl_profiler_cb_t profiler);
  nccl_devices_fn devices;
  nccl_result_t (*get_properties)(int dev, nccl_props_v11_t *props);
  nccl_result_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
  nccl_result_t (*connect)(void *ctx, int dev, void *handle, void **send_comm,
                           nccl_net_device_handle_t **send_dev_comm);
  nccl_accept_fn accept;
  nccl_reg_mr_fn reg_mr;
  nccl_reg_mr_dmabuf_fn reg_mr_dmabuf;
  nccl_dereg_mr_fn dereg_mr;
  nccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                         void **request);
  nccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                         void **phandles, void **request);
  nccl_iflush_fn iflush;
  nccl_test_fn test;
  nccl_close_fn close_send;
  nccl_close_fn close_recv;
  nccl_close_fn close_listen;
  nccl_get_device_mr_fn get_device_mr;
  nccl_irecv_consumed_fn irecv_consumed;
  nccl_make_vdevice_fn make_vdevice;
  nccl_result_t (*finalize)(void *ctx);
  nccl_result_t (*set_net_attr)(void *ctx, nccl_net_attr_t *attr);
} nccl_net_v11_t;

_Static_assert(offsetof(nccl_net_v11_t, finalize) == 0xa0, "ncclNet_v11_t slot order (NCCL 2.28.9)");
_Static_assert(offsetof(nccl_net_v8_t, irecv_consumed) == 0x90, "ncclNet_v8_t slot order");

#endif
