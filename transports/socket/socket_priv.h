/* Private types of the socket transport, shared by its files only.
 *
 * A connection is one control socket and nthreads x nsocks data sockets. Every
 * message starts with a header on the control socket; payloads up to the
 * inline threshold follow it there, larger ones are cut into contiguous pieces
 * that travel on the data sockets, each moved by the helper thread owning that
 * socket. Both ends cut a message the same way from its size and rotate the
 * first data socket identically, so every socket carries its pieces in message
 * order and no piece needs a header of its own. Between two ranks that send
 * both ways, small messages of the higher rank travel back over the control
 * socket of the lower rank's connection (socket_lane.c), so that each
 * side's acknowledgements ride on its own messages. */
#ifndef RCOLL_TRANSPORT_SOCKET_PRIV_H
#define RCOLL_TRANSPORT_SOCKET_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "net.h"
#include "sockutil.h"

#define SOCKET_MAGIC 0x32746b636f736372ull /* "rcsockt2": also versions the wire format (2: the lane) */
#define SOCKET_NREQS 32                    /* request slots per connection */
#define SOCKET_MAX_THREADS 16
#define SOCKET_MAX_DATA 64                 /* data sockets per connection */
#define SOCKET_MAX_SOCKS (SOCKET_MAX_DATA + 1)
#define SOCKET_MIN_PIECE (64 * 1024)       /* smaller pieces cost more in wakeups than they gain */
#define SOCKET_PIECE_ALIGN 4096
#define SOCKET_STAGE_BYTES 16384           /* control-socket read-ahead buffer */
#define SOCKET_BUF_BYTES (4 * 1024 * 1024) /* the listener's buffers: accepted sockets only receive */
#define SOCKET_CTRL_SNDBUF_MIN 65536       /* the control socket's SO_SNDBUF, at least */
#define SOCKET_SNDBUF_MAX (64 << 20)       /* RCOLL_SOCKET_SNDBUF's range: 0..this */
#define SOCKET_POLL_TICK_MS 100            /* how often blocked helpers look for shutdown */
#define SOCKET_ADDR_STR 64
#define SOCKET_CC_MAX 16 /* TCP_CA_NAME_MAX: a congestion control's name and its NUL */

/* First bytes on every socket of a connection (host byte order: peers of one
 * job share an architecture; the magic catches anything else). */
typedef struct socket_hello {
  uint64_t magic;
  uint64_t secret;
  uint64_t conn_id;    /* random, groups the sockets of one connection */
  uint64_t inline_max; /* the sender's threshold: both ends must cut alike */
  uint16_t index;      /* 0 is the control socket */
  uint16_t nsocks_total;
  uint16_t nthreads;
  uint16_t nsocks_per;
  uint32_t lane_max; /* the sender's RCOLL_SOCKET_LANE: the receiver predicts its streams with it */
  uint32_t pad;
} socket_hello_t;

/* Precedes every message on the control socket. */
typedef struct socket_msg_hdr {
  uint64_t size;
  int32_t tag;
  uint32_t seq; /* message number modulo 2^32: catches a desynchronized stream */
} socket_msg_hdr_t;

/* What the listen handle carries to the connecting peer. */
typedef struct socket_handle {
  uint64_t magic;
  uint64_t secret;
  rcoll_sockaddr_t addr;
} socket_handle_t;

/* Per-communicator context: the settings snapshot and connects in flight. */
typedef struct socket_ctx {
  rcoll_sockaddr_t addr; /* interface address to listen on (port 0) */
  char ifname[RCOLL_IFNAME_MAX];
  uint64_t secret;
  int rank;
  int nthreads, nsocks_per;
  size_t inline_max;
  int sndbuf; /* RCOLL_SOCKET_SNDBUF; 0: the kernel's autotuning */
  size_t lane_max; /* RCOLL_SOCKET_LANE; 0: no lane */
  int64_t timeout_ms;
  char congestion[SOCKET_CC_MAX]; /* for the sockets it connects; "" keeps the system's */
  pthread_mutex_t lock;           /* guards the pending-connect list */
  struct socket_pconn *connects;
} socket_ctx_t;

enum socket_req_kind { SOCKET_REQ_FREE = 0, SOCKET_REQ_SEND, SOCKET_REQ_RECV };

struct socket_conn;
struct socket_req;

/* A grouped receive (irecv of n > 1 buffers) takes n request slots, one per
 * message it consumes, consecutive in the ring; the first is the caller's
 * request. Which buffer a message fills is known only when its header
 * arrives and names its tag. Lives in socket_conn_t.rgroups at the index of
 * the first slot, so it needs no allocation. */
typedef struct socket_rgroup {
  int n;
  unsigned filled; /* bit i: buffer i has taken its message */
  char *bufs[RCOLL_NET_MAX_RECVS];
  size_t caps[RCOLL_NET_MAX_RECVS];
  int tags[RCOLL_NET_MAX_RECVS];
  struct socket_req *members[RCOLL_NET_MAX_RECVS]; /* in wire order */
} socket_rgroup_t;

/* One isend or irecv, or one message of a grouped receive. ctrl_* fields
 * belong to the calling thread; helpers touch only pieces_left and failed. */
typedef struct socket_req {
  struct socket_conn *conn;
  int kind;
  int src;                 /* the stream of its control part: SOCKET_CTRL or SOCKET_LANE */
  int ctrl_done;           /* header (and inline payload) moved */
  char *buf;
  size_t posted;           /* send size, or receive capacity */
  size_t size;             /* bytes of the message (receive: known after the header) */
  size_t ctrl_off;         /* bytes of header + inline payload moved so far */
  socket_msg_hdr_t hdr;
  socket_rgroup_t *group;   /* the grouped receive this message belongs to, or NULL */
  int slot;                /* grouped: the caller's buffer index it landed in */
  _Atomic int pieces_left; /* pieces handed to helpers and not finished */
  _Atomic int failed;      /* a helper abandoned a piece */
} socket_req_t;

/* A piece of a message for one data socket. */
typedef struct socket_task {
  socket_req_t *req;
  char *buf;
  size_t len;
} socket_task_t;

/* A data socket and its FIFO of pieces. The FIFO never holds more than one
 * piece per live request, so SOCKET_NREQS entries always suffice. */
typedef struct socket_dsock {
  int fd;
  socket_task_t q[SOCKET_NREQS];
  unsigned head, tail; /* under the owning helper's lock */
  size_t done;         /* bytes of the head piece moved (helper only) */
  int64_t last_ms;     /* last progress on the head piece (helper only) */
} socket_dsock_t;

typedef struct socket_helper {
  struct socket_conn *conn;
  pthread_t thread;
  int started;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int idle;      /* waiting on cond: a producer must signal */
  int queued;    /* pieces in all FIFOs of this helper */
  _Atomic int stop;
  int nsocks;
  socket_dsock_t *socks[SOCKET_MAX_DATA];
} socket_helper_t;

/* The two byte streams a connection's control parts travel on: its own
 * control socket, and the lane (socket_lane.c), another descriptor of the
 * control socket of the connection the other way. */
enum { SOCKET_CTRL = 0, SOCKET_LANE = 1 };

/* Receive side of a stream: bytes read ahead of the message being taken. */
typedef struct socket_stream {
  size_t beg, end;
  int64_t acks_delayed_us; /* when socket_delay_acks last set pingpong mode */
  char stage[SOCKET_STAGE_BYTES];
} socket_stream_t;

/* One direction of a connection: a send comm or a recv comm. */
typedef struct socket_conn {
  int is_send;
  int ctrl_fd;
  int ndata, nthreads;
  size_t inline_max;
  int64_t timeout_ms;
  char peer[SOCKET_ADDR_STR];
  socket_dsock_t *data;    /* ndata entries */
  socket_helper_t *helpers;
  unsigned next_sock;      /* first data socket of the next large message */
  uint32_t seq;            /* header number expected / to send next */

  socket_req_t reqs[SOCKET_NREQS];
  int free_idx[SOCKET_NREQS];
  int nfree;
  /* Requests whose control part is pending, in posting order. */
  socket_req_t *ring[SOCKET_NREQS];
  unsigned ring_head, ring_tail;
  socket_rgroup_t rgroups[SOCKET_NREQS]; /* by index of a group's first slot */

  /* The lane (socket_lane.c): -1 until socket_pair. A send comm puts
   * messages up to lane_max bytes on it; a recv comm takes each message from
   * whichever stream holds the next sequence number (socket_hdr_take). */
  int lane_fd;
  size_t lane_max;     /* the sender's, at most inline_max */
  int prev_small;      /* the last message sent or taken was at most lane_max bytes */
  int peer_lane;       /* recv comm: a message came on the lane (the sender has one) */
  int after_small;     /* recv comm: the stream of the last message that followed a small one */
  int lane_closed;     /* recv comm: the lane has ended (the peer closed its comms) */
  int ctrl_closed;     /* recv comm: the control socket ended while the lane was open */
  unsigned lane_polls;

  /* Receive side: bytes read ahead, by stream. */
  socket_stream_t in[2];

  /* Wake-ups for rcoll's engine (socket_wait.c): helpers count finished
   * requests and poke event_fd when the calling thread sleeps in wait. */
  int event_fd;
  _Atomic unsigned completions;
  unsigned completions_seen; /* calling thread only */
  _Atomic int waiting;

  /* First failure wins; later operations fail fast with the same text. */
  _Atomic int err;
  atomic_flag err_claimed;
  char errmsg[256];
} socket_conn_t;

/* socket.c: small shared helpers. */
const char *socket_addr_str(const rcoll_sockaddr_t *a, char buf[SOCKET_ADDR_STR]);
void socket_log_conn(const char *verb, int fd, const char *peer, const socket_hello_t *h);
/* TCP_CONGESTION = name on fd ("" leaves it): 0 or the errno. */
int socket_set_congestion(int fd, const char *name);
void socket_set_sndbuf(int fd, int bytes);

/* socket_accept.c: listen and accept. */
rcollResult_t socket_listen(void *ctx, int dev, void *handle, void **listen_comm);
rcollResult_t socket_accept(void *listen_comm, void **recv_comm);
rcollResult_t socket_close_listen(void *listen_comm);
/* A socket's hello as read (len bytes): NULL and *out filled when it is
 * well formed and carries `secret`, else why the socket is dropped. */
const char *socket_hello_parse(const void *wire, size_t len, uint64_t secret, socket_hello_t *out);

/* socket_connect.c: connect. */
rcollResult_t socket_connect(void *ctx, int dev, const void *handle, void **send_comm);
/* The listen handle a peer sent (RCOLL_NET_HANDLE_BYTES): its magic and an
 * address with a port, or an error saying what is wrong. */
rcollResult_t socket_handle_decode(const void *handle, socket_handle_t *out);
void socket_connects_free(socket_ctx_t *ctx);

/* socket_io.c: the comm and its requests. */
rcollResult_t socket_conn_create(int is_send, const int *fds, const socket_hello_t *hello,
                                 int64_t timeout_ms, const char *peer, socket_conn_t **out);
void socket_conn_destroy(socket_conn_t *c);
void socket_conn_fail(socket_conn_t *c, rcollResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
rcollResult_t socket_isend(void *comm, const void *data, size_t size, int tag, void *mh, void **req);
rcollResult_t socket_irecv(void *comm, int n, void **data, const size_t *sizes, const int *tags,
                           void **mh, void **req);
rcollResult_t socket_iflush(void *comm, int n, void **data, const size_t *sizes, void **mh,
                            void **req);
rcollResult_t socket_test(void *request, int *done, size_t *sizes);
rcollResult_t socket_close_comm(void *comm);

/* socket_lane.c: the lane between a pair's two connections (net.h, pair). */
rcollResult_t socket_pair(void *ctx, void *send_comm, void *recv_comm, int lower);
#define SOCKET_LANE_EVERY 8
#define SOCKET_LANE_CHECK 64
/* The descriptor a stream of c is read from or written to. */
static inline int socket_stream_fd(const struct socket_conn *c, int src) {
  return src == SOCKET_LANE ? c->lane_fd : c->ctrl_fd;
}

/* socket_wait.c: blocking until a connection may progress. */
rcollResult_t socket_wait(void *const *comms, int n, int64_t timeout_us);
void socket_wake(socket_conn_t *c);

/* socket_helper.c: helper threads moving pieces on data sockets. */
rcollResult_t socket_helpers_start(socket_conn_t *c);
void socket_helpers_stop(socket_conn_t *c);
void socket_helper_push(socket_conn_t *c, int sock, socket_req_t *req, char *buf, size_t len);

#endif
