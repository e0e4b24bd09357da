/* A toy transport over pipes: lab exercise 06 (README.md next to this
 * file). Fill in the TODOs: connect, accept, the data path (move and
 * progress), test, isend and irecv. Everything else is given and builds as it
 * is. Grade it with `make lab-check EX=6`.
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
  (void)ctx, (void)dev, (void)handle, (void)comm_new;
  *send_comm = NULL;
  /* TODO: read the handle (check its magic and that its pid is ours: say
   * why when not), make the data pipe (pipe2, O_NONBLOCK | O_CLOEXEC), ring
   * the doorbell with {our secret, the read end}; if the doorbell is full
   * (EAGAIN) close the pipe and return success with *send_comm NULL (the
   * core calls again). The send comm is comm_new(write end, 1). */
  return rcoll_error(rcollInternalError, "pipe: connect is not written yet (TODO)");
}

static rcollResult_t pipe_accept(void *listen_comm, void **recv_comm) {
  (void)listen_comm;
  *recv_comm = NULL;
  /* TODO: read one record from the doorbell without blocking (EAGAIN:
   * nobody rang, return success with *recv_comm NULL); drop (close) a pipe
   * whose record carries another secret; otherwise the recv comm is
   * comm_new(read end, 0). */
  return rcoll_error(rcollInternalError, "pipe: accept is not written yet (TODO)");
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
  (void)send_comm, (void)data, (void)size, (void)tag, (void)mhandle, (void)post;
  /* TODO: post the message (post(): NULL when the ring is full is fine). */
  *request = NULL;
  return rcoll_error(rcollInternalError, "pipe: isend is not written yet (TODO)");
}

static rcollResult_t pipe_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
                                void **mhandles, void **request) {
  (void)recv_comm, (void)n, (void)data, (void)sizes, (void)tags, (void)mhandles;
  /* TODO: one buffer only (max_recvs is 1): refuse n != 1 saying so, and
   * post data[0] with room sizes[0]. */
  *request = NULL;
  return rcoll_error(rcollInternalError, "pipe: irecv is not written yet (TODO)");
}

static rcollResult_t pipe_iflush(void *recv_comm, int n, void **data, const size_t *sizes, void **mhandles,
                                 void **request) {
  (void)recv_comm, (void)n, (void)data, (void)sizes, (void)mhandles;
  *request = (void *)&pipe_token; /* host memory: nothing to flush */
  return rcollSuccess;
}

/* Moves the connection's requests in the order posted, as far as the pipe
 * allows: for each, the 8-byte length (q->len, q->hdr_done), then the bytes
 * (q->buf, q->done); a receive whose message is longer than its room is an
 * error saying both sizes; read() returning 0 means the sender closed the
 * pipe. A finished request becomes SLOT_DONE and c->moved counts it. */
static rcollResult_t progress(pipe_comm_t *c) {
  (void)c;
  /* TODO: write() or read() without blocking (EAGAIN: stop for now). */
  return rcollSuccess;
}

static rcollResult_t pipe_test(void *request, int *done, size_t *sizes) {
  *done = 0;
  if (request == &pipe_token) { /* iflush's: done at once */
    *done = 1;
    return rcollSuccess;
  }
  (void)sizes, (void)progress;
  /* TODO: progress the request's connection; when the request is
   * SLOT_DONE, report *done = 1 and its size (sizes may be NULL), and free
   * its slot. */
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
