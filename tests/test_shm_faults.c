/* The shared-memory transport's refusals and failures, driven through its
 * ops table: strangers and wrong secrets at the listener, a peer killed or
 * closed mid-transfer, waits that sleep, directories that cannot hold the
 * rings, and the library's fallback to sockets. The data paths are in
 * test_shm.c; the set-up in support/shm_pair.c. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../transports/shm/shm_priv.h"
#include "clock.h"
#include "comm.h"
#include "error.h"
#include "rcoll.h"
#include "support/shm_pair.h"

TestSuite(shm_faults, .init = shm_pair_dir_make, .fini = shm_pair_dir_remove, .timeout = 120);

static int raw_connect(const char handle[RCOLL_NET_HANDLE_BYTES]) {
  shm_handle_t h;
  memcpy(&h, handle, sizeof h);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  size_t len = strlen(h.sock);
  memcpy(a.sun_path + 1, h.sock, len);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  cr_assert_eq(connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)), 0,
               "%s", strerror(errno));
  return fd;
}

/* A connection with the wrong secret, a stray with garbage and one naming a
 * file outside our pattern are dropped; the right one is accepted, and only
 * that one. */
Test(shm_faults, wrong_secret_is_dropped) {
  pair_t p;
  shm_pair_listen(&p, &(shm_cfg_t){.slots = 4, .slot_size = SLOT});
  p.sctx = th_ctx_try(ops, &p.set, SECRET);
  void *bad_ctx = th_ctx_try(ops, &p.set, SECRET + 1), *bad = NULL;
  int stray = raw_connect(p.handle);
  cr_assert_eq(send(stray, "GET / HTTP/1.0\r\n\r\n", 18, 0), 18);
  int evil = raw_connect(p.handle);
  shm_conn_req_t req = {.magic = SHM_MAGIC, .secret = SECRET, .pid = getpid(), .seg = "../etc/passwd"};
  cr_assert_eq(send(evil, &req, sizeof req, 0), (ssize_t)sizeof req);
  rcollResult_t bad_r = rcollSuccess;
  int64_t end = rcoll_now_ms() + 5000;
  while ((bad_r == rcollSuccess || p.send == NULL) && rcoll_now_ms() < end) {
    if (bad_r == rcollSuccess)
      bad_r = ops->connect(bad_ctx, 0, p.handle, &bad);
    if (p.send == NULL)
      cr_assert_eq(ops->connect(p.sctx, 0, p.handle, &p.send), rcollSuccess, "%s", rcoll_error_text());
    void *got = NULL;
    cr_assert_eq(ops->accept(p.listen, &got), rcollSuccess);
    cr_assert(got == NULL || p.recv == NULL, "a second connection was accepted");
    if (got != NULL)
      p.recv = got;
  }
  cr_assert_eq(bad_r, rcollRemoteError, "a refused connect fails: %d", bad_r);
  cr_assert(strstr(rcoll_error_text(), "refused"), "text: %s", rcoll_error_text());
  cr_assert_null(bad);
  cr_assert_not_null(p.send);
  if (p.recv == NULL)
    p.recv = th_accept_for(ops, p.listen, 2000);
  cr_assert_not_null(p.recv);
  cr_assert_null(th_accept_for(ops, p.listen, 200), "a second connection was accepted");
  char c;
  cr_assert_eq(recv(stray, &c, 1, 0), 0, "the stray was closed by the listener");
  shm_conn_ack_t ack = {0};
  cr_assert_eq(recv(evil, &ack, sizeof ack, 0), (ssize_t)sizeof ack);
  cr_assert_neq(ack.status, 0, "a segment outside our pattern is refused");
  cr_assert_eq(shm_pair_dir_entries(), 0, "the refused connector removed its segment");
  const size_t sizes[] = {5, 300000};
  shm_pair_exchange(&p, 2, sizes, 0);
  ops->finalize(bad_ctx);
  close(stray);
  close(evil);
  th_pair_close(&p);
}

/* A child that sends into the ring (or publishes a single-copy address) and
 * is then killed: the receiver fails with a remote error, soon. */
static void killed_sender(const shm_cfg_t *c, size_t n, int receive_first) {
  pair_t p;
  shm_pair_listen(&p, c);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    void *comm = shm_pair_proc_connect(&p);
    char *b = malloc(n);
    void *req = NULL;
    th_fill(b, n, 0);
    if (comm == NULL || ops->isend(comm, b, n, 0, NULL, &req) != rcollSuccess || req == NULL)
      _exit(2);
    for (;;)
      pause(); /* never tests again: the ring stays as isend left it */
  }
  p.recv = shm_pair_proc_accept(&p);
  cr_assert_not_null(p.recv);
  char *rb = malloc(n);
  void *rreq, *rbp = rb;
  int tag = 0;
  cr_assert_eq(ops->irecv(p.recv, 1, &rbp, &n, &tag, NULL, &rreq), rcollSuccess);
  if (receive_first)
    cr_assert_eq(th_wait_req(ops, rreq, NULL, 300), rcollInProgress, "only part of the message can have come");
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  int64_t t0 = rcoll_now_ms();
  rcollResult_t r = th_wait_req(ops, rreq, NULL, 10000);
  cr_assert_eq(r, rcollRemoteError, "got %d: %s", r, rcoll_error_text());
  cr_assert_lt(rcoll_now_ms() - t0, 1000, "noticed after %lld ms", (long long)(rcoll_now_ms() - t0));
  cr_assert(strstr(rcoll_error_text(), "pid"), "the message names the peer: %s", rcoll_error_text());
  th_pair_close(&p);
  free(rb);
}

Test(shm_faults, sender_killed_mid_transfer_fails_receiver) {
  killed_sender(&(shm_cfg_t){.slots = 4, .slot_size = SLOT, .cma = 0}, 8 * MIB, 1);
  killed_sender(&(shm_cfg_t){.slots = 4, .slot_size = SLOT, .cma = 4096}, 8 * MIB, 0);
}

/* The receiver process dies: the sender's pending send fails. */
Test(shm_faults, receiver_killed_fails_sender) {
  pair_t p;
  shm_pair_listen(&p, &(shm_cfg_t){.slots = 4, .slot_size = SLOT});
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    shm_pair_proc_accept(&p);
    for (;;)
      pause();
  }
  void *sctx = th_ctx_try(ops, &p.set, SECRET), *send = NULL;
  for (int64_t end = rcoll_now_ms() + 5000; send == NULL && rcoll_now_ms() < end;)
    cr_assert_eq(ops->connect(sctx, 0, p.handle, &send), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_not_null(send);
  size_t n = MIB;
  char *b = calloc(1, n);
  void *req;
  cr_assert_eq(ops->isend(send, b, n, 0, NULL, &req), rcollSuccess);
  cr_assert_eq(th_wait_req(ops, req, NULL, 200), rcollInProgress, "the ring holds only 16 KiB");
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  int64_t t0 = rcoll_now_ms();
  cr_assert_eq(th_wait_req(ops, req, NULL, 10000), rcollRemoteError, "%s", rcoll_error_text());
  cr_assert_lt(rcoll_now_ms() - t0, 1000);
  cr_assert(strstr(rcoll_error_text(), "has exited"), "text: %s", rcoll_error_text());
  cr_assert_eq(ops->isend(send, b, 8, 0, NULL, &req), rcollRemoteError, "later calls fail fast");
  ops->close_send(send);
  ops->finalize(sctx);
  p.send = NULL;
  th_pair_close(&p);
  free(b);
}

/* Closing one end fails the other's pending requests, but what was sent
 * before the sender closed is still delivered. */
Test(shm_faults, peer_close_fails_pending_requests) {
  pair_t p;
  size_t n = MIB;
  char *b = calloc(1, n), out[100];
  void *req, *bp = b;
  int tag = 0;
  shm_pair_open(&p, &(shm_cfg_t){.slots = 2, .slot_size = SLOT, .memcpy_min = 0});
  cr_assert_eq(ops->isend(p.send, b, n, 0, NULL, &req), rcollSuccess);
  ops->close_recv(p.recv);
  p.recv = NULL;
  cr_assert_eq(th_wait_req(ops, req, NULL, 2000), rcollRemoteError);
  cr_assert(strstr(rcoll_error_text(), "closed the connection"), "text: %s", rcoll_error_text());
  th_pair_close(&p);

  shm_pair_open(&p, &(shm_cfg_t){.slots = 8, .slot_size = SLOT});
  th_fill(out, sizeof out, 3);
  cr_assert_eq(ops->isend(p.send, out, sizeof out, 0, NULL, &req), rcollSuccess);
  cr_assert_eq(th_wait_req(ops, req, NULL, 1000), rcollSuccess, "a ring send completes without the receiver");
  ops->close_send(p.send);
  p.send = NULL;
  cr_assert_eq(ops->irecv(p.recv, 1, &bp, &n, &tag, NULL, &req), rcollSuccess);
  cr_assert_eq(th_wait_req(ops, req, &n, 1000), rcollSuccess, "%s", rcoll_error_text());
  cr_assert(n == sizeof out && th_check(b, sizeof out, 3) == -1, "sent before close: %zu bytes", n);
  n = MIB;
  cr_assert_eq(ops->irecv(p.recv, 1, &bp, &n, &tag, NULL, &req), rcollSuccess);
  cr_assert_eq(th_wait_req(ops, req, NULL, 2000), rcollRemoteError, "nothing more will come");
  th_pair_close(&p);
  free(b);
}

/* The wait op sleeps in the kernel (no busy spin) and wakes as data comes. */
Test(shm_faults, wait_sleeps_and_wakes_on_data) {
  pair_t p;
  shm_pair_open(&p, &(shm_cfg_t){.slots = 4, .slot_size = SLOT});
  char in[64];
  void *req, *bp = in;
  size_t n = sizeof in;
  int tag = 0, done = 0;
  cr_assert_eq(ops->irecv(p.recv, 1, &bp, &n, &tag, NULL, &req), rcollSuccess);
  th_late_send_t l = {.ops = ops, .comm = p.send, .delay_ms = 300, .size = sizeof l.buf};
  pthread_t t;
  pthread_create(&t, NULL, th_late_send_run, &l);
  double cpu0 = th_thread_cpu_ms();
  int64_t t0 = rcoll_now_us(), woke = 0;
  while (!done && rcoll_now_us() - t0 < 5000000) {
    cr_assert_eq(ops->wait(&p.recv, 1, 2000000), rcollSuccess);
    cr_assert_eq(ops->test(req, &done, NULL), rcollSuccess);
    woke++;
  }
  int64_t dt = rcoll_now_us() - t0;
  double cpu = th_thread_cpu_ms() - cpu0;
  pthread_join(t, NULL);
  cr_assert(done);
  cr_assert(dt >= 290000 && dt < 1000000, "woke after %lld us for data sent at 300 ms", (long long)dt);
  cr_assert_lt(cpu, 30.0, "waiting 300 ms burned %.1f ms of CPU in %lld wakeups", cpu, (long long)woke);
  /* Nothing to wait for: the timeout bounds the sleep. */
  t0 = rcoll_now_us();
  cr_assert_eq(ops->irecv(p.recv, 1, &bp, &n, &tag, NULL, &req), rcollSuccess);
  cr_assert_eq(ops->wait(&p.recv, 1, 50000), rcollSuccess);
  dt = rcoll_now_us() - t0;
  cr_assert(dt >= 45000 && dt < 500000, "a 50 ms wait took %lld us", (long long)dt);
  th_pair_close(&p);
}

static void expect_init_error(const shm_cfg_t *c, const char *dir, rcollResult_t want, const char *needle) {
  rcoll_settings_t s;
  rcoll_net_config_t cfg = {.settings = &s, .secret = 1};
  void *ctx = (void *)1;
  shm_pair_settings(&s, c);
  if (dir != NULL)
    snprintf(s.shm_dir, sizeof s.shm_dir, "%s", dir);
  cr_assert_eq(ops->init(&cfg, &ctx), want, "%s", rcoll_error_text());
  cr_assert_null(ctx);
  cr_assert(strstr(rcoll_error_text(), needle), "\"%s\" does not say %s", rcoll_error_text(), needle);
}

/* A missing directory, or one too small for the rings, makes init fail (the
 * core then uses the next transport); so do settings out of range. */
Test(shm_faults, init_refuses_unusable_dirs_and_bad_settings) {
  expect_init_error(&(shm_cfg_t){.slots = 4, .slot_size = SLOT}, "/nonexistent/rcoll-shm", rcollSystemError,
                    "/nonexistent/rcoll-shm");
  expect_init_error(&(shm_cfg_t){.slots = 4096, .slot_size = 64 * MIB}, NULL, rcollSystemError, "free");
  expect_init_error(&(shm_cfg_t){.slots = 1, .slot_size = SLOT}, NULL, rcollInvalidArgument, "SHM_SLOTS");
  expect_init_error(&(shm_cfg_t){.slots = 4, .slot_size = 1000}, NULL, rcollInvalidArgument, "SHM_SLOT_SIZE");
  expect_init_error(&(shm_cfg_t){.slots = 4, .slot_size = SLOT, .cma = -1}, NULL, rcollInvalidArgument, "THRESHOLD");
}

/* A directory that fills up: later rings get fewer slots, and once not even
 * the smallest fits, connect fails saying so. Needs a small tmpfs, mounted
 * in a mount namespace of this test process only (root); skipped without. */
Test(shm_faults, full_directory_shrinks_rings_then_refuses) {
  if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      mount("tmpfs", shm_test_dir, "tmpfs", 0, "size=3m") != 0)
    cr_skip_test("cannot mount a small tmpfs here: %s", strerror(errno));
  pair_t p;
  shm_pair_listen(&p, &(shm_cfg_t){.slots = 16, .slot_size = 65536}); /* 1 MiB + 4 KiB rings */
  p.sctx = th_ctx_try(ops, &p.set, SECRET);
  uint32_t slots[6] = {0};
  void *sends[6] = {0}, *recvs[6] = {0};
  rcollResult_t r = rcollSuccess;
  int n = 0;
  for (; n < 6 && r == rcollSuccess; n++) {
    for (int64_t end = rcoll_now_ms() + 3000; sends[n] == NULL && r == rcollSuccess && rcoll_now_ms() < end;) {
      r = ops->connect(p.sctx, 0, p.handle, &sends[n]);
      if (recvs[n] == NULL)
        cr_assert_eq(ops->accept(p.listen, &recvs[n]), rcollSuccess);
    }
    if (sends[n] != NULL)
      slots[n] = ((shm_conn_t *)sends[n])->nslots;
  }
  cr_assert_eq(r, rcollSystemError, "connection %d: %d", n, r);
  cr_assert(strstr(rcoll_error_text(), "full"), "text: %s", rcoll_error_text());
  cr_assert(slots[0] == 16 && slots[1] == 16 && slots[2] > 0 && slots[2] < 16, "rings of %u, %u, %u slots", slots[0],
            slots[1], slots[2]);
  pair_t q = {.ops = ops, .send = sends[2], .recv = recvs[2] ? recvs[2] : th_accept_for(ops, p.listen, 2000)};
  recvs[2] = q.recv;
  const size_t sizes[] = {100, 3 * MIB + 5};
  shm_pair_exchange(&q, 2, sizes, 0);
  for (int i = 0; i < 6; i++) {
    if (sends[i])
      ops->close_send(sends[i]);
    if (recvs[i])
      ops->close_recv(recvs[i]);
  }
  th_pair_close(&p);
  umount(shm_test_dir);
}

Test(shm_faults, properties_registration_and_flush) {
  pair_t p;
  rcoll_net_props_t props;
  char buf[64];
  void *mh = NULL, *req = NULL, *bp = buf, *bufs[2] = {buf, buf};
  size_t sz = sizeof buf, sizes[2] = {8, 8};
  int ndev = 0, tags[2] = {0, 0}, done = 0;
  shm_pair_open(&p, &(shm_cfg_t){.slots = 4, .slot_size = SLOT});
  cr_assert(ops->size == sizeof(rcoll_transport_ops_t) && !strcmp(ops->name, "shm"));
  cr_assert_eq(ops->caps, RCOLL_NET_CAP_LOCAL_ONLY);
  cr_assert(ops->devices(p.sctx, &ndev) == rcollSuccess && ndev == 1);
  cr_assert_eq(ops->get_properties(p.sctx, 0, &props), rcollSuccess);
  cr_assert(props.ptr_support == RCOLL_PTR_HOST && props.max_recvs == 1);
  cr_assert_neq(ops->get_properties(p.sctx, 1, &props), rcollSuccess);
  cr_assert_eq(ops->reg_mr(p.recv, buf, sizeof buf, RCOLL_MEM_HOST, &mh), rcollSuccess);
  cr_assert(mh != NULL && ops->dereg_mr(p.recv, mh) == rcollSuccess);
  cr_assert_eq(ops->reg_mr(p.recv, buf, sizeof buf, RCOLL_MEM_CUDA, &mh), rcollInvalidUsage);
  cr_assert_eq(ops->iflush(p.recv, 1, &bp, &sz, &mh, &req), rcollSuccess);
  cr_assert_not_null(req, "a NULL flush request would read as 'out of slots'");
  cr_assert(ops->test(req, &done, NULL) == rcollSuccess && done == 1);
  cr_assert_eq(ops->irecv(p.recv, 2, bufs, sizes, tags, NULL, &req), rcollInvalidArgument);
  th_pair_close(&p);
}

/* ---- through the library ---- */

/* Two ranks of one process (rcollCommInitAll, one thread) all-reduce; the
 * communicator reports which transport carried it. */
static void allreduce_pair(const char *want_net) {
  rcollComm_t comms[2];
  enum { COUNT = 300000 };
  float *buf[2];
  cr_assert_eq(rcollCommInitAll(comms, 2, NULL), rcollSuccess, "%s", rcollGetLastError(NULL));
  for (int r = 0; r < 2; r++) {
    buf[r] = malloc(COUNT * sizeof(float));
    for (int i = 0; i < COUNT; i++)
      buf[r][i] = (float)(i % 1000) * (r + 1);
  }
  cr_assert_eq(rcollGroupStart(), rcollSuccess);
  for (int r = 0; r < 2; r++)
    rcollAllReduce(buf[r], buf[r], COUNT, rcollFloat32, rcollSum, comms[r], NULL);
  cr_assert_eq(rcollGroupEnd(), rcollSuccess, "%s", rcollGetLastError(NULL));
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < COUNT; i++)
      cr_assert_eq(buf[r][i], (float)(i % 1000) * 3, "rank %d element %d", r, i);
    cr_assert_str_eq(((struct rcollComm *)comms[r])->net_summary, want_net);
    rcollCommDestroy(comms[r]);
    free(buf[r]);
  }
}

Test(shm_faults, library_uses_shm_within_a_node_and_falls_back) {
  setenv("RCOLL_TIMEOUT", "20", 1);
  setenv("RCOLL_SHM_DIR", shm_test_dir, 1);
  allreduce_pair("shm");
  cr_assert_eq(shm_pair_dir_entries(), 0, "nothing left in the segment directory");
  setenv("RCOLL_SHM_DIR", "/nonexistent/rcoll-shm", 1);
  allreduce_pair("socket");
  setenv("RCOLL_SHM_DIR", shm_test_dir, 1);
  setenv("RCOLL_SHM_DISABLE", "1", 1);
  allreduce_pair("socket");
}
