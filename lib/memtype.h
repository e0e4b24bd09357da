/* Where a buffer lives, which memory a call may use, and the buffers users
 * register with a communicator (rcollCommRegister).
 *
 * Where a pointer lives is asked of the device path (lib/device.h): CUDA,
 * loaded lazily, which answers RCOLL_MEM_HOST for every pointer when this
 * machine has no CUDA driver or device, so host-only machines never touch
 * CUDA at all. */
#ifndef RCOLL_MEMTYPE_H
#define RCOLL_MEMTYPE_H

#include <stddef.h>

#include "net.h"
#include "rcoll.h"

struct rcollComm;

typedef struct rcoll_mem_info {
  int type;   /* enum rcoll_mem_type */
  int device; /* CUDA device ordinal, -1 for host memory */
} rcoll_mem_info_t;

/* Host memory, pinned host memory and unknown pointers are RCOLL_MEM_HOST;
 * device and managed memory are RCOLL_MEM_CUDA. A device buffer that runs
 * past the end of its allocation is an error. */
rcollResult_t rcoll_mem_query(const void *ptr, size_t bytes, rcoll_mem_info_t *out);

/* The memory rule of one call, given the buffers it uses (NULL: unused):
 * all host memory with stream NULL, or all device memory of one device (any
 * stream; NULL is the default stream). *device gets that device, or -1 for a
 * host call. A group may not mix host and device calls on one comm. */
rcollResult_t rcoll_mem_check_call(const struct rcollComm *c, const char *fn,
                                   const rcoll_mem_info_t *send, const rcoll_mem_info_t *recv,
                                   rcollStream_t stream, int *device);

/* ---- registrations ---- */

typedef struct rcoll_reg {
  unsigned long long magic;
  const struct rcollComm *comm;
  char *base;
  size_t bytes;
  rcoll_mem_info_t mem;
  struct rcoll_reg *next;
} rcoll_reg_t;

/* The registration covering [ptr, ptr + bytes), or NULL. */
const rcoll_reg_t *rcoll_reg_find(const struct rcollComm *c, const void *ptr, size_t bytes);
/* Number of registrations the comm holds. */
int rcoll_reg_count(const struct rcollComm *c);
/* Frees every registration left (rcollCommDestroy, Abort). */
void rcoll_reg_free_all(struct rcollComm *c);

#endif
