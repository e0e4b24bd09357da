/* The shared-memory transport's receive-reduce (shm_reduce.c): a message is
 * reduced into the destination as it arrives, dst = src (op) message, on each
 * path a message can take: through the ring (slot by slot), single-copy
 * between threads (straight from the sender's buffer) and single-copy
 * between processes (process_vm_readv in cache-sized pieces). Sizes cross
 * the slot and piece boundaries; expected values are computed here. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../transports/shm/shm.h"
#include "../transports/shm/shm_priv.h"
#include "comm.h"
#include "error.h"
#include "rcoll.h"
#include "support/transport_harness.h"

#define SLOT 4096

static const rcoll_transport_ops_t *ops = &shm_ops;
static char test_dir[128];

static void setup(void) {
  snprintf(test_dir, sizeof test_dir, "/dev/shm/rcoll-test-XXXXXX");
  cr_assert_not_null(mkdtemp(test_dir), "mkdtemp: %s", strerror(errno));
}

static void teardown(void) { rmdir(test_dir); }

TestSuite(shm_reduce, .init = setup, .fini = teardown, .timeout = 120);

/* int32 counts: inside one slot, across slots (a slot carries SLOT - 64
 * bytes), across 128 KiB pieces, and large. */
static const size_t counts[] = {1, 7, (SLOT - 64) / 4, (SLOT - 64) / 4 + 1, 3 * SLOT / 4 + 5,
                                32768, 32768 + 3, 100003, (1u << 20) + 11};
#define NCOUNTS (sizeof counts / sizeof counts[0])

static int32_t sent_value(int msg, size_t i) { return (int32_t)((i * 7 + (size_t)msg * 13) % 1000) - 500; }
static int32_t own_value(int msg, size_t i) { return (int32_t)((i * 3 + (size_t)msg) % 777); }

static void pair_open(th_pair_t *p, long cma, long memcpy_min) {
  memset(p, 0, sizeof *p);
  shm_settings(&p->set)->shm_slots = 8;
  shm_settings(&p->set)->shm_slot_size = SLOT;
  shm_settings(&p->set)->shm_cma_threshold = cma;
  shm_settings(&p->set)->shm_memcpy_threshold = memcpy_min;
  p->set.timeout = 30;
  snprintf(p->set.shm_dir, sizeof p->set.shm_dir, "%s", test_dir);
  th_pair_listen(p, ops);
}

/* Sends every count in order, each a message of int32 sent_value. */
static int send_all(void *comm) {
  for (size_t k = 0; k < NCOUNTS; k++) {
    int32_t *b = malloc(counts[k] * 4);
    for (size_t i = 0; i < counts[k]; i++)
      b[i] = sent_value((int)k, i);
    void *req = NULL;
    while (req == NULL)
      if (ops->isend(comm, b, counts[k] * 4, 0, NULL, &req) != rcollSuccess)
        return -1;
    rcollResult_t r = th_wait_req(ops, req, NULL, 30000);
    free(b);
    if (r != rcollSuccess)
      return -1;
  }
  return 0;
}

static void *send_thread(void *comm) { return (void *)(intptr_t)send_all(comm); }

/* Receives every count with irecv_reduce (sum, in place on odd messages)
 * and returns the number of wrong elements. */
static long reduce_all(void *comm) {
  long wrong = 0;
  for (size_t k = 0; k < NCOUNTS; k++) {
    size_t n = counts[k];
    int32_t *src = malloc(n * 4), *dst = k % 2 ? src : malloc(n * 4);
    for (size_t i = 0; i < n; i++)
      src[i] = own_value((int)k, i);
    void *req = NULL;
    while (req == NULL)
      cr_assert_eq(ops->irecv_reduce(comm, dst, src, n * 4, rcollInt32, rcollSum, &req), rcollSuccess,
                   "irecv_reduce: %s", rcoll_error_text());
    size_t got = 0;
    cr_assert_eq(th_wait_req(ops, req, &got, 30000), rcollSuccess, "count %zu: %s", n, rcoll_error_text());
    cr_expect_eq(got, n * 4);
    for (size_t i = 0; i < n; i++)
      wrong += dst[i] != own_value((int)k, i) + sent_value((int)k, i);
    if (dst != src)
      free(dst);
    free(src);
  }
  return wrong;
}

static void threads_case(long memcpy_min, int want_copy) {
  th_pair_t p;
  pair_open(&p, 0, memcpy_min);
  p.sctx = th_ctx_try(ops, &p.set, TH_SECRET);
  th_pair_connect(&p, 5000, 0, "shm");
  cr_assert_eq(((shm_conn_t *)p.recv)->copy, want_copy);
  pthread_t t;
  pthread_create(&t, NULL, send_thread, p.send);
  long wrong = reduce_all(p.recv);
  void *rc = NULL;
  pthread_join(t, &rc);
  cr_expect_eq((intptr_t)rc, 0, "the sender failed");
  cr_expect_eq(wrong, 0, "%ld wrong elements", wrong);
  th_pair_close(&p);
}

Test(shm_reduce, threads_through_the_ring) {
  threads_case(0, SHM_COPY_MEMCPY); /* memcpy threshold 0: never single-copy */
}

Test(shm_reduce, threads_single_copy_from_the_senders_buffer) {
  threads_case(1, SHM_COPY_MEMCPY);
}

/* The child connects and sends; the parent accepts and reduces. */
static void process_case(long cma) {
  th_pair_t p;
  pair_open(&p, cma, 0);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(60);
    void *ctx = th_ctx_try(ops, &p.set, TH_SECRET), *comm = NULL;
    int64_t end = rcoll_now_ms() + 5000;
    while (ctx && comm == NULL && rcoll_now_ms() < end)
      if (ops->connect(ctx, 0, p.handle, &comm) != rcollSuccess)
        _exit(2);
    _exit(comm == NULL ? 3 : send_all(comm) == 0 ? 0 : 4);
  }
  p.recv = th_accept_for(ops, p.listen, 5000);
  cr_assert_not_null(p.recv, "accept: %s", rcoll_error_text());
  cr_assert_eq(((shm_conn_t *)p.recv)->copy, SHM_COPY_CMA);
  long wrong = reduce_all(p.recv);
  int status = 0;
  waitpid(pid, &status, 0);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed (status 0x%x)", status);
  cr_expect_eq(wrong, 0, "%ld wrong elements", wrong);
  if (cma > 0)
    cr_expect_not_null(((shm_conn_t *)p.recv)->bounce, "single-copy messages were not read in pieces");
  th_pair_close(&p);
}

Test(shm_reduce, processes_through_the_ring) {
  process_case(0);
}

Test(shm_reduce, processes_single_copy_in_pieces) {
  process_case(1);
}

Test(shm_reduce, bad_arguments_are_refused) {
  th_pair_t p;
  pair_open(&p, 0, 0);
  p.sctx = th_ctx_try(ops, &p.set, TH_SECRET);
  th_pair_connect(&p, 5000, 0, "shm");
  int32_t a[4] = {0};
  void *req = NULL;
  cr_expect_eq(ops->irecv_reduce(p.recv, a, a, 16, rcollNumTypes, rcollSum, &req), rcollInvalidArgument);
  cr_expect_eq(ops->irecv_reduce(p.recv, a, a, 16, rcollInt32, rcollNumOps, &req), rcollInvalidArgument);
  cr_expect_eq(ops->irecv_reduce(p.recv, a, a, 10, rcollInt32, rcollSum, &req), rcollInvalidArgument,
               "10 bytes is not a whole number of int32");
  cr_expect_null(req);
  th_pair_close(&p);
}
