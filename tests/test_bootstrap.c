/* Bootstrap: hello validation, id decoding, and whole jobs run as threads of
 * this process: joining, allgather, barrier, strangers, missing ranks.
 * Strays at the listeners are in test_bootstrap_strays.c. */
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

/* Found by tests/fuzz/fuzz_uid.c: an id, a hello or a table naming port 0
 * passed, and a rank then retried connecting to port 0 until its timeout. */
Test(bootstrap, port_zero_is_no_address) {
  rcoll_bootstrap_hello_t h = good_hello();
  h.listen_addr.sin.sin_port = 0;
  cr_assert_eq(rcoll_bootstrap_hello_check(&h, h.secret, 4), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "no listening address"), "%s", rcoll_error_text());

  rcoll_bootstrap_hello_t table[1] = {good_hello()};
  char hosts[1][RCOLL_BOOTSTRAP_HOST_MAX];
  table[0].rank = 0;
  table[0].nranks = 1;
  table[0].listen_addr.sin.sin_port = 0;
  rcoll_bootstrap_hello_swap(&table[0]); /* to the wire's order */
  cr_assert_eq(rcoll_bootstrap_table_decode(table, sizeof table, table[0].secret, 1, hosts, 0, 1),
               rcollRemoteError);

  rcoll_settings_t s = settings_with_timeout(2);
  rcollUniqueId id = start_root(&s, 0xfeedull);
  memset(id.internal + offsetof(rcoll_bootstrap_id_t, root) + offsetof(struct sockaddr_in, sin_port),
         0, sizeof(in_port_t));
  rcoll_bootstrap_id_t d;
  cr_assert_eq(rcoll_bootstrap_id_decode(&id, &d), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "no root address"), "%s", rcoll_error_text());
  rcoll_bootstrap_t *b = NULL;
  int64_t t0 = rcoll_now_ms();
  cr_assert_eq(rcoll_bootstrap_init(&s, &id, 1, 2, &b), rcollInvalidArgument,
               "a port-0 id fails at once, not after the timeout");
  cr_assert_lt(rcoll_now_ms() - t0, 1000);
  cr_assert_null(b);
}

/* Found by tests/fuzz/fuzz_bootstrap.c: the table's entries kept host names
 * without a terminator (only the copies in hosts[] had one). */
Test(bootstrap, table_host_names_are_terminated_in_place) {
  rcoll_bootstrap_hello_t table[2] = {good_hello(), good_hello()};
  char hosts[2][RCOLL_BOOTSTRAP_HOST_MAX];
  for (int i = 0; i < 2; i++) {
    table[i].rank = i;
    table[i].nranks = 2;
    memset(table[i].host, 'x', sizeof table[i].host);
    rcoll_bootstrap_hello_swap(&table[i]);
  }
  cr_assert_eq(rcoll_bootstrap_table_decode(table, sizeof table, good_hello().secret, 2, hosts, 0, 2),
               rcollSuccess, "%s", rcoll_error_text());
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(strnlen(table[i].host, sizeof table[i].host), sizeof table[i].host - 1, "entry %d", i);
    cr_assert_str_eq(hosts[i], table[i].host);
  }
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
