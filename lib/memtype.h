/* Where a buffer lives. Host-only builds answer RCOLL_MEM_HOST; the CUDA path
 * (cudaPointerGetAttributes, loaded lazily so the library runs without a
 * driver) plugs in here. */
#ifndef RCOLL_MEMTYPE_H
#define RCOLL_MEMTYPE_H

#include <stddef.h>

#include "net.h"
#include "rcoll.h"

typedef struct rcoll_mem_info {
  int type;   /* enum rcoll_mem_type */
  int device; /* CUDA device ordinal, -1 for host memory */
} rcoll_mem_info_t;

rcollResult_t rcoll_mem_query(const void *ptr, size_t bytes, rcoll_mem_info_t *out);

#endif
