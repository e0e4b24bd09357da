/* Send and receive comms as NCCL sees them: a transport comm plus a small
 * pool of request wrappers. The wrapper remembers how many buffers a request
 * covers, because NCCL's test reports one size per buffer and the transport
 * request does not say how many there are. NCCL drives one comm from one
 * thread (its proxy), so the pool needs no lock. */
#include <stdlib.h>

#include "error.h"
#include "plugin.h"

typedef struct rcoll_plugin_req {
  rcoll_plugin_comm_t *comm;
  void *treq;
  int n; /* buffers whose sizes test reports */
} rcoll_plugin_req_t;

struct rcoll_plugin_comm {
  void *tcomm;
  int is_send;
  int nfree;
  rcoll_plugin_req_t *free_reqs[RCOLL_PLUGIN_NREQS];
  rcoll_plugin_req_t reqs[RCOLL_PLUGIN_NREQS];
};

rcollResult_t rcoll_plugin_comm_wrap(void *tcomm, int is_send, rcoll_plugin_comm_t **out) {
  const rcoll_transport_ops_t *ops = rcoll_plugin_ops();
  rcoll_plugin_comm_t *c = calloc(1, sizeof *c);
  if (c == NULL) {
    (is_send ? ops->close_send : ops->close_recv)(tcomm);
    return rcoll_error(rcollSystemError, "NET/rcoll: out of memory for a comm");
  }
  c->tcomm = tcomm;
  c->is_send = is_send;
  for (int i = 0; i < RCOLL_PLUGIN_NREQS; i++) {
    c->reqs[i].comm = c;
    c->free_reqs[c->nfree++] = &c->reqs[RCOLL_PLUGIN_NREQS - 1 - i];
  }
  *out = c;
  return rcollSuccess;
}

rcollResult_t rcoll_plugin_close(rcoll_plugin_comm_t *comm) {
  if (comm == NULL)
    return rcollSuccess;
  const rcoll_transport_ops_t *ops = rcoll_plugin_ops();
  rcollResult_t r = (comm->is_send ? ops->close_send : ops->close_recv)(comm->tcomm);
  free(comm);
  return r;
}

static rcollResult_t plugin_check_comm(const rcoll_plugin_comm_t *comm, int want_send, const char *what) {
  if (comm == NULL)
    return rcoll_error(rcollInvalidArgument, "NET/rcoll: %s given a NULL comm", what);
  if (want_send >= 0 && comm->is_send != want_send)
    return rcoll_error(rcollInvalidUsage, "NET/rcoll: %s given a %s comm", what, comm->is_send ? "send" : "receive");
  return rcollSuccess;
}

rcollResult_t rcoll_plugin_reg_mr(rcoll_plugin_comm_t *comm, void *data, size_t size, int type, void **mhandle) {
  RCOLL_CHECK(plugin_check_comm(comm, -1, "regMr"));
  int mem_type;
  if (type == NCCL_ABI_PTR_HOST)
    mem_type = RCOLL_MEM_HOST;
  else if (type == NCCL_ABI_PTR_CUDA)
    mem_type = RCOLL_MEM_CUDA;
  else
    return rcoll_error(rcollInvalidArgument, "NET/rcoll: regMr with pointer type %d (host 1 or CUDA 2 expected)",
                       type);
  return rcoll_plugin_ops()->reg_mr(comm->tcomm, data, size, mem_type, mhandle);
}

rcollResult_t rcoll_plugin_dereg_mr(rcoll_plugin_comm_t *comm, void *mhandle) {
  RCOLL_CHECK(plugin_check_comm(comm, -1, "deregMr"));
  return rcoll_plugin_ops()->dereg_mr(comm->tcomm, mhandle);
}

/* Takes a wrapper for a transport request the caller just got; the caller
 * checked that one is free before asking the transport. */
static void *plugin_req_take(rcoll_plugin_comm_t *comm, void *treq, int n) {
  rcoll_plugin_req_t *r = comm->free_reqs[--comm->nfree];
  r->treq = treq;
  r->n = n;
  return r;
}

rcollResult_t rcoll_plugin_isend(rcoll_plugin_comm_t *comm, void *data, size_t size, int tag, void *mhandle,
                                 void **request) {
  RCOLL_CHECK(plugin_check_comm(comm, 1, "isend"));
  *request = NULL;
  if (size > RCOLL_PLUGIN_MAX_BYTES)
    return rcoll_error(rcollInvalidArgument, "NET/rcoll: isend of %zu bytes exceeds maxP2pBytes %zu", size,
                       RCOLL_PLUGIN_MAX_BYTES);
  if (comm->nfree == 0)
    return rcollSuccess;
  void *treq = NULL;
  RCOLL_CHECK(rcoll_plugin_ops()->isend(comm->tcomm, data, size, tag, mhandle, &treq));
  if (treq != NULL)
    *request = plugin_req_take(comm, treq, 1);
  return rcollSuccess;
}

static rcollResult_t plugin_check_bufs(int n, const size_t *sizes, const char *what) {
  if (n < 1 || n > RCOLL_NET_MAX_RECVS)
    return rcoll_error(rcollInvalidArgument, "NET/rcoll: %s of %d buffers (1..%d)", what, n, RCOLL_NET_MAX_RECVS);
  for (int i = 0; i < n; i++)
    if (sizes[i] > RCOLL_PLUGIN_MAX_BYTES)
      return rcoll_error(rcollInvalidArgument, "NET/rcoll: %s buffer %d of %zu bytes exceeds maxP2pBytes %zu",
                         what, i, sizes[i], RCOLL_PLUGIN_MAX_BYTES);
  return rcollSuccess;
}

rcollResult_t rcoll_plugin_irecv(rcoll_plugin_comm_t *comm, int n, void **data, const size_t *sizes,
                                 const int *tags, void **mhandles, void **request) {
  RCOLL_CHECK(plugin_check_comm(comm, 0, "irecv"));
  *request = NULL; /* NCCL may have left a hint there */
  RCOLL_CHECK(plugin_check_bufs(n, sizes, "irecv"));
  if (comm->nfree == 0)
    return rcollSuccess;
  void *treq = NULL;
  RCOLL_CHECK(rcoll_plugin_ops()->irecv(comm->tcomm, n, data, sizes, tags, mhandles, &treq));
  if (treq != NULL)
    *request = plugin_req_take(comm, treq, n);
  return rcollSuccess;
}

rcollResult_t rcoll_plugin_iflush(rcoll_plugin_comm_t *comm, int n, void **data, const size_t *sizes,
                                  void **mhandles, void **request) {
  RCOLL_CHECK(plugin_check_comm(comm, 0, "iflush"));
  *request = NULL;
  RCOLL_CHECK(plugin_check_bufs(n, sizes, "iflush"));
  if (comm->nfree == 0)
    return rcollSuccess;
  void *treq = NULL;
  RCOLL_CHECK(rcoll_plugin_ops()->iflush(comm->tcomm, n, data, sizes, mhandles, &treq));
  if (treq != NULL)
    *request = plugin_req_take(comm, treq, 0); /* a flush moves no bytes */
  return rcollSuccess;
}

/* The transport leaves a failed connection's error quiet for the caller to
 * report with context; NCCL will then tear the connection down. */
rcollResult_t rcoll_plugin_test(void *request, int *done, int *sizes) {
  rcoll_plugin_req_t *r = request;
  if (r == NULL || done == NULL)
    return rcoll_error(rcollInvalidArgument, "NET/rcoll: test given a NULL %s", r == NULL ? "request" : "flag");
  size_t got[RCOLL_NET_MAX_RECVS] = {0};
  *done = 0;
  rcollResult_t res = rcoll_plugin_ops()->test(r->treq, done, got);
  if (res != rcollSuccess)
    return rcoll_error(res, "NET/rcoll: %s failed: %s", r->comm->is_send ? "send" : "receive", rcoll_error_text());
  if (!*done)
    return rcollSuccess;
  for (int i = 0; sizes != NULL && i < r->n; i++)
    sizes[i] = (int)got[i]; /* no larger than the posted size, itself <= maxP2pBytes */
  rcoll_plugin_comm_t *c = r->comm;
  c->free_reqs[c->nfree++] = r;
  return rcollSuccess;
}
