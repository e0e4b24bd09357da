/* Grouped receives on the socket transport (irecv of n > 1 buffers, NCCL's
 * "multi-receive"): one receive consumes the next n sends of the connection,
 * each landing in the buffer posted with its tag whatever the order the sends
 * come in. Real sockets on loopback; payloads carry a pattern derived from
 * their tag, so a message in the wrong buffer, or cut short, shows. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../transports/socket/socket.h"
#include "../transports/socket/socket_priv.h"
#include "error.h"
#include "support/multi_harness.h"

#define INLINE 4096
#define MIB TH_MIB

static const rcoll_transport_ops_t *ops = &socket_ops;

static void pair_open(th_pair_t *p, int nt, int ns, int timeout) {
  memset(p, 0, sizeof *p);
  snprintf(p->set.socket_ifname, sizeof p->set.socket_ifname, "lo");
  snprintf(p->set.socket_family, sizeof p->set.socket_family, "AF_INET");
  socket_settings(&p->set)->socket_nthreads = nt;
  socket_settings(&p->set)->nsocks_perthread = ns;
  socket_settings(&p->set)->socket_inline = INLINE;
  p->set.timeout = timeout;
  p->sctx = th_ctx_new(ops, &p->set, TH_SECRET);
  th_pair_listen(p, ops);
  th_pair_connect(p, 5000, 0, "multi");
}

static const struct { int nt, ns; } configs[] = {{1, 1}, {2, 1}, {4, 2}};

/* Afterwards the connection still carries single receives in order. */
Test(socket_multi, reverse_tag_order_mixed_sizes, .timeout = 120) {
  for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
    th_pair_t p;
    pair_open(&p, configs[c].nt, configs[c].ns, 30);
    char what[64];
    snprintf(what, sizeof what, "%d helper threads x %d sockets", configs[c].nt, configs[c].ns);
    th_multi_reverse_order(&p, what);
    const size_t after[] = {7, INLINE + 1, 300000};
    th_exchange(&p, 3, after, 5, 1);
    th_pair_close(&p);
  }
}

Test(socket_multi, eight_buffers_with_empty_and_duplicate_tags, .timeout = 60) {
  const size_t ssizes[RCOLL_NET_MAX_RECVS] = {0, 70000, 1, INLINE, INLINE + 1, 2 * MIB + 3, 0, 200000};
  th_pair_t p;
  pair_open(&p, 2, 2, 30);
  th_multi_eight(&p, ssizes, "socket");
  th_pair_close(&p);
}

static void expect_tag_error(int bad, size_t size, const char *why) {
  th_pair_t p;
  pair_open(&p, 2, 1, 30);
  th_multi_tag_error(&p, bad, size, why);
  th_pair_close(&p);
}

Test(socket_multi, tag_matching_no_buffer_fails_naming_it, .timeout = 30) {
  expect_tag_error(7, 100, "matches no buffer");
  expect_tag_error(-5, MIB, "matches no buffer"); /* announced for the helpers: none may start */
}

Test(socket_multi, tag_of_an_already_filled_buffer_fails, .timeout = 30) {
  expect_tag_error(1, 100, "matches only already filled buffers");
  expect_tag_error(1, 3 * MIB, "matches only already filled buffers");
}

Test(socket_multi, message_larger_than_its_buffer_fails, .timeout = 30) {
  th_pair_t p;
  pair_open(&p, 1, 1, 30);
  th_multi_too_large(&p);
  th_pair_close(&p);
}

static rcollResult_t wait_one(th_pair_t *p, void *req, size_t *size, int64_t ms) {
  return th_wait_req(p->ops, req, size, ms);
}

/* A grouped receive takes one request slot per buffer, all or none: with
 * fewer free than it needs it gets a NULL request, and once enough are free
 * it is posted behind the single receives before it. */
Test(socket_multi, needs_one_slot_per_buffer, .timeout = 30) {
  th_pair_t p;
  pair_open(&p, 1, 1, 30);
  th_multi_slots(&p, SOCKET_NREQS, wait_one, NULL);
  th_pair_close(&p);
}

/* A stream of groups of 1..8 buffers, several in flight, against a sender
 * thread (th_group_stream), while helpers move the large ones concurrently. */
Test(socket_multi, stream_of_groups_against_a_sender_thread, .timeout = 120) {
  enum { N = 400, W = 6, EXTRA = 9 };
  size_t sizes[N];
  char *rb[N];
  for (int i = 0; i < N; i++) {
    sizes[i] = i % 7 == 0 ? 0 : i % 5 == 0 ? (size_t)(150000 + i * 331) : (size_t)((i * 53) % (INLINE + 300));
    rb[i] = th_rbuf_new(sizes[i] + EXTRA);
  }
  for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
    th_pair_t p;
    pair_open(&p, configs[c].nt, configs[c].ns, 30);
    char what[64];
    snprintf(what, sizeof what, "%d helper threads", configs[c].nt);
    cr_assert_gt(th_group_stream(&p, N, sizes, rb, EXTRA, W, what), N / 8);
    th_pair_close(&p);
  }
  for (int i = 0; i < N; i++)
    free(rb[i]);
}
