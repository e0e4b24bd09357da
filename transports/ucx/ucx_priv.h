/* Private types of the UCX transport, shared by its files only.
 *
 * One UCP context and one worker per rcoll transport context (that is, per
 * communicator). Data moves as UCP tagged messages; the tag carries the
 * connection id (chosen by the receiving worker, unique within it), a
 * per-connection sequence number and the low bits of the sender's rcoll tag
 * (see UCX_TAG_BITS). Receives match on the first two only, so a receive
 * matches exactly the message of its position on its connection and never
 * one of another connection (tag matching in UCP is worker-wide, not per
 * endpoint); a grouped receive reads the third to pick the buffer.
 *
 * How peers find each other. The listen handle holds a TCP address of a
 * small rendezvous socket of ours, not the UCX worker address, and not a UCP
 * listener's address. Measured with UCX 1.13 on the build machines:
 * - The worker address is 108 bytes with UCX_TLS=tcp,self or posix,cma,self,
 *   145 with sm,self and 215 with UCX's default transports, and it grows with
 *   each network interface: it does not fit the 128-byte handle reliably.
 * - A UCP listener (client/server connection through a connection manager)
 *   needs endpoints with peer failure handling, which the shared-memory
 *   transports lack: with UCX_TLS=posix,cma,self the connection fails with
 *   "Destination is unreachable".
 * The rendezvous socket carries the communicator's secret one way and the
 * receiving worker's address (any length) and the connection id back; the
 * sender then creates its endpoint from that address. The socket stays open
 * for the life of the connection as a liveness line: when either process
 * dies, the kernel closes it and the other side learns at once, whatever
 * transport UCX picked. (A process that forks without exec keeps the line
 * open in its child; the rcoll timeout still bounds every wait then.)
 *
 * Endpoints use UCP_ERR_HANDLING_MODE_PEER with an error handler, so that a
 * peer failure fails the endpoint's requests and UCX cleans up after it,
 * except endpoints to peers on the same host when UCX may use shared memory:
 * its shared-memory transports (posix, sysv, cma) support no peer failure
 * handling, and asking for it would push local traffic onto TCP loopback.
 * Those use UCP_ERR_HANDLING_MODE_NONE, and the liveness line detects a dead
 * peer. (UCX 1.13 itself may then abort a survivor that still processes a
 * rendezvous from the dead peer: a limitation of that mode, seen in about 1
 * of 40 rank-death runs with UCX_TLS=posix,cma,self.) */
#ifndef RCOLL_TRANSPORT_UCX_PRIV_H
#define RCOLL_TRANSPORT_UCX_PRIV_H

#if RCOLL_HAVE_UCX

#include <stddef.h>
#include <stdint.h>
#include <ucp/api/ucp.h>

#include "net.h"
#include "sockutil.h"

/* "rcollux2": versions the handshake and the tag layout below, so that a
 * peer built with the old layout (rcollux1) is refused, not mismatched. */
#define UCX_MAGIC 0x3278756c6c6f6372ull
#define UCX_NREQS 32                     /* request slots per connection */
#define UCX_ADDR_STR 64
#define UCX_WORKER_ADDR_MAX (64 * 1024)  /* sanity bound on a peer's worker address */
/* The 64-bit UCX tag of a message, from the top:
 *   1 bit   UCX_TAG_CTRL: set only on the connection's greeting
 *   23 bits connection id (1 .. UCX_CONN_ID_MAX)
 *   24 bits sequence number on the connection (wraps; UCX_SEQ_BITS)
 *   16 bits the low bits of the sender's rcoll tag (UCX_TAG_BITS)
 * 2^24 messages would have to wait unmatched on one connection for two to
 * share a tag. 16 tag bits tell apart the tags NCCL groups (the ranks of
 * one node's GPUs); a group whose distinct tags collide there is refused. */
#define UCX_TAG_CTRL (1ull << 63)
#define UCX_TAG_BITS 16
#define UCX_SEQ_BITS 24
#define UCX_CONN_SHIFT (UCX_TAG_BITS + UCX_SEQ_BITS)
#define UCX_CONN_ID_MAX 0x7fffffu
#define UCX_TAG_LOW_MASK ((1ull << UCX_TAG_BITS) - 1)
#define UCX_SEQ_MASK ((1u << UCX_SEQ_BITS) - 1)
/* Data receives ignore the rcoll-tag bits and match everything else. */
#define UCX_TAG_MATCH_MASK (~(ucp_tag_t)UCX_TAG_LOW_MASK)
/* After a peer is known to be gone, a pending request still waits this long
 * (never longer than RCOLL_TIMEOUT): the liveness line may report the close
 * before the last bytes the peer sent (data, or the acknowledgement that
 * completes a rendezvous send) have been processed. */
#define UCX_LOST_GRACE_MS 1000
#define UCX_PROBE_US 10000               /* how often test looks at the liveness line */
/* How long closing waits for UCX to finish what is queued: briefly after a
 * clean close (every request had completed: what remains are UCX's own
 * acknowledgements, which need the peer to progress, and it may be driven by
 * this very thread), longer after a close with transfers in flight or a
 * failure, see ucx_worker_quiesce. */
#define UCX_CLOSE_CLEAN_MS 100
#define UCX_CLOSE_UNCLEAN_MS 1000
/* How long a clean close waits for the worker's flush before it closes the
 * liveness line (ucx_close_comm): what this rank owes its peers must have
 * left before they see the line close. Shorter than UCX_LOST_GRACE_MS, so
 * that what left in time is still waited for on the other side. */
#define UCX_CLOSE_FLUSH_MS 500

/* What the listen handle carries to the connecting peer. */
typedef struct ucx_handle {
  uint64_t magic;
  uint64_t secret;
  rcoll_sockaddr_t addr; /* the rendezvous socket */
} ucx_handle_t;

/* First bytes from the connecting side (host byte order: peers of one job
 * share an architecture; the magic catches anything else). */
typedef struct ucx_hello {
  uint64_t magic;
  uint64_t secret;
  uint64_t host_id;
} ucx_hello_t;

/* The accepting side's answer, followed by addr_len bytes of worker address. */
typedef struct ucx_reply {
  uint64_t magic;
  uint64_t host_id;
  uint32_t conn_id;
  uint32_t addr_len;
} ucx_reply_t;

/* Per-communicator context. */
typedef struct ucx_ctx {
  ucp_context_h ucp;
  ucp_worker_h worker;
  int efd;                 /* worker's event fd for wait, or -1 */
  ucp_address_t *waddr;    /* this worker's address, sent to connecting peers */
  size_t waddr_len;
  uint64_t mem_types;      /* UCS_MEMORY_TYPE_* bits UCX supports here */
  int has_shm;             /* UCX may use shared memory for local peers */
  rcoll_sockaddr_t addr;   /* interface address for rendezvous sockets (port 0) */
  char ifname[RCOLL_IFNAME_MAX];
  uint64_t secret, host_id;
  int rank;
  int64_t timeout_ms;
  uint32_t next_conn_id;
  /* Test hook: use peer failure handling even for peers on this host. */
  int force_peer_mode;
  struct ucx_pconn *connects; /* connects in progress */
  struct ucx_conn *zombies;   /* closed comms whose endpoint is still open */
  int unclean;                /* a comm was closed with transfers in flight, or failed */
  int flush_stuck;            /* a close's flush ran out of time: later closes skip it */
  void **orphans;             /* UCX requests of closed or failed comms, not finished */
  int norphans, orphans_cap;
} ucx_ctx_t;

/* UCX_REQ_GROUP: one buffer of a grouped receive (ucx_group.c); the slot of
 * its first buffer is the caller's request. */
enum ucx_req_kind { UCX_REQ_FREE = 0, UCX_REQ_SEND, UCX_REQ_RECV, UCX_REQ_GROUP };

struct ucx_conn;

/* A grouped receive (irecv of n > 1 buffers) takes n request slots, one per
 * buffer, and consumes the next n sequence numbers of its connection. Its
 * messages are not posted as receives: test probes for each one, reads the
 * sender's tag and only then receives it into the buffer of that tag. Lives
 * in ucx_conn_t.groups at the index of the first buffer's slot. */
typedef struct ucx_group {
  int n;
  uint32_t seq0;   /* sequence number of its first message */
  unsigned seen;   /* bit k: message seq0 + k has been taken from UCX */
  unsigned filled; /* bit i: buffer i has a message */
  int slots[RCOLL_NET_MAX_RECVS];  /* request slot of buffer i */
  void *bufs[RCOLL_NET_MAX_RECVS];
  size_t caps[RCOLL_NET_MAX_RECVS];
  int tags[RCOLL_NET_MAX_RECVS];
  void *mhs[RCOLL_NET_MAX_RECVS];
  size_t got[RCOLL_NET_MAX_RECVS]; /* bytes of the message buffer i took */
  int64_t fail_ms; /* when the connection was found failed (0: not yet) */
  int failed;      /* reported as failed: test repeats the error */
} ucx_group_t;

/* One isend or irecv. ucp_req is UCX's request, NULL once it finished (or
 * when it finished at once); status then holds the outcome. */
typedef struct ucx_req {
  struct ucx_conn *conn;
  int kind;
  int done;
  ucs_status_t status;
  void *ucp_req;
  size_t posted;
  ucp_tag_recv_info_t info;
} ucx_req_t;

/* One direction of a connection: a send comm (with its endpoint) or a recv
 * comm (receiving on the context's worker). */
typedef struct ucx_conn {
  ucx_ctx_t *ctx;
  int is_send;
  ucp_ep_h ep;          /* send comm only */
  int peer_mode;        /* ep created with UCP_ERR_HANDLING_MODE_PEER */
  int fd;               /* the liveness line (rendezvous socket) */
  void *greet_req;      /* UCX request of the greeting (ucx_connect.c), until close */
  uint32_t conn_id;
  uint32_t seq;         /* sequence number of the next message */
  int64_t timeout_ms;
  char peer[UCX_ADDR_STR];

  ucx_req_t reqs[UCX_NREQS];
  int free_idx[UCX_NREQS];
  int nfree;
  ucx_group_t groups[UCX_NREQS]; /* by the slot index of a group's first buffer */

  /* Failure state: lost_ms is when the peer was found gone (0: not yet);
   * err is set once operations must fail, with errmsg saying why. */
  int64_t lost_ms;
  int64_t next_probe_us;
  ucs_status_t ep_status; /* from the endpoint's error handler */
  rcollResult_t err;
  char errmsg[256];
  struct ucx_conn *next_zombie;
} ucx_conn_t;

/* ucx.c */
const char *ucx_addr_str(const rcoll_sockaddr_t *a, char buf[UCX_ADDR_STR]);

/* ucx_accept.c: listen and accept. */
rcollResult_t ucx_listen(void *ctx, int dev, void *handle, void **listen_comm);
rcollResult_t ucx_accept(void *listen_comm, void **recv_comm);
/* The connecting side's hello as read (len bytes): NULL and *out filled when
 * it carries the magic and `secret`, else why the socket is dropped. */
const char *ucx_hello_parse(const void *wire, size_t len, uint64_t secret, ucx_hello_t *out);
rcollResult_t ucx_close_listen(void *listen_comm);

/* ucx_connect.c: connect. */
rcollResult_t ucx_connect(void *ctx, int dev, const void *handle, void **send_comm);
/* The listener's answer header as read: NULL when its magic, worker address
 * length and connection id are in range, else what is wrong. */
const char *ucx_reply_parse(const void *wire, size_t len, ucx_reply_t *out);
/* The listen handle a peer sent: its magic and an address with a port. */
rcollResult_t ucx_handle_decode(const void *handle, ucx_handle_t *out);
void ucx_connects_free(ucx_ctx_t *ctx);

/* ucx_conn.c: comms, endpoints and failure detection. */
rcollResult_t ucx_conn_new(ucx_ctx_t *ctx, int is_send, int fd, uint32_t conn_id, const char *peer,
                           ucx_conn_t **out);
rcollResult_t ucx_conn_connect_ep(ucx_conn_t *c, const void *waddr, int local);
void ucx_conn_fail(ucx_conn_t *c, rcollResult_t r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
rcollResult_t ucx_conn_error(const ucx_conn_t *c);
int ucx_conn_probe(ucx_conn_t *c);
/* The transports of the endpoint's lanes, e.g. "posix/memory.0,cma/memory.0". */
void ucx_lanes_summary(ucp_ep_h ep, char *out, size_t outlen);
rcollResult_t ucx_close_comm(void *comm);
void ucx_zombies_free(ucx_ctx_t *ctx); /* after the worker is destroyed */
/* Progresses w until req completes or deadline_ms passes; returns its status. */
ucs_status_t ucx_progress_until(ucp_worker_h w, void *req, int64_t deadline_ms);
/* Flushes the worker (every endpoint, UCX's own included) until done or the
 * deadline: UCS_OK, UCS_INPROGRESS on a timeout, or UCX's error. */
ucs_status_t ucx_worker_flush(ucp_worker_h w, int64_t deadline_ms);
/* A UCX request nobody will test again: kept until it finishes, because the
 * worker must not be destroyed under it (ucx.c). */
void ucx_orphan(ucx_ctx_t *ctx, void *req);

/* The UCX tag of message seq on connection conn_id carrying rcoll tag bits. */
static inline ucp_tag_t ucx_tag_make(uint32_t conn_id, uint32_t seq, int tag) {
  return ((ucp_tag_t)conn_id << UCX_CONN_SHIFT) | ((ucp_tag_t)(seq & UCX_SEQ_MASK) << UCX_TAG_BITS) |
         ((ucp_tag_t)(unsigned)tag & UCX_TAG_LOW_MASK);
}
static inline ucp_tag_t ucx_tag_greeting(uint32_t conn_id) {
  return UCX_TAG_CTRL | ((ucp_tag_t)conn_id << UCX_CONN_SHIFT);
}

/* ucx_io.c: requests. */
ucx_req_t *ucx_req_alloc(ucx_conn_t *c, int kind, size_t posted);
void ucx_req_free(ucx_conn_t *c, ucx_req_t *r);
void ucx_param_memh(ucp_request_param_t *p, const ucx_conn_t *c, const void *buf, size_t size, void *mh);
void ucx_req_started(ucx_req_t *r, ucs_status_ptr_t p);
void ucx_req_poll(ucx_req_t *r);    /* progresses the worker, then collects */
void ucx_req_collect(ucx_req_t *r); /* the outcome, if UCX has finished it */
rcollResult_t ucx_req_failed(ucx_conn_t *c, ucx_req_t *r);
int ucx_req_peer_failed(ucx_conn_t *c, size_t posted);
void ucx_req_abandon(ucx_conn_t *c, ucx_req_t *r);
rcollResult_t ucx_isend(void *comm, const void *data, size_t size, int tag, void *mh, void **req);
rcollResult_t ucx_irecv(void *comm, int n, void **data, const size_t *sizes, const int *tags, void **mh,
                        void **req);
rcollResult_t ucx_iflush(void *comm, int n, void **data, const size_t *sizes, void **mh, void **req);
rcollResult_t ucx_test(void *request, int *done, size_t *sizes);
int ucx_reqs_release(ucx_conn_t *c); /* returns how many were still in flight */

/* ucx_group.c: grouped receives (n > 1 buffers). */
rcollResult_t ucx_irecv_group(ucx_conn_t *c, int n, void **data, const size_t *sizes, const int *tags, void **mh,
                              void **request);
rcollResult_t ucx_test_group(ucx_req_t *first, int *done, size_t *sizes);

/* ucx_mem.c: registration. */
typedef struct ucx_mr {
  ucx_ctx_t *ctx;
  ucp_mem_h memh; /* NULL for an empty region */
  const char *base;
  size_t len;
} ucx_mr_t;
rcollResult_t ucx_reg_mr(void *comm, void *data, size_t size, int mem_type, void **mhandle);
rcollResult_t ucx_dereg_mr(void *comm, void *mhandle);

/* ucx_wait.c */
rcollResult_t ucx_wait(void *const *comms, int n, int64_t timeout_us);

#endif /* RCOLL_HAVE_UCX */
#endif
