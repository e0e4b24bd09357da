/* The device path as the core sees it: the one rcoll_device_ops table
 * (lib/device.h says why the core reaches lib/cuda only through it). Each
 * slot is the lib/cuda function that does the work; cuda_comm.h declares
 * them. */
#include "cuda/cuda_comm.h"
#include "device.h"

static int cuda_comm_device(const struct rcollComm *c) {
  return c->cuda != NULL ? c->cuda->device : -1;
}

const rcoll_device_ops_t rcoll_device_ops = {
    .mem_query = rcoll_cuda_mem_query,
    .group_has_device = rcoll_cuda_group_has_device,
    .submit = rcoll_cuda_submit,
    .direct = rcoll_cuda_direct,
    .direct_p2p = rcoll_cuda_direct_p2p,
    .bounce_begin = rcoll_cuda_bounce_begin,
    .bounce_cancel = rcoll_cuda_bounce_cancel,
    .group_divert = rcoll_cuda_group_divert,
    .drain_plans = rcoll_cuda_drain_plans,
    .executing = rcoll_cuda_executing,
    .step_post = rcoll_cuda_step_post,
    .step_test = rcoll_cuda_step_test,
    .idle = rcoll_cuda_idle,
    .mem_alloc = rcoll_cuda_mem_alloc,
    .mem_free = rcoll_cuda_mem_free,
    .current_device = rcoll_cuda_current_device,
    .set_device = rcoll_cuda_set_device,
    .comm_device = cuda_comm_device,
    .comm_drain = rcoll_cuda_comm_drain,
    .comm_destroy = rcoll_cuda_comm_destroy,
};
