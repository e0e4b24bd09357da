/* Memory types, the memory rule of a call, and user registrations
 * (memtype.h). */
#include "memtype.h"

#include <stdint.h>
#include <stdlib.h>

#include "comm.h"
#include "device.h"
#include "log.h"

#define REG_MAGIC 0x6765726c6c6f6372ull /* "rcollreg" */

/* The answer comes from the device path (lib/device.h): CUDA's pointer
 * query, which says RCOLL_MEM_HOST for every pointer on a machine without a
 * CUDA driver or device. */
rcollResult_t rcoll_mem_query(const void *ptr, size_t bytes, rcoll_mem_info_t *out) {
  return rcoll_device_ops.mem_query(ptr, bytes, out);
}

rcollResult_t rcoll_mem_check_call(const struct rcollComm *c, const char *fn,
                                   const rcoll_mem_info_t *send, const rcoll_mem_info_t *recv,
                                   rcollStream_t stream, int *device) {
  int nbuf = (send != NULL) + (recv != NULL);
  int ndev = (send && send->type == RCOLL_MEM_CUDA) + (recv && recv->type == RCOLL_MEM_CUDA);
  *device = -1;
  if (ndev == 0) {
    if (stream != NULL)
      return rcoll_error(rcollInvalidUsage, "%s: stream must be NULL for host buffers", fn);
    if (rcoll_device_ops.group_has_device(c))
      return rcoll_error(rcollInvalidUsage, "%s: this group already has calls on device buffers for "
                         "this communicator; a group holds host calls or device calls, not both", fn);
    return rcollSuccess;
  }
  if (ndev != nbuf)
    return rcoll_error(rcollInvalidUsage, "%s: %s is device memory but %s is host memory; a call "
                       "uses one kind", fn, send->type == RCOLL_MEM_CUDA ? "sendbuff" : "recvbuff",
                       send->type == RCOLL_MEM_CUDA ? "recvbuff" : "sendbuff");
  if (send && recv && send->device != recv->device)
    return rcoll_error(rcollInvalidUsage, "%s: sendbuff is on device %d, recvbuff on device %d", fn,
                       send->device, recv->device);
  *device = send ? send->device : recv->device;
  return rcollSuccess;
}

/* ---- registrations ---- */

const rcoll_reg_t *rcoll_reg_find(const struct rcollComm *c, const void *ptr, size_t bytes) {
  const char *p = ptr;
  for (const rcoll_reg_t *g = c->regs; g != NULL; g = g->next)
    if (p >= g->base && bytes <= g->bytes && (size_t)(p - g->base) <= g->bytes - bytes)
      return g;
  return NULL;
}

int rcoll_reg_count(const struct rcollComm *c) {
  int n = 0;
  for (const rcoll_reg_t *g = c->regs; g != NULL; g = g->next)
    n++;
  return n;
}

void rcoll_reg_free_all(struct rcollComm *c) {
  while (c->regs != NULL) {
    rcoll_reg_t *g = c->regs;
    c->regs = g->next;
    g->magic = 0;
    free(g);
  }
}

/* Registration records the buffer and its memory type; calls work on
 * unregistered buffers too. Transports that benefit from pinned
 * registrations (ib) will take them from here (rcoll_reg_find). */
RCOLL_API rcollResult_t rcollCommRegister(const rcollComm_t comm, void *buff, size_t size,
                                          void **handle) {
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollCommRegister"));
  if (buff == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollCommRegister: buff is NULL");
  if (size == 0)
    return rcoll_error(rcollInvalidArgument, "rcollCommRegister: size is 0");
  if (handle == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollCommRegister: handle is NULL");
  if ((uintptr_t)buff > UINTPTR_MAX - size)
    return rcoll_error(rcollInvalidArgument, "rcollCommRegister: buff + size wraps around");
  rcoll_mem_info_t mem;
  RCOLL_CHECK(rcoll_mem_query(buff, size, &mem));
  rcoll_reg_t *g = calloc(1, sizeof *g);
  if (g == NULL)
    return rcoll_error(rcollSystemError, "rcollCommRegister: out of memory");
  *g = (rcoll_reg_t){REG_MAGIC, comm, buff, size, mem, comm->regs};
  comm->regs = g;
  RCOLL_INFO(RCOLL_SUB_ALLOC, "rank %d: registered %zu bytes of %s memory at %p", comm->rank, size,
             mem.type == RCOLL_MEM_CUDA ? "device" : "host", buff);
  *handle = g;
  return rcollSuccess;
}

RCOLL_API rcollResult_t rcollCommDeregister(const rcollComm_t comm, void *handle) {
  RCOLL_CHECK(rcoll_comm_check(comm, "rcollCommDeregister"));
  if (handle == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollCommDeregister: handle is NULL");
  /* Found by walking our own list, so a stale or foreign handle is never
   * dereferenced. */
  for (rcoll_reg_t **link = &comm->regs; *link != NULL; link = &(*link)->next) {
    if (*link != handle)
      continue;
    rcoll_reg_t *g = *link;
    *link = g->next;
    g->magic = 0;
    free(g);
    return rcollSuccess;
  }
  return rcoll_error(rcollInvalidArgument, "rcollCommDeregister: handle %p is not a registration "
                     "of this communicator (deregistered already?)", handle);
}
