/* Receive-reduce on a shared-memory connection: the message is reduced into
 * the destination as it arrives (dst = src op message), instead of being
 * copied into the engine's staging and read back from there.
 *
 * Ring slots are reduced straight from the slot. A single-copy message is
 * read from the sender's buffer in pieces small enough to stay in this
 * core's cache (process_vm_readv into a bounce buffer, or straight from the
 * buffer between threads of one process or from a mapped pool block), each reduced before the next is
 * read: the message crosses memory once, where the staging path wrote it
 * out and read it back. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "error.h"
#include "reduce.h"
#include "shm_priv.h"

/* A piece of a single-copy message: well inside a core's L2. Whole elements
 * of every type, so that pieces split no element. */
#define SHM_REDUCE_PIECE (128 * 1024)

void shm_reduce_piece(const shm_req_t *r, size_t off, const char *from, size_t len) {
  rcollDataType_t t = (rcollDataType_t)r->rtype;
  rcoll_reduce(r->buf + off, r->rsrc + off, from, len / rcoll_type_size(t), t, (rcollRedOp_t)r->rop);
}

/* Reads len bytes at the sender's src into dst, going on after short reads. */
static int shm_cma_read(shm_conn_t *c, char *dst, const char *src, size_t len, size_t total) {
  size_t done = 0;
  while (done < len) {
    struct iovec local = {dst + done, len - done};
    struct iovec remote = {(void *)(src + done), len - done};
    ssize_t k = process_vm_readv(c->peer_pid, &local, 1, &remote, 1, 0);
    if (k <= 0 && errno != EINTR) {
      shm_conn_fail(c, rcollRemoteError, "shm: reading %zu bytes from %s failed: %s", total, c->peer,
                    errno == ESRCH ? "the process has exited" : strerror(errno));
      return -1;
    }
    done += k > 0 ? (size_t)k : 0;
  }
  return 0;
}

int shm_recv_direct_reduce(shm_conn_t *c, shm_req_t *r, const char *src, int copy) {
  if (copy == SHM_COPY_MEMCPY) {
    shm_reduce_piece(r, 0, src, r->size);
    r->off = r->size;
    return 0;
  }
  if (c->bounce == NULL && (c->bounce = aligned_alloc(64, SHM_REDUCE_PIECE)) == NULL) {
    shm_conn_fail(c, rcollSystemError, "shm: out of memory for a %d-byte reduce buffer", SHM_REDUCE_PIECE);
    return -1;
  }
  while (r->off < r->size) {
    size_t len = r->size - r->off < SHM_REDUCE_PIECE ? r->size - r->off : SHM_REDUCE_PIECE;
    if (shm_cma_read(c, c->bounce, src + r->off, len, r->size) < 0)
      return -1;
    shm_reduce_piece(r, r->off, c->bounce, len);
    r->off += len;
  }
  return 0;
}

rcollResult_t shm_irecv_reduce(void *comm, void *dst, const void *src, size_t bytes, int dtype, int op,
                               void **request) {
  shm_conn_t *c = comm;
  *request = NULL;
  if (dtype < 0 || dtype >= rcollNumTypes || op < 0 || op >= rcollNumOps ||
      bytes % rcoll_type_size((rcollDataType_t)dtype) != 0)
    return rcoll_error(rcollInvalidArgument, "shm: receive-reduce of %zu bytes of type %d, op %d",
                       bytes, dtype, op);
  shm_req_t *r = NULL;
  RCOLL_CHECK(shm_recv_post(c, dst, bytes, &r));
  if (r == NULL)
    return rcollSuccess;
  r->reduce = 1;
  r->rtype = dtype;
  r->rop = op;
  r->rsrc = src;
  shm_recv_kick(c);
  *request = r;
  return rcollSuccess;
}
