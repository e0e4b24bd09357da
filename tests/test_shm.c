/* The shared-memory transport, driven through its ops table as the engine
 * drives it: a sender and a receiver as two threads of one process (the
 * single-copy path is then a memcpy) and as two processes (fork; the
 * single-copy path is process_vm_readv). Payloads carry a pattern that
 * depends on the message number and offset, so a lost, reordered or
 * truncated piece shows. Every test uses its own segment directory under
 * /dev/shm, so that leftovers can be counted. */
#include <criterion/criterion.h>
#include <dirent.h>
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
#include <time.h>
#include <unistd.h>

#include "../transports/shm/shm.h"
#include "../transports/shm/shm_priv.h"
#include "clock.h"
#include "comm.h"
#include "error.h"
#include "rcoll.h"
#include "support/transport_harness.h"

#define SECRET TH_SECRET
#define SLOT 4096
#define MIB TH_MIB

static const rcoll_transport_ops_t *ops = &shm_ops;
/* What the forked sender's stream sends with (a test may swap isend). */
static const rcoll_transport_ops_t *child_ops = &shm_ops;
static char test_dir[128];

/* A fresh segment directory per test (Criterion runs each in a process). */
static void shm_setup(void) {
  snprintf(test_dir, sizeof test_dir, "/dev/shm/rcoll-test-XXXXXX");
  cr_assert_not_null(mkdtemp(test_dir), "mkdtemp: %s", strerror(errno));
}

static void shm_teardown(void) { rmdir(test_dir); }

TestSuite(shm, .init = shm_setup, .fini = shm_teardown, .timeout = 120);

/* Files left in the test directory. */
static int dir_entries(void) {
  int n = 0;
  DIR *d = opendir(test_dir);
  for (struct dirent *e; d && (e = readdir(d));)
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

typedef struct cfg {
  int slots, slot_size;
  long cma, memcpy_min, exchange;
  int timeout;
} cfg_t;

static void settings(rcoll_settings_t *s, const cfg_t *c) {
  memset(s, 0, sizeof *s);
  shm_settings(s)->shm_slots = c->slots;
  shm_settings(s)->shm_slot_size = c->slot_size;
  shm_settings(s)->shm_cma_threshold = c->cma;
  shm_settings(s)->shm_memcpy_threshold = c->memcpy_min;
  shm_settings(s)->shm_exchange_threshold = c->exchange;
  s->timeout = c->timeout ? c->timeout : 30;
  snprintf(s->shm_dir, sizeof s->shm_dir, "%s", test_dir);
}

typedef th_pair_t pair_t;

static void pair_listen(pair_t *p, const cfg_t *c) {
  memset(p, 0, sizeof *p);
  settings(&p->set, c);
  th_pair_listen(p, ops);
}

static void pair_open(pair_t *p, const cfg_t *c) {
  pair_listen(p, c);
  p->sctx = th_ctx_try(ops, &p->set, SECRET);
  th_pair_connect(p, 5000, 0, "shm");
}

/* Receives land at every alignment (streaming stores align first). */
#define SHIFT 8

static int exchange(pair_t *p, int n, const size_t *sizes, size_t extra) {
  return th_exchange(p, n, sizes, extra, SHIFT);
}

/* Around the payload rules: up to 48 bytes share the header's line (a
 * SMALL slot), a slot of SLOT bytes carries SLOT - 64. */
static const size_t sizes_all[] = {0,         1,         8,        47,    48,    49,
                                   64,        SLOT - 65, SLOT - 64, SLOT - 63, 3 * SLOT, 65535,
                                   65537,     MIB + 13,  4 * MIB - 1, 64 * MIB};
#define NSIZES ((int)(sizeof sizes_all / sizeof sizes_all[0]))

/* ---- two threads of one process ---- */

Test(shm, threads_sizes_ring_memcpy_and_crossover) {
  const cfg_t cfgs[] = {{.slots = 8, .slot_size = SLOT, .memcpy_min = 0},
                        {.slots = 8, .slot_size = SLOT, .memcpy_min = 65536},
                        {.slots = 2, .slot_size = 256, .memcpy_min = 1}};
  for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
    pair_t p;
    pair_open(&p, &cfgs[c]);
    cr_assert_eq(((shm_conn_t *)p.send)->copy, SHM_COPY_MEMCPY, "threads of one process use memcpy");
    cr_assert_eq(dir_entries(), 0, "segments must be unlinked once both ends mapped them");
    exchange(&p, NSIZES, sizes_all, 0);
    exchange(&p, NSIZES, sizes_all, 3 * SLOT + 7); /* receives posted larger than the send */
    th_pair_close(&p);
  }
  /* Sizes just below, at and above the threshold alternate on one ring. */
  size_t cross[60];
  for (int i = 0; i < 60; i++)
    cross[i] = 65536 + (size_t)(i % 3) - 1;
  pair_t p;
  pair_open(&p, &(cfg_t){.slots = 4, .slot_size = SLOT, .memcpy_min = 65536});
  exchange(&p, 60, cross, 5);
  th_pair_close(&p);
}

/* Which path a send took shows in when it completes: through the ring at
 * once, single-copy only once the receiver has read it. With the memcpy
 * threshold off, a plain isend of 64 KiB goes through the ring, and so does
 * an isend_single below the exchange threshold; an isend_single at it waits
 * for its receive. */
Test(shm, exchange_sends_go_single_copy_from_their_threshold) {
  pair_t p;
  pair_open(&p, &(cfg_t){.slots = 32, .slot_size = SLOT, .memcpy_min = 0, .exchange = 16384});
  static char src[3][65536], dst[3][65536];
  const size_t len[3] = {65536, 16383, 16384};
  void *req[3];
  int done = 0;
  for (int i = 0; i < 3; i++)
    memset(src[i], 'a' + i, len[i]);
  cr_assert_eq(ops->isend(p.send, src[0], len[0], 0, NULL, &req[0]), rcollSuccess);
  cr_assert_eq(ops->isend_single(p.send, src[1], len[1], 0, NULL, &req[1]), rcollSuccess);
  cr_assert_eq(ops->isend_single(p.send, src[2], len[2], 0, NULL, &req[2]), rcollSuccess);
  for (int i = 0; i < 3; i++)
    cr_assert_not_null(req[i]);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(ops->test(req[i], &done, NULL), rcollSuccess);
    cr_assert_eq(done, 1, "send %d (%zu bytes) went through the ring: done before any receive", i, len[i]);
  }
  cr_assert_eq(ops->test(req[2], &done, NULL), rcollSuccess);
  cr_assert_eq(done, 0, "an exchange send at the threshold is read by the receiver: not done before it");
  for (int i = 0; i < 3; i++) {
    void *r = NULL, *d = dst[i];
    size_t sz = sizeof dst[i], got = 0;
    int tag = 0;
    cr_assert_eq(ops->irecv(p.recv, 1, &d, &sz, &tag, NULL, &r), rcollSuccess);
    cr_assert_eq(th_wait_req(ops, r, &got, 5000), rcollSuccess, "receive %d: %s", i, rcoll_error_text());
    cr_assert_eq(got, len[i]);
    cr_assert_eq(memcmp(dst[i], src[i], len[i]), 0, "message %d arrived whole", i);
  }
  cr_assert_eq(th_wait_req(ops, req[2], NULL, 5000), rcollSuccess, "the single-copy send completes once read");
  th_pair_close(&p);
}

/* More messages than request slots, of mixed sizes, in flight at once: both
 * sides meet NULL requests (out of slots: retry after completing older ones)
 * and order must hold. */
Test(shm, many_in_flight_keep_order) {
  enum { N = 400 };
  size_t sizes[N];
  for (int i = 0; i < N; i++)
    sizes[i] = (i % 7 == 0) ? (size_t)(200000 + i * 977) : (size_t)((i * 37) % (SLOT + 100));
  pair_t p;
  pair_open(&p, &(cfg_t){.slots = 16, .slot_size = SLOT, .memcpy_min = 100000});
  cr_assert_gt(exchange(&p, N, sizes, 11), 0, "%d messages fit in %d request slots?", N, SHM_NREQS);
  th_pair_close(&p);
}

static void expect_larger_error(size_t sent, size_t posted, long memcpy_min) {
  pair_t p;
  char *sb = calloc(1, sent), *rb = calloc(1, posted);
  void *sreq, *rreq, *rbp = rb;
  int tag = 0;
  pair_open(&p, &(cfg_t){.slots = 4, .slot_size = SLOT, .memcpy_min = memcpy_min});
  cr_assert_eq(ops->isend(p.send, sb, sent, 0, NULL, &sreq), rcollSuccess);
  cr_assert_eq(ops->irecv(p.recv, 1, &rbp, &posted, &tag, NULL, &rreq), rcollSuccess);
  rcollResult_t r = th_wait_req(ops, rreq, NULL, 5000);
  cr_assert_eq(r, rcollInvalidUsage, "got %d: %s", r, rcoll_error_text());
  char want[128];
  snprintf(want, sizeof want, "message of %zu bytes", sent);
  cr_assert(strstr(rcoll_error_text(), want) && strstr(rcoll_error_text(), "larger than posted receive"),
            "text: %s", rcoll_error_text());
  cr_assert_neq(ops->irecv(p.recv, 1, &rbp, &posted, &tag, NULL, &rreq), rcollSuccess,
                "a failed connection fails later calls at once");
  th_pair_close(&p);
  free(sb);
  free(rb);
}

Test(shm, message_larger_than_posted_receive_fails) {
  expect_larger_error(48, 40, 0); /* a SMALL slot says its size in len */
  expect_larger_error(1000, 999, 0);
  expect_larger_error(MIB, MIB / 2, 0);
  expect_larger_error(MIB, MIB / 2, 4096); /* the single-copy path checks too */
}

/* ---- two processes ---- */

/* The child's half of a two-process exchange: its own context, connect or
 * accept, then the stream; the exit status says how it went. */
typedef struct proc_job {
  pair_t *p;
  int child_sends;
  int n;
  const size_t *sizes;
  size_t extra;
} proc_job_t;

static void *proc_connect(pair_t *p) {
  void *ctx = th_ctx_try(ops, &p->set, SECRET), *comm = NULL;
  int64_t end = rcoll_now_ms() + 5000;
  while (ctx && comm == NULL && rcoll_now_ms() < end)
    if (ops->connect(ctx, 0, p->handle, &comm) != rcollSuccess)
      return NULL;
  return comm;
}

static void *proc_accept(pair_t *p) {
  void *comm = NULL;
  int64_t end = rcoll_now_ms() + 5000;
  while (comm == NULL && rcoll_now_ms() < end)
    if (ops->accept(p->listen, &comm) != rcollSuccess)
      return NULL;
  return comm;
}

/* In the child the listener belongs to the parent; the child connects. */
static int proc_child(const proc_job_t *j) {
  alarm(60);
  void *comm = proc_connect(j->p);
  if (comm == NULL)
    return 2;
  th_stream_t *s = th_stream_new(child_ops, comm, j->child_sends, j->n, j->sizes, j->child_sends ? 0 : j->extra,
                                 SHIFT);
  th_stream_run(s);
  char why[256] = "";
  int bad = s->result != rcollSuccess ? 3 : !j->child_sends && th_stream_verify(s, j->sizes, why, sizeof why);
  if (bad)
    fprintf(stderr, "child: %s %s\n", s->err, why);
  ops->close_send(comm);
  return bad ? 4 : 0;
}

static void proc_exchange(const cfg_t *c, int child_sends, int n, const size_t *sizes, size_t extra,
                          int want_copy) {
  pair_t p;
  pair_listen(&p, c);
  proc_job_t j = {&p, child_sends, n, sizes, extra};
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0)
    _exit(proc_child(&j));
  p.recv = proc_accept(&p);
  cr_assert_not_null(p.recv, "accept: %s", rcoll_error_text());
  cr_assert_eq(dir_entries(), 0, "segments must be unlinked once both ends mapped them");
  cr_assert_eq(((shm_conn_t *)p.recv)->copy, want_copy);
  th_stream_t *s = th_stream_new(ops, p.recv, 0, n, sizes, extra, SHIFT);
  th_stream_run(s);
  int status = 0;
  waitpid(pid, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed (status 0x%x)", status);
  cr_assert_eq(s->result, rcollSuccess, "receive failed: %s", s->err);
  char why[256];
  cr_assert_eq(th_stream_verify(s, sizes, why, sizeof why), 0, "%s", why);
  th_stream_free(s);
  th_pair_close(&p);
}

Test(shm, processes_sizes_ring_and_cma) {
  /* The acceptor is the receiver: the child connects and sends. */
  proc_exchange(&(cfg_t){.slots = 8, .slot_size = SLOT, .cma = 0}, 1, NSIZES, sizes_all, 0, SHM_COPY_CMA);
  proc_exchange(&(cfg_t){.slots = 8, .slot_size = SLOT, .cma = 65536}, 1, NSIZES, sizes_all, 777,
                SHM_COPY_CMA);
  proc_exchange(&(cfg_t){.slots = 16, .slot_size = 65536, .cma = 1}, 1, NSIZES, sizes_all, 0,
                SHM_COPY_CMA);
}

Test(shm, processes_many_in_flight_across_the_crossover) {
  enum { N = 300 };
  size_t sizes[N];
  for (int i = 0; i < N; i++)
    sizes[i] = (i % 5 == 0) ? (size_t)(262144 + (i % 3) - 1) : (size_t)((i * 53) % (3 * SLOT));
  proc_exchange(&(cfg_t){.slots = 8, .slot_size = SLOT, .cma = 262144}, 1, N, sizes, 9, SHM_COPY_CMA);
}

/* isend_single (a send of an exchange) goes single-copy from the exchange
 * threshold even with the CMA threshold off: every size across it, sent
 * with isend_single alone, arrives whole (the child's stream). */
Test(shm, processes_exchange_sends_use_cma_from_their_threshold) {
  static rcoll_transport_ops_t single;
  single = shm_ops;
  single.isend = shm_ops.isend_single;
  child_ops = &single;
  cr_assert_not_null(shm_ops.isend_single);
  size_t sizes[NSIZES + 3];
  memcpy(sizes, sizes_all, sizeof sizes_all);
  sizes[NSIZES] = 16383, sizes[NSIZES + 1] = 16384, sizes[NSIZES + 2] = 16385;
  proc_exchange(&(cfg_t){.slots = 8, .slot_size = SLOT, .cma = 0, .exchange = 16384}, 1, NSIZES + 3, sizes, 5,
                SHM_COPY_CMA);
}

/* ---- refusals, failures, fallbacks ---- */

static int raw_connect(const char handle[RCOLL_NET_HANDLE_BYTES]) {
  shm_handle_t h;
  memcpy(&h, handle, sizeof h);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  size_t len = strlen(h.sock);
  memcpy(a.sun_path + 1, h.sock, len);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  cr_assert_eq(connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)),
               0, "%s", strerror(errno));
  return fd;
}

/* A connection with the wrong secret, a stray with garbage and one naming a
 * file outside our pattern are dropped; the right one is accepted, and only
 * that one. */
Test(shm, wrong_secret_is_dropped) {
  pair_t p;
  pair_listen(&p, &(cfg_t){.slots = 4, .slot_size = SLOT});
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
  cr_assert_eq(dir_entries(), 0, "the refused connector removed its segment");
  const size_t sizes[] = {5, 300000};
  exchange(&p, 2, sizes, 0);
  ops->finalize(bad_ctx);
  close(stray);
  close(evil);
  th_pair_close(&p);
}

/* A child that sends into the ring (or publishes a single-copy address) and
 * is then killed: the receiver fails with a remote error, soon. */
static void killed_sender(const cfg_t *c, size_t n, int receive_first) {
  pair_t p;
  pair_listen(&p, c);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    void *comm = proc_connect(&p);
    char *b = malloc(n);
    void *req = NULL;
    th_fill(b, n, 0);
    if (comm == NULL || ops->isend(comm, b, n, 0, NULL, &req) != rcollSuccess || req == NULL)
      _exit(2);
    for (;;)
      pause(); /* never tests again: the ring stays as isend left it */
  }
  p.recv = proc_accept(&p);
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

Test(shm, sender_killed_mid_transfer_fails_receiver) {
  killed_sender(&(cfg_t){.slots = 4, .slot_size = SLOT, .cma = 0}, 8 * MIB, 1);
  killed_sender(&(cfg_t){.slots = 4, .slot_size = SLOT, .cma = 4096}, 8 * MIB, 0);
}

/* The receiver process dies: the sender's pending send fails. */
Test(shm, receiver_killed_fails_sender) {
  pair_t p;
  pair_listen(&p, &(cfg_t){.slots = 4, .slot_size = SLOT});
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    proc_accept(&p);
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
Test(shm, peer_close_fails_pending_requests) {
  pair_t p;
  size_t n = MIB;
  char *b = calloc(1, n), out[100];
  void *req, *bp = b;
  int tag = 0;
  pair_open(&p, &(cfg_t){.slots = 2, .slot_size = SLOT, .memcpy_min = 0});
  cr_assert_eq(ops->isend(p.send, b, n, 0, NULL, &req), rcollSuccess);
  ops->close_recv(p.recv);
  p.recv = NULL;
  cr_assert_eq(th_wait_req(ops, req, NULL, 2000), rcollRemoteError);
  cr_assert(strstr(rcoll_error_text(), "closed the connection"), "text: %s", rcoll_error_text());
  th_pair_close(&p);

  pair_open(&p, &(cfg_t){.slots = 8, .slot_size = SLOT});
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
Test(shm, wait_sleeps_and_wakes_on_data) {
  pair_t p;
  pair_open(&p, &(cfg_t){.slots = 4, .slot_size = SLOT});
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

static void expect_init_error(const cfg_t *c, const char *dir, rcollResult_t want, const char *needle) {
  rcoll_settings_t s;
  rcoll_net_config_t cfg = {.settings = &s, .secret = 1};
  void *ctx = (void *)1;
  settings(&s, c);
  if (dir != NULL)
    snprintf(s.shm_dir, sizeof s.shm_dir, "%s", dir);
  cr_assert_eq(ops->init(&cfg, &ctx), want, "%s", rcoll_error_text());
  cr_assert_null(ctx);
  cr_assert(strstr(rcoll_error_text(), needle), "\"%s\" does not say %s", rcoll_error_text(), needle);
}

/* A missing directory, or one too small for the rings, makes init fail (the
 * core then uses the next transport); so do settings out of range. */
Test(shm, init_refuses_unusable_dirs_and_bad_settings) {
  expect_init_error(&(cfg_t){.slots = 4, .slot_size = SLOT}, "/nonexistent/rcoll-shm", rcollSystemError,
                    "/nonexistent/rcoll-shm");
  expect_init_error(&(cfg_t){.slots = 4096, .slot_size = 64 * MIB}, NULL, rcollSystemError, "free");
  expect_init_error(&(cfg_t){.slots = 1, .slot_size = SLOT}, NULL, rcollInvalidArgument, "SHM_SLOTS");
  expect_init_error(&(cfg_t){.slots = 4, .slot_size = 1000}, NULL, rcollInvalidArgument, "SHM_SLOT_SIZE");
  expect_init_error(&(cfg_t){.slots = 4, .slot_size = SLOT, .cma = -1}, NULL, rcollInvalidArgument,
                    "THRESHOLD");
}

/* A directory that fills up: later rings get fewer slots, and once not even
 * the smallest fits, connect fails saying so. Needs a small tmpfs, mounted
 * in a mount namespace of this test process only (root); skipped without. */
Test(shm, full_directory_shrinks_rings_then_refuses) {
  if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      mount("tmpfs", test_dir, "tmpfs", 0, "size=3m") != 0)
    cr_skip_test("cannot mount a small tmpfs here: %s", strerror(errno));
  pair_t p;
  pair_listen(&p, &(cfg_t){.slots = 16, .slot_size = 65536}); /* 1 MiB + 4 KiB rings */
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
  cr_assert(slots[0] == 16 && slots[1] == 16 && slots[2] > 0 && slots[2] < 16, "rings of %u, %u, %u slots",
            slots[0], slots[1], slots[2]);
  pair_t q = {.ops = ops, .send = sends[2], .recv = recvs[2] ? recvs[2] : th_accept_for(ops, p.listen, 2000)};
  recvs[2] = q.recv;
  const size_t sizes[] = {100, 3 * MIB + 5};
  exchange(&q, 2, sizes, 0);
  for (int i = 0; i < 6; i++) {
    if (sends[i])
      ops->close_send(sends[i]);
    if (recvs[i])
      ops->close_recv(recvs[i]);
  }
  th_pair_close(&p);
  umount(test_dir);
}

Test(shm, properties_registration_and_flush) {
  pair_t p;
  rcoll_net_props_t props;
  char buf[64];
  void *mh = NULL, *req = NULL, *bp = buf, *bufs[2] = {buf, buf};
  size_t sz = sizeof buf, sizes[2] = {8, 8};
  int ndev = 0, tags[2] = {0, 0}, done = 0;
  pair_open(&p, &(cfg_t){.slots = 4, .slot_size = SLOT});
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

Test(shm, library_uses_shm_within_a_node_and_falls_back) {
  setenv("RCOLL_TIMEOUT", "20", 1);
  setenv("RCOLL_SHM_DIR", test_dir, 1);
  allreduce_pair("shm");
  cr_assert_eq(dir_entries(), 0, "nothing left in the segment directory");
  setenv("RCOLL_SHM_DIR", "/nonexistent/rcoll-shm", 1);
  allreduce_pair("socket");
  setenv("RCOLL_SHM_DIR", test_dir, 1);
  setenv("RCOLL_SHM_DISABLE", "1", 1);
  allreduce_pair("socket");
}
