/* Private types of the shared-memory transport, shared by its files only.
 *
 * A connection is one segment, created by the connecting (sending) side in
 * the shared-memory directory, mapped by both ends and unlinked as soon as
 * the acceptor has mapped it, so that nothing is left behind when a process
 * dies. The segment holds a header page and a ring of nslots slots of
 * slot_size bytes. The sender writes slot k (mod nslots) and publishes it by
 * storing k + 1 into the slot's seq with release order; the receiver reads it
 * after an acquire load of seq and frees slots by advancing `consumed`. Each
 * side's counter lives on its own cache line.
 *
 * Besides the segment, the two ends keep a connected unix socket: it carries
 * the connection request (segment name and the communicator's secret) and
 * its answer, tells each end the other's real pid (SO_PEERCRED), and reads
 * end-of-file once the peer has gone, however it died. */
#ifndef RCOLL_TRANSPORT_SHM_PRIV_H
#define RCOLL_TRANSPORT_SHM_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pool.h"
#include "net.h"

#define SHM_MAGIC 0x3230306d68736372ull /* "rcshm002": also versions the layout */
#define SHM_LINE 64
#define SHM_HDR_BYTES 4096 /* the header page; slots start after it */
#define SHM_SLOT_HDR 32    /* seq, len, kind, size, addr */
#define SHM_SMALL_AT 16    /* a small message's payload overwrites size and addr (SHM_SLOT_SMALL) */
#define SHM_NREQS 64       /* request slots per connection */
#define SHM_NAME_MAX 64
#define SHM_PREFIX "rcoll-shm"
#define SHM_CHECK_MS 10    /* how often a connection that waits checks its peer */
#define SHM_MIN_SLOTS 2
#define SHM_MAX_SLOTS 4096
#define SHM_MIN_SLOT (256)
#define SHM_MAX_SLOT (64ll << 20)
#define SHM_POOL_MAPS 32   /* mapped pool blocks kept per connection (shm_pool.c) */

/* FIRST, then CONT: a message through the ring; DIRECT: the address of
 * the sender's buffer (single copy), and when len is sizeof
 * (rcoll_pool_ref_t), a reference to the pool block it lies in as the
 * slot's payload (shm_pool.c); SMALL: a whole message of up to
 * SHM_LINE - SHM_SMALL_AT bytes in the slot's first cache line, so that
 * the receiver's one miss brings the flag and the data together (an
 * 8-byte all-reduce's message with its fingerprint is 48 bytes). */
enum shm_slot_kind { SHM_SLOT_FIRST = 1, SHM_SLOT_CONT, SHM_SLOT_DIRECT, SHM_SLOT_SMALL };

/* How a receiver can copy straight from its sender's buffer. */
enum shm_copy { SHM_COPY_NONE = 0, SHM_COPY_CMA, SHM_COPY_MEMCPY };

typedef struct shm_slot {
  _Atomic uint64_t seq; /* ring position + 1 once written */
  uint32_t len;         /* payload bytes in this slot */
  uint32_t kind;        /* enum shm_slot_kind */
  uint64_t size;        /* bytes of the whole message (not in a SMALL slot) */
  uint64_t addr;        /* SHM_SLOT_DIRECT: where the sender's buffer is */
} shm_slot_t;

typedef struct shm_seg {
  /* Written by the connecting side before the acceptor maps the segment. */
  uint64_t magic;
  uint32_t nslots;
  uint32_t pad0;
  uint64_t slot_size;
  uint64_t bytes;
  int32_t sender_pid;
  uint32_t pad1;
  uint64_t probe_addr; /* a word in the sender's memory that holds probe_value */
  uint64_t probe_value;
  /* Written by the acceptor before it answers. */
  int32_t receiver_pid;
  uint32_t copy; /* enum shm_copy */
  _Alignas(SHM_LINE) _Atomic uint64_t consumed; /* slots the receiver released */
  _Alignas(SHM_LINE) _Atomic uint32_t rx_word;  /* the receiver sleeps on this */
  _Atomic uint32_t rx_sleeping;
  _Alignas(SHM_LINE) _Atomic uint32_t tx_word; /* the sender sleeps on this */
  _Atomic uint32_t tx_sleeping;
  _Alignas(SHM_LINE) _Atomic uint32_t closed[2]; /* [0]: sender closed, [1]: receiver */
} shm_seg_t;

/* What the listen handle carries to the connecting peer. */
typedef struct shm_handle {
  uint64_t magic;
  uint64_t secret;
  int32_t pid;
  uint32_t pad;
  char sock[SHM_NAME_MAX]; /* abstract unix socket name, without its leading NUL */
  uint64_t ns_key;         /* rcoll_pid_ns_key() of the listener: whose pid numbers `pid` is in */
} shm_handle_t;

/* The connection request on the unix socket, and its answer. */
typedef struct shm_conn_req {
  uint64_t magic;
  uint64_t secret;
  int32_t pid;
  uint32_t pad;
  char seg[SHM_NAME_MAX];
} shm_conn_req_t;

typedef struct shm_conn_ack {
  uint64_t magic;
  int32_t status; /* 0, or the errno that stopped the acceptor */
  int32_t pad;
} shm_conn_ack_t;

/* Per-communicator context: settings and connects in flight. */
typedef struct shm_ctx {
  char dir[256];
  uint64_t secret;
  int rank;
  uint32_t nslots;
  size_t slot_size;
  size_t cma_min, memcpy_min; /* single-copy thresholds; SIZE_MAX: never */
  size_t exchange_min;        /* the same for isend_single, either kind of copy */
  int pool_map;               /* RCOLL_SHM_POOL_MAP */
  int64_t timeout_ms;
  pthread_mutex_t lock; /* guards the pending-connect list */
  struct shm_pconn *connects;
} shm_ctx_t;

enum shm_req_state { SHM_REQ_FREE = 0, SHM_REQ_ACTIVE, SHM_REQ_DONE };

/* One isend or irecv. */
typedef struct shm_req {
  struct shm_conn *conn;
  int state;
  int direct;  /* single copy: published (send) or announced (receive) */
  int single;  /* send: isend_single (direct from the connection's single_min) */
  int started; /* receive: the first slot has been read */
  int stream;  /* receive: write with non-temporal stores (shm_io.c) */
  int pooled;  /* send: buf lies in a pool block the receiver may map (pool) */
  rcoll_pool_ref_t pool;
  int reduce;  /* receive: buf = rsrc (rop) message, as it arrives (shm_reduce.c) */
  int rtype, rop;
  const char *rsrc;
  char *buf;
  size_t size; /* send size; receive: capacity until the first slot, then size */
  size_t off;  /* bytes moved so far */
  uint64_t end;/* direct send: done once consumed reaches this */
} shm_req_t;

/* One direction of a connection: a send comm or a recv comm. */
typedef struct shm_conn {
  int is_send;
  shm_seg_t *seg;
  size_t seg_bytes;
  char *slots;
  uint32_t nslots;
  size_t slot_size, payload;
  int fd;            /* unix socket to the peer */
  pid_t peer_pid;    /* as the kernel reports it (SO_PEERCRED) */
  int copy;          /* enum shm_copy */
  size_t direct_min; /* sender: messages this large go single-copy */
  size_t single_min; /* sender: the same for isend_single */
  uint64_t pos;      /* next slot to write (send) or read (receive) */
  uint64_t room;     /* sender: `consumed` as last read */
  uint64_t seen;     /* sender: `consumed` when requests last progressed */
  int64_t check_ms;  /* time of the last liveness check */
  unsigned idle;     /* tests that could not finish, to space out checks */
  int gone;          /* the peer closed its end or exited */
  uint64_t probe;    /* sender: the word the acceptor reads to try CMA */

  shm_req_t reqs[SHM_NREQS];
  int free_idx[SHM_NREQS];
  int nfree;
  /* Requests whose data still moves, in posting order. */
  shm_req_t *queue[SHM_NREQS];
  unsigned qhead, qtail;

  char *bounce; /* receiver: where single-copy pieces land to be reduced (shm_reduce.c) */
  int pool_map;  /* sender: single-copy sends from pool blocks say so (shm_pool.c) */
  int pool_off;  /* receiver: mapping the sender's pool failed once; CMA from then on */
  struct shm_pool_maps *pool; /* receiver: the sender's pool blocks it has mapped */

  int err; /* rcollResult_t of the first failure; later calls repeat it */
  char errmsg[256];
  char peer[48]; /* "pid 1234", for messages */
} shm_conn_t;

static inline shm_slot_t *shm_slot_at(const shm_conn_t *c, uint64_t pos) {
  return (shm_slot_t *)(c->slots + (size_t)(pos % c->nslots) * c->slot_size);
}

/* Where a slot's payload starts: a SMALL slot's in the header's cache line,
 * any other's on the next line, so that large copies write whole aligned
 * lines (a copy into a ring offset by 32 bytes measured 25% slower). */
static inline char *shm_payload(shm_slot_t *s, int kind) {
  return (char *)s + (kind == SHM_SLOT_SMALL ? SHM_SMALL_AT : SHM_LINE);
}

/* ThreadSanitizer, with both ends of a ring in one process (ranks as
 * threads): each end maps the segment at its own address, so TSan cannot
 * pair the release of a slot's seq (or of `consumed`) with its acquire, and
 * took the single-copy path's memcpy from the sender's buffer for a race.
 * Each such release and acquire is mirrored on one address both ends know:
 * the sender connection's probe word (seg->probe_addr), memory of this
 * process when the peer is this process (SHM_COPY_MEMCPY). Without TSan
 * these are empty. */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
static inline void shm_tsan_release(const shm_conn_t *c) {
  if (c->copy == SHM_COPY_MEMCPY)
    __tsan_release((void *)(uintptr_t)c->seg->probe_addr);
}
static inline void shm_tsan_acquire(const shm_conn_t *c) {
  if (c->copy == SHM_COPY_MEMCPY)
    __tsan_acquire((void *)(uintptr_t)c->seg->probe_addr);
}
#else
static inline void shm_tsan_release(const shm_conn_t *c) { (void)c; }
static inline void shm_tsan_acquire(const shm_conn_t *c) { (void)c; }
#endif

/* shm_seg.c: segments in the shared-memory directory. */
rcollResult_t shm_dir_check(const char *dir, size_t need);
rcollResult_t shm_seg_create(const shm_ctx_t *ctx, char name[SHM_NAME_MAX], shm_seg_t **seg);
rcollResult_t shm_seg_open(const char *dir, const char *name, shm_seg_t **seg, size_t *bytes);
/* What shm_seg_open checks of a peer's segment before using it: a name of
 * our own pattern (it becomes a path), and a header that agrees with the
 * file's size (bytes). 1 when fine. */
int shm_seg_name_ok(const char *name);
int shm_seg_valid(const shm_seg_t *seg, size_t bytes);
void shm_seg_unlink(const char *dir, const char *name);
size_t shm_seg_bytes(uint32_t nslots, size_t slot_size);
uint64_t shm_random64(void);
/* Why a peer's listener could not be reached (errno err): "pid N has
 * exited" when its handle's key (rcoll_pid_ns_key, lib/pidns.h) matches ours
 * and the pid is gone, else the network-namespace hint (shm_peer.c). */
void shm_unreachable_why(const shm_handle_t *h, int err, char *buf, size_t len);

/* shm_sweep.c: the segments of dead processes. shm_seg_name writes a new
 * segment's name; shm_seg_sweep removes from dir the segments whose creator
 * (in this pid namespace) has exited, and returns how many. */
void shm_seg_name(char name[SHM_NAME_MAX], unsigned seq, uint64_t rnd);
int shm_seg_sweep(const char *dir);

/* shm_setup.c: listen, accept, and the connection object. */
rcollResult_t shm_listen(void *ctx, int dev, void *handle, void **listen_comm);
rcollResult_t shm_accept(void *listen_comm, void **recv_comm);
/* A connection request as read (len bytes): NULL and *out filled (segment
 * name terminated) when it is well formed and carries `secret`, else what
 * was wrong with it. */
const char *shm_req_parse(const void *wire, size_t len, uint64_t secret, shm_conn_req_t *out);
rcollResult_t shm_close_listen(void *listen_comm);
shm_conn_t *shm_conn_new(int is_send, shm_seg_t *seg, size_t bytes, int fd, pid_t peer);
void shm_conn_log(const shm_conn_t *c, int rank);

/* shm_connect.c: the connecting side. */
rcollResult_t shm_connect(void *ctx, int dev, const void *handle, void **send_comm);
/* The listen handle a peer sent: its magic, a socket name and a pid, or an
 * error (quiet: the caller reports it) saying what is wrong. */
rcollResult_t shm_handle_decode(const void *handle, shm_handle_t *out);
void shm_connects_free(shm_ctx_t *ctx);

/* shm_io.c: requests. */
rcollResult_t shm_isend(void *comm, const void *data, size_t size, int tag, void *mh, void **req);
rcollResult_t shm_isend_single(void *comm, const void *data, size_t size, int tag, void *mh, void **req);
rcollResult_t shm_irecv(void *comm, int n, void **data, const size_t *sizes, const int *tags,
                        void **mh, void **req);
rcollResult_t shm_iflush(void *comm, int n, void **data, const size_t *sizes, void **mh,
                         void **req);
rcollResult_t shm_test(void *request, int *done, size_t *sizes);
/* shm_io.c, for shm_reduce.c: a receive request queued without progress
 * (NULL when out of requests), and the progress that then moves it. */
rcollResult_t shm_recv_post(shm_conn_t *c, void *buf, size_t size, shm_req_t **out);
void shm_recv_kick(shm_conn_t *c);

/* shm_reduce.c */
rcollResult_t shm_irecv_reduce(void *comm, void *dst, const void *src, size_t bytes, int dtype, int op,
                               void **request);
void shm_reduce_piece(const shm_req_t *r, size_t off, const char *from, size_t len);
/* Reduces a whole single-copy message from the sender's buffer at src,
 * read as `copy` says (enum shm_copy). */
int shm_recv_direct_reduce(shm_conn_t *c, shm_req_t *r, const char *src, int copy);
rcollResult_t shm_close_comm(void *comm);
void shm_conn_fail(shm_conn_t *c, rcollResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* shm_pool.c: single copy from rcollMemAlloc's shared host pool. The
 * sender: 1 and *ref filled when a message of `size` at buf (sent through
 * isend_single when `single`) goes single-copy between processes and lies
 * in a shared pool block, which the receiver may then map. The receiver: where the message is in its mapping
 * of that block, or NULL to read it with process_vm_readv (or on an error,
 * recorded in the connection). */
int shm_pool_describe(const shm_conn_t *c, const void *buf, size_t size, int single, rcoll_pool_ref_t *ref);
const char *shm_pool_map(shm_conn_t *c, const rcoll_pool_ref_t *ref, size_t size);
void shm_pool_close(shm_conn_t *c);

/* shm_wait.c: sleeping and waking, and noticing a peer that is gone. */
rcollResult_t shm_wait(void *const *comms, int n, int64_t timeout_us);
void shm_wake(_Atomic uint32_t *word, _Atomic uint32_t *sleeping);
int shm_conn_ready(shm_conn_t *c);
int shm_peer_check(shm_conn_t *c, int force);

#endif
