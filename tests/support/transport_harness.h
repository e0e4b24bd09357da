/* Harness shared by the transport tests (test_socket.c, test_ucx.c,
 * test_shm.c...): they drive different transports through the same ops table
 * (lib/net.h), so the plumbing lives in transport_harness.c once and takes
 * the table it is to drive. Payloads carry a pattern that depends on the
 * message number and offset, so that a lost, reordered or truncated piece
 * shows. The stream functions make no Criterion assertions, because forked
 * children run them; the others do, and since the linker takes the whole
 * file, only Criterion binaries can link any of it. */
#ifndef RCOLL_TESTS_SUPPORT_TRANSPORT_HARNESS_H
#define RCOLL_TESTS_SUPPORT_TRANSPORT_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "net.h"

#define TH_SECRET 0x5eC2e7ull
#define TH_MIB (1024 * 1024)
#define TH_MAX_INFLIGHT 256

/* Two ends of one connection and the contexts they came from. */
typedef struct th_pair {
  const rcoll_transport_ops_t *ops;
  rcoll_settings_t set;
  void *sctx, *rctx, *listen, *send, *recv;
  char handle[RCOLL_NET_HANDLE_BYTES];
} th_pair_t;

/* The pattern of message msg: th_fill writes it, th_check returns the index
 * of the first wrong byte, or -1. */
void th_fill(char *b, size_t n, int msg);
long th_check(const char *b, size_t n, int msg);

/* A context, or NULL with the reason printed (usable in forked children). */
void *th_ctx_try(const rcoll_transport_ops_t *ops, const rcoll_settings_t *s, uint64_t secret);
/* A context, asserting that init succeeds. */
void *th_ctx_new(const rcoll_transport_ops_t *ops, const rcoll_settings_t *s, uint64_t secret);

/* The receiving side of a pair: p->set is filled by the caller first. */
void th_pair_listen(th_pair_t *p, const rcoll_transport_ops_t *ops);
/* Polls connect and accept together, as the engine does, until both finish.
 * With keep_accepting, accept is called until the connect is done too (a
 * transport may finish the sender's wire-up through the receiver's
 * progress), and must not produce a second comm. */
void th_pair_connect(th_pair_t *p, int64_t ms, int keep_accepting, const char *what);
void th_pair_close(th_pair_t *p);

/* Accepts for up to ms; NULL when nothing came. */
void *th_accept_for(const rcoll_transport_ops_t *ops, void *listen, int ms);

/* Tests until done, an error, or the deadline (then rcollInProgress). */
rcollResult_t th_wait_req(const rcoll_transport_ops_t *ops, void *req, size_t *size, int64_t ms);

/* One side of a stream of messages: posts as many as the transport takes,
 * and when it answers with a NULL request completes the oldest first. */
typedef struct th_stream {
  const rcoll_transport_ops_t *ops;
  void *comm;
  int is_send, n, shift;
  char **bufs;
  size_t *sizes; /* send sizes, or posted receive sizes */
  size_t *got;   /* sizes test reported */
  rcollResult_t result;
  char err[RCOLL_ERROR_TEXT_MAX];
  int nulls; /* times the transport was out of requests */
} th_stream_t;

/* Buffers for n messages: sends filled with the pattern, receives posted
 * `extra` bytes larger and poisoned (0xEE), with a canary byte after the
 * size. With shift > 1 receive i starts i % shift bytes into its allocation,
 * so that receives land at every alignment. */
th_stream_t *th_stream_new(const rcoll_transport_ops_t *ops, void *comm, int is_send, int n, const size_t *sizes,
                           size_t extra, int shift);
/* Runs the stream to its end or its first error (a pthread start routine). */
void *th_stream_run(void *arg);
void th_stream_free(th_stream_t *s);
/* Checks a finished receive stream (reported size, contents, canary): 0, or
 * the first bad message + 1 with the reason in why. */
int th_stream_verify(const th_stream_t *rx, const size_t *sizes, char *why, size_t len);

/* Sends sizes[i] bytes as message i from a second thread while this one
 * receives into buffers `extra` bytes larger; asserts that both sides
 * succeeded and reported the sent sizes and that the receives hold the
 * pattern and stopped at their size. Returns how often the two sides found
 * the transport out of request slots. */
int th_exchange(th_pair_t *p, int n, const size_t *sizes, size_t extra, int shift);

/* A send posted from another thread after a delay, to wake a waiting
 * receiver: size bytes of buf (at most 64). th_late_send_run is the thread. */
typedef struct th_late_send {
  const rcoll_transport_ops_t *ops;
  void *comm;
  int delay_ms;
  size_t size;
  char buf[64];
} th_late_send_t;

void *th_late_send_run(void *arg);

/* CPU time of the calling thread, to show that a wait sleeps in the kernel. */
double th_thread_cpu_ms(void);

/* Waits for a request of pair p; a transport may need both ends driven. */
typedef rcollResult_t (*th_wait_fn)(th_pair_t *p, void *req, size_t *size, int64_t ms);

/* The receive side has exactly nreqs request slots: the next irecv gives a
 * NULL request, and completing the oldest frees a slot. */
void th_expect_slot_pool(th_pair_t *p, int nreqs, th_wait_fn wait);

#endif
