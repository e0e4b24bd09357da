/* Memory-type queries (memtype.h). */
#include "memtype.h"

rcollResult_t rcoll_mem_query(const void *ptr, size_t bytes, rcoll_mem_info_t *out) {
  (void)ptr;
  (void)bytes;
  /* Without the CUDA path every pointer is host memory. */
  out->type = RCOLL_MEM_HOST;
  out->device = -1;
  return rcollSuccess;
}
