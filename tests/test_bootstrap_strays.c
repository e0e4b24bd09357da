/* Bootstrap: strays (idle connections, garbage, half hellos, floods) at the
 * root and the ring listeners, while whole jobs run as threads of this
 * process (support/bootstrap_job.h). */
#include <criterion/criterion.h>
#include <endian.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.h"
#include "bootstrap_wire.h"
#include "error.h"
#include "hello_pending.h"
#include "log.h"
#include "support/bootstrap_job.h"

/* ------------------------------------------------------------------ */
/* Strays: idle connections, garbage and floods at every listener       */

/* The library's warnings, captured so that a test can read what it said. */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 16];
static size_t log_len;

static void log_capture(int level, const char *msg) {
  (void)level;
  pthread_mutex_lock(&log_mu);
  size_t n = strlen(msg);
  if (log_len + n + 2 < sizeof(log_text)) {
    memcpy(log_text + log_len, msg, n);
    log_len += n;
    log_text[log_len++] = '\n';
    log_text[log_len] = '\0';
  }
  pthread_mutex_unlock(&log_mu);
}

static void log_capture_start(void) {
  pthread_mutex_lock(&log_mu);
  log_len = 0;
  log_text[0] = '\0';
  pthread_mutex_unlock(&log_mu);
  rcoll_log_set_sink(log_capture);
}

#define MAX_STRAYS 1024

/* Connections that are not ranks of the job, and their local addresses, which
 * the warning about them must name. */
typedef struct strays {
  int n;
  int fds[MAX_STRAYS];
  char addrs[MAX_STRAYS][64];
} strays_t;

/* Opens one stray that sends `len` bytes of garbage (0: it stays silent). */
static void stray_open(strays_t *st, const rcoll_sockaddr_t *at, size_t len) {
  unsigned char junk[RCOLL_PENDING_HELLO_MAX];
  rcoll_sockaddr_t me;
  socklen_t mlen = sizeof(me);
  cr_assert_lt(st->n, MAX_STRAYS);
  int fd = rcoll_socket_connect(at, rcoll_now_ms() + 5000);
  cr_assert_geq(fd, 0, "stray %d: %s", st->n, rcoll_error_text());
  memset(junk, 0xa5, sizeof(junk));
  if (len > 0)
    cr_assert_eq(rcoll_socket_send_all(fd, junk, len, rcoll_now_ms() + 2000), rcollSuccess);
  cr_assert_eq(getsockname(fd, &me.sa, &mlen), 0);
  rcoll_sockaddr_str(&me, st->addrs[st->n], sizeof(st->addrs[0]));
  st->fds[st->n++] = fd;
}

/* `idle` silent connections, `garbage` that send a hello's worth of junk and
 * `half` that send a few bytes and stop, then a flood of `flood` silent ones. */
static void strays_open(strays_t *st, const rcoll_sockaddr_t *at, int idle, int garbage, int half,
                        int flood) {
  for (int i = 0; i < idle; i++)
    stray_open(st, at, 0);
  for (int i = 0; i < garbage; i++)
    stray_open(st, at, RCOLL_PENDING_HELLO_MAX);
  for (int i = 0; i < half; i++)
    stray_open(st, at, 5);
  for (int i = 0; i < flood; i++)
    stray_open(st, at, 0);
}

static void strays_close(strays_t *st) {
  for (int i = 0; i < st->n; i++)
    close(st->fds[i]);
  st->n = 0;
}

/* Lines of the captured log that contain `what`; *named: whether one of them
 * names a stray's address. */
static int log_lines_with(const char *what, const strays_t *st, int *named) {
  int lines = 0;
  *named = 0;
  pthread_mutex_lock(&log_mu);
  for (char *l = log_text; *l;) {
    char *end = strchr(l, '\n');
    *end = '\0';
    if (strstr(l, what)) {
      lines++;
      for (int i = 0; i < st->n && !*named; i++)
        *named = strstr(l, st->addrs[i]) != NULL;
    }
    *end = '\n';
    l = end + 1;
  }
  pthread_mutex_unlock(&log_mu);
  return lines;
}

/* Waits (the listener reports its last strays when it closes, just after the
 * job) for a warning from `who` that names a stray; returns its line count. */
static int expect_strays_named(const char *who, const strays_t *st) {
  int named = 0, lines = 0;
  for (int64_t end = rcoll_now_ms() + 10000; !named && rcoll_now_ms() < end; usleep(50 * 1000))
    lines = log_lines_with(who, st, &named);
  cr_assert(named, "no warning from '%s' names a stray; the log:\n%s", who, log_text);
  return lines;
}

/* The old root and ring read one connection at a time, 5 s each: N idle
 * strays cost N x 5 s. The bound leaves room for a loaded machine. */
#define PROMPT_MS 10000

static void expect_job_prompt(const job_t *j) {
  for (int i = 0; i < j->nranks; i++)
    cr_assert_lt(j->ranks[i].elapsed_ms, PROMPT_MS, "rank %d took %lld ms", i,
                 (long long)j->ranks[i].elapsed_ms);
}

Test(bootstrap, root_serves_ranks_while_strays_idle_or_send_garbage, .timeout = 60) {
  job_t j;
  strays_t *st = calloc(1, sizeof(*st));
  rcoll_bootstrap_id_t d;
  log_capture_start();
  job_setup(&j, 3, 20);
  j.do_barrier = 1;
  j.id = start_root(&j.s, 0x57a7);
  cr_assert_eq(rcoll_bootstrap_id_decode(&j.id, &d), rcollSuccess);
  strays_open(st, &d.root, 8, 4, 4, 0);
  job_run(&j, 0, 3);
  expect_job_ok(&j);
  expect_job_prompt(&j);
  expect_strays_named("bootstrap root", st);
  rcoll_log_set_sink(NULL);
  strays_close(st);
  free(st);
}

Test(bootstrap, root_serves_ranks_through_a_flood_with_few_warnings, .timeout = 60) {
  job_t j;
  strays_t *st = calloc(1, sizeof(*st));
  rcoll_bootstrap_id_t d;
  log_capture_start();
  job_setup(&j, 3, 20);
  j.id = start_root(&j.s, 0xf100d);
  cr_assert_eq(rcoll_bootstrap_id_decode(&j.id, &d), rcollSuccess);
  /* More than the pending set's cap: the oldest must give way. */
  strays_open(st, &d.root, 0, 0, 0, RCOLL_PENDING_CAP + 150);
  job_run(&j, 0, 3);
  expect_job_ok(&j);
  expect_job_prompt(&j);
  int lines = expect_strays_named("bootstrap root", st);
  /* One warning at once, one when the root closes: not one per stray. */
  cr_assert_leq(lines, 3, "%d warnings about strays:\n%s", lines, log_text);
  rcoll_log_set_sink(NULL);
  strays_close(st);
  free(st);
}

Test(bootstrap, ring_listeners_serve_neighbours_while_strays_idle_garbage_and_flood,
     .timeout = 60) {
  const uint64_t secret = 0x717e;
  job_t j;
  strays_t *st = calloc(1, sizeof(*st));
  rcoll_sockaddr_t at;
  rcoll_bootstrap_hello_t wire[3];
  int fds[3];
  pthread_t t;
  log_capture_start();
  job_setup(&j, 3, 20);
  cr_assert_eq(rcoll_sockaddr_parse("127.0.0.1:0", -1, &at), rcollSuccess);
  int lfd = rcoll_socket_listen(&at, 8);
  cr_assert_geq(lfd, 0);
  j.id = fake_root_id(&at, secret);
  pthread_create(&t, NULL, run_job, &j);
  fake_root_take3(lfd, secret, wire, fds);
  /* Every rank's ring listener is open and waiting for the table: crowd it. */
  for (int r = 0; r < 3; r++) {
    rcoll_sockaddr_t ring = wire[r].listen_addr;
    rcoll_bootstrap_addr_swap(&ring);
    strays_open(st, &ring, 8, 4, 4, 200);
  }
  int64_t t0 = rcoll_now_ms();
  for (int r = 0; r < 3; r++) {
    rcoll_bootstrap_reply_t ok;
    memset(&ok, 0, sizeof(ok));
    cr_assert_eq(rcoll_socket_send_all(fds[r], &ok, sizeof(ok), rcoll_now_ms() + 2000),
                 rcollSuccess);
    cr_assert_eq(rcoll_socket_send_all(fds[r], wire, sizeof(wire), rcoll_now_ms() + 2000),
                 rcollSuccess);
  }
  pthread_join(t, NULL);
  int64_t ring_ms = rcoll_now_ms() - t0;
  expect_job_ok(&j);
  cr_assert_lt(ring_ms, PROMPT_MS, "forming the ring took %lld ms", (long long)ring_ms);
  expect_strays_named("ring listener", st);
  rcoll_log_set_sink(NULL);
  strays_close(st);
  free(st);
  for (int r = 0; r < 3; r++)
    close(fds[r]);
  close(lfd);
}
