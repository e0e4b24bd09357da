/* Private types of the verbs transport, shared by its files only.
 *
 * A connection (one direction, send or receive) is nqps RC queue pairs, one
 * completion queue with a completion channel, a registered block of slots,
 * and the TCP socket its queue pairs were set up over (kept open: its
 * closing is the fastest sign that the peer went away).
 *
 * Two protocols, chosen by the sender from the size it sends:
 * - eager (<= IB_EAGER_BYTES, when the message's credit has not come yet):
 *   a SEND on QP 0 of a header (message number, size) and the payload, into
 *   one of the landing buffers the receiver keeps posted. It needs nothing
 *   from the receiver, so small messages (the core's connection hello among
 *   them) complete even before the peer looks. At most IB_NEAGER may wait
 *   unconsumed; the receiver hands those eager credits back in its credit
 *   messages. A small message whose credit is there goes as rendezvous, so a
 *   sender out of eager credits never waits on a receive already posted.
 * - rendezvous (larger): irecv sends a *credit* (address, rkey and size of
 *   the buffer, the message number) on QP 0; the sender waits for the credit
 *   of its message and RDMA-writes with immediate straight into that buffer,
 *   so it can never overrun the receiver. Every write carries an immediate
 *   (message number, a LAST flag on the final write of each QP), which
 *   consumes a receive pre-posted on that QP and tells the receiver the data
 *   landed and how much (the completion's byte count). Receives posted larger
 *   than IB_SPLIT_MIN are spread over every QP; both sides derive that from
 *   the posted size the credit carries. A receive posts a credit unless its
 *   message already arrived eagerly; a sender ignores the credits of the
 *   messages it sent eagerly.
 * Grouped receives (irecv of n > 1 tagged buffers, NCCL's multi-receive)
 * take n request slots, one per message (n consecutive message numbers),
 * and post one credit that carries all n buffers with their tags. Which
 * buffer a message fills is decided without a round trip, so that both
 * sides agree whatever order things arrive in: a rendezvous message takes
 * the first buffer of its tag that no earlier rendezvous message of the
 * group took (the sender decides, and names the buffer in the immediate);
 * an eager message (its header carries its tag) takes the last unfilled
 * buffer of its tag (the receiver decides). The two ends meet only when the
 * group has more messages of a tag than buffers, which is the error the
 * receiver reports; a sender whose message's tag matches no buffer left
 * tells the receiver so (a header-only SEND flagged IB_EAGER_BADTAG) in
 * place of the data. See ib_group.c.
 * Eager copies the payload with the CPU on both sides, so it is never used
 * for device memory (GPUDirect RDMA): a send registered as device memory
 * always waits for its credit; a receive comm that may be given device
 * buffers (RCOLL_IB_EAGER, ib_eager_refused) tells its sender at set-up to
 * send nothing eagerly (IB_QPI_NO_EAGER), and a receive into device memory
 * that meets an eager message anyway fails the connection rather than copy.
 * Buffers nobody registered are copied through a bounce slot when small, and
 * registered for the life of the request when large.
 *
 * Flush (GPUDirect RDMA): data the NIC wrote into device memory may not yet
 * be visible to the GPU's own reads. A receive comm that must flush owns a
 * third kind of queue pair, connected to itself through the same port, and
 * iflush posts one RDMA READ of a few bytes of the received buffer on it:
 * the READ's completion orders the earlier PCIe writes before it (ib_flush.c). */
#ifndef RCOLL_TRANSPORT_IB_PRIV_H
#define RCOLL_TRANSPORT_IB_PRIV_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ib.h"
#include "ib_select.h"
#include "net.h"
#include "sockutil.h"

#define IB_MAGIC 0x33626976626c6f63ull  /* "colbvib3": also versions the wire format */
#define IB_READY 0x7964616572626972ull  /* connector's last handshake word */
#define IB_MAX_QPS 16
#define IB_NREQS 32                     /* request slots per connection */
#define IB_BOUNCE_BYTES 16384           /* unregistered messages up to this size are copied */
#define IB_EAGER_BYTES 8192             /* sends up to this size go eagerly */
#define IB_NEAGER 16                    /* eager messages that may wait unconsumed */
/* Credit buffers, in a ring of their own: a credit may still be on the wire
 * after its receive finished eagerly, and the receive must not wait for it
 * (the peer may have closed by then). */
#define IB_NCREDIT (2 * IB_NREQS)
#define IB_HDR 64                       /* room for the eager header before a payload */
#define IB_SLOT_BYTES (IB_HDR + IB_BOUNCE_BYTES)
#define IB_LAND_BYTES (IB_HDR + IB_EAGER_BYTES)
#define IB_SPLIT_MIN 65536              /* larger posted receives spread over every QP */
#define IB_MAX_WR_BYTES (1u << 30)      /* bytes one RDMA write carries (mlx5's max_msg_sz) */
#define IB_WRS_PER_QP 2                 /* writes one QP may carry of one message */
/* Receives QP 0 keeps posted on the receive side: every one has a landing
 * buffer, since an eager SEND takes whichever is next. */
#define IB_NLAND (IB_NEAGER + IB_NREQS * IB_WRS_PER_QP)
#define IB_IMM_SEQ 0xffffffu            /* immediate: message number modulo 2^24 */
#define IB_IMM_LAST (1u << 24)          /*   the last write of this message on this QP */
#define IB_IMM_TOOBIG (1u << 25)        /*   the send did not fit the posted receive */
#define IB_IMM_BUF_SHIFT 26             /*   grouped receive: the buffer written (3 bits) */
#define IB_IMM_BUF(imm) (((imm) >> IB_IMM_BUF_SHIFT) & 7u)
#define IB_STR 128
#define IB_GID_SCAN_MAX 256             /* entries read when ibv_query_gid_table is missing */
#define IB_NFLUSH 32                    /* flushes one receive comm may have outstanding */
#define IB_FLUSH_BYTES 8                /* bytes each flush READ reads back */

enum ib_gdr_kind { IB_GDR_NONE = 0, IB_GDR_PEERMEM, IB_GDR_DMABUF };
/* RCOLL_IB_FLUSH: which receives iflush reads back. */
enum ib_flush_mode { IB_FLUSH_AUTO = 0, IB_FLUSH_OFF, IB_FLUSH_FORCE };
/* RCOLL_IB_EAGER: whether small messages may go eagerly (through host
 * landing buffers). auto: unless the receiving context can register device
 * memory. */
enum ib_eager_mode { IB_EAGER_AUTO = 0, IB_EAGER_OFF, IB_EAGER_ON };

/* The port a context uses, as discovery found it. */
typedef struct ib_port {
  char dev[IB_HCA_NAME_MAX];
  char desc[IB_STR]; /* "rxe0:1" */
  int port;
  int link_layer;    /* IBV_LINK_LAYER_* */
  enum ibv_mtu mtu;
  uint16_t lid;
  int gid_index;     /* -1 on InfiniBand (LIDs) */
  int gid_tbl_len;
  union ibv_gid gid;
  uint32_t max_msg_sz;
  int speed_mbps;
  char pci_path[256];
} ib_port_t;

/* One registration, shared by every request inside its range. */
typedef struct ib_mr {
  uintptr_t beg, end; /* page-aligned */
  struct ibv_mr *mr;
  int access;
  int refs;
  int mem_type;
} ib_mr_t;

typedef struct ib_mr_cache {
  pthread_mutex_t lock;
  ib_mr_t **v; /* sorted by beg */
  int n, cap;
} ib_mr_cache_t;

struct ib_pconn;

/* Per-communicator context: one opened port, shared by its connections
 * (each holds a reference, so a context outlives finalize while they live). */
typedef struct ib_ctx {
  _Atomic int refs;
  struct ibv_context *verbs;
  struct ibv_pd *pd;
  ib_port_t port;
  int nports; /* usable ports discovery found (devices()) */
  int nqps, sl, tc, timeout, retry_cnt;
  int kick_ms;           /* RCOLL_IB_KICK_MS (ib_stall.c); 0: off */
  int64_t timeout_ms;
  uint64_t secret;
  int rank;
  rcoll_sockaddr_t addr; /* TCP address for the queue-pair handshake */
  char ifname[RCOLL_IFNAME_MAX];
  int gdr;               /* enum ib_gdr_kind */
  int flush_mode;        /* enum ib_flush_mode */
  int eager_mode;        /* enum ib_eager_mode */
  char gdr_why[160];
  ib_mr_cache_t cache;
  pthread_mutex_t lock;  /* pending connects and async events */
  struct ib_pconn *connects;
  _Atomic int fatal;     /* a port or device event broke every connection */
  char fatal_msg[256];
  int64_t async_next_us;
} ib_ctx_t;

/* What the listen handle carries to the connecting peer. */
typedef struct ib_handle {
  uint64_t magic;
  uint64_t secret;
  rcoll_sockaddr_t addr;
} ib_handle_t;

/* Each side's queue pairs, sent over the TCP socket during the handshake. */
typedef struct ib_qp_info {
  uint64_t magic;
  uint64_t secret;
  uint32_t nqps;
  uint32_t mtu;
  uint32_t qpn[IB_MAX_QPS];
  uint32_t psn[IB_MAX_QPS];
  uint8_t gid[16];
  uint16_t lid;
  uint8_t link_layer;
  uint8_t flags;     /* IB_QPI_*; the receive side's requests to its sender */
  int32_t gid_index;
  char desc[32]; /* "rxe0:1", for messages on the other side */
} ib_qp_info_t;
#define IB_QPI_NO_EAGER 0x1 /* the receiver may be given device memory: send nothing eagerly */

/* One buffer of a credit: where the sender writes. */
typedef struct ib_credit_buf {
  uint64_t addr;
  uint64_t size;
  uint32_t rkey;
  int32_t tag;  /* grouped receives only */
} ib_credit_buf_t;

/* Receiver -> sender, one per receive not already satisfied eagerly: for
 * messages seq .. seq + n - 1 (n > 1: a grouped receive). Only the n
 * buffers used go on the wire (IB_CREDIT_BYTES). */
typedef struct ib_credit {
  uint32_t seq;
  uint32_t eager_returned; /* landing buffers freed so far (cumulative) */
  uint32_t n;
  uint32_t pad;
  ib_credit_buf_t b[RCOLL_NET_MAX_RECVS];
} ib_credit_t;
#define IB_CREDIT_BYTES(n) (offsetof(ib_credit_t, b) + (size_t)(n) * sizeof(ib_credit_buf_t))

/* Starts an eager message in its landing buffer. */
typedef struct ib_eager_hdr {
  uint32_t seq;
  uint32_t size;
  int32_t tag;    /* picks the buffer in a grouped receive */
  uint32_t flags; /* IB_EAGER_* */
} ib_eager_hdr_t;
/* No payload: the message's tag matched no buffer left in the grouped
 * receive the sender was given (it sends this in place of the data). */
#define IB_EAGER_BADTAG 0x1

enum ib_req_kind { IB_REQ_FREE = 0, IB_REQ_SEND, IB_REQ_RECV, IB_REQ_FLUSH };

/* What a work request is, in the high half of its wr_id; the low half is a
 * request slot (DATA, EAGER), a credit buffer (CREDIT, CREDIT_RECV), a
 * landing buffer of QP 0 (LAND), a QP index (DATA_RECV, KICK) or a flush
 * slot (FLUSH). */
enum ib_wr_kind {
  IB_WR_DATA = 1, IB_WR_EAGER, IB_WR_CREDIT, IB_WR_CREDIT_RECV, IB_WR_LAND, IB_WR_DATA_RECV, IB_WR_FLUSH,
  IB_WR_KICK /* ib_stall.c: an empty RDMA write; the low half is the QP index */
};
#define IB_WR_ID(kind, idx) (((uint64_t)(kind) << 32) | (uint32_t)(idx))
#define IB_WR_KIND(id) ((int)((id) >> 32))
#define IB_WR_IDX(id) ((int)((id)&0xffffffffu))

struct ib_rgroup;

typedef struct ib_req {
  struct ib_comm *comm;
  int kind;
  uint32_t seq;
  char *buf;        /* the caller's buffer */
  size_t size;      /* send size, or posted receive size */
  size_t got;       /* bytes received so far */
  int pending;      /* send: completions to come; receive: LAST writes to come */
  int posted;       /* send: the SEND or the writes are posted */
  int eager;        /* send: small enough to go eagerly; receive: arrived so */
  int bounce;       /* data goes through this slot's bounce buffer */
  int toobig;       /* the message did not fit the posted receive */
  int device;       /* the buffer is device memory: the CPU must never touch it */
  uint64_t addr;    /* where the data moves from/to (bounce or buf) */
  uint32_t lkey, rkey;
  ib_mr_t *mr;      /* registration to release at completion, or NULL */
  int tag;          /* send: the caller's tag */
  int badtag;       /* send: its tag matched no buffer left in the grouped receive */
  ib_credit_buf_t dest; /* send: the peer's buffer its writes went to (for errors) */
  /* Receive, grouped: member `gidx` of `group` is message seq and also owns
   * buffer gidx (buf, size, addr, keys, bounce, mr, device above); `where`
   * is the buffer the message went to (-1 until known). */
  struct ib_rgroup *group;
  int gidx, where;
} ib_req_t;

/* A grouped receive, kept in ib_comm_t.rgroups at its first member's slot. */
typedef struct ib_rgroup {
  int n;
  unsigned filled; /* bit i: buffer i took a message */
  int tags[RCOLL_NET_MAX_RECVS];
  ib_req_t *members[RCOLL_NET_MAX_RECVS];
} ib_rgroup_t;

/* An eager message that arrived before its receive was posted. */
typedef struct ib_unexp {
  uint32_t seq;
  int land;
} ib_unexp_t;

/* A receive comm's flush queue pair (connected to itself), the host buffer
 * its READs land in (IB_FLUSH_BYTES per slot), and the flush requests. */
typedef struct ib_flush {
  struct ibv_qp *qp;
  uint32_t psn;
  char *buf;
  struct ibv_mr *mr;
  ib_req_t reqs[IB_NFLUSH]; /* kind IB_REQ_FLUSH while in use; pending until the READ completes */
} ib_flush_t;

/* One direction of a connection. */
typedef struct ib_comm {
  int is_send;
  ib_ctx_t *ctx;
  int nqps;
  struct ibv_qp *qps[IB_MAX_QPS];
  uint32_t psn[IB_MAX_QPS];
  struct ibv_cq *cq;
  struct ibv_comp_channel *chan;
  int armed;
  int fd;          /* handshake socket, watched for the peer closing */
  int peer_gone;
  int64_t gone_us;
  char peer[IB_STR];
  char *block;     /* credits, bounce slots, landing buffers: ib_block_* below */
  struct ibv_mr *block_mr;
  uint32_t max_wr_bytes;

  ib_req_t reqs[IB_NREQS];
  int free_idx[IB_NREQS];
  int nfree;
  uint32_t seq;    /* number of the next message */
  /* The live request of each message number modulo IB_NREQS: a request is
   * refused while the one IB_NREQS messages earlier still lives, so that
   * message numbers index credits and receives without ambiguity. */
  ib_req_t *by_seq[IB_NREQS];

  /* Send side: credits by message number, eager credits, and the sends
   * waiting for either. */
  ib_credit_t credits[IB_NREQS]; /* a group's credit is copied to each member's slot, seq made its own */
  uint8_t credit_valid[IB_NREQS];
  uint8_t credit_off[IB_NREQS];  /* a grouped credit: the message's index in its group */
  uint8_t group_used[IB_NREQS];  /* at a group's first slot: buffers rendezvous messages took */
  uint32_t eager_sent, eager_ret;
  ib_req_t *unposted[IB_NREQS]; /* in message order */
  int nunposted;
  /* Receive side: eager messages that came before their receive, and
   * landing buffers handed back. */
  ib_unexp_t unexp[IB_NLAND];
  unsigned unexp_head, unexp_tail;
  uint32_t eager_returned;
  uint8_t credit_busy[IB_NCREDIT]; /* credit SENDs not completed */
  ib_rgroup_t rgroups[IB_NREQS];   /* by the slot of a group's first member */
  unsigned credit_next;

  ib_flush_t *flush; /* receive side: made by the first flush that needs it */

  /* Send side: the receiver asked for no eager messages, or this side's
   * RCOLL_IB_EAGER is off. Receive side: this side asked for none. */
  int no_eager;

  /* ib_stall.c: since when nothing completed with messages pending (0:
   * start counting at the next check), the next queue-pair state check,
   * whether this quiet spell was logged; the kicks of this spell (when the
   * last went, how many) and the kicks not completed, by QP. */
  int64_t quiet_since_us, qp_check_us;
  int stall_logged;
  int qp_err_seen; /* a queue pair was in error at the last check */
  int64_t kicked_us;
  int kicks;
  uint8_t kick_busy[IB_MAX_QPS];

  int err; /* rcollResult_t; the first failure wins */
  char errmsg[384];
} ib_comm_t;

/* ib.c: the context. */
void ib_ctx_ref(ib_ctx_t *ctx);
void ib_ctx_unref(ib_ctx_t *ctx);

/* ib_dev.c: discovery and GID choice. */
rcollResult_t ib_dev_open(ib_ctx_t *ctx, const ib_settings_t *s);
void ib_dev_async(ib_ctx_t *ctx);

/* ib_qp.c: queue pairs and the comm's verbs objects. */
rcollResult_t ib_comm_create(ib_ctx_t *ctx, int is_send, int nqps, int fd, const char *peer,
                             ib_comm_t **out);
void ib_comm_destroy(ib_comm_t *c);
void ib_qp_info_fill(const ib_comm_t *c, uint64_t secret, ib_qp_info_t *info);
rcollResult_t ib_qp_connect(ib_comm_t *c, const ib_qp_info_t *remote);
/* One RC queue pair on the comm's completion queue, moved to INIT. */
rcollResult_t ib_qp_create(ib_comm_t *c, int access, uint32_t max_send, uint32_t max_recv, struct ibv_qp **out);
/* Moves qp to RTR and RTS toward queue pair q of `remote`, starting its own
 * packets at sq_psn. */
rcollResult_t ib_qp_ready(ib_comm_t *c, struct ibv_qp *qp, uint32_t sq_psn, const ib_qp_info_t *remote, int q,
                          enum ibv_mtu mtu);
uint32_t ib_random_psn(void);
rcollResult_t ib_post_recvs(ib_comm_t *c);
rcollResult_t ib_post_land(ib_comm_t *c, int land);
rcollResult_t ib_post_credit_recv(ib_comm_t *c, int slot);
/* A signalled SEND of len bytes at buf (inside the comm's registered block)
 * on the first QP; -1 with the connection failed ("posting <what> to ...")
 * when the verbs refuse it. Eager messages, bad-tag notices and credits. */
int ib_post_block_send(ib_comm_t *c, uint64_t wr_id, const void *buf, uint32_t len, const char *what);

/* The registered block: IB_NCREDIT credits, IB_NREQS bounce slots (each with
 * IB_HDR bytes of header room), and on the receive side IB_NLAND landing
 * buffers. */
static inline size_t ib_block_bytes(int is_send) {
  return (size_t)IB_NCREDIT * sizeof(ib_credit_t) + (size_t)IB_NREQS * IB_SLOT_BYTES +
         (is_send ? 0 : (size_t)IB_NLAND * IB_LAND_BYTES);
}
static inline ib_credit_t *ib_block_credit(const ib_comm_t *c, int i) { return (ib_credit_t *)c->block + i; }
static inline char *ib_block_slot(const ib_comm_t *c, int i) {
  return c->block + (size_t)IB_NCREDIT * sizeof(ib_credit_t) + (size_t)i * IB_SLOT_BYTES;
}
static inline char *ib_block_land(const ib_comm_t *c, int i) {
  return c->block + (size_t)IB_NCREDIT * sizeof(ib_credit_t) + (size_t)IB_NREQS * IB_SLOT_BYTES +
         (size_t)i * IB_LAND_BYTES;
}

/* ib_conn.c: listen, connect, accept. */
rcollResult_t ib_listen(void *ctx, int dev, void *handle, void **listen_comm);
rcollResult_t ib_connect(void *ctx, int dev, const void *handle, void **send_comm);
rcollResult_t ib_accept(void *listen_comm, void **recv_comm);
/* The peer's queue-pair information as read (len bytes): NULL and *out
 * filled (desc terminated) when its magic, `secret`, queue-pair count and
 * MTU check out, else what is wrong. Both ends apply it. */
const char *ib_qp_info_parse(const void *wire, size_t len, uint64_t secret, ib_qp_info_t *out);
/* The listen handle a peer sent: its magic and an address with a port. */
rcollResult_t ib_handle_decode(const void *handle, ib_handle_t *out);
rcollResult_t ib_close_listen(void *listen_comm);
void ib_connects_free(ib_ctx_t *ctx);

/* ib_io.c: requests, completions, progress. */
void ib_comm_fail(ib_comm_t *c, rcollResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
rcollResult_t ib_comm_error(ib_comm_t *c);
int ib_progress(ib_comm_t *c);
ib_req_t *ib_req_alloc(ib_comm_t *c, int kind, void *buf, size_t size);
void ib_req_free(ib_comm_t *c, ib_req_t *r);
/* "; receives posted: message N into ADDR+SIZE rkey K, ..." (the receives a
 * peer may be writing into, as their credits said), or "". */
void ib_recvs_str(const ib_comm_t *c, char *out, size_t len);
rcollResult_t ib_req_mem(ib_comm_t *c, ib_req_t *r, ib_mr_t *mh, int access);
static inline int ib_slot(const ib_comm_t *c, const ib_req_t *r) { return (int)(r - c->reqs); }
/* Whether a message for a receive of `posted` bytes spreads over every QP;
 * both sides decide alike from the size the credit carries. */
static inline int ib_split(const ib_comm_t *c, uint64_t posted) { return c->nqps > 1 && posted > IB_SPLIT_MIN; }

/* ib_send.c: the send side. */
rcollResult_t ib_isend(void *comm, const void *data, size_t size, int tag, void *mh, void **req);
rcollResult_t ib_eager_mode_parse(const char *text, int *mode);
/* Whether a receive comm of ctx asks its sender for no eager messages. */
int ib_eager_refused(const ib_ctx_t *ctx);
void ib_send_ready(ib_comm_t *c);
void ib_credit_in(ib_comm_t *c, int slot);

/* ib_recv.c: the receive side. */
rcollResult_t ib_irecv(void *comm, int n, void **data, const size_t *sizes, const int *tags,
                       void **mh, void **req);
void ib_land_in(ib_comm_t *c, int land, const struct ibv_wc *wc);
int ib_post_credit(ib_comm_t *c, ib_req_t *const *bufs, int n, const int *tags);
void ib_eager_deliver(ib_comm_t *c, ib_req_t *r, int land);
void ib_land_free(ib_comm_t *c, int land);
void ib_data_in(ib_comm_t *c, const struct ibv_wc *wc);
rcollResult_t ib_test(void *request, int *done, size_t *sizes);
rcollResult_t ib_close_comm(void *comm);

/* ib_group.c: grouped receives (n > 1). */
rcollResult_t ib_irecv_group(ib_comm_t *c, int n, void **data, const size_t *sizes, const int *tags, void **mh,
                             void **request);
/* The buffer an eager message of group member r goes to (-1: failed). */
int ib_group_eager_buf(ib_comm_t *c, ib_req_t *r, int32_t tag);
/* The first data of group member r names its buffer: 0, or -1 (failed). */
int ib_group_data_buf(ib_comm_t *c, ib_req_t *r, uint32_t imm);
rcollResult_t ib_group_test(ib_req_t *first, int *done, size_t *sizes);
void ib_group_tags_str(const int *tags, int n, char *out, size_t len);

/* ib_flush.c: iflush, its queue pair and its completions. */
extern const char ib_flush_token; /* the request of a flush with nothing to do */
rcollResult_t ib_flush_mode_parse(const char *text, int *mode);
rcollResult_t ib_iflush(void *comm, int n, void **data, const size_t *sizes, void **mh,
                        void **req);
rcollResult_t ib_flush_test(ib_req_t *r, int *done);
void ib_flush_in(ib_comm_t *c, int slot);
void ib_flush_wc_fail(ib_comm_t *c, const struct ibv_wc *wc);
void ib_flush_destroy(ib_comm_t *c);

/* ib_stall.c: after `moved` completions at `now`, checks a connection
 * that has not moved for a while (queue pairs in error fail it at once). */
void ib_stall_check(ib_comm_t *c, int64_t now, int moved);
/* The completion of the kick posted on QP q. */
void ib_kick_in(ib_comm_t *c, int q);

/* ib_wait.c: sleeping until a connection may progress. */
rcollResult_t ib_wait(void *const *comms, int n, int64_t timeout_us);

/* ib_mr.c: registration cache and device-memory hooks. */
void ib_mr_cache_init(ib_mr_cache_t *c);
void ib_mr_cache_fini(ib_mr_cache_t *c);
rcollResult_t ib_mr_get(ib_ctx_t *ctx, const void *addr, size_t len, int access, int mem_type,
                        ib_mr_t **out);
void ib_mr_put(ib_ctx_t *ctx, ib_mr_t *m);
int ib_gdr_probe(ib_ctx_t *ctx, char *why, size_t len);
/* Whether a memory handle (reg_mr's, or NULL) covers device memory. Tests
 * mark host registrations RCOLL_MEM_CUDA to drive the device paths. */
static inline int ib_mr_is_device(const void *mh) {
  return mh != NULL && ((const ib_mr_t *)mh)->mem_type == RCOLL_MEM_CUDA;
}

#endif
