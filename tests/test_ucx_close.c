/* Closing a UCX connection right after its last message, as a rank does
 * when it destroys its communicator the moment its last collective is done
 * (issue 14: the survivors' last all-reduce after a shrink failed over ucx).
 * send_outlives_the_lines_end_of_file forces the order that failed; the
 * loop at the end (allreduce_then_destroy_in_a_loop) meets it as ranks do.
 *
 * Each trial forks a sender and a receiver (the test process itself never
 * touches UCX, so the children start clean). One side finishes its part and
 * at once closes its comm, its listener and its context and exits; the other
 * side is still waiting for the completion of what was already delivered:
 * - receiver_closes_first: the receiver has every message, the sender's
 *   sends (rendezvous sized) still wait for UCX's acknowledgement. They must
 *   complete, not fail with "connection lost".
 * - sender_closes_first: the sender's sends completed locally and it leaves;
 *   the receiver must still get every message intact.
 * In both the side that stays looks at the liveness line only after the
 * other has exited (it progresses UCX directly until then): the moment a
 * real rank is slow to come back to its request. These two did not fail
 * before the fix either (0 of 20 trials per transport set): they guard the
 * close's flush (a sender that leaves must not take its data with it) and
 * the sender's grace, not the order that failed.
 * Under UCX_TLS=tcp,self and posix,sysv,self, as the other multi-process
 * UCX tests (no cma: UCX aborts a process whose process_vm_readv finds the
 * peer gone). RCOLL_TEST_UCX_CLOSE_TRIALS sets the trials per case. */
#if RCOLL_HAVE_UCX

#include <criterion/criterion.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../transports/ucx/ucx_priv.h"
#include "rcoll.h"
#include "support/ucx_pair.h"

#define NMSG 4
#define MSG_BYTES (MIB + 17) /* rendezvous under both transport sets */

static const char *const close_tls[] = {"tcp,self", "posix,sysv,self", "posix,cma,self"};
#define NCLOSE_TLS (int)(sizeof close_tls / sizeof close_tls[0])

/* What each child reports, in memory shared with the test process. */
typedef struct report {
  int done;   /* got to the end of its part */
  int failed; /* its part failed */
  char why[RCOLL_ERROR_TEXT_MAX + 64];
} report_t;

static int trials(void) {
  const char *e = getenv("RCOLL_TEST_UCX_CLOSE_TRIALS");
  int n = e ? atoi(e) : 10;
  return n > 0 ? n : 10;
}

static void *child_ctx(const char *tls) {
  static rcoll_settings_t s;
  alarm(60); /* should the other side hang, this one still ends */
  setenv("UCX_TLS", tls, 1);
  ucx_pair_settings(&s, 30);
  rcoll_net_config_t cfg = {.settings = &s, .secret = SECRET};
  void *ctx = NULL;
  if (ops->init(&cfg, &ctx) != rcollSuccess)
    _exit(5);
  return ctx;
}

static void fail(report_t *rep, const char *what) {
  snprintf(rep->why, sizeof rep->why, "%s: %s", what, rcoll_error_text());
  rep->failed = 1;
  rep->done = 1;
}

/* The side that stays: progresses the worker without testing its requests
 * (so without looking at the liveness line) until the other child says it
 * is done with its part (a byte on peer_fd), then does nothing until that
 * child has exited (end of file: only it held the pipe's other end). */
static void stall_until_gone(void *comm, int peer_fd) {
  struct pollfd pfd = {.fd = peer_fd, .events = POLLIN};
  ucp_worker_h w = ((ucx_conn_t *)comm)->ctx->worker;
  char b;
  for (int64_t end = now_ms() + 20000; poll(&pfd, 1, 0) == 0 && now_ms() < end;)
    ucp_worker_progress(w);
  while (read(peer_fd, &b, 1) > 0) {
  }
}

/* Tests each request to its end. */
static int wait_all(void **req, int64_t ms, report_t *rep, const char *what) {
  for (int i = 0; i < NMSG; i++) {
    rcollResult_t r = th_wait_req(ops, req[i], NULL, ms);
    if (r != rcollSuccess) {
      char w[64];
      snprintf(w, sizeof w, "%s %d of %d", what, i + 1, NMSG);
      fail(rep, w);
      return -1;
    }
  }
  return 0;
}

/* The receiver: listens (its handle goes out on hfd), receives NMSG
 * messages; with `first` it leaves as soon as they are in, else it waits
 * for the sender to leave before it tests them. */
static void receiver(const char *tls, int hfd, int gone_fd, int done_fd, int first, report_t *rep) {
  char handle[RCOLL_NET_HANDLE_BYTES];
  void *ctx = child_ctx(tls), *listen = NULL, *recv = NULL, *req[NMSG];
  if (ops->listen(ctx, 0, handle, &listen) != rcollSuccess || write(hfd, handle, sizeof handle) != sizeof handle)
    _exit(6);
  recv = th_accept_for(ops, listen, 20000);
  if (recv == NULL) {
    fail(rep, "accept");
    _exit(0);
  }
  char *buf = malloc((size_t)NMSG * MSG_BYTES);
  for (int i = 0; i < NMSG; i++) {
    void *b = buf + (size_t)i * MSG_BYTES;
    size_t n = MSG_BYTES;
    int tag = 0;
    if (ops->irecv(recv, 1, &b, &n, &tag, NULL, &req[i]) != rcollSuccess || req[i] == NULL) {
      fail(rep, "irecv");
      _exit(0);
    }
  }
  if (!first)
    stall_until_gone(recv, gone_fd);
  if (wait_all(req, 10000, rep, "receive") == 0) {
    for (int i = 0; i < NMSG && !rep->failed; i++)
      if (th_check(buf + (size_t)i * MSG_BYTES, MSG_BYTES, i) >= 0) {
        snprintf(rep->why, sizeof rep->why, "message %d arrived corrupted", i);
        rep->failed = 1;
      }
    rep->done = 1;
  }
  if (first && write(done_fd, "d", 1) != 1) /* now the sender stops progressing */
    _exit(7);
  ops->close_recv(recv);
  ops->close_listen(listen);
  ops->finalize(ctx);
  _exit(0);
}

/* The sender: connects to the handle read from hfd and sends NMSG
 * messages; with `first` it leaves once they completed locally, else it
 * waits for the receiver to leave before it tests them. */
static void sender(const char *tls, int hfd, int gone_fd, int done_fd, int first, report_t *rep) {
  char handle[RCOLL_NET_HANDLE_BYTES];
  void *send = NULL, *req[NMSG];
  if (read(hfd, handle, sizeof handle) != sizeof handle)
    _exit(6);
  void *ctx = child_ctx(tls);
  for (int64_t end = now_ms() + 20000; send == NULL && now_ms() < end;)
    if (ops->connect(ctx, 0, handle, &send) != rcollSuccess)
      break;
  if (send == NULL) {
    fail(rep, "connect");
    _exit(0);
  }
  char *buf = malloc((size_t)NMSG * MSG_BYTES);
  for (int i = 0; i < NMSG; i++) {
    th_fill(buf + (size_t)i * MSG_BYTES, MSG_BYTES, i);
    if (ops->isend(send, buf + (size_t)i * MSG_BYTES, MSG_BYTES, i, NULL, &req[i]) != rcollSuccess ||
        req[i] == NULL) {
      fail(rep, "isend");
      _exit(0);
    }
  }
  if (!first)
    stall_until_gone(send, gone_fd);
  if (wait_all(req, 10000, rep, "send") == 0)
    rep->done = 1;
  if (first && write(done_fd, "d", 1) != 1) /* now the receiver stops progressing */
    _exit(7);
  ops->close_send(send);
  ops->finalize(ctx);
  _exit(0);
}

/* One trial: returns 0, or 1 with the reason in why. */
static int trial(const char *tls, int sender_first, char *why, size_t len) {
  report_t *rep = mmap(NULL, 2 * sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(rep != MAP_FAILED);
  memset(rep, 0, 2 * sizeof *rep);
  int hp[2], sgone[2], rgone[2];
  cr_assert_eq(pipe(hp), 0);
  cr_assert_eq(pipe(sgone), 0); /* readable (EOF) once the sender has exited */
  cr_assert_eq(pipe(rgone), 0); /* once the receiver has exited */
  pid_t rpid = fork();
  cr_assert_geq(rpid, 0);
  if (rpid == 0) {
    close(hp[0]), close(sgone[1]), close(rgone[0]);
    receiver(tls, hp[1], sgone[0], rgone[1], !sender_first, &rep[0]);
  }
  pid_t spid = fork();
  cr_assert_geq(spid, 0);
  if (spid == 0) {
    close(hp[1]), close(sgone[0]), close(rgone[1]);
    sender(tls, hp[0], rgone[0], sgone[1], sender_first, &rep[1]);
  }
  close(hp[0]), close(hp[1]), close(sgone[0]), close(sgone[1]), close(rgone[0]), close(rgone[1]);
  int st[2];
  waitpid(rpid, &st[0], 0);
  waitpid(spid, &st[1], 0);
  int bad = 0;
  for (int k = 0; k < 2 && !bad; k++) {
    const char *who = k ? "sender" : "receiver";
    if (!WIFEXITED(st[k]) || WEXITSTATUS(st[k]) != 0)
      bad = snprintf(why, len, "%s: status 0x%x", who, st[k]) > 0;
    else if (!rep[k].done || rep[k].failed)
      bad = snprintf(why, len, "%s: %s", who, rep[k].done ? rep[k].why : "did not finish") > 0;
  }
  munmap(rep, 2 * sizeof *rep);
  return bad;
}

static void run_case(int sender_first) {
  int n = trials();
  for (int t = 0; t < NCLOSE_TLS; t++) {
    int failed = 0;
    char why[RCOLL_ERROR_TEXT_MAX + 128] = "";
    for (int i = 0; i < n; i++) {
      char w[sizeof why];
      if (trial(close_tls[t], sender_first, w, sizeof w)) {
        if (failed++ == 0)
          snprintf(why, sizeof why, "%s", w);
      }
    }
    fprintf(stderr, "ucx_close: UCX_TLS=%s, %s closes first: %d of %d trials failed\n", close_tls[t],
            sender_first ? "sender" : "receiver", failed, n);
    cr_expect_eq(failed, 0, "UCX_TLS=%s: %d of %d trials failed; the first: %s", close_tls[t], failed, n, why);
  }
}

Test(ucx_close, receiver_closes_first, .timeout = 300) { run_case(0); }
Test(ucx_close, sender_closes_first, .timeout = 300) { run_case(1); }

/* The liveness line's end of file can reach a sender before UCX has told it
 * that its send is complete (a rendezvous waits for the receiver's
 * acknowledgement; the receiver may close right after sending it). Made
 * certain here: once the send is posted, the sender's line is swapped for
 * one whose other end is closed (the real line is kept open, so the
 * receiver sees nothing) before the receiver has even posted its receive. The send must still complete
 * once the receiver takes the message, and a second one, never received,
 * must fail within the grace, naming the peer. */
static void send_outlives_eof(const char *tls) {
  pair_t p;
  ucx_pair_open(&p, tls, 30, 0);
  ucx_conn_t *c = p.send;
  size_t n = MSG_BYTES;
  char *sb = malloc(n), *rb = malloc(n);
  void *rbp = rb, *sreq, *rreq, *sreq2;
  int tag = 0, done = 0;
  th_fill(sb, n, 0);
  /* Posted while the line is open: a send on a line already closed fails
   * at once (the peer takes no new message). */
  cr_assert_eq(ops->isend(p.send, sb, n, 0, NULL, &sreq), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_not_null(sreq);
  int sp[2], keep = dup(c->fd);
  cr_assert_geq(keep, 0);
  cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
  cr_assert_geq(dup2(sp[0], c->fd), 0);
  close(sp[0]);
  close(sp[1]); /* the sender's line now reads end of file */
  usleep(2 * UCX_PROBE_US); /* so that the next test looks at the line */
  rcollResult_t r = ops->test(sreq, &done, NULL); /* sees the end of file */
  cr_assert_eq(r, rcollSuccess, "UCX_TLS=%s: the send failed at the line's end of file: %s", tls,
               rcoll_error_text());
  cr_assert_eq(ops->irecv(p.recv, 1, &rbp, &n, &tag, NULL, &rreq), rcollSuccess);
  if (!done) {
    r = ucx_pair_wait_both(&p, sreq, NULL, 5000);
    cr_assert_eq(r, rcollSuccess, "UCX_TLS=%s: the send failed: %s", tls, rcoll_error_text());
  }
  cr_assert_eq(ucx_pair_wait_both(&p, rreq, NULL, 5000), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_eq(th_check(rb, n, 0), -1, "UCX_TLS=%s: message corrupted", tls);
  /* A send the peer never takes still fails, once the grace is over. */
  int64_t t0 = now_ms();
  r = ops->isend(p.send, sb, n, 0, NULL, &sreq2);
  if (r == rcollSuccess && sreq2 != NULL)
    r = th_wait_req(ops, sreq2, NULL, 10000);
  cr_assert_eq(r, rcollRemoteError, "UCX_TLS=%s: got %d after %lld ms: %s", tls, r, (long long)(now_ms() - t0),
               rcoll_error_text());
  cr_assert_lt(now_ms() - t0, UCX_LOST_GRACE_MS + 2000, "UCX_TLS=%s: failing took %lld ms", tls,
               (long long)(now_ms() - t0));
  cr_assert(strstr(rcoll_error_text(), "127.0.0.1:"), "text names no peer: %s", rcoll_error_text());
  th_pair_close(&p);
  close(keep);
  free(sb);
  free(rb);
}

Test(ucx_close, send_outlives_the_lines_end_of_file, .timeout = 60) {
  send_outlives_eof("tcp,self");
  send_outlives_eof("posix,sysv,self");
}

/* The race as ranks meet it (issue 14), through the public API: 3 forked
 * ranks split a fresh communicator from their world, run one all-reduce on
 * it and destroy it at once, RCOLL_TEST_UCX_CLOSE_LOOPS times (200). Under
 * posix,cma,self a rendezvous send completes only on the receiver's
 * acknowledgement (the receiver reads the data with process_vm_readv), and
 * a rank whose last step was that receive destroys its communicator right
 * after. Before the fix a sender failed "send to rank N ... lost: the peer
 * closed it or its process ended" in each of 6 runs of 300 iterations, at
 * iterations 6, 22, 57, 71, 84 and 193. No rank dies here, so cma is safe
 * to use. */
#define LOOP_NR 3
#define LOOP_COUNT (64u * 1024)

typedef struct loop_shared {
  rcollUniqueId id;
  int ready;
  int done[LOOP_NR];
  char error[LOOP_NR][400];
} loop_shared_t;

static void loop_rank(loop_shared_t *sh, int rank, int iters) {
  alarm(240);
  setenv("UCX_TLS", "posix,cma,self", 1);
  setenv("RCOLL_NET", "ucx", 1);
  if (rank == 0) {
    if (rcollGetUniqueId(&sh->id) != rcollSuccess)
      _exit(2);
    __atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
  }
  for (int ms = 0; !__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE) && ms < 60000; ms++)
    usleep(1000);
  rcollComm_t world;
  if (rcollCommInitRank(&world, LOOP_NR, sh->id, rank) != rcollSuccess) {
    snprintf(sh->error[rank], sizeof sh->error[rank], "init: %s", rcollGetLastError(NULL));
    _exit(0);
  }
  float *in = malloc(LOOP_COUNT * sizeof(float)), *out = malloc(LOOP_COUNT * sizeof(float));
  for (size_t k = 0; k < LOOP_COUNT; k++)
    in[k] = (float)(rank + 1 + (int)(k % 5));
  int i = 0;
  for (; i < iters; i++) {
    rcollComm_t nc = NULL;
    if (rcollCommSplit(world, 0, rank, &nc, NULL) != rcollSuccess) {
      snprintf(sh->error[rank], sizeof sh->error[rank], "split %d: %s", i, rcollGetLastError(NULL));
      break;
    }
    rcollResult_t r = rcollAllReduce(in, out, LOOP_COUNT, rcollFloat32, rcollSum, nc, NULL);
    if (r != rcollSuccess)
      snprintf(sh->error[rank], sizeof sh->error[rank], "all-reduce %d: %s", i, rcollGetLastError(nc));
    for (size_t k = 0; r == rcollSuccess && k < LOOP_COUNT; k++)
      if (out[k] != (float)(6 + 3 * (int)(k % 5))) {
        snprintf(sh->error[rank], sizeof sh->error[rank], "all-reduce %d: wrong sum at %zu", i, k);
        r = rcollInternalError;
      }
    rcollCommDestroy(nc); /* at once, as a rank that is done does */
    if (r != rcollSuccess)
      break;
  }
  sh->done[rank] = i;
  rcollCommDestroy(world);
  _exit(0);
}

Test(ucx_close, allreduce_then_destroy_in_a_loop, .timeout = 300) {
  const char *e = getenv("RCOLL_TEST_UCX_CLOSE_LOOPS");
  int iters = e && atoi(e) > 0 ? atoi(e) : 200;
  loop_shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(sh != MAP_FAILED);
  memset(sh, 0, sizeof *sh);
  pid_t pids[LOOP_NR];
  for (int r = 0; r < LOOP_NR; r++) {
    pids[r] = fork();
    cr_assert_geq(pids[r], 0);
    if (pids[r] == 0)
      loop_rank(sh, r, iters);
  }
  int st[LOOP_NR];
  for (int r = 0; r < LOOP_NR; r++)
    waitpid(pids[r], &st[r], 0);
  for (int r = 0; r < LOOP_NR; r++) {
    cr_expect(WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d: status 0x%x", r, st[r]);
    cr_expect_eq(sh->done[r], iters, "rank %d: %d of %d iterations; %s", r, sh->done[r], iters, sh->error[r]);
  }
  munmap(sh, sizeof *sh);
}

#else
#include <criterion/criterion.h>
Test(ucx_close, not_built) { cr_skip_test("rcoll was configured without UCX"); }
#endif
