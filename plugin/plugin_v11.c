/* ncclNetPlugin_v11, and the slots every version shares. Each function
 * converts NCCL's arguments to the core's (plugin_core.c, plugin_comm.c) and
 * the result back; nothing here holds state. */
#include <string.h>

#include "error.h"
#include "plugin.h"

#define RESULT(call) rcoll_plugin_result(call)

nccl_result_t rcoll_nccl_devices(int *ndev) { return RESULT(rcoll_plugin_devices(ndev)); }

nccl_result_t rcoll_nccl_properties_v11(int dev, nccl_props_v11_t *props) {
  rcoll_plugin_props_t p;
  rcollResult_t r = rcoll_plugin_properties(dev, &p);
  if (r != rcollSuccess)
    return RESULT(r);
  memset(props, 0, sizeof *props);
  props->name = p.name;
  props->pci_path = p.pci_path;
  props->guid = (uint64_t)dev; /* one NIC per device: nothing for NCCL to merge */
  props->ptr_support = p.ptr_support;
  props->reg_is_global = p.reg_is_global;
  props->force_flush = 0;
  props->speed = p.speed_mbps;
  props->port = 0;
  props->latency = p.latency_us;
  props->max_comms = p.max_comms;
  props->max_recvs = p.max_recvs;
  props->net_device_type = NCCL_ABI_NET_DEVICE_HOST;
  props->net_device_version = NCCL_ABI_NET_DEVICE_INVALID_VERSION;
  props->vprops.ndevs = 1;
  props->vprops.devs[0] = dev;
  props->max_p2p_bytes = p.max_bytes;
  props->max_coll_bytes = p.max_bytes;
  props->max_multi_request_size = 1;
  return NCCL_ABI_SUCCESS;
}

/* recv_dev_comm: NCCL asks for device offload only from plugins whose
 * netDeviceType is not HOST, which this one never reports. */
nccl_result_t rcoll_nccl_accept(void *listen_comm, void **recv_comm, nccl_net_device_handle_t **recv_dev_comm) {
  (void)recv_dev_comm;
  return RESULT(rcoll_plugin_accept(listen_comm, (rcoll_plugin_comm_t **)recv_comm));
}

nccl_result_t rcoll_nccl_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  return RESULT(rcoll_plugin_reg_mr(comm, data, size, type, mhandle));
}

/* NCCL registers by DMA-BUF only when ptrSupport has NCCL_PTR_DMABUF, which
 * this plugin never reports; the slot answers anyway rather than crash. */
nccl_result_t rcoll_nccl_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                       void **mhandle) {
  (void)comm, (void)data, (void)size, (void)type, (void)offset, (void)fd, (void)mhandle;
  return RESULT(rcoll_error(rcollInvalidUsage, "NET/rcoll: DMA-BUF registration is not offered "
                                               "(ptrSupport has no NCCL_PTR_DMABUF)"));
}

nccl_result_t rcoll_nccl_dereg_mr(void *comm, void *mhandle) { return RESULT(rcoll_plugin_dereg_mr(comm, mhandle)); }

nccl_result_t rcoll_nccl_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request) {
  size_t sz[RCOLL_NET_MAX_RECVS];
  if (n < 1 || n > RCOLL_NET_MAX_RECVS || sizes == NULL || request == NULL)
    return RESULT(rcoll_error(rcollInvalidArgument, "NET/rcoll: iflush of %d buffers (1..%d) or NULL arguments",
                              n, RCOLL_NET_MAX_RECVS));
  for (int i = 0; i < n; i++)
    sz[i] = sizes[i] < 0 ? 0 : (size_t)sizes[i];
  return RESULT(rcoll_plugin_iflush(recv_comm, n, data, sz, mhandles, request));
}

nccl_result_t rcoll_nccl_test(void *request, int *done, int *sizes) {
  return RESULT(rcoll_plugin_test(request, done, sizes));
}

nccl_result_t rcoll_nccl_close(void *comm) { return RESULT(rcoll_plugin_close(comm)); }

nccl_result_t rcoll_nccl_close_listen(void *listen_comm) { return RESULT(rcoll_plugin_close_listen(listen_comm)); }

/* ---- v11 only ---- */

/* The comm id and traffic class are accepted and unused: rcoll transports
 * have no per-communicator network settings; the profiler gets no events. */
static nccl_result_t v11_init(void **ctx, uint64_t comm_id, nccl_comm_config_t *config, nccl_logger_t logger,
                              nccl_profiler_cb_t profiler) {
  (void)comm_id, (void)config, (void)profiler;
  if (ctx == NULL)
    return RESULT(rcoll_error(rcollInvalidArgument, "NET/rcoll: init given a NULL context pointer"));
  return RESULT(rcoll_plugin_init(logger, (rcoll_plugin_ctx_t **)ctx));
}

static nccl_result_t v11_finalize(void *ctx) { return RESULT(rcoll_plugin_finalize(ctx)); }

static nccl_result_t v11_listen(void *ctx, int dev, void *handle, void **listen_comm) {
  return RESULT(rcoll_plugin_listen(ctx, dev, handle, listen_comm));
}

static nccl_result_t v11_connect(void *ctx, int dev, void *handle, void **send_comm,
                                 nccl_net_device_handle_t **send_dev_comm) {
  (void)send_dev_comm;
  return RESULT(rcoll_plugin_connect(ctx, dev, handle, (rcoll_plugin_comm_t **)send_comm));
}

static nccl_result_t v11_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                               void **request) {
  (void)phandle;
  return RESULT(rcoll_plugin_isend(send_comm, data, size, tag, mhandle, request));
}

static nccl_result_t v11_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                               void **phandles, void **request) {
  (void)phandles;
  return RESULT(rcoll_plugin_irecv(recv_comm, n, data, sizes, tags, mhandles, request));
}

/* Writable, not const: the struct is NCCL's to read, and a host that stores
 * into its copy of the table must not fault. The NULL slots are the optional
 * ones NCCL checks before calling (no device offload, no virtual NICs, no
 * attribute hints). */
__attribute__((visibility("default"))) nccl_net_v11_t ncclNetPlugin_v11 = {
    .name = RCOLL_PLUGIN_NAME,
    .init = v11_init,
    .devices = rcoll_nccl_devices,
    .get_properties = rcoll_nccl_properties_v11,
    .listen = v11_listen,
    .connect = v11_connect,
    .accept = rcoll_nccl_accept,
    .reg_mr = rcoll_nccl_reg_mr,
    .reg_mr_dmabuf = rcoll_nccl_reg_mr_dmabuf,
    .dereg_mr = rcoll_nccl_dereg_mr,
    .isend = v11_isend,
    .irecv = v11_irecv,
    .iflush = rcoll_nccl_iflush,
    .test = rcoll_nccl_test,
    .close_send = rcoll_nccl_close,
    .close_recv = rcoll_nccl_close,
    .close_listen = rcoll_nccl_close_listen,
    .get_device_mr = NULL,
    .irecv_consumed = NULL,
    .make_vdevice = NULL,
    .finalize = v11_finalize,
    .set_net_attr = NULL,
};
