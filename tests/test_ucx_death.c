/* The UCX transport when a peer dies: the survivor's calls fail, naming
 * the peer, within the timeout, under UCX_TLS=tcp,self and posix,cma,self,
 * and with UCX's own peer-failure handling forced on. Set-up is in
 * tests/support/ucx_pair.h; the other UCX tests are in tests/test_ucx.c. */
#if RCOLL_HAVE_UCX

#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../transports/ucx/ucx_priv.h"
#include "support/ucx_pair.h"

/* ---- a peer that dies ----
 * The dying peer is a forked child that never touched UCX before the fork;
 * the parent creates its context only after forking. The handle travels
 * through a pipe. */

typedef struct child {
  pid_t pid;
  int to_child[2], from_child[2];
} child_t;

static void child_start(child_t *k) {
  cr_assert_eq(pipe(k->to_child), 0);
  cr_assert_eq(pipe(k->from_child), 0);
  k->pid = fork();
  cr_assert_geq(k->pid, 0);
}

static void child_write(int fd, const void *b, size_t n) {
  if (write(fd, b, n) != (ssize_t)n)
    _exit(3);
}

static void child_read(int fd, void *b, size_t n) {
  if (read(fd, b, n) != (ssize_t)n)
    _exit(4);
}

/* The child's context; alarm ends it should the parent fail first. */
static void *child_ctx(const char *tls) {
  static rcoll_settings_t s;
  void *ctx = NULL;
  alarm(30);
  setenv("UCX_TLS", tls, 1);
  ucx_pair_settings(&s, 30);
  rcoll_net_config_t cfg = {.settings = &s, .secret = SECRET};
  if (ops->init(&cfg, &ctx) != rcollSuccess)
    _exit(5);
  return ctx;
}

/* What a survivor must see: a remote error naming the peer's address, in
 * time; later operations fail at once; closing is prompt. */
static void expect_peer_gone(const char *tls, rcollResult_t r, int64_t t0, int64_t limit_ms) {
  int64_t dt = now_ms() - t0;
  cr_assert_eq(r, rcollRemoteError, "UCX_TLS=%s: got %d after %lld ms: %s", tls, r, (long long)dt,
               rcoll_error_text());
  cr_assert_lt(dt, limit_ms, "UCX_TLS=%s: failing took %lld ms", tls, (long long)dt);
  cr_assert(strstr(rcoll_error_text(), "127.0.0.1:"), "text names no address: %s", rcoll_error_text());
}

/* Child: connects to the parent's handle, sends two messages of 64 MiB,
 * progresses them until the parent kills it (or alarm does, should the
 * parent fail first). */
static void child_send_and_die(child_t *k, const char *tls) {
  char handle[RCOLL_NET_HANDLE_BYTES];
  void *send = NULL, *req[2] = {NULL, NULL};
  child_read(k->to_child[0], handle, sizeof handle);
  void *ctx = child_ctx(tls);
  for (int64_t end = now_ms() + 10000; send == NULL && now_ms() < end;)
    if (ops->connect(ctx, 0, handle, &send) != rcollSuccess)
      _exit(6);
  char *buf = calloc(1, 64 * MIB);
  for (int i = 0; i < 2; i++)
    if (send == NULL || ops->isend(send, buf, 64 * MIB, 0, NULL, &req[i]) != rcollSuccess || req[i] == NULL)
      _exit(7);
  child_write(k->from_child[1], "s", 1);
  for (int done = 0, i = 0;;) { /* until killed */
    if (ops->test(req[i], &done, NULL) != rcollSuccess || (done && ++i == 2))
      pause();
  }
}

/* Waits for a receive that may finish or fail; returns its outcome. */
static rcollResult_t recv_outcome(void *recv, void *buf, size_t n, int64_t ms) {
  void *req = NULL;
  int tag = 0;
  rcollResult_t r = ops->irecv(recv, 1, &buf, &n, &tag, NULL, &req);
  if (r != rcollSuccess)
    return r;
  cr_assert_not_null(req);
  return th_wait_req(ops, req, NULL, ms);
}

/* A sender dies while its messages are in flight: the receiver gets a remote
 * error naming the peer's address within a few seconds (the first message
 * may have completed before the kill; the second cannot have). RCOLL_TIMEOUT
 * is 1 s, so no grace period can exceed it. */
static void sender_dies(const char *tls) {
  child_t k;
  child_start(&k);
  if (k.pid == 0)
    child_send_and_die(&k, tls);
  rcoll_settings_t s;
  char handle[RCOLL_NET_HANDLE_BYTES];
  void *listen, *recv, *rreq;
  setenv("UCX_TLS", tls, 1);
  ucx_pair_settings(&s, 1);
  void *ctx = th_ctx_new(ops, &s, SECRET);
  cr_assert_eq(ops->listen(ctx, 0, handle, &listen), rcollSuccess);
  cr_assert_eq(write(k.to_child[1], handle, sizeof handle), (ssize_t)sizeof handle);
  recv = th_accept_for(ops, listen, 10000);
  cr_assert_not_null(recv);
  size_t n = 64 * MIB;
  char *rb = malloc(n), c;
  void *rbp = rb;
  int tag = 0;
  /* The child's endpoint finishes its wire-up through this worker, so the
   * receive is tested (progressing it) until the child says it has posted
   * its sends; then the transfer runs a moment, and may even finish. */
  cr_assert_eq(ops->irecv(recv, 1, &rbp, &n, &tag, NULL, &rreq), rcollSuccess);
  struct pollfd pfd = {.fd = k.from_child[0], .events = POLLIN};
  rcollResult_t r = rcollInProgress;
  for (int64_t end = now_ms() + 10000; poll(&pfd, 1, 0) == 0 && now_ms() < end;)
    if (r == rcollInProgress)
      r = th_wait_req(ops, rreq, NULL, 1);
  cr_assert_eq(read(k.from_child[0], &c, 1), 1, "child failed before sending");
  if (r == rcollInProgress)
    r = th_wait_req(ops, rreq, NULL, 20);
  cr_assert(r == rcollInProgress || r == rcollSuccess, "%s", rcoll_error_text());
  kill(k.pid, SIGKILL);
  waitpid(k.pid, NULL, 0);
  int64_t t0 = now_ms();
  if (r == rcollInProgress)
    r = th_wait_req(ops, rreq, NULL, 10000);
  if (r == rcollSuccess)
    r = recv_outcome(recv, rb, n, 10000);
  expect_peer_gone(tls, r, t0, 3000);
  cr_assert_neq(ops->irecv(recv, 1, &rbp, &n, &tag, NULL, &rreq), rcollSuccess, "later ops must fail fast");
  int64_t t1 = now_ms();
  ops->close_recv(recv);
  ops->close_listen(listen);
  ops->finalize(ctx);
  cr_assert_lt(now_ms() - t1, 3000, "closing took %lld ms", (long long)(now_ms() - t1));
  free(rb);
}

Test(ucx, sender_death_fails_receiver_tcp, .timeout = 60) { sender_dies("tcp,self"); }
Test(ucx, sender_death_fails_receiver_shm, .timeout = 60) { sender_dies("posix,cma,self"); }

/* Child: listens, accepts the parent's connection, posts one receive of
 * 64 MiB and dies once it has arrived (or after 3 s), with the parent's
 * second message in flight. */
static void child_recv_and_die(child_t *k, const char *tls) {
  char handle[RCOLL_NET_HANDLE_BYTES];
  void *ctx = child_ctx(tls), *listen = NULL, *recv = NULL, *req = NULL;
  if (ops->listen(ctx, 0, handle, &listen) != rcollSuccess)
    _exit(5);
  child_write(k->from_child[1], handle, sizeof handle);
  for (int64_t end = now_ms() + 10000; recv == NULL && now_ms() < end;)
    if (ops->accept(listen, &recv) != rcollSuccess)
      _exit(6);
  size_t n = 64 * MIB;
  void *buf = malloc(n);
  int tag = 0, done = 0;
  if (recv == NULL || ops->irecv(recv, 1, &buf, &n, &tag, NULL, &req) != rcollSuccess || req == NULL)
    _exit(7);
  for (int64_t end = now_ms() + 3000; now_ms() < end;)
    if (ops->test(req, &done, NULL) != rcollSuccess || done)
      break;
  raise(SIGKILL);
}

/* A receiver dies: the parent sent two messages of 64 MiB and the child
 * received at most the first, so the second send must fail with a remote
 * error. With blind_line the sender's liveness line is replaced by one that
 * never closes, so that only UCX's peer failure handling can tell. */
static void receiver_dies(const char *tls, int force_peer, int blind_line) {
  child_t k;
  child_start(&k);
  if (k.pid == 0)
    child_recv_and_die(&k, tls);
  rcoll_settings_t s;
  char handle[RCOLL_NET_HANDLE_BYTES];
  void *send = NULL, *sreq[2];
  setenv("UCX_TLS", tls, 1);
  ucx_pair_settings(&s, 30);
  void *ctx = th_ctx_new(ops, &s, SECRET);
  ((ucx_ctx_t *)ctx)->force_peer_mode = force_peer;
  cr_assert_eq(read(k.from_child[0], handle, sizeof handle), (ssize_t)sizeof handle);
  for (int64_t end = now_ms() + 10000; send == NULL && now_ms() < end;)
    cr_assert_eq(ops->connect(ctx, 0, handle, &send), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_not_null(send);
  int sp[2] = {-1, -1};
  if (blind_line) {
    cr_assert_eq(((ucx_conn_t *)send)->peer_mode, 1);
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    cr_assert_geq(dup2(sp[0], ((ucx_conn_t *)send)->fd), 0);
  }
  char *sb = calloc(1, 64 * MIB);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(ops->isend(send, sb, 64 * MIB, 0, NULL, &sreq[i]), rcollSuccess);
  int64_t t0 = now_ms();
  rcollResult_t r = th_wait_req(ops, sreq[0], NULL, 15000);
  if (r == rcollSuccess)
    r = th_wait_req(ops, sreq[1], NULL, 15000);
  expect_peer_gone(tls, r, t0, 10000);
  int status = 0;
  waitpid(k.pid, &status, 0);
  cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the child did not die as planned (status %d)",
            status);
  void *req2;
  cr_assert_eq(ops->isend(send, sb, 10, 0, NULL, &req2), rcollRemoteError, "later ops must fail fast");
  int64_t t1 = now_ms();
  ops->close_send(send);
  ops->finalize(ctx);
  cr_assert_lt(now_ms() - t1, 3000, "closing took %lld ms", (long long)(now_ms() - t1));
  if (sp[0] >= 0) {
    close(sp[0]);
    close(sp[1]);
  }
  free(sb);
}

Test(ucx, receiver_death_fails_sender_tcp, .timeout = 60) { receiver_dies("tcp,self", 0, 0); }
Test(ucx, receiver_death_fails_sender_shm, .timeout = 60) { receiver_dies("posix,cma,self", 0, 0); }
Test(ucx, receiver_death_seen_by_ucx_error_handler, .timeout = 60) { receiver_dies("tcp,self", 1, 1); }

#else
/* Built without UCX: nothing to test, and Criterion still wants a test. */
#include <criterion/criterion.h>
Test(ucx_death, not_built) { cr_skip_test("rcoll was configured without UCX"); }
#endif
