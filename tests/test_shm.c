/* The shared-memory transport, driven through its ops table as the engine
 * drives it: a sender and a receiver as two threads of one process (the
 * single-copy path is then a memcpy) and as two processes (fork; the
 * single-copy path is process_vm_readv). Payloads carry a pattern that
 * depends on the message number and offset, so a lost, reordered or
 * truncated piece shows. Every test uses its own segment directory under
 * /dev/shm, so that leftovers can be counted (support/shm_pair.c). Refusals
 * and failures are in test_shm_faults.c. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../transports/shm/shm.h"
#include "../transports/shm/shm_priv.h"
#include "clock.h"
#include "comm.h"
#include "error.h"
#include "rcoll.h"
#include "support/shm_pair.h"

/* What the forked sender's stream sends with (a test may swap isend), what
 * it does to its buffers before sending, and whether the parent's receiving
 * end must have mapped the child's pool blocks (-1: not asked). */
static const rcoll_transport_ops_t *child_ops = &shm_ops;
static void (*child_prepare)(th_stream_t *s);
static int want_pool_mapped = -1;

TestSuite(shm, .init = shm_pair_dir_make, .fini = shm_pair_dir_remove, .timeout = 120);

/* Around the payload rules: up to 48 bytes share the header's line (a
 * SMALL slot), a slot of SLOT bytes carries SLOT - 64. */
static const size_t sizes_all[] = {0,         1,         8,        47,    48,    49,       64,          SLOT - 65,
                                   SLOT - 64, SLOT - 63, 3 * SLOT, 65535, 65537, MIB + 13, 4 * MIB - 1, 64 * MIB};
#define NSIZES ((int)(sizeof sizes_all / sizeof sizes_all[0]))

/* ---- two threads of one process ---- */

Test(shm, threads_sizes_ring_memcpy_and_crossover) {
  const shm_cfg_t cfgs[] = {{.slots = 8, .slot_size = SLOT, .memcpy_min = 0},
                            {.slots = 8, .slot_size = SLOT, .memcpy_min = 65536},
                            {.slots = 2, .slot_size = 256, .memcpy_min = 1}};
  for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
    pair_t p;
    shm_pair_open(&p, &cfgs[c]);
    cr_assert_eq(((shm_conn_t *)p.send)->copy, SHM_COPY_MEMCPY, "threads of one process use memcpy");
    cr_assert_eq(shm_pair_dir_entries(), 0, "segments must be unlinked once both ends mapped them");
    shm_pair_exchange(&p, NSIZES, sizes_all, 0);
    shm_pair_exchange(&p, NSIZES, sizes_all, 3 * SLOT + 7); /* receives posted larger than the send */
    th_pair_close(&p);
  }
  /* Sizes just below, at and above the threshold alternate on one ring. */
  size_t cross[60];
  for (int i = 0; i < 60; i++)
    cross[i] = 65536 + (size_t)(i % 3) - 1;
  pair_t p;
  shm_pair_open(&p, &(shm_cfg_t){.slots = 4, .slot_size = SLOT, .memcpy_min = 65536});
  shm_pair_exchange(&p, 60, cross, 5);
  th_pair_close(&p);
}

/* Which path a send took shows in when it completes: through the ring at
 * once, single-copy only once the receiver has read it. With the memcpy
 * threshold off, a plain isend of 64 KiB goes through the ring, and so does
 * an isend_single below the exchange threshold; an isend_single at it waits
 * for its receive. */
Test(shm, exchange_sends_go_single_copy_from_their_threshold) {
  pair_t p;
  shm_pair_open(&p, &(shm_cfg_t){.slots = 32, .slot_size = SLOT, .memcpy_min = 0, .exchange = 16384});
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
  shm_pair_open(&p, &(shm_cfg_t){.slots = 16, .slot_size = SLOT, .memcpy_min = 100000});
  cr_assert_gt(shm_pair_exchange(&p, N, sizes, 11), 0, "%d messages fit in %d request slots?", N, SHM_NREQS);
  th_pair_close(&p);
}

static void expect_larger_error(size_t sent, size_t posted, long memcpy_min) {
  pair_t p;
  char *sb = calloc(1, sent), *rb = calloc(1, posted);
  void *sreq, *rreq, *rbp = rb;
  int tag = 0;
  shm_pair_open(&p, &(shm_cfg_t){.slots = 4, .slot_size = SLOT, .memcpy_min = memcpy_min});
  cr_assert_eq(ops->isend(p.send, sb, sent, 0, NULL, &sreq), rcollSuccess);
  cr_assert_eq(ops->irecv(p.recv, 1, &rbp, &posted, &tag, NULL, &rreq), rcollSuccess);
  rcollResult_t r = th_wait_req(ops, rreq, NULL, 5000);
  cr_assert_eq(r, rcollInvalidUsage, "got %d: %s", r, rcoll_error_text());
  char want[128];
  snprintf(want, sizeof want, "message of %zu bytes", sent);
  cr_assert(strstr(rcoll_error_text(), want) && strstr(rcoll_error_text(), "larger than posted receive"), "text: %s",
            rcoll_error_text());
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

/* In the child the listener belongs to the parent; the child connects. */
static int proc_child(const proc_job_t *j) {
  alarm(60);
  void *comm = shm_pair_proc_connect(j->p);
  if (comm == NULL)
    return 2;
  th_stream_t *s = th_stream_new(child_ops, comm, j->child_sends, j->n, j->sizes, j->child_sends ? 0 : j->extra, SHIFT);
  if (child_prepare != NULL)
    child_prepare(s);
  th_stream_run(s);
  char why[256] = "";
  int bad = s->result != rcollSuccess ? 3 : !j->child_sends && th_stream_verify(s, j->sizes, why, sizeof why);
  if (bad)
    fprintf(stderr, "child: %s %s\n", s->err, why);
  ops->close_send(comm);
  return bad ? 4 : 0;
}

static void proc_exchange(const shm_cfg_t *c, int child_sends, int n, const size_t *sizes, size_t extra,
                          int want_copy) {
  pair_t p;
  shm_pair_listen(&p, c);
  proc_job_t j = {&p, child_sends, n, sizes, extra};
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0)
    _exit(proc_child(&j));
  p.recv = shm_pair_proc_accept(&p);
  cr_assert_not_null(p.recv, "accept: %s", rcoll_error_text());
  cr_assert_eq(shm_pair_dir_entries(), 0, "segments must be unlinked once both ends mapped them");
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
  if (want_pool_mapped >= 0) {
    const shm_conn_t *rc = p.recv;
    cr_assert_eq(rc->pool != NULL && !rc->pool_off, want_pool_mapped,
                 "pool blocks %s mapped (pool_off %d)", rc->pool != NULL ? "were" : "were not", rc->pool_off);
  }
  th_pair_close(&p);
}

Test(shm, processes_sizes_ring_and_cma) {
  /* The acceptor is the receiver: the child connects and sends. */
  proc_exchange(&(shm_cfg_t){.slots = 8, .slot_size = SLOT, .cma = 0}, 1, NSIZES, sizes_all, 0, SHM_COPY_CMA);
  proc_exchange(&(shm_cfg_t){.slots = 8, .slot_size = SLOT, .cma = 65536}, 1, NSIZES, sizes_all, 777, SHM_COPY_CMA);
  proc_exchange(&(shm_cfg_t){.slots = 16, .slot_size = 65536, .cma = 1}, 1, NSIZES, sizes_all, 0, SHM_COPY_CMA);
}

Test(shm, processes_many_in_flight_across_the_crossover) {
  enum { N = 300 };
  size_t sizes[N];
  for (int i = 0; i < N; i++)
    sizes[i] = (i % 5 == 0) ? (size_t)(262144 + (i % 3) - 1) : (size_t)((i * 53) % (3 * SLOT));
  proc_exchange(&(shm_cfg_t){.slots = 8, .slot_size = SLOT, .cma = 262144}, 1, N, sizes, 9, SHM_COPY_CMA);
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
  proc_exchange(&(shm_cfg_t){.slots = 8, .slot_size = SLOT, .cma = 0, .exchange = 16384}, 1, NSIZES + 3, sizes, 5,
                SHM_COPY_CMA);
}

/* Sends of 64 KiB and more from rcollMemAlloc's host pool, each at its own
 * offset into a block of its own, more blocks than a connection keeps
 * mapped, so that mappings are evicted; the rest stay in the child's heap.
 * The patterns are the stream's. */
static void child_to_pool(th_stream_t *s) {
  for (int i = 0; i < s->n; i++) {
    if (s->sizes[i] < 65536)
      continue;
    size_t at = (size_t)(i % 3) * 4096 + (size_t)(i % 7) * 8;
    void *block = NULL;
    if (rcollMemAlloc(&block, at + s->sizes[i]) != rcollSuccess)
      _exit(5);
    memcpy((char *)block + at, s->bufs[i], s->sizes[i]);
    s->bufs[i] = (char *)block + at; /* the child exits without freeing */
  }
}

/* Sends through isend_single (halves of an exchange, single copy from the
 * exchange threshold) or plain isend (single copy from the CMA threshold),
 * from pool buffers where 64 KiB or larger. */
static void pool_exchange(int single, int no_pool_map, int want_mapped) {
  static rcoll_transport_ops_t single_ops;
  single_ops = shm_ops;
  single_ops.isend = shm_ops.isend_single;
  child_ops = single ? &single_ops : &shm_ops;
  child_prepare = child_to_pool;
  want_pool_mapped = want_mapped;
  enum { N = 2 * SHM_POOL_MAPS };
  size_t sizes[N];
  for (int i = 0; i < N; i++)
    sizes[i] = i % 4 == 3 ? (size_t)(100 * i) : (size_t)65536 + (size_t)i * 8192 + (size_t)(i % 5);
  proc_exchange(&(shm_cfg_t){.slots = 8, .slot_size = SLOT, .cma = single ? 0 : 65536, .exchange = single ? 65536 : 0,
                             .no_pool_map = no_pool_map},
                1, N, sizes, 3, SHM_COPY_CMA);
}

/* From a pool buffer the receiver copies through its mapping of the
 * sender's block (shm_pool.c) rather than with process_vm_readv. */
Test(shm, processes_exchange_sends_from_pool_buffers_are_mapped) {
  pool_exchange(1, 0, 1);
}

Test(shm, processes_single_copy_sends_from_pool_buffers_are_mapped) {
  pool_exchange(0, 0, 1);
}

/* RCOLL_SHM_POOL_MAP=0 on the sender: the same sends go by CMA. */
Test(shm, processes_pool_map_off_reads_pool_buffers_by_cma) {
  pool_exchange(1, 1, 0);
  pool_exchange(0, 1, 0);
}
