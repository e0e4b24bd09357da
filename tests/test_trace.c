/* Execution traces (lib/trace.c, lib/trace_write.c, and the clock exchange
 * in lib/bootstrap.c). tests/check_trace.sh runs whole traced jobs and
 * validates the merged JSON; these pin the parts whose mistakes that would
 * only blur: the offset arithmetic, the cap, and the file's fields. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "error.h"
#include "trace_priv.h"

#define MAX_RANKS 5

/* Each rank's clock runs `skew` ahead of the real one: rank r by r seconds
 * plus a little, as unrelated machines' monotonic clocks would. */
static _Thread_local int64_t skew;
static int64_t skewed_now(void) { return rcoll_trace_now() + skew; }
static int64_t skew_of(int rank) { return rank * 1000000000ll + rank * rank * 12345; }

typedef struct clock_rank {
  int rank, nranks;
  rcollUniqueId id;
  rcoll_settings_t s;
  rcollResult_t rc;
  int64_t offset, rtt;
} clock_rank_t;

static void *clock_rank_main(void *arg) {
  clock_rank_t *r = arg;
  rcoll_bootstrap_t *b = NULL;
  skew = skew_of(r->rank);
  r->rc = rcoll_bootstrap_init(&r->s, &r->id, r->rank, r->nranks, &b);
  if (r->rc == rcollSuccess)
    r->rc = rcoll_bootstrap_clock_left(b, 16, skewed_now, &r->offset, &r->rtt);
  if (r->rc == rcollSuccess) /* the ring must still be in step for later exchanges */
    r->rc = rcoll_bootstrap_barrier(b);
  rcoll_bootstrap_close(b);
  return NULL;
}

/* Every rank's clock is skewed by skew_of(rank); each must find its left
 * neighbour's skew minus its own. Odd and even rank counts order the
 * ping-pongs differently (bootstrap.c). */
static void clock_job(int nranks) {
  rcoll_settings_t s;
  cr_assert_eq(rcoll_settings_load(&s), 0);
  s.timeout = 30;
  snprintf(s.socket_ifname, sizeof s.socket_ifname, "lo");
  s.socket_family[0] = '\0';
  rcoll_sockaddr_t at;
  rcollUniqueId id;
  cr_assert_eq(rcoll_sockaddr_parse("127.0.0.1:0", -1, &at), rcollSuccess);
  cr_assert_eq(rcoll_bootstrap_root_start(&s, &at, 77, &id), rcollSuccess, "%s",
               rcoll_error_text());
  clock_rank_t ranks[MAX_RANKS];
  pthread_t t[MAX_RANKS];
  for (int r = 0; r < nranks; r++) {
    ranks[r] = (clock_rank_t){.rank = r, .nranks = nranks, .id = id, .s = s};
    pthread_create(&t[r], NULL, clock_rank_main, &ranks[r]);
  }
  for (int r = 0; r < nranks; r++)
    pthread_join(t[r], NULL);
  int64_t closure = 0;
  for (int r = 0; r < nranks; r++) {
    const clock_rank_t *k = &ranks[r];
    cr_assert_eq(k->rc, rcollSuccess, "%d ranks, rank %d: %s", nranks, r, rcoll_error_text());
    int64_t want = skew_of((r + nranks - 1) % nranks) - skew_of(r);
    /* The estimate is off by at most half the round trip it came from. */
    cr_expect(k->rtt > 0 && k->rtt < 1000000000, "%d ranks, rank %d: round trip %lld ns", nranks, r,
              (long long)k->rtt);
    cr_expect(llabs(k->offset - want) <= k->rtt / 2 + 1,
              "%d ranks, rank %d: offset %lld ns, expected %lld +- %lld", nranks, r,
              (long long)k->offset, (long long)want, (long long)k->rtt / 2);
    closure += k->offset;
  }
  cr_expect(llabs(closure) < 5000000, "the offsets round the ring sum to %lld ns",
            (long long)closure);
}

Test(trace, clock_left_measures_each_neighbours_skew) {
  for (int n = 2; n <= MAX_RANKS; n++)
    clock_job(n);
}

Test(trace, neighbours_offsets_chain_to_rank_0) {
  /* Rank k's clock reads 100 k (+ 1 for rank 3): left[k] = clock(k-1) - clock(k). */
  const int64_t left[4] = {301, -100, -100, -101};
  int64_t off, closure;
  for (int r = 0; r < 4; r++) {
    rcoll_trace_chain_offsets(left, 4, r, &off, &closure);
    cr_expect_eq(off, -(100 * r + (r == 3)), "rank %d: clock + offset reads rank 0's", r);
    cr_expect_eq(closure, 0);
  }
  const int64_t noisy[2] = {7, 3};
  rcoll_trace_chain_offsets(noisy, 2, 1, &off, &closure);
  cr_expect(off == 3 && closure == 10, "the closure shows the error: %lld", (long long)closure);
}

Test(trace, clock_left_on_one_rank_is_zero) {
  rcoll_bootstrap_t *b = NULL;
  rcoll_settings_t s;
  cr_assert_eq(rcoll_settings_load(&s), 0);
  snprintf(s.socket_ifname, sizeof s.socket_ifname, "lo");
  rcoll_sockaddr_t at;
  rcollUniqueId id;
  cr_assert_eq(rcoll_sockaddr_parse("127.0.0.1:0", -1, &at), rcollSuccess);
  cr_assert_eq(rcoll_bootstrap_root_start(&s, &at, 78, &id), rcollSuccess);
  cr_assert_eq(rcoll_bootstrap_init(&s, &id, 0, 1, &b), rcollSuccess, "%s", rcoll_error_text());
  int64_t off = 5, rtt = 5;
  cr_expect_eq(rcoll_bootstrap_clock_left(b, 4, rcoll_trace_now, &off, &rtt), rcollSuccess);
  cr_expect(off == 0 && rtt == 0);
  rcoll_bootstrap_close(b);
}

/* A trace with no communicator behind it, writing to a memory buffer. */
static rcoll_trace_t *fake_trace(size_t max, char **buf, size_t *len) {
  rcoll_trace_t *t = calloc(1, sizeof *t);
  t->rank = 0;
  t->nranks = 2;
  t->comm_hash = 0x0123456789abcdefull;
  t->max = max;
  t->sync = "test";
  snprintf(t->host, sizeof t->host, "h\"1");
  t->file = open_memstream(buf, len);
  return t;
}

/* A plan of two steps: a send to rank 1 and a receive-reduce from it. */
static rcoll_plan_t fake_plan(rcoll_step_t *steps) {
  steps[0] = (rcoll_step_t){.kind = RCOLL_STEP_SEND, .peer = 1, .bytes = 64, .seq = 7};
  steps[1] = (rcoll_step_t){.kind = RCOLL_STEP_RECV_REDUCE, .peer = 1, .bytes = 64, .seq = 9};
  return (rcoll_plan_t){.steps = steps, .nsteps = 2, .algo = "ring"};
}

static void run_fake_call(rcoll_trace_t *t, const rcoll_plan_t *p) {
  rcoll_trace_call(t, "rcollAllReduce", 64);
  rcoll_trace_run_begin(t, p);
  rcoll_trace_posted(t, p, 0);
  rcoll_trace_posted(t, p, 1);
  rcoll_trace_done(t, p, 0);
  rcoll_trace_arrived(t, p, 1);
  rcoll_trace_done(t, p, 1);
  rcoll_trace_run_end(t, p, rcollSuccess, 0);
}

static void free_fake(rcoll_trace_t *t) {
  free(t->recs);
  free(t->posted);
  free(t->arrived);
  free(t);
}

Test(trace, records_steps_and_writes_their_fields) {
  char *buf = NULL;
  size_t len = 0;
  rcoll_trace_t *t = fake_trace(100, &buf, &len);
  rcoll_step_t steps[2];
  rcoll_plan_t p = fake_plan(steps);
  run_fake_call(t, &p);
  cr_assert_eq(t->n, 3, "two steps and the call");
  cr_expect(t->recs[1].t0 <= t->recs[1].t1 && t->recs[1].t1 <= t->recs[1].t2,
            "post <= arrival <= done");
  t->recs[0].t0 = 1234; /* a known time: 1234 ns is 1.234 us */
  t->recs[0].t2 = 2001234;
  cr_assert_eq(rcoll_trace_write(t), 0);
  fclose(t->file);
  cr_expect(strncmp(buf, "{\"traceEvents\":[", 16) == 0);
  cr_expect(strstr(buf, "\"name\":\"send\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":0,\"tid\":1124,"
                        "\"ts\":1.234,\"dur\":2000.000") != NULL, "%s", buf);
  cr_expect(strstr(buf, "\"id\":\"01234567:0>1#7\"") != NULL, "the send's flow");
  cr_expect(strstr(buf, "\"tid\":1636,\"args\":{\"name\":\"recv from rank 1\"}") != NULL,
            "lanes 100 + 512 (2 peer + receiving)");
  cr_expect(strstr(buf, "\"id\":\"01234567:1>0#9\",\"bp\":\"e\"") != NULL, "the receive's flow");
  cr_expect(strstr(buf, "\"name\":\"reduce\",\"cat\":\"reduce\"") != NULL, "the staged reduction");
  cr_expect(strstr(buf, "\"name\":\"rcollAllReduce\",\"cat\":\"call\"") != NULL);
  cr_expect(strstr(buf, "rank 0 (h\\\"1)") != NULL, "the host name is escaped");
  cr_expect(strstr(buf, "\"events_dropped\":0,\"complete\":true}}}\n") != NULL);
  free(buf);
  free_fake(t);
}

Test(trace, the_cap_keeps_the_first_events_and_counts_the_rest) {
  char *buf = NULL;
  size_t len = 0;
  rcoll_trace_t *t = fake_trace(5, &buf, &len);
  rcoll_step_t steps[2];
  rcoll_plan_t p = fake_plan(steps);
  for (int i = 0; i < 4; i++)
    run_fake_call(t, &p);
  cr_expect_eq(t->n, 5);
  cr_expect_eq(t->dropped, 7, "12 events, 5 kept");
  cr_expect_eq(t->recs[4].call, 2, "the first ones are kept");
  cr_assert_eq(rcoll_trace_write(t), 0);
  fclose(t->file);
  cr_expect(strstr(buf, "\"name\":\"trace full\"") != NULL);
  cr_expect(strstr(buf, "\"events\":5,\"event_cap\":5,\"events_dropped\":7") != NULL, "%s", buf);
  free(buf);
  free_fake(t);
}

Test(trace, a_group_is_one_call) {
  char *buf = NULL;
  size_t len = 0;
  rcoll_trace_t *t = fake_trace(100, &buf, &len);
  rcoll_step_t steps[2];
  rcoll_plan_t p = fake_plan(steps);
  rcoll_trace_call(t, "rcollSend", 8);
  run_fake_call(t, &p); /* names rcollAllReduce second */
  cr_expect_str_eq(t->recs[2].name, "group");
  cr_expect_eq(t->recs[2].a, 72, "bytes of both calls");
  fclose(t->file);
  free(buf);
  free_fake(t);
}

Test(trace, pipelined_messages_of_a_connection_get_lanes_that_nest) {
  char *buf = NULL;
  size_t len = 0;
  rcoll_trace_t *t = fake_trace(100, &buf, &len);
  rcoll_step_t steps[2];
  rcoll_plan_t p = fake_plan(steps);
  for (int i = 0; i < 3; i++)
    run_fake_call(t, &p);
  /* Three sends to rank 1: 0-10 and 5-15 overlap, 20-30 follows both. */
  const int64_t times[3][2] = {{0, 10}, {5, 15}, {20, 30}};
  int k = 0;
  for (size_t i = 0; i < t->n; i++)
    if (t->recs[i].type == RCOLL_TR_STEP && t->recs[i].kind == RCOLL_STEP_SEND) {
      t->recs[i].t0 = times[k][0] * 1000;
      t->recs[i].t2 = times[k][1] * 1000;
      t->recs[i].a = (uint64_t)k++;
    }
  cr_assert_eq(k, 3);
  cr_assert_eq(rcoll_trace_write(t), 0);
  fclose(t->file);
  cr_expect(strstr(buf, "\"tid\":1124,\"ts\":0.000,\"dur\":10.000") != NULL, "%s", buf);
  cr_expect(strstr(buf, "\"tid\":1125,\"ts\":5.000,\"dur\":10.000") != NULL, "the overlapping one");
  cr_expect(strstr(buf, "\"tid\":1124,\"ts\":20.000,\"dur\":10.000") != NULL,
            "the first lane again");
  cr_expect(strstr(buf, "\"name\":\"send to rank 1 (2)\"") != NULL);
  cr_expect(strstr(buf, "\"tid\":1126") == NULL, "two lanes are enough");
  free(buf);
  free_fake(t);
}
