/* Bootstrap: hello validation, id decoding, and whole jobs run as threads of
 * this process: joining, allgather, barrier, strangers, missing ranks, and
 * strays (idle, garbage, floods) at the root and the ring listeners. */
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

#define MAX_RANKS 8

static rcoll_settings_t settings_with_timeout(int seconds) {
  rcoll_settings_t s;
  cr_assert_eq(rcoll_settings_load(&s), 0);
  /* The environment must not steer the test onto another interface. */
  s.timeout = seconds;
  s.socket_ifname[0] = '\0';
  s.socket_family[0] = '\0';
  return s;
}

static rcollUniqueId start_root(const rcoll_settings_t *s, uint64_t secret) {
  rcoll_sockaddr_t at;
  rcollUniqueId id;
  cr_assert_eq(rcoll_sockaddr_parse("127.0.0.1:0", -1, &at), rcollSuccess);
  cr_assert_eq(rcoll_bootstrap_root_start(s, &at, secret, &id), rcollSuccess, "%s",
               rcoll_error_text());
  return id;
}

/* Block k of an allgather holds bytes only rank k can produce. */
static unsigned char pattern(int rank, size_t j, int round) {
  return (unsigned char)(rank * 37 + j * 11 + round * 101 + 5);
}

/* ------------------------------------------------------------------ */
/* Hello and id                                                         */

static rcoll_bootstrap_hello_t good_hello(void) {
  rcoll_bootstrap_hello_t h;
  memset(&h, 0, sizeof(h));
  h.secret = 0x1234abcd5678ef00ull;
  h.rank = 2;
  h.nranks = 4;
  cr_assert_eq(rcoll_sockaddr_parse("10.0.0.7:4000", -1, &h.listen_addr), rcollSuccess);
  snprintf(h.host, sizeof(h.host), "node7:42");
  return h;
}

Test(bootstrap, hello_check_accepts_a_good_hello) {
  rcoll_bootstrap_hello_t h = good_hello();
  cr_assert_eq(rcoll_bootstrap_hello_check(&h, h.secret, 4), rcollSuccess);
  cr_assert_eq(rcoll_bootstrap_hello_check(&h, h.secret, 0), rcollSuccess,
               "the first hello sets nranks");
}

Test(bootstrap, hello_check_rejects_what_is_wrong) {
  rcoll_bootstrap_hello_t h = good_hello();
  cr_assert_eq(rcoll_bootstrap_hello_check(&h, h.secret ^ 1, 4), rcollInvalidUsage);
  cr_assert(strstr(rcoll_error_text(), "secret"), "%s", rcoll_error_text());
  cr_assert_eq(rcoll_bootstrap_hello_check(&h, h.secret, 3), rcollInvalidUsage, "nranks mismatch");
  h.rank = 4;
  cr_assert_eq(rcoll_bootstrap_hello_check(&h, h.secret, 4), rcollInvalidArgument,
               "rank == nranks");
  h.rank = -1;
  cr_assert_eq(rcoll_bootstrap_hello_check(&h, h.secret, 0), rcollInvalidArgument, "rank < 0");
  h = good_hello();
  h.nranks = 0;
  h.rank = 0;
  cr_assert_neq(rcoll_bootstrap_hello_check(&h, h.secret, 0), rcollSuccess, "nranks 0");
  h = good_hello();
  h.listen_addr.sa.sa_family = AF_UNIX;
  cr_assert_eq(rcoll_bootstrap_hello_check(&h, h.secret, 4), rcollInvalidArgument, "no address");
}

Test(bootstrap, id_decode_rejects_garbage) {
  rcollUniqueId id;
  rcoll_bootstrap_id_t d;
  memset(&id, 0, sizeof(id));
  cr_assert_eq(rcoll_bootstrap_id_decode(&id, &d), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "not an rcoll id"), "%s", rcoll_error_text());
  for (size_t i = 0; i < sizeof(id.internal); i++)
    id.internal[i] = (char)(i * 7 + 3);
  cr_assert_eq(rcoll_bootstrap_id_decode(&id, &d), rcollInvalidArgument);
  cr_assert_eq(rcoll_bootstrap_id_decode(NULL, &d), rcollInvalidArgument);
}

Test(bootstrap, root_start_fills_a_decodable_id) {
  rcoll_settings_t s = settings_with_timeout(2);
  rcollUniqueId id = start_root(&s, 0xfeedull);
  rcoll_bootstrap_id_t d;
  uint64_t magic_le;
  memcpy(&magic_le, id.internal, sizeof(magic_le));
  cr_assert_eq(le64toh(magic_le), RCOLL_BOOTSTRAP_ID_MAGIC, "magic must lead the id bytes");
  cr_assert_eq(rcoll_bootstrap_id_decode(&id, &d), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_eq(d.secret, 0xfeedull);
  cr_assert_eq(d.root.sa.sa_family, AF_INET);
  cr_assert_eq(ntohl(d.root.sin.sin_addr.s_addr), INADDR_LOOPBACK);
  cr_assert_neq(rcoll_sockaddr_port(&d.root), 0, "port 0 must be replaced by the bound port");
}

Test(bootstrap, init_rejects_bad_arguments) {
  rcoll_settings_t s = settings_with_timeout(2);
  rcollUniqueId id;
  rcoll_bootstrap_t *b = NULL;
  memset(&id, 0, sizeof(id));
  cr_assert_eq(rcoll_bootstrap_init(&s, &id, 0, 1, &b), rcollInvalidArgument, "garbage id");
  id = start_root(&s, 1);
  cr_assert_eq(rcoll_bootstrap_init(&s, &id, 3, 3, &b), rcollInvalidArgument);
  cr_assert_eq(rcoll_bootstrap_init(&s, &id, 0, 0, &b), rcollInvalidArgument);
  cr_assert_null(b);
  rcoll_bootstrap_close(NULL);
  cr_assert_str_eq(rcoll_bootstrap_host(NULL, 0), "?");
}

/* ------------------------------------------------------------------ */
/* Whole jobs                                                           */

typedef struct job job_t;
typedef struct {
  job_t *job;
  int rank;
  int close_early; /* joins, then leaves without taking part */
  rcollResult_t rc_init, rc_op;
  char err[RCOLL_ERROR_TEXT_MAX];
  int bad_blocks;
  int saw_early_barrier;
  char host_of_0[64];
  int64_t elapsed_ms;
} rank_t;

struct job {
  rcoll_settings_t s;
  rcollUniqueId id;
  int nranks;
  size_t bytes;
  int do_barrier;
  atomic_int entered;
  rank_t ranks[MAX_RANKS];
};

/* Two allgathers of different sizes, so that the ring's byte streams must
 * stay in step across calls, then an optional barrier. */
static rcollResult_t rank_ops(rank_t *r, rcoll_bootstrap_t *b) {
  job_t *j = r->job;
  size_t sizes[2] = {1, j->bytes};
  for (int round = 0; round < 2; round++) {
    size_t bytes = sizes[round];
    unsigned char *data = calloc((size_t)j->nranks, bytes);
    for (size_t x = 0; x < bytes; x++)
      data[(size_t)r->rank * bytes + x] = pattern(r->rank, x, round);
    rcollResult_t rc = rcoll_bootstrap_allgather(b, data, bytes);
    for (int k = 0; rc == rcollSuccess && k < j->nranks; k++)
      for (size_t x = 0; x < bytes; x++)
        r->bad_blocks += data[(size_t)k * bytes + x] != pattern(k, x, round);
    free(data);
    if (rc != rcollSuccess)
      return rc;
  }
  if (!j->do_barrier)
    return rcollSuccess;
  /* Rank 0 arrives late: nobody may leave the barrier before it entered. */
  if (r->rank == 0)
    usleep(200 * 1000);
  atomic_fetch_add(&j->entered, 1);
  rcollResult_t rc = rcoll_bootstrap_barrier(b);
  r->saw_early_barrier = atomic_load(&j->entered) != j->nranks;
  return rc;
}

static void *rank_main(void *arg) {
  rank_t *r = arg;
  rcoll_bootstrap_t *b = NULL;
  int64_t t0 = rcoll_now_ms();
  r->rc_init = rcoll_bootstrap_init(&r->job->s, &r->job->id, r->rank, r->job->nranks, &b);
  r->rc_op = rcollSuccess;
  if (r->rc_init == rcollSuccess) {
    snprintf(r->host_of_0, sizeof(r->host_of_0), "%s", rcoll_bootstrap_host(b, 0));
    if (!r->close_early)
      r->rc_op = rank_ops(r, b);
  }
  snprintf(r->err, sizeof(r->err), "%s", rcoll_error_text());
  r->elapsed_ms = rcoll_now_ms() - t0;
  rcoll_bootstrap_close(b);
  return NULL;
}

static void job_setup(job_t *j, int nranks, int timeout_s) {
  memset(j, 0, sizeof(*j));
  j->s = settings_with_timeout(timeout_s);
  j->nranks = nranks;
  j->bytes = 100000;
  for (int i = 0; i < MAX_RANKS; i++) {
    j->ranks[i].job = j;
    j->ranks[i].rank = i;
  }
}

/* Runs ranks [first, last) as threads and waits for them. */
static void job_run(job_t *j, int first, int last) {
  pthread_t t[MAX_RANKS];
  for (int i = first; i < last; i++)
    pthread_create(&t[i], NULL, rank_main, &j->ranks[i]);
  for (int i = first; i < last; i++)
    pthread_join(t[i], NULL);
}

static void expect_job_ok(job_t *j) {
  char want_host[64], name[48] = "?";
  gethostname(name, sizeof(name) - 1);
  snprintf(want_host, sizeof(want_host), "%s:%d", name, (int)getpid());
  for (int i = 0; i < j->nranks; i++) {
    rank_t *r = &j->ranks[i];
    cr_assert_eq(r->rc_init, rcollSuccess, "rank %d init: %s", i, r->err);
    cr_assert_eq(r->rc_op, rcollSuccess, "rank %d ops: %s", i, r->err);
    cr_assert_eq(r->bad_blocks, 0, "rank %d got %d wrong bytes", i, r->bad_blocks);
    cr_assert_eq(r->saw_early_barrier, 0, "rank %d left the barrier before rank 0 entered", i);
    cr_assert_str_eq(r->host_of_0, want_host, "rank %d", i);
  }
}

static void run_full_job(int nranks) {
  job_t j;
  job_setup(&j, nranks, 20);
  j.do_barrier = 1;
  j.id = start_root(&j.s, 0x5eed0000ull + (uint64_t)nranks);
  job_run(&j, 0, nranks);
  expect_job_ok(&j);
}

Test(bootstrap, job_of_one_rank, .timeout = 30) { run_full_job(1); }
Test(bootstrap, job_of_three_ranks, .timeout = 30) { run_full_job(3); }
Test(bootstrap, job_of_five_ranks, .timeout = 30) { run_full_job(5); }
Test(bootstrap, job_of_two_ranks, .timeout = 30) { run_full_job(2); }

/* Runs a 3-rank job whose root listens at `where` (NULL: the settings pick). */
static void run_job_with_root_at(const char *where, rcoll_bootstrap_id_t *root_seen) {
  job_t j;
  rcoll_sockaddr_t at;
  job_setup(&j, 3, 20);
  j.do_barrier = 1;
  if (where)
    cr_assert_eq(rcoll_sockaddr_parse(where, -1, &at), rcollSuccess);
  cr_assert_eq(rcoll_bootstrap_root_start(&j.s, where ? &at : NULL, 31337, &j.id), rcollSuccess,
               "%s", rcoll_error_text());
  cr_assert_eq(rcoll_bootstrap_id_decode(&j.id, root_seen), rcollSuccess);
  job_run(&j, 0, 3);
  expect_job_ok(&j);
}

Test(bootstrap, job_over_ipv6_loopback, .timeout = 30) {
  rcoll_bootstrap_id_t d;
  int probe = socket(AF_INET6, SOCK_STREAM, 0);
  struct sockaddr_in6 lo6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  int ok = probe >= 0 && bind(probe, (struct sockaddr *)&lo6, sizeof(lo6)) == 0;
  if (probe >= 0)
    close(probe);
  if (!ok)
    cr_skip_test("no ::1 on this host");
  run_job_with_root_at("[::1]:0", &d);
  cr_assert_eq(d.root.sa.sa_family, AF_INET6);
}

Test(bootstrap, job_with_root_on_the_picked_interface, .timeout = 30) {
  rcoll_bootstrap_id_t d;
  rcoll_sockaddr_t picked;
  char ifname[RCOLL_IFNAME_MAX];
  cr_assert_eq(rcoll_socket_pick_addr("", "", &picked, ifname), rcollSuccess);
  run_job_with_root_at(NULL, &d);
  cr_assert_eq(d.root.sa.sa_family, picked.sa.sa_family);
  rcoll_sockaddr_t a = d.root, b = picked;
  a.sin.sin_port = b.sin.sin_port = 0;
  cr_assert_eq(memcmp(&a, &b, rcoll_sockaddr_len(&a)), 0, "root not on %s", ifname);
}

Test(bootstrap, wildcard_root_address_is_replaced_in_the_id, .timeout = 30) {
  rcoll_bootstrap_id_t d;
  run_job_with_root_at("0.0.0.0:0", &d);
  cr_assert_eq(d.root.sa.sa_family, AF_INET);
  cr_assert_neq(d.root.sin.sin_addr.s_addr, htonl(INADDR_ANY), "ranks cannot connect to 0.0.0.0");
  cr_assert_neq(rcoll_sockaddr_port(&d.root), 0);
}

/* A copy of id with another secret, as a second job might hold. */
static rcollUniqueId with_secret(const rcollUniqueId *id, uint64_t secret) {
  rcollUniqueId other = *id;
  uint64_t le = htole64(secret);
  memcpy(other.internal + offsetof(rcoll_bootstrap_id_t, secret), &le, sizeof(le));
  return other;
}

Test(bootstrap, wrong_secret_is_rejected_and_the_job_completes, .timeout = 30) {
  job_t j;
  rcoll_bootstrap_t *b = NULL;
  job_setup(&j, 3, 20);
  j.id = start_root(&j.s, 777);
  /* The stranger comes first, claiming rank 1 before the real rank 1. */
  rcollUniqueId bad = with_secret(&j.id, 778);
  cr_assert_eq(rcoll_bootstrap_init(&j.s, &bad, 1, 3, &b), rcollInvalidUsage);
  cr_assert(strstr(rcoll_error_text(), "secret"), "%s", rcoll_error_text());
  cr_assert_null(b);
  job_run(&j, 0, 3);
  expect_job_ok(&j);
}

Test(bootstrap, duplicate_rank_and_nranks_mismatch_are_rejected, .timeout = 30) {
  job_t j;
  rcoll_bootstrap_t *b = NULL;
  pthread_t t;
  job_setup(&j, 2, 20);
  j.id = start_root(&j.s, 99);
  pthread_create(&t, NULL, rank_main, &j.ranks[0]);
  usleep(300 * 1000); /* let the real rank 0 reach the root first */
  cr_assert_eq(rcoll_bootstrap_init(&j.s, &j.id, 0, 2, &b), rcollInvalidUsage);
  cr_assert(strstr(rcoll_error_text(), "twice"), "%s", rcoll_error_text());
  cr_assert_eq(rcoll_bootstrap_init(&j.s, &j.id, 1, 3, &b), rcollInvalidUsage);
  cr_assert(strstr(rcoll_error_text(), "nranks"), "%s", rcoll_error_text());
  cr_assert_null(b);
  job_run(&j, 1, 2);
  pthread_join(t, NULL);
  expect_job_ok(&j);
}

Test(bootstrap, missing_rank_times_out_naming_it, .timeout = 30) {
  job_t j;
  job_setup(&j, 3, 2);
  j.id = start_root(&j.s, 5);
  job_run(&j, 0, 2); /* rank 2 never comes */
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(j.ranks[i].rc_init, rcollTimeout, "rank %d: %s", i, j.ranks[i].err);
    cr_assert(strstr(j.ranks[i].err, "ranks 2 of 3"), "rank %d: %s", i, j.ranks[i].err);
    cr_assert_lt(j.ranks[i].elapsed_ms, 4000, "rank %d waited %lld ms", i,
                 (long long)j.ranks[i].elapsed_ms);
  }
}

Test(bootstrap, peer_leaving_is_named_in_the_error, .timeout = 30) {
  job_t j;
  job_setup(&j, 3, 2);
  j.id = start_root(&j.s, 6);
  j.ranks[2].close_early = 1;
  job_run(&j, 0, 3);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(j.ranks[i].rc_init, rcollSuccess, "rank %d: %s", i, j.ranks[i].err);
  /* Rank 0 receives from rank 2, which has gone. */
  cr_assert_eq(j.ranks[0].rc_op, rcollRemoteError, "%s", j.ranks[0].err);
  char want[128];
  snprintf(want, sizeof(want), "rank 2 (%s) closed the connection during allgather",
           j.ranks[0].host_of_0);
  cr_assert(strstr(j.ranks[0].err, want), "%s", j.ranks[0].err);
  cr_assert_neq(j.ranks[1].rc_op, rcollSuccess, "rank 1 cannot complete without rank 2");
}

/* ------------------------------------------------------------------ */
/* Strangers on the ring                                                */

/* The test plays the root itself, so that it learns the ranks' listening
 * addresses and can knock on rank 1's door before its real left neighbour. */
static rcollUniqueId fake_root_id(const rcoll_sockaddr_t *at, uint64_t secret) {
  rcoll_bootstrap_id_t e;
  rcollUniqueId id;
  memset(&e, 0, sizeof(e));
  e.magic = htole64(RCOLL_BOOTSTRAP_ID_MAGIC);
  e.secret = htole64(secret);
  e.root = *at;
  rcoll_bootstrap_addr_swap(&e.root);
  memset(&id, 0, sizeof(id));
  memcpy(id.internal, &e, sizeof(e));
  return id;
}

static int knock(const rcoll_sockaddr_t *at, uint64_t secret, int rank) {
  rcoll_bootstrap_intro_t in = {.secret = secret, .rank = rank};
  int fd = rcoll_socket_connect(at, rcoll_now_ms() + 2000);
  cr_assert_geq(fd, 0, "%s", rcoll_error_text());
  rcoll_bootstrap_intro_swap(&in);
  cr_assert_eq(rcoll_socket_send_all(fd, &in, sizeof(in), rcoll_now_ms() + 2000), rcollSuccess);
  return fd;
}

static void *run_job(void *arg) {
  job_t *j = arg;
  job_run(j, 0, j->nranks);
  return NULL;
}

/* Plays the root of a 3-rank job: takes each rank's hello as it came on
 * the wire (wire[rank]) and its connection (fds[rank]). */
static void fake_root_take3(int lfd, uint64_t secret, rcoll_bootstrap_hello_t wire[3], int fds[3]) {
  for (int n = 0; n < 3; n++) {
    rcoll_bootstrap_hello_t h;
    int fd = rcoll_socket_accept(lfd, rcoll_now_ms() + 5000);
    cr_assert_geq(fd, 0, "%s", rcoll_error_text());
    cr_assert_eq(rcoll_socket_recv_all(fd, &h, sizeof(h), rcoll_now_ms() + 5000), rcollSuccess);
    rcoll_bootstrap_hello_t raw = h;
    rcoll_bootstrap_hello_swap(&h);
    cr_assert(h.rank >= 0 && h.rank < 3 && h.secret == secret && h.nranks == 3);
    wire[h.rank] = raw;
    fds[h.rank] = fd;
  }
}

Test(bootstrap, ring_drops_strangers_and_wrong_neighbours, .timeout = 30) {
  const uint64_t secret = 4242;
  job_t j;
  rcoll_sockaddr_t at;
  rcoll_bootstrap_hello_t wire[3];
  int fds[3], strangers[2];
  pthread_t t;
  job_setup(&j, 3, 10);
  cr_assert_eq(rcoll_sockaddr_parse("127.0.0.1:0", -1, &at), rcollSuccess);
  int lfd = rcoll_socket_listen(&at, 8);
  cr_assert_geq(lfd, 0);
  j.id = fake_root_id(&at, secret);
  pthread_create(&t, NULL, run_job, &j);
  fake_root_take3(lfd, secret, wire, fds);
  /* Rank 1's left neighbour is rank 0: a wrong secret, then rank 2, knock first. */
  rcoll_sockaddr_t rank1 = wire[1].listen_addr;
  rcoll_bootstrap_addr_swap(&rank1);
  strangers[0] = knock(&rank1, secret + 1, 0);
  strangers[1] = knock(&rank1, secret, 2);
  for (int r = 0; r < 3; r++) {
    rcoll_bootstrap_reply_t ok;
    memset(&ok, 0, sizeof(ok));
    cr_assert_eq(rcoll_socket_send_all(fds[r], &ok, sizeof(ok), rcoll_now_ms() + 2000),
                 rcollSuccess);
    cr_assert_eq(rcoll_socket_send_all(fds[r], wire, sizeof(wire), rcoll_now_ms() + 2000),
                 rcollSuccess);
  }
  pthread_join(t, NULL);
  expect_job_ok(&j);
  /* Both strangers were hung up on, not kept. */
  for (int i = 0; i < 2; i++) {
    char c;
    cr_assert_eq(rcoll_socket_recv_all(strangers[i], &c, 1, rcoll_now_ms() + 2000),
                 rcollRemoteError, "stranger %d: %s", i, rcoll_error_text());
    close(strangers[i]);
  }
  for (int r = 0; r < 3; r++)
    close(fds[r]);
  close(lfd);
}

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
