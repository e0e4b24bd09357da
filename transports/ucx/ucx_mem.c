/* Memory registration: ucp_mem_map of host memory, and of device memory when
 * UCX reports CUDA support (ucp_context_query memory types). Registrations
 * belong to the UCP context, so one is valid on every comm of the context. */
#if RCOLL_HAVE_UCX

#include <stdlib.h>

#include "error.h"
#include "ucx_priv.h"

rcollResult_t ucx_reg_mr(void *comm, void *data, size_t size, int mem_type, void **mhandle) {
  ucx_conn_t *c = comm;
  ucx_ctx_t *ctx = c->ctx;
  ucs_memory_type_t ut;
  if (mem_type == RCOLL_MEM_HOST)
    ut = UCS_MEMORY_TYPE_HOST;
  else if (mem_type == RCOLL_MEM_CUDA)
    ut = UCS_MEMORY_TYPE_CUDA;
  else
    return rcoll_error(rcollInvalidArgument, "ucx: reg_mr with unknown memory type %d", mem_type);
  if (!(ctx->mem_types & UCS_BIT(ut)))
    return rcoll_error(rcollInvalidUsage, "ucx: this UCX build cannot register device memory (no CUDA "
                       "memory type support); stage through host");
  ucx_mr_t *mr = calloc(1, sizeof *mr);
  if (mr == NULL)
    return rcoll_error(rcollSystemError, "ucx: out of memory for a registration");
  mr->ctx = ctx;
  mr->base = data;
  mr->len = size;
  /* UCX refuses an empty region; such a handle simply carries no memh. */
  if (size > 0) {
    ucp_mem_map_params_t p = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
        .address = data,
        .length = size,
        .memory_type = ut,
    };
    ucs_status_t st = ucp_mem_map(ctx->ucp, &p, &mr->memh);
    if (st != UCS_OK) {
      free(mr);
      return rcoll_error(rcollSystemError, "ucx: ucp_mem_map of %zu bytes at %p failed: %s", size, data,
                         ucs_status_string(st));
    }
  }
  *mhandle = mr;
  return rcollSuccess;
}

rcollResult_t ucx_dereg_mr(void *comm, void *mhandle) {
  ucx_mr_t *mr = mhandle;
  (void)comm;
  if (mr == NULL)
    return rcollSuccess;
  ucs_status_t st = mr->memh != NULL ? ucp_mem_unmap(mr->ctx->ucp, mr->memh) : UCS_OK;
  free(mr);
  if (st != UCS_OK)
    return rcoll_error(rcollSystemError, "ucx: ucp_mem_unmap failed: %s", ucs_status_string(st));
  return rcollSuccess;
}

#endif /* RCOLL_HAVE_UCX */
