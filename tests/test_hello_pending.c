/* The pending-hello set every listener shares: hellos read together and in
 * pieces, garbage and silent connections dropped, the oldest giving way past
 * the cap (unless its hello has come), and strays reported in few warnings. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "hello_pending.h"
#include "log.h"

#define HELLO 16

typedef struct fixture {
  int lfd;
  rcoll_sockaddr_t at;
  rcoll_pending_t p;
  int taken[8]; /* fds the callback kept */
  int ntaken;
} fixture_t;

/* Keeps hellos that start with "GOOD"; anything else is a stray. */
static const char *take_good(void *arg, int fd, const rcoll_sockaddr_t *addr, const void *hello) {
  fixture_t *f = arg;
  (void)addr;
  if (memcmp(hello, "GOOD", 4) != 0)
    return "not good";
  cr_assert_lt(f->ntaken, 8);
  f->taken[f->ntaken++] = fd;
  return NULL;
}

static void fixture_start(fixture_t *f, int cap, int64_t first_msg_ms) {
  memset(f, 0, sizeof(*f));
  cr_assert_eq(rcoll_sockaddr_parse("127.0.0.1:0", -1, &f->at), rcollSuccess);
  f->lfd = rcoll_socket_listen(&f->at, 64);
  cr_assert_geq(f->lfd, 0, "%s", rcoll_error_text());
  cr_assert_eq(rcoll_pending_init(&f->p, "test listener", HELLO, cap, first_msg_ms, take_good, f),
               rcollSuccess, "%s", rcoll_error_text());
}

static void fixture_stop(fixture_t *f) {
  rcoll_pending_free(&f->p);
  for (int i = 0; i < f->ntaken; i++)
    close(f->taken[i]);
  close(f->lfd);
}

/* A client that sends `text` (may be empty) right after connecting. */
static int client(const fixture_t *f, const char *text) {
  int fd = rcoll_socket_connect(&f->at, rcoll_now_ms() + 5000);
  cr_assert_geq(fd, 0, "%s", rcoll_error_text());
  if (text[0])
    cr_assert_eq(rcoll_socket_send_all(fd, text, strlen(text), rcoll_now_ms() + 2000),
                 rcollSuccess);
  return fd;
}

/* Whether the listener hung up on the client within ms. */
static int hung_up(int fd, int ms) {
  char c;
  return rcoll_socket_recv_all(fd, &c, 1, rcoll_now_ms() + ms) == rcollRemoteError;
}

/* Runs the set for ms, as a listener's loop does. */
static void run_for(fixture_t *f, int ms) {
  for (int64_t end = rcoll_now_ms() + ms; rcoll_now_ms() < end;) {
    rcoll_pending_wait(&f->p, f->lfd, end);
    cr_assert_eq(rcoll_pending_progress(&f->p, f->lfd), rcollSuccess, "%s", rcoll_error_text());
  }
}

Test(hello_pending, rejects_hellos_larger_than_it_can_hold) {
  rcoll_pending_t p;
  cr_assert_neq(rcoll_pending_init(&p, "x", RCOLL_PENDING_HELLO_MAX + 1, 0, 0, take_good, NULL),
                rcollSuccess);
  cr_assert_neq(rcoll_pending_init(&p, "x", 0, 0, 0, take_good, NULL), rcollSuccess);
}

Test(hello_pending, hello_in_pieces_is_kept_while_garbage_and_silence_are_dropped, .timeout = 30) {
  fixture_t f;
  fixture_start(&f, 0, 300);
  int silent = client(&f, "");
  int garbage = client(&f, "this is no hello at all");
  int good = client(&f, "GOOD");
  run_for(&f, 50);
  cr_assert_eq(f.ntaken, 0, "a hello of 4 of 16 bytes was taken");
  cr_assert_eq(rcoll_socket_send_all(good, "-and-the-rest", 12, rcoll_now_ms() + 2000),
               rcollSuccess);
  run_for(&f, 100);
  cr_assert_eq(f.ntaken, 1, "the good hello was not taken");
  cr_assert(hung_up(garbage, 2000), "the garbage sender was kept");
  /* Well past the 300 ms first-message limit, however slow the machine. */
  run_for(&f, 600);
  cr_assert(hung_up(silent, 2000), "the silent client was kept past its deadline");
  cr_assert_eq(f.p.n, 0);
  fixture_stop(&f);
  close(silent);
  close(garbage);
  close(good);
}

Test(hello_pending, past_the_cap_the_oldest_goes_unless_its_hello_came, .timeout = 30) {
  fixture_t f;
  int fds[6];
  fixture_start(&f, 4, 0);
  /* All connect before the listener looks: one batch of six for a cap of 4. */
  fds[0] = client(&f, "GOOD-oldest-ok!!"); /* its hello is in: taken, not dropped */
  for (int i = 1; i < 6; i++)
    fds[i] = client(&f, "");
  cr_assert_eq(rcoll_pending_progress(&f.p, f.lfd), rcollSuccess);
  cr_assert_eq(f.ntaken, 1, "the oldest, whose hello had come, was not taken");
  cr_assert_eq(f.p.n, 4);
  cr_assert(hung_up(fds[1], 2000), "the oldest silent client was kept past the cap");
  for (int i = 2; i < 6; i++)
    cr_assert(!hung_up(fds[i], 50), "client %d was dropped, not the oldest", i);
  fixture_stop(&f);
  for (int i = 0; i < 6; i++)
    close(fds[i]);
}

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int warn_lines, warn_strays;

static void count_warnings(int level, const char *msg) {
  int n = 0;
  const char *d = strstr(msg, "dropped ");
  (void)level;
  pthread_mutex_lock(&log_mu);
  if (strstr(msg, "test listener") && d && sscanf(d, "dropped %d", &n) == 1) {
    warn_lines++;
    warn_strays += n;
  }
  pthread_mutex_unlock(&log_mu);
}

Test(hello_pending, many_strays_make_few_warnings_that_count_them_all, .timeout = 30) {
  fixture_t f;
  int fds[20];
  rcoll_log_set_sink(count_warnings);
  fixture_start(&f, 0, 0);
  for (int i = 0; i < 20; i++)
    fds[i] = client(&f, "garbage garbage garbage");
  run_for(&f, 200);
  fixture_stop(&f);
  rcoll_log_set_sink(NULL);
  cr_assert_eq(warn_strays, 20, "the warnings counted %d of 20 strays", warn_strays);
  /* One at once, one when the listener closes; a third only after 10 s. */
  cr_assert_leq(warn_lines, 3, "%d warnings for 20 strays", warn_lines);
  for (int i = 0; i < 20; i++)
    close(fds[i]);
}
