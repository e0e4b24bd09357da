/* A toy transport over pipes: lab exercise 06, reference solution.
 *
 * Every connection is one pipe: the sender writes, the receiver reads. Ranks
 * that are threads of one process share their file descriptors, so a pipe
 * made by the connecting thread can be handed to the accepting one by its
 * number. That is all this transport can reach: ranks in one process
 * (rcollCommInitAll, conformance -t). Connecting from another process is
 * refused with a message that says so.
 *
 * Listening makes a "doorbell" pipe; its write end and our pid are the
 * handle. connect makes the data pipe and rings the bell with a record
 * {secret, read fd}; accept reads records and keeps those that present the
 * communicator's secret. Records are 16 bytes, under PIPE_BUF, so the
 * kernel writes each whole: a read of 16 bytes gets a whole record or none.
 *
 * A message is an 8-byte length, then the bytes. Requests of a connection
 * sit in a ring of PIPE_QUEUE slots and are moved strictly in the order
 * posted (messages match in order); test() moves as much as the pipe takes
 * without blocking, then says whether the request asked about is done. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "net.h"

#define PIPE_MAGIC 0x50495045u /* "PIPE" */
#define PIPE_QUEUE 16

typedef struct pipe_ctx {
  uint64_t secret;
  int rank;
} pipe_ctx_t;

typedef struct pipe_handle { /* what listen publishes, at most RCOLL_NET_HANDLE_BYTES */
  uint32_t magic;
  int bell_fd; /* the doorbell's write end */
  pid_t pid;   /* the process the descriptor numbers belong to */
} pipe_handle_t;

typedef struct pipe_bell { /* one doorbell record */
  uint64_t secret;
  int64_t fd; /* the data pipe's read end */
} pipe_bell_t;

typedef struct pipe_listen {
  int bell[2];
  uint64_t secret;
} pipe_listen_t;

enum { SLOT_FREE = 0, SLOT_ACTIVE, SLOT_DONE };

struct pipe_comm;
typedef struct pipe_req {
  struct pipe_comm *comm;
  int state;
  char *buf;
  size_t size;         /* send: the message; recv: room in buf */
  uint64_t len;        /* the length header: sent, or received */
  size_t hdr_done, done;
} pipe_req_t;

typedef struct pipe_comm {
  int fd;
  int is_send;
  uint64_t posted, moved; /* requests posted; requests whose bytes all moved */
  pipe_req_t q[PIPE_QUEUE];
} pipe_comm_t;

static const char pipe_token; /* reg_mr and iflush: nothing to hold */

static rcollResult_t pipe_init(const rcoll_net_config_t *cfg, void **ctx) {
  pipe_ctx_t *c = calloc(1, sizeof *c);
  if (c == NULL)
    return rcoll_error(rcollSystemError, "pipe: out of memory");
  c->secret = cfg->secret;
  c->rank = cfg->rank;
  *ctx = c;
  return rcollSuccess;
}

static rcollResult_t pipe_finalize(void *ctx) {
  free(ctx);
  return rcollSuccess;
}

static rcollResult_t pipe_devices(void *ctx, int *ndev) {
  (void)ctx;
  *ndev = 1;
  return rcollSuccess;
}

static rcollResult_t pipe_get_properties(void *ctx, int dev, rcoll_net_props_t *props) {
  (void)ctx;
  if (dev != 0)
    return rcoll_error(rcollInvalidArgument, "pipe: device %d does not exist (1 device)", dev);
  memset(props, 0, sizeof *props);
  strcpy(props->name, "pipe");
  props->ptr_support = RCOLL_PTR_HOST;
  props->speed_mbps = 10000;
  props->latency_us = 5.0f;
  props->max_recvs = 1;
  props->reg_is_global = 1;
  return rcollSuccess;
}

static rcollResult_t pipe_listen(void *ctx, int dev, void *handle, void **listen_comm) {
  (void)dev;
  pipe_listen_t *l = calloc(1, sizeof *l);
  if (l == NULL)
    return rcoll_error(rcollSystemError, "pipe: out of memory");
  if (pipe2(l->bell, O_NONBLOCK | O_CLOEXEC) != 0) {
    free(l);
    return rcoll_error(rcollSystemError, "pipe: pipe2 for the doorbell: %s", strerror(errno));
  }
  l->secret = ((pipe_ctx_t *)ctx)->secret;
  pipe_handle_t h = {PIPE_MAGIC, l->bell[1], getpid()};
  _Static_assert(sizeof h <= RCOLL_NET_HANDLE_BYTES, "the handle must fit");
  memset(handle, 0, RCOLL_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof h);
  *listen_comm = l;
  return rcollSuccess;
}

static pipe_comm_t *comm_new(int fd, int is_send) {
  pipe_comm_t *c = calloc(1, sizeof *c);
  if (c != NULL)
    c->fd = fd, c->is_send = is_send;
  return c;
}

static rcollResult_t pipe_connect(void *ctx, int dev, const void *handle, void **send_comm) {
  (void)dev;
  pipe_handle_t h;
  memcpy(&h, handle, sizeof h);
  *send_comm = NULL;
  if (h.magic != PIPE_MAGIC)
    return rcoll_error(rcollInvalidArgument, "pipe: the peer's handle is not a pipe transport's");
  if (h.pid != getpid())
    return rcoll_error(rcollInvalidUsage, "pipe: the peer is process %d and this is %d: pipes only join "
                       "ranks that are threads of one process", (int)h.pid, (int)getpid());
  int fds[2];
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
    return rcoll_error(rcollSystemError, "pipe: pipe2: %s", strerror(errno));
  pipe_bell_t bell = {((pipe_ctx_t *)ctx)->secret, fds[0]};
  ssize_t w = write(h.bell_fd, &bell, sizeof bell);
  if (w != (ssize_t)sizeof bell) {
    int e = errno;
    close(fds[0]), close(fds[1]);
    if (w < 0 && e == EAGAIN) /* the doorbell is full: try again later */
      return rcollSuccess;
    return rcoll_error(rcollRemoteError, "pipe: ringing the peer's doorbell: %s", w < 0 ? strerror(e) : "short write");
  }
  if ((*send_comm = comm_new(fds[1], 1)) == NULL) {
    close(fds[1]); /* the reader sees the end of the pipe and fails */
    return rcoll_error(rcollSystemError, "pipe: out of memory");
  }
  return rcollSuccess;
}

static rcollResult_t pipe_accept(void *listen_comm, void **recv_comm) {
  pipe_listen_t *l = listen_comm;
  pipe_bell_t bell;
  *recv_comm = NULL;
  ssize_t r = read(l->bell[0], &bell, sizeof bell);
  if (r < 0 && errno == EAGAIN)
    return rcollSuccess; /* nobody rang yet */
  if (r != (ssize_t)sizeof bell)
    return rcoll_error(rcollSystemError, "pipe: reading the doorbell: %s", r < 0 ? strerror(errno) : "short read");
  if (bell.secret != l->secret) { /* another communicator's: drop it */
    close((int)bell.fd);
    return rcollSuccess;
  }
  if ((*recv_comm = comm_new((int)bell.fd, 0)) == NULL) {
    close((int)bell.fd);
    return rcoll_error(rcollSystemError, "pipe: out of memory");
  }
  return rcollSuccess;
}

static rcollResult_t pipe_reg_mr(void *comm, void *data, size_t size, int mem_type, void **mhandle) {
  (void)comm, (void)data, (void)size;
  if (mem_type != RCOLL_MEM_HOST)
    return rcoll_error(rcollInvalidUsage, "pipe: only host memory can be registered");
  *mhandle = (void *)&pipe_token;
  return rcollSuccess;
}

static rcollResult_t pipe_dereg_mr(void *comm, void *mhandle) {
  (void)comm, (void)mhandle;
  return rcollSuccess;
}

/* The next free slot, or NULL when the ring is full (the caller retries). */
static pipe_req_t *post(pipe_comm_t *c, void *buf, size_t size) {
  pipe_req_t *q = &c->q[c->posted % PIPE_QUEUE];
  if (q->state != SLOT_FREE)
    return NULL;
  *q = (pipe_req_t){.comm = c, .state = SLOT_ACTIVE, .buf = buf, .size = size, .len = size};
  c->posted++;
  return q;
}

static rcollResult_t pipe_isend(void *send_comm, const void *data, size_t size, int tag, void *mhandle,
                                void **request) {
  (void)tag, (void)mhandle;
  *request = post(send_comm, (void *)data, size);
  return rcollSuccess;
}

static rcollResult_t pipe_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
                                void **mhandles, void **request) {
  (void)tags, (void)mhandles;
  if (n != 1)
    return rcoll_error(rcollInvalidArgument, "pipe: irecv of %d buffers (max_recvs is 1)", n);
  *request = post(recv_comm, data[0], sizes[0]);
  return rcollSuccess;
}

static rcollResult_t pipe_iflush(void *recv_comm, int n, void **data, const size_t *sizes, void **mhandles,
                                 void **request) {
  (void)recv_comm, (void)n, (void)data, (void)sizes, (void)mhandles;
  *request = (void *)&pipe_token; /* host memory: nothing to flush */
  return rcollSuccess;
}

/* Writes (or reads) what it can of [p, p + len) from *done on; 1 when all
 * of it has moved, 0 when the pipe is full (or empty), -1 on an error. */
static int move(pipe_comm_t *c, void *p, size_t len, size_t *done) {
  while (*done < len) {
    ssize_t k = c->is_send ? write(c->fd, (char *)p + *done, len - *done)
                           : read(c->fd, (char *)p + *done, len - *done);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && errno == EAGAIN)
      return 0;
    if (k <= 0) {
      rcoll_error(rcollRemoteError, "pipe: %s", k == 0 ? "the sending side closed the pipe (peer gone?)"
                                                        : strerror(errno));
      return -1;
    }
    *done += (size_t)k;
  }
  return 1;
}

/* Moves the connection's requests in the order posted, as far as the pipe allows. */
static rcollResult_t progress(pipe_comm_t *c) {
  while (c->moved < c->posted) {
    pipe_req_t *q = &c->q[c->moved % PIPE_QUEUE];
    int m = move(c, &q->len, sizeof q->len, &q->hdr_done);
    if (m == 1 && !c->is_send && q->len > q->size)
      return rcoll_error(rcollRemoteError, "pipe: a message of %llu bytes arrived for a receive of %zu",
                         (unsigned long long)q->len, q->size);
    if (m == 1)
      m = move(c, q->buf, (size_t)q->len, &q->done);
    if (m < 0)
      return rcollRemoteError;
    if (m == 0)
      return rcollSuccess;
    q->state = SLOT_DONE;
    c->moved++;
  }
  return rcollSuccess;
}

static rcollResult_t pipe_test(void *request, int *done, size_t *sizes) {
  *done = 0;
  if (request == &pipe_token) {
    *done = 1;
    return rcollSuccess;
  }
  pipe_req_t *q = request;
  RCOLL_CHECK(progress(q->comm));
  if (q->state == SLOT_DONE) {
    *done = 1;
    if (sizes != NULL)
      sizes[0] = (size_t)q->len;
    q->state = SLOT_FREE;
  }
  return rcollSuccess;
}

/* Sleeps in poll() until a pipe with work pending can move. */
static rcollResult_t pipe_wait(void *const *comms, int n, int64_t timeout_us) {
  struct pollfd fds[64];
  int k = 0;
  for (int i = 0; i < n && k < 64; i++) {
    const pipe_comm_t *c = comms[i];
    if (c != NULL && c->moved < c->posted)
      fds[k++] = (struct pollfd){.fd = c->fd, .events = c->is_send ? POLLOUT : POLLIN};
  }
  int ms = timeout_us <= 0 ? 0 : (int)((timeout_us + 999) / 1000);
  poll(fds, (nfds_t)k, ms);
  return rcollSuccess;
}

static rcollResult_t pipe_close(void *comm) {
  pipe_comm_t *c = comm;
  if (c != NULL) {
    close(c->fd);
    free(c);
  }
  return rcollSuccess;
}

/* Closes the doorbell, and any data pipe that rang but was never accepted. */
static rcollResult_t pipe_close_listen(void *listen_comm) {
  pipe_listen_t *l = listen_comm;
  pipe_bell_t bell;
  while (read(l->bell[0], &bell, sizeof bell) == (ssize_t)sizeof bell)
    close((int)bell.fd);
  close(l->bell[0]), close(l->bell[1]);
  free(l);
  return rcollSuccess;
}

const rcoll_transport_desc_t lab_pipe_desc = {
    .name = "pipe",
    .auto_priority = RCOLL_NET_BY_NAME_ONLY, /* a toy: only when RCOLL_NET=pipe */
    .link = {.alpha_us = 5.0, .gbps = 2.0, .msg_us = 0.0, .chunk_cap = 0},
};

const rcoll_transport_ops_t lab_pipe_ops = {
    .size = sizeof(rcoll_transport_ops_t),
    .version = RCOLL_NET_OPS_VERSION,
    .name = "pipe",
    .desc = &lab_pipe_desc,
    .init = pipe_init,
    .finalize = pipe_finalize,
    .devices = pipe_devices,
    .get_properties = pipe_get_properties,
    .listen = pipe_listen,
    .connect = pipe_connect,
    .accept = pipe_accept,
    .reg_mr = pipe_reg_mr,
    .dereg_mr = pipe_dereg_mr,
    .isend = pipe_isend,
    .irecv = pipe_irecv,
    .iflush = pipe_iflush,
    .test = pipe_test,
    .wait = pipe_wait,
    .close_send = pipe_close,
    .close_recv = pipe_close,
    .close_listen = pipe_close_listen,
};
