/* Whole bootstrap jobs run as threads of the test process (bootstrap_job.h). */
#include "bootstrap_job.h"

#include <criterion/criterion.h>
#include <endian.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap_wire.h"
#include "clock.h"
#include "error.h"

rcoll_settings_t settings_with_timeout(int seconds) {
  rcoll_settings_t s;
  cr_assert_eq(rcoll_settings_load(&s), 0);
  /* The environment must not steer the test onto another interface. */
  s.timeout = seconds;
  s.socket_ifname[0] = '\0';
  s.socket_family[0] = '\0';
  return s;
}

rcollUniqueId start_root(const rcoll_settings_t *s, uint64_t secret) {
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

void *rank_main(void *arg) {
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

void job_setup(job_t *j, int nranks, int timeout_s) {
  memset(j, 0, sizeof(*j));
  j->s = settings_with_timeout(timeout_s);
  j->nranks = nranks;
  j->bytes = 100000;
  for (int i = 0; i < MAX_RANKS; i++) {
    j->ranks[i].job = j;
    j->ranks[i].rank = i;
  }
}

void job_run(job_t *j, int first, int last) {
  pthread_t t[MAX_RANKS];
  for (int i = first; i < last; i++)
    pthread_create(&t[i], NULL, rank_main, &j->ranks[i]);
  for (int i = first; i < last; i++)
    pthread_join(t[i], NULL);
}

void expect_job_ok(job_t *j) {
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


/* The test plays the root itself, so that it learns the ranks' listening
 * addresses and can knock on rank 1's door before its real left neighbour. */
rcollUniqueId fake_root_id(const rcoll_sockaddr_t *at, uint64_t secret) {
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

int knock(const rcoll_sockaddr_t *at, uint64_t secret, int rank) {
  rcoll_bootstrap_intro_t in = {.secret = secret, .rank = rank};
  int fd = rcoll_socket_connect(at, rcoll_now_ms() + 2000);
  cr_assert_geq(fd, 0, "%s", rcoll_error_text());
  rcoll_bootstrap_intro_swap(&in);
  cr_assert_eq(rcoll_socket_send_all(fd, &in, sizeof(in), rcoll_now_ms() + 2000), rcollSuccess);
  return fd;
}

void *run_job(void *arg) {
  job_t *j = arg;
  job_run(j, 0, j->nranks);
  return NULL;
}

/* Plays the root of a 3-rank job: takes each rank's hello as it came on
 * the wire (wire[rank]) and its connection (fds[rank]). */
void fake_root_take3(int lfd, uint64_t secret, rcoll_bootstrap_hello_t wire[3], int fds[3]) {
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

