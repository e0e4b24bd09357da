/* What the shared-memory transport says when a peer's listener cannot be
 * reached: "pid N has exited" when the peer process is gone (the common
 * case: it crashed), and the network-namespace hint only when the process is
 * alive (here it moved into a network namespace of its own, where its unix
 * socket cannot be seen). The peer is a forked child that listens and hands
 * its handle back through a pipe. */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../transports/shm/shm.h"
#include "../transports/shm/shm_priv.h"
#include "clock.h"
#include "error.h"
#include "support/transport_harness.h"

static const rcoll_transport_ops_t *ops = &shm_ops;
static char test_dir[128];

static void peer_setup(void) {
  snprintf(test_dir, sizeof test_dir, "/dev/shm/rcoll-peer-XXXXXX");
  cr_assert_not_null(mkdtemp(test_dir), "mkdtemp: %s", strerror(errno));
}

static void peer_teardown(void) { rmdir(test_dir); }

TestSuite(shm_peer, .init = peer_setup, .fini = peer_teardown, .timeout = 60);

static void settings(rcoll_settings_t *s) {
  memset(s, 0, sizeof *s);
  shm_settings(s)->shm_slots = 4;
  shm_settings(s)->shm_slot_size = 4096;
  s->timeout = 10;
  snprintf(s->shm_dir, sizeof s->shm_dir, "%s", test_dir);
}

/* The child: optionally into a network namespace of its own, then listen,
 * send the handle, and either exit at once (a crash leaves the socket to the
 * kernel) or wait for the parent's word. Exit status 2: could not unshare. */
static void child(int out_fd, int hold_fd, int new_netns) {
  if (new_netns && unshare(CLONE_NEWNET) != 0)
    _exit(2);
  rcoll_settings_t s;
  settings(&s);
  void *ctx = th_ctx_try(ops, &s, TH_SECRET), *listen = NULL;
  char handle[RCOLL_NET_HANDLE_BYTES];
  if (ctx == NULL || ops->listen(ctx, 0, handle, &listen) != rcollSuccess)
    _exit(3);
  if (write(out_fd, handle, sizeof handle) != (ssize_t)sizeof handle)
    _exit(4);
  char c;
  if (hold_fd >= 0 && read(hold_fd, &c, 1) < 0)
    _exit(5);
  _exit(0);
}

/* Connects to the handle until the transport gives up (at most 5 s). */
static rcollResult_t connect_until_error(const char *handle) {
  rcoll_settings_t s;
  settings(&s);
  void *ctx = th_ctx_new(ops, &s, TH_SECRET), *send = NULL;
  rcollResult_t r = rcollSuccess;
  int64_t deadline = rcoll_now_ms() + 5000;
  while (r == rcollSuccess && send == NULL && rcoll_now_ms() < deadline)
    r = ops->connect(ctx, 0, handle, &send);
  cr_assert_null(send, "connected to a listener that should be unreachable");
  ops->finalize(ctx);
  return r;
}

Test(shm_peer, a_dead_peer_is_said_to_have_exited) {
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0)
    child(fds[1], -1, 0);
  char handle[RCOLL_NET_HANDLE_BYTES];
  cr_assert_eq(read(fds[0], handle, sizeof handle), (ssize_t)sizeof handle, "the child sent no handle");
  int st = 0;
  cr_assert_eq(waitpid(pid, &st, 0), pid); /* reaped: the pid no longer exists */
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
  rcollResult_t r = connect_until_error(handle);
  const char *msg = rcoll_error_text();
  char want[64];
  snprintf(want, sizeof want, "pid %d has exited", (int)pid);
  cr_assert_eq(r, rcollSystemError, "got %d: %s", r, msg);
  cr_assert(strstr(msg, want) != NULL, "\"%s\" should say \"%s\"", msg, want);
  cr_assert(strstr(msg, "network namespace") == NULL, "\"%s\" blames a namespace for a dead peer", msg);
  close(fds[0]);
  close(fds[1]);
}

Test(shm_peer, a_live_peer_elsewhere_gets_the_namespace_hint) {
  int fds[2], hold[2];
  cr_assert_eq(pipe(fds), 0);
  cr_assert_eq(pipe(hold), 0);
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0)
    child(fds[1], hold[0], 1);
  close(fds[1]);
  char handle[RCOLL_NET_HANDLE_BYTES];
  ssize_t got = read(fds[0], handle, sizeof handle);
  if (got != (ssize_t)sizeof handle) {
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 2)
      cr_skip_test("cannot make a network namespace here (unshare needs CAP_SYS_ADMIN)");
    cr_assert_fail("the child sent no handle (status %d)", st);
  }
  rcollResult_t r = connect_until_error(handle);
  char msg[RCOLL_ERROR_TEXT_MAX];
  snprintf(msg, sizeof msg, "%s", rcoll_error_text());
  cr_assert_eq(write(hold[1], "x", 1), 1);
  int st = 0;
  cr_assert_eq(waitpid(pid, &st, 0), pid);
  cr_assert_eq(r, rcollSystemError, "got %d: %s", r, msg);
  cr_assert(strstr(msg, "in another network namespace") != NULL && strstr(msg, "running") != NULL,
            "\"%s\" should give the namespace hint for a live peer", msg);
  cr_assert(strstr(msg, "exited") == NULL, "\"%s\" says a live peer exited", msg);
}
