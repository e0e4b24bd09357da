/* The accepting side: listen on a unix socket in the abstract namespace (no
 * file to clean up), and the non-blocking accept. A connecting peer sends one
 * request naming the segment it created and presenting the secret; the
 * acceptor maps the segment, unlinks it, decides how it can copy straight
 * from the sender's memory, and answers. Requests with a wrong secret or
 * garbage are dropped with a warning, and so are sockets that stay silent. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "log.h"
#include "pidns.h"
#include "shm_priv.h"

#define SHM_BACKLOG 1024
#define SHM_MAX_PENDING 256

typedef struct shm_pacc { /* accepted socket whose request has not arrived */
  int fd;
  int64_t since_ms;
} shm_pacc_t;

typedef struct shm_listener {
  int fd;
  int rank;
  uint64_t secret;
  int64_t timeout_ms;
  char dir[256];
  shm_pacc_t pend[SHM_MAX_PENDING];
  int npend;
} shm_listener_t;

shm_conn_t *shm_conn_new(int is_send, shm_seg_t *seg, size_t bytes, int fd, pid_t peer) {
  shm_conn_t *c = calloc(1, sizeof *c);
  if (c == NULL)
    return NULL;
  c->is_send = is_send;
  c->seg = seg;
  c->seg_bytes = bytes;
  c->slots = (char *)seg + SHM_HDR_BYTES;
  c->nslots = seg->nslots;
  c->slot_size = seg->slot_size;
  c->payload = seg->slot_size - SHM_LINE;
  c->fd = fd;
  c->peer_pid = peer;
  c->direct_min = SIZE_MAX;
  c->single_min = SIZE_MAX;
  for (int i = 0; i < SHM_NREQS; i++) {
    c->reqs[i].conn = c;
    c->free_idx[i] = SHM_NREQS - 1 - i;
  }
  c->nfree = SHM_NREQS;
  snprintf(c->peer, sizeof c->peer, "pid %d", (int)peer);
  return c;
}

static const char *shm_copy_name(int copy) {
  return copy == SHM_COPY_CMA ? "CMA (process_vm_readv)" : copy == SHM_COPY_MEMCPY ? "memcpy (same process)"
                                                                                     : "none";
}

void shm_conn_log(const shm_conn_t *c, int rank) {
  char thr[96] = "off";
  if (c->copy != SHM_COPY_NONE && c->direct_min != SIZE_MAX)
    snprintf(thr, sizeof thr, "from %zu bytes", c->direct_min);
  if (c->copy != SHM_COPY_NONE && c->single_min != SIZE_MAX)
    snprintf(thr + strlen(thr), sizeof thr - strlen(thr), ", in exchanges from %zu", c->single_min);
  RCOLL_INFO(RCOLL_SUB_NET, "shm: rank %d %s %s: ring %u x %zu bytes (%zu KiB), single copy %s %s%s",
             rank, c->is_send ? "sends to" : "receives from", c->peer, c->nslots, c->slot_size,
             c->seg_bytes >> 10, shm_copy_name(c->copy), c->is_send ? thr : "",
             c->is_send && c->copy == SHM_COPY_CMA && c->pool_map
                 ? "; from rcollMemAlloc buffers through the receiver's mapping (RCOLL_SHM_POOL_MAP)"
                 : "");
}

/* ---- listen ---- */

static socklen_t shm_sockaddr(struct sockaddr_un *a, const char *name) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  size_t len = strnlen(name, sizeof a->sun_path - 2);
  memcpy(a->sun_path + 1, name, len); /* leading NUL: the abstract namespace */
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

rcollResult_t shm_listen(void *vctx, int dev, void *handle, void **listen_comm) {
  shm_ctx_t *ctx = vctx;
  struct sockaddr_un a;
  if (dev != 0)
    return rcoll_error(rcollInvalidArgument, "shm: listen on device %d, only device 0 exists", dev);
  shm_listener_t *l = calloc(1, sizeof *l);
  if (l == NULL)
    return rcoll_error(rcollSystemError, "shm: out of memory for a listener");
  shm_handle_t h = {.magic = SHM_MAGIC, .secret = ctx->secret, .pid = (int32_t)getpid(),
                    .ns_key = rcoll_pid_ns_key()};
  snprintf(h.sock, sizeof h.sock, SHM_PREFIX ".%d.%016llx", (int)getpid(),
           (unsigned long long)shm_random64());
  l->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&a, shm_sockaddr(&a, h.sock)) != 0 ||
      listen(l->fd, SHM_BACKLOG) != 0) {
    int e = errno;
    if (l->fd >= 0)
      close(l->fd);
    free(l);
    return rcoll_error_quiet(rcollSystemError, "shm: cannot listen on a unix socket: %s", strerror(e));
  }
  l->rank = ctx->rank;
  l->secret = ctx->secret;
  l->timeout_ms = ctx->timeout_ms;
  snprintf(l->dir, sizeof l->dir, "%s", ctx->dir);
  memset(handle, 0, RCOLL_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof h);
  RCOLL_INFO(RCOLL_SUB_NET, "shm: rank %d listening on @%s, segments in %s", ctx->rank, h.sock, ctx->dir);
  *listen_comm = l;
  return rcollSuccess;
}

rcollResult_t shm_close_listen(void *listen_comm) {
  shm_listener_t *l = listen_comm;
  if (l == NULL)
    return rcollSuccess;
  for (int i = 0; i < l->npend; i++)
    close(l->pend[i].fd);
  close(l->fd);
  free(l);
  return rcollSuccess;
}

/* ---- accept ---- */

static void shm_pend_drop(shm_listener_t *l, int i, int close_fd) {
  if (close_fd)
    close(l->pend[i].fd);
  l->pend[i] = l->pend[--l->npend];
}

static void shm_accept_new(shm_listener_t *l, int64_t now) {
  while (l->npend < SHM_MAX_PENDING) {
    int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return; /* EAGAIN, or a connection that died on the way: try later */
    l->pend[l->npend++] = (shm_pacc_t){.fd = fd, .since_ms = now};
  }
}

static pid_t shm_peer_pid(int fd) {
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return 0;
  return cred.pid;
}

/* Can we read the sender's memory with process_vm_readv? Yama, a different
 * user or another pid namespace (pid 0 here) say no; the probe word says. */
static int shm_cma_works(pid_t pid, const shm_seg_t *seg) {
  uint64_t v = 0;
  struct iovec local = {&v, sizeof v};
  struct iovec remote = {(void *)(uintptr_t)seg->probe_addr, sizeof v};
  if (pid <= 0)
    return 0;
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof v && v == seg->probe_value;
}

static void shm_answer(int fd, int status) {
  shm_conn_ack_t ack = {.magic = SHM_MAGIC, .status = status};
  if (send(fd, &ack, sizeof ack, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof ack)
    RCOLL_INFO(RCOLL_SUB_NET, "shm: could not answer a connecting peer: %s", strerror(errno));
}

/* Maps the segment a valid request names and answers; *out stays NULL when
 * the request cannot be served (the peer is told why). */
static rcollResult_t shm_accept_one(shm_listener_t *l, int fd, const shm_conn_req_t *req,
                                    shm_conn_t **out) {
  shm_seg_t *seg = NULL;
  size_t bytes = 0;
  pid_t pid = shm_peer_pid(fd);
  rcollResult_t r = shm_seg_open(l->dir, req->seg, &seg, &bytes);
  if (r == rcollSuccess)
    shm_seg_unlink(l->dir, req->seg); /* both ends have it mapped now */
  if (r != rcollSuccess) {
    RCOLL_WARN("shm: rank %d cannot take a connection from pid %d: %s", l->rank, (int)pid,
               rcoll_error_text());
    shm_answer(fd, ENOENT);
    close(fd);
    return rcollSuccess;
  }
  int copy = pid == getpid() ? SHM_COPY_MEMCPY : shm_cma_works(pid, seg) ? SHM_COPY_CMA : SHM_COPY_NONE;
  seg->receiver_pid = (int32_t)getpid();
  seg->copy = (uint32_t)copy;
  shm_conn_t *c = shm_conn_new(0, seg, bytes, fd, pid);
  if (c == NULL) {
    munmap(seg, bytes);
    shm_answer(fd, ENOMEM);
    close(fd);
    return rcoll_error(rcollSystemError, "shm: out of memory for a connection");
  }
  c->copy = copy;
  shm_answer(fd, 0);
  shm_conn_log(c, l->rank);
  *out = c;
  return rcollSuccess;
}

const char *shm_req_parse(const void *wire, size_t len, uint64_t secret, shm_conn_req_t *out) {
  shm_conn_req_t req;
  if (len != sizeof req)
    return "a malformed request (wrong size)";
  memcpy(&req, wire, sizeof req);
  if (req.magic != SHM_MAGIC)
    return "a malformed request (bad magic)";
  if (req.secret != secret)
    return "a wrong secret";
  req.seg[SHM_NAME_MAX - 1] = '\0';
  *out = req;
  return NULL;
}

/* Reads the request of pending socket i: 1 when it was consumed (served or
 * dropped), 0 when it has not arrived yet. */
static int shm_pend_read(shm_listener_t *l, int i, int64_t now, shm_conn_t **out, rcollResult_t *r) {
  shm_conn_req_t req;
  char wire[sizeof req];
  int fd = l->pend[i].fd;
  ssize_t k = recv(fd, wire, sizeof wire, MSG_DONTWAIT);
  const char *why = NULL;
  if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
    if (now - l->pend[i].since_ms <= l->timeout_ms)
      return 0;
    RCOLL_WARN("shm: rank %d dropping a connection that sent nothing for %lld ms", l->rank,
               (long long)(now - l->pend[i].since_ms));
  } else if ((why = shm_req_parse(wire, k < 0 ? 0 : (size_t)k, l->secret, &req)) != NULL) {
    RCOLL_WARN("shm: rank %d dropping a connection that sent %s (%zd bytes)", l->rank, why, k);
  } else {
    shm_pend_drop(l, i, 0);
    *r = shm_accept_one(l, fd, &req, out);
    return 1;
  }
  shm_pend_drop(l, i, 1);
  return 1;
}

rcollResult_t shm_accept(void *listen_comm, void **recv_comm) {
  shm_listener_t *l = listen_comm;
  int64_t now = rcoll_now_ms();
  *recv_comm = NULL;
  shm_accept_new(l, now);
  for (int i = 0; i < l->npend; i++) {
    shm_conn_t *c = NULL;
    rcollResult_t r = rcollSuccess;
    if (!shm_pend_read(l, i, now, &c, &r))
      continue;
    i--; /* entry i now holds what was the last one */
    if (r != rcollSuccess)
      return r;
    if (c != NULL) {
      *recv_comm = c;
      return rcollSuccess;
    }
  }
  return rcollSuccess;
}
