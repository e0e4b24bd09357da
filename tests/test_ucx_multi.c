/* Grouped receives on the UCX transport (irecv of n > 1 buffers, NCCL's
 * "multi-receive"): one receive consumes the next n sends of the connection,
 * each landing in the buffer posted with its tag whatever the order the sends
 * come in. Real UCX under UCX_TLS=tcp,self and posix,cma,self; payloads
 * carry a pattern derived from their tag, so a message in the wrong buffer,
 * or cut short, shows, and receive buffers are poisoned up to a canary past
 * their posted size, so a write beyond the received bytes shows. */
#if RCOLL_HAVE_UCX

#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../transports/ucx/ucx_priv.h"
#include "support/multi_harness.h"
#include "support/ucx_pair.h"


static const char *const tls_list[NTLS] = {"tcp,self", "posix,cma,self"};

/* Afterwards the connection still carries single receives in order. */
Test(ucx_multi, reverse_tag_order_mixed_sizes, .timeout = 120) {
  for (int t = 0; t < NTLS; t++) {
    pair_t p;
    ucx_pair_open(&p, tls_list[t], 30, 0);
    th_multi_reverse_order(&p, tls_list[t]);
    const size_t after[] = {7, 9000, 300000};
    ucx_pair_exchange(&p, 3, after, 5);
    th_pair_close(&p);
  }
}

Test(ucx_multi, eight_buffers_with_empty_and_duplicate_tags, .timeout = 60) {
  const size_t ssizes[RCOLL_NET_MAX_RECVS] = {0, 70000, 1, 4096, 8193, 2 * MIB + 3, 0, 200000};
  for (int t = 0; t < NTLS; t++) {
    pair_t p;
    ucx_pair_open(&p, tls_list[t], 30, 0);
    th_multi_eight(&p, ssizes, tls_list[t]);
    th_pair_close(&p);
  }
}

static void expect_tag_error(const char *tls, int bad, size_t size, const char *why) {
  pair_t p;
  ucx_pair_open(&p, tls, 30, 0);
  th_multi_tag_error(&p, bad, size, why);
  th_pair_close(&p);
}

Test(ucx_multi, tag_matching_no_buffer_fails_naming_it, .timeout = 60) {
  for (int t = 0; t < NTLS; t++) {
    expect_tag_error(tls_list[t], 7, 100, "matches no buffer");
    expect_tag_error(tls_list[t], 7, 3 * MIB, "matches no buffer"); /* a rendezvous, dropped */
  }
}

Test(ucx_multi, tag_of_an_already_filled_buffer_fails, .timeout = 60) {
  for (int t = 0; t < NTLS; t++)
    expect_tag_error(tls_list[t], 1, 100, "matches only already filled buffers");
}

Test(ucx_multi, message_larger_than_its_buffer_fails, .timeout = 60) {
  for (int t = 0; t < NTLS; t++) {
    pair_t p;
    ucx_pair_open(&p, tls_list[t], 30, 0);
    th_multi_too_large(&p);
    th_pair_close(&p);
  }
}

/* Refused at irecv, before anything is taken: 0 or 9 buffers, no tags, and
 * distinct tags that UCX's 16 tag bits cannot tell apart. */
Test(ucx_multi, bad_groups_are_refused) {
  pair_t p;
  ucx_pair_open(&p, tls_list[0], 30, 0);
  char buf[64];
  void *bufs[RCOLL_NET_MAX_RECVS + 1], *req = NULL;
  size_t sizes[RCOLL_NET_MAX_RECVS + 1];
  int tags[RCOLL_NET_MAX_RECVS + 1];
  for (int i = 0; i <= RCOLL_NET_MAX_RECVS; i++)
    bufs[i] = buf, sizes[i] = sizeof buf, tags[i] = i;
  cr_assert_eq(ops->irecv(p.recv, 9, bufs, sizes, tags, NULL, &req), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "irecv of 9 buffers (max_recvs is 8)"), "text: %s", rcoll_error_text());
  cr_assert_null(req);
  cr_assert_eq(ops->irecv(p.recv, 0, bufs, sizes, tags, NULL, &req), rcollInvalidArgument);
  cr_assert_eq(ops->irecv(p.recv, 2, bufs, sizes, NULL, NULL, &req), rcollInvalidArgument);
  tags[1] = 65536 + 0; /* same low 16 bits as tags[0] = 0 */
  cr_assert_eq(ops->irecv(p.recv, 3, bufs, sizes, tags, NULL, &req), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "tags 0 and 65536"), "text: %s", rcoll_error_text());
  cr_assert_null(req);
  /* Nothing was taken: every slot is still there for single receives. */
  cr_assert_eq(((ucx_conn_t *)p.recv)->nfree, UCX_NREQS);
  const size_t after[] = {1, 70000};
  ucx_pair_exchange(&p, 2, after, 0);
  th_pair_close(&p);
}

/* A grouped receive takes one request slot per buffer, all or none: with
 * fewer free than it needs it gets a NULL request, and once enough are free
 * it is posted behind the single receives before it. */
static int free_slots(void *recv) { return ((ucx_conn_t *)recv)->nfree; }

Test(ucx_multi, needs_one_slot_per_buffer, .timeout = 60) {
  pair_t p;
  ucx_pair_open(&p, tls_list[0], 30, 0);
  th_multi_slots(&p, UCX_NREQS, ucx_pair_wait_both, free_slots);
  th_pair_close(&p);
}

/* A stream of groups of 1..8 buffers, several in flight, against a sender
 * thread (th_group_stream); sizes mix empty, eager and rendezvous messages.
 * Then single receives. */
Test(ucx_multi, stream_of_groups_against_a_sender_thread, .timeout = 180) {
  enum { N = 600, W = 6, EXTRA = 9 };
  size_t sizes[N];
  char *rb[N];
  for (int i = 0; i < N; i++) {
    sizes[i] = i % 7 == 0 ? 0 : i % 5 == 0 ? (size_t)(150000 + i * 331) : (size_t)((i * 53) % 9000);
    rb[i] = th_rbuf_new(sizes[i] + EXTRA);
  }
  for (int t = 0; t < NTLS; t++) {
    pair_t p;
    ucx_pair_open(&p, tls_list[t], 30, 0);
    int groups = th_group_stream(&p, N, sizes, rb, EXTRA, W, tls_list[t]);
    cr_assert_gt(groups, N / 8, "only %d grouped receives ran", groups);
    cr_assert_eq(((ucx_conn_t *)p.recv)->nfree, UCX_NREQS);
    const size_t after[] = {0, 3, 65536, MIB + 1};
    ucx_pair_exchange(&p, 4, after, 17);
    th_pair_close(&p);
  }
  for (int i = 0; i < N; i++)
    free(rb[i]);
}

/* ---- a sender that dies with a group half received ----
 * The child never touched UCX before the fork; it connects to the parent's
 * handle (through a pipe), sends tag 2 (100 B) and tag 1 (8 MiB), says so,
 * and progresses them until it is killed (alarm ends it should the parent
 * fail first). */
static void child_send_two(int hfd, int sfd, const char *tls) {
  static rcoll_settings_t s;
  char handle[RCOLL_NET_HANDLE_BYTES];
  void *ctx = NULL, *send = NULL, *req[2] = {NULL, NULL};
  alarm(30);
  if (read(hfd, handle, sizeof handle) != (ssize_t)sizeof handle)
    _exit(4);
  setenv("UCX_TLS", tls, 1);
  ucx_pair_settings(&s, 30);
  rcoll_net_config_t cfg = {.settings = &s, .secret = SECRET};
  if (ops->init(&cfg, &ctx) != rcollSuccess)
    _exit(5);
  for (int64_t end = now_ms() + 10000; send == NULL && now_ms() < end;)
    if (ops->connect(ctx, 0, handle, &send) != rcollSuccess)
      _exit(6);
  const size_t sizes[2] = {100, 8 * MIB};
  char *buf[2] = {malloc(sizes[0]), malloc(sizes[1])};
  for (int i = 0; i < 2; i++) {
    th_fill(buf[i], sizes[i], 2 - i);
    if (send == NULL || ops->isend(send, buf[i], sizes[i], 2 - i, NULL, &req[i]) != rcollSuccess || !req[i])
      _exit(7);
  }
  if (write(sfd, "s", 1) != 1)
    _exit(3);
  for (int done = 0, i = 0;;) /* until killed */
    if (ops->test(req[i], &done, NULL) != rcollSuccess || (done && ++i == 2))
      pause();
}

/* The group of tags {1, 2, 3} gets two of its messages, then the sender
 * dies: the receive fails with a remote error naming the peer within a few
 * seconds (RCOLL_TIMEOUT is 1 s, so the grace for data in flight is short),
 * later receives fail at once, and closing is prompt. */
static void sender_dies_mid_group(const char *tls) {
#if defined(__SANITIZE_THREAD__)
  /* The forked sender starts UCX's threads, and ThreadSanitizer cannot
   * follow a child of a process with threads (its own, at least) that does:
   * "dup thread with used id", and the child dies. */
  cr_skip_test("a forked child that starts threads is beyond ThreadSanitizer");
#endif
  int hp[2], sp[2];
  cr_assert_eq(pipe(hp), 0);
  cr_assert_eq(pipe(sp), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0)
    child_send_two(hp[0], sp[1], tls);
  rcoll_settings_t set;
  char handle[RCOLL_NET_HANDLE_BYTES], c;
  void *listen, *recv, *req = NULL;
  setenv("UCX_TLS", tls, 1);
  ucx_pair_settings(&set, 1);
  void *ctx = th_ctx_new(ops, &set, SECRET);
  cr_assert_eq(ops->listen(ctx, 0, handle, &listen), rcollSuccess);
  cr_assert_eq(write(hp[1], handle, sizeof handle), (ssize_t)sizeof handle);
  recv = th_accept_for(ops, listen, 10000);
  cr_assert_not_null(recv);
  const int tags[3] = {1, 2, 3};
  const size_t caps[3] = {8 * MIB, 4096, 4096};
  char *rbufs[3];
  size_t got[3];
  for (int i = 0; i < 3; i++)
    rbufs[i] = th_rbuf_new(caps[i]);
  cr_assert_eq(ops->irecv(recv, 3, (void **)rbufs, caps, tags, NULL, &req), rcollSuccess);
  cr_assert_not_null(req);
  /* Tested (progressing the child's wire-up) until the child has sent. */
  struct pollfd pfd = {.fd = sp[0], .events = POLLIN};
  rcollResult_t r = rcollInProgress;
  for (int64_t end = now_ms() + 10000; poll(&pfd, 1, 0) == 0 && now_ms() < end;)
    r = th_wait_req(ops, req, got, 1);
  cr_assert_eq(read(sp[0], &c, 1), 1, "child failed before sending");
  cr_assert_eq(r, rcollInProgress, "the group finished with 2 of 3 messages sent: %s", rcoll_error_text());
  r = th_wait_req(ops, req, got, 50);
  cr_assert_eq(r, rcollInProgress, "%s", rcoll_error_text());
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  int64_t t0 = now_ms();
  r = th_wait_req(ops, req, got, 10000);
  int64_t dt = now_ms() - t0;
  cr_assert_eq(r, rcollRemoteError, "UCX_TLS=%s: got %d after %lld ms: %s", tls, r, (long long)dt,
               rcoll_error_text());
  cr_assert_lt(dt, 4000, "UCX_TLS=%s: failing took %lld ms", tls, (long long)dt);
  cr_assert(strstr(rcoll_error_text(), "127.0.0.1:"), "text names no address: %s", rcoll_error_text());
  int done = 0;
  cr_assert_eq(ops->test(req, &done, got), rcollRemoteError, "testing again repeats the error");
  cr_assert_eq(done, 0);
  th_rbuf_check(rbufs[1], 100, caps[1], 2, "the small message, in before the death");
  th_rbuf_check(rbufs[2], 0, caps[2], 3, "the buffer whose message never came");
  int tag = 0;
  cr_assert_neq(ops->irecv(recv, 1, (void **)rbufs, caps, &tag, NULL, &req), rcollSuccess);
  int64_t t1 = now_ms();
  ops->close_recv(recv);
  ops->close_listen(listen);
  ops->finalize(ctx);
  cr_assert_lt(now_ms() - t1, 3000, "closing took %lld ms", (long long)(now_ms() - t1));
  for (int i = 0; i < 3; i++)
    free(rbufs[i]);
}

Test(ucx_multi, sender_death_mid_group_tcp, .timeout = 60) { sender_dies_mid_group("tcp,self"); }
Test(ucx_multi, sender_death_mid_group_shm, .timeout = 60) { sender_dies_mid_group("posix,cma,self"); }

#endif /* RCOLL_HAVE_UCX */
