/* The segments a killed rank leaves in the shared-memory directory are
 * removed by the next init on the host and by the survivors' teardown
 * (transports/shm/shm_sweep.c), and nothing of a live process is touched.
 * A segment exists only while its connection is being made, so the rank is
 * killed there: a forked process starts a real connect to a listener that
 * does not accept yet, says so, and gets SIGKILL. A rank killed in the
 * middle of an all-reduce over shm (public API, two processes) must leave no
 * segment either. Every test uses its own directory under /dev/shm. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../transports/shm/shm.h"
#include "../transports/shm/shm_priv.h"
#include "clock.h"
#include "error.h"
#include "rcoll.h"
#include "support/transport_harness.h"

static const rcoll_transport_ops_t *ops = &shm_ops;
static char test_dir[128];

static void sweep_setup(void) {
  snprintf(test_dir, sizeof test_dir, "/dev/shm/rcoll-sweep-XXXXXX");
  cr_assert_not_null(mkdtemp(test_dir), "mkdtemp: %s", strerror(errno));
}

/* Whatever a failed test left, so that /dev/shm stays clean. */
static void sweep_teardown(void) {
  DIR *d = opendir(test_dir);
  for (struct dirent *e; d && (e = readdir(d));)
    if (e->d_name[0] != '.')
      unlinkat(dirfd(d), e->d_name, 0);
  if (d)
    closedir(d);
  rmdir(test_dir);
}

TestSuite(shm_sweep, .init = sweep_setup, .fini = sweep_teardown, .timeout = 120);

static void settings(rcoll_settings_t *s) {
  memset(s, 0, sizeof *s);
  shm_settings(s)->shm_slots = 4;
  shm_settings(s)->shm_slot_size = 4096;
  s->timeout = 30;
  snprintf(s->shm_dir, sizeof s->shm_dir, "%s", test_dir);
}

/* Segments in the test directory created by pid (0: by anyone). */
static int segments_of(pid_t pid) {
  char prefix[48];
  int n = 0;
  snprintf(prefix, sizeof prefix, "rcoll-shm-%d-", (int)pid);
  DIR *d = opendir(test_dir);
  for (struct dirent *e; d && (e = readdir(d));)
    n += pid == 0 ? strncmp(e->d_name, "rcoll-shm-", 10) == 0
                  : strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  if (d)
    closedir(d);
  return n;
}

static int exists(const char *name) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", test_dir, name);
  return access(path, F_OK) == 0;
}

static void touch(const char *name) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", test_dir, name);
  int fd = open(path, O_CREAT | O_WRONLY, 0600);
  cr_assert_geq(fd, 0, "creating %s: %s", path, strerror(errno));
  close(fd);
}

/* A pid that no process has any more: a child that exited and was reaped. */
static pid_t dead_pid(void) {
  pid_t p = fork();
  if (p == 0)
    _exit(0);
  cr_assert_gt(p, 0);
  cr_assert_eq(waitpid(p, NULL, 0), p);
  return p;
}

static unsigned our_pidns(void) {
  struct stat st;
  cr_assert_eq(stat("/proc/self/ns/pid", &st), 0);
  return (unsigned)st.st_ino;
}

/* A forked rank that starts connecting to handle (the segment is created and
 * the request sent at the first call), reports that on the pipe and goes on
 * waiting for the answer, as a rank inside rcollCommInitRank would, until it
 * is killed. Returns its pid once its segment exists. */
static pid_t start_connecting_rank(const rcoll_settings_t *set, const char *handle) {
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    void *ctx = th_ctx_try(ops, set, TH_SECRET), *send = NULL;
    if (ctx == NULL || ops->connect(ctx, 0, handle, &send) != rcollSuccess)
      _exit(1);
    (void)!write(fds[1], "x", 1);
    for (int i = 0; i < 600000 && send == NULL; i++) { /* ~60 s, then give up */
      if (ops->connect(ctx, 0, handle, &send) != rcollSuccess)
        _exit(1);
      usleep(100);
    }
    _exit(2);
  }
  close(fds[1]);
  struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
  char c;
  cr_assert_eq(poll(&pfd, 1, 30000), 1, "the connecting rank did not start connecting within 30 s");
  cr_assert_eq(read(fds[0], &c, 1), 1, "the connecting rank failed before its segment existed");
  close(fds[0]);
  return pid;
}

static void kill_rank(pid_t pid) {
  cr_assert_eq(kill(pid, SIGKILL), 0);
  int st;
  cr_assert_eq(waitpid(pid, &st, 0), pid);
  cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the rank ended before it was killed (status %d)", st);
}

Test(shm_sweep, next_init_removes_a_killed_ranks_segment_and_keeps_live_ones) {
  rcoll_settings_t set;
  settings(&set);
  void *rctx = th_ctx_new(ops, &set, TH_SECRET), *listen = NULL;
  char handle[RCOLL_NET_HANDLE_BYTES];
  cr_assert_eq(ops->listen(rctx, 0, handle, &listen), rcollSuccess);

  pid_t victim = start_connecting_rank(&set, handle);
  kill_rank(victim);
  cr_assert_eq(segments_of(victim), 1, "the killed rank should have left its segment (found %d)",
               segments_of(victim));

  /* A live process's segment: this process connecting, not yet accepted. */
  void *lctx = th_ctx_new(ops, &set, TH_SECRET), *send = NULL;
  cr_assert_eq(ops->connect(lctx, 0, handle, &send), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_eq(segments_of(getpid()), 1);
  /* Names sweeping must not judge: a dead pid in another pid namespace (its
   * pids are not ours), the old name format without a namespace, and a
   * file of another program. */
  char other_ns[80], old_format[80];
  pid_t gone = dead_pid();
  snprintf(other_ns, sizeof other_ns, "rcoll-shm-%d-%u-0-0123456789abcdef", (int)gone, our_pidns() + 1);
  snprintf(old_format, sizeof old_format, "rcoll-shm-%d-0-0123456789abcdef", (int)gone);
  touch(other_ns);
  touch(old_format);
  touch("not-rcoll");

  void *next = th_ctx_new(ops, &set, TH_SECRET); /* the next init on this host */
  cr_expect_eq(segments_of(victim), 0, "the dead rank's segment is still there after the next init");
  cr_expect_eq(segments_of(getpid()), 1, "the live connect's segment was removed");
  cr_expect(exists(other_ns), "a segment of another pid namespace was removed");
  cr_expect(exists(old_format), "a segment without a namespace in its name was removed");
  cr_expect(exists("not-rcoll"), "a file that is not a segment was removed");

  ops->finalize(next);
  ops->finalize(lctx); /* abandons its connect, which unlinks its segment */
  ops->close_listen(listen);
  ops->finalize(rctx);
  cr_expect_eq(segments_of(0), 2, "only the two names the sweep must not judge should be left (found %d)",
               segments_of(0));
}

Test(shm_sweep, survivors_teardown_removes_a_killed_ranks_segment) {
  rcoll_settings_t set;
  settings(&set);
  void *rctx = th_ctx_new(ops, &set, TH_SECRET), *listen = NULL;
  char handle[RCOLL_NET_HANDLE_BYTES];
  cr_assert_eq(ops->listen(rctx, 0, handle, &listen), rcollSuccess);
  pid_t victim = start_connecting_rank(&set, handle);
  kill_rank(victim);
  cr_assert_eq(segments_of(victim), 1);
  /* The survivor's accept takes the request and maps the segment (then
   * unlinks it); whether it gets there or not, its teardown leaves none. */
  ops->close_listen(listen);
  ops->finalize(rctx);
  cr_expect_eq(segments_of(0), 0, "%d segments left after the survivor's teardown", segments_of(0));
}

/* ---- a rank killed in the middle of an all-reduce ---- */

#define AR_COUNT (4u << 20)

typedef struct ar_shared {
  rcollUniqueId id;
  volatile int calls[2];
  volatile int result0; /* rank 0's first failure, or -1 */
} ar_shared_t;

static void ar_rank(ar_shared_t *sh, int rank) {
  rcollComm_t comm;
  float *buf = calloc(AR_COUNT, sizeof *buf);
  if (buf == NULL || rcollCommInitRank(&comm, 2, sh->id, rank) != rcollSuccess)
    _exit(1);
  for (int i = 0; i < 100000; i++) {
    rcollResult_t r = rcollAllReduce(buf, buf, AR_COUNT, rcollFloat32, rcollSum, comm, NULL);
    if (r != rcollSuccess) {
      sh->result0 = (int)r;
      rcollCommAbort(comm);
      _exit(0);
    }
    sh->calls[rank] = i + 1;
  }
  _exit(2);
}

Test(shm_sweep, rank_killed_mid_allreduce_leaves_no_segment) {
  setenv("RCOLL_NET", "shm", 1);
  setenv("RCOLL_SHM_DIR", test_dir, 1);
  setenv("RCOLL_TIMEOUT", "20", 1);
  ar_shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(sh, MAP_FAILED);
  sh->result0 = -1;
  cr_assert_eq(rcollGetUniqueId(&sh->id), rcollSuccess, "%s", rcoll_error_text());
  pid_t pid[2];
  for (int r = 0; r < 2; r++) {
    pid[r] = fork();
    if (pid[r] == 0)
      ar_rank(sh, r);
  }
  /* Rank 1 dies inside a call: after a few complete, while the next runs. */
  int64_t end = rcoll_now_ms() + 60000;
  while (sh->calls[1] < 3 && rcoll_now_ms() < end)
    usleep(1000);
  cr_assert_geq(sh->calls[1], 3, "the ranks did not complete 3 all-reduces within 60 s");
  kill_rank(pid[1]);
  int st;
  cr_assert_eq(waitpid(pid[0], &st, 0), pid[0]);
  cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 0 did not end with an error (status %d)", st);
  cr_expect_neq(sh->result0, -1, "rank 0's all-reduce never failed");
  /* And the next init on this host (rank 0 has gone too by now). */
  rcoll_settings_t set;
  settings(&set);
  ops->finalize(th_ctx_new(ops, &set, TH_SECRET));
  cr_expect_eq(segments_of(0), 0, "%d segments left after a rank was killed mid all-reduce", segments_of(0));
}
