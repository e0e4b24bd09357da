/* ncclNetPlugin_v8, _v9 and _v10: the versions without a context. They
 * share one context, made by the first init; NCCL 2.28.9 calls their init
 * once per process through its compatibility layer, older NCCLs once as
 * well, and none of them finalizes. v8 carries message sizes as int; v9 and
 * v10 as size_t; v10 adds profiler handles and a connect-time config. */
#include <string.h>

#include "error.h"
#include "plugin.h"

#define RESULT(call) rcoll_plugin_result(call)

_Static_assert(offsetof(nccl_props_v11_t, max_coll_bytes) == offsetof(nccl_props_v9_t, max_coll_bytes),
               "v9/v10 properties are a prefix of v11's");

static nccl_result_t legacy_init(nccl_logger_t logger) { return RESULT(rcoll_plugin_init_shared(logger)); }

static nccl_result_t legacy_init_v10(nccl_logger_t logger, nccl_profiler_cb_t profiler) {
  (void)profiler;
  return RESULT(rcoll_plugin_init_shared(logger));
}

static nccl_result_t legacy_listen(int dev, void *handle, void **listen_comm) {
  return RESULT(rcoll_plugin_listen(rcoll_plugin_shared(), dev, handle, listen_comm));
}

static nccl_result_t legacy_connect(int dev, void *handle, void **send_comm, nccl_net_device_handle_t **dev_comm) {
  (void)dev_comm;
  return RESULT(rcoll_plugin_connect(rcoll_plugin_shared(), dev, handle, (rcoll_plugin_comm_t **)send_comm));
}

static nccl_result_t legacy_connect_v10(int dev, nccl_comm_config_t *config, void *handle, void **send_comm,
                                        nccl_net_device_handle_t **dev_comm) {
  (void)config;
  return legacy_connect(dev, handle, send_comm, dev_comm);
}

static nccl_result_t props_v9(int dev, nccl_props_v9_t *props) {
  nccl_props_v11_t p;
  nccl_result_t r = rcoll_nccl_properties_v11(dev, &p);
  if (r == NCCL_ABI_SUCCESS)
    memcpy(props, &p, sizeof *props);
  return r;
}

static nccl_result_t props_v8(int dev, nccl_props_v8_t *props) {
  nccl_props_v11_t p;
  nccl_result_t r = rcoll_nccl_properties_v11(dev, &p);
  if (r != NCCL_ABI_SUCCESS)
    return r;
  *props = (nccl_props_v8_t){
      .name = p.name,
      .pci_path = p.pci_path,
      .guid = p.guid,
      .ptr_support = p.ptr_support,
      .reg_is_global = p.reg_is_global,
      .speed = p.speed,
      .port = p.port,
      .latency = p.latency,
      .max_comms = p.max_comms,
      .max_recvs = p.max_recvs,
      .net_device_type = p.net_device_type,
      .net_device_version = p.net_device_version,
  };
  return NCCL_ABI_SUCCESS;
}

static nccl_result_t isend_v8(void *send_comm, void *data, int size, int tag, void *mhandle, void **request) {
  if (size < 0)
    return RESULT(rcoll_error(rcollInvalidArgument, "NET/rcoll: isend of %d bytes", size));
  return RESULT(rcoll_plugin_isend(send_comm, data, (size_t)size, tag, mhandle, request));
}

static nccl_result_t irecv_v8(void *recv_comm, int n, void **data, int *sizes, int *tags, void **mhandles,
                              void **request) {
  size_t sz[RCOLL_NET_MAX_RECVS];
  if (n < 1 || n > RCOLL_NET_MAX_RECVS || sizes == NULL)
    return RESULT(rcoll_error(rcollInvalidArgument, "NET/rcoll: irecv of %d buffers (1..%d)", n,
                              RCOLL_NET_MAX_RECVS));
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0)
      return RESULT(rcoll_error(rcollInvalidArgument, "NET/rcoll: irecv buffer %d of %d bytes", i, sizes[i]));
    sz[i] = (size_t)sizes[i];
  }
  return RESULT(rcoll_plugin_irecv(recv_comm, n, data, sz, tags, mhandles, request));
}

static nccl_result_t isend_v9(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request) {
  return RESULT(rcoll_plugin_isend(send_comm, data, size, tag, mhandle, request));
}

static nccl_result_t irecv_v9(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                              void **request) {
  return RESULT(rcoll_plugin_irecv(recv_comm, n, data, sizes, tags, mhandles, request));
}

static nccl_result_t isend_v10(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                               void **request) {
  (void)phandle;
  return isend_v9(send_comm, data, size, tag, mhandle, request);
}

static nccl_result_t irecv_v10(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                               void **phandles, void **request) {
  (void)phandles;
  return irecv_v9(recv_comm, n, data, sizes, tags, mhandles, request);
}

/* Writable like ncclNetPlugin_v11, with the same optional slots left NULL. */
__attribute__((visibility("default"))) nccl_net_v10_t ncclNetPlugin_v10 = {
    .name = RCOLL_PLUGIN_NAME,
    .init = legacy_init_v10,
    .devices = rcoll_nccl_devices,
    .get_properties = props_v9,
    .listen = legacy_listen,
    .connect = legacy_connect_v10,
    .accept = rcoll_nccl_accept,
    .reg_mr = rcoll_nccl_reg_mr,
    .reg_mr_dmabuf = rcoll_nccl_reg_mr_dmabuf,
    .dereg_mr = rcoll_nccl_dereg_mr,
    .isend = isend_v10,
    .irecv = irecv_v10,
    .iflush = rcoll_nccl_iflush,
    .test = rcoll_nccl_test,
    .close_send = rcoll_nccl_close,
    .close_recv = rcoll_nccl_close,
    .close_listen = rcoll_nccl_close_listen,
    .get_device_mr = NULL,
    .irecv_consumed = NULL,
    .make_vdevice = NULL,
};

__attribute__((visibility("default"))) nccl_net_v9_t ncclNetPlugin_v9 = {
    .name = RCOLL_PLUGIN_NAME,
    .init = legacy_init,
    .devices = rcoll_nccl_devices,
    .get_properties = props_v9,
    .listen = legacy_listen,
    .connect = legacy_connect,
    .accept = rcoll_nccl_accept,
    .reg_mr = rcoll_nccl_reg_mr,
    .reg_mr_dmabuf = rcoll_nccl_reg_mr_dmabuf,
    .dereg_mr = rcoll_nccl_dereg_mr,
    .isend = isend_v9,
    .irecv = irecv_v9,
    .iflush = rcoll_nccl_iflush,
    .test = rcoll_nccl_test,
    .close_send = rcoll_nccl_close,
    .close_recv = rcoll_nccl_close,
    .close_listen = rcoll_nccl_close_listen,
    .get_device_mr = NULL,
    .irecv_consumed = NULL,
    .make_vdevice = NULL,
};

__attribute__((visibility("default"))) nccl_net_v8_t ncclNetPlugin_v8 = {
    .name = RCOLL_PLUGIN_NAME,
    .init = legacy_init,
    .devices = rcoll_nccl_devices,
    .get_properties = props_v8,
    .listen = legacy_listen,
    .connect = legacy_connect,
    .accept = rcoll_nccl_accept,
    .reg_mr = rcoll_nccl_reg_mr,
    .reg_mr_dmabuf = rcoll_nccl_reg_mr_dmabuf,
    .dereg_mr = rcoll_nccl_dereg_mr,
    .isend = isend_v8,
    .irecv = irecv_v8,
    .iflush = rcoll_nccl_iflush,
    .test = rcoll_nccl_test,
    .close_send = rcoll_nccl_close,
    .close_recv = rcoll_nccl_close,
    .close_listen = rcoll_nccl_close_listen,
    .get_device_mr = NULL,
    .irecv_consumed = NULL,
};
