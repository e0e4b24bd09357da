/* rcollMemAlloc and rcollMemFree (lib/memalloc.c) on a machine without a
 * CUDA device: host memory from the pool, page-aligned, writable, reused
 * after a free, good for a registered collective; and every misuse refused
 * with a message. The device side (lib/cuda/mem_alloc.c) with the CUDA fake. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memtype.h"
#include "rcoll.h"
#include "support/cuda_fake.h"

static void setup(void) { setenv("RCOLL_TIMEOUT", "30", 1); }
TestSuite(memalloc, .init = setup, .timeout = 120);

static void expect_error(rcollResult_t got, rcollResult_t want, const char *needle) {
  const char *msg = rcollGetLastError(NULL);
  cr_assert_eq(got, want, "got %d, want %d; last error: %s", got, want, msg ? msg : "(null)");
  cr_assert(msg != NULL && strstr(msg, needle) != NULL, "\"%s\" does not mention \"%s\"", msg, needle);
}

Test(memalloc, host_buffers_are_page_aligned_writable_and_reused) {
  long page = sysconf(_SC_PAGESIZE);
  static const size_t sizes[] = {1, 4095, 4097, 1 << 20, (3 << 20) + 5};
  void *p[5];
  for (int i = 0; i < 5; i++) {
    cr_assert_eq(rcollMemAlloc(&p[i], sizes[i]), rcollSuccess, "%s", rcollGetLastError(NULL));
    cr_assert_not_null(p[i]);
    cr_expect_eq((uintptr_t)p[i] % (uintptr_t)page, 0, "size %zu: %p is not page-aligned", sizes[i], p[i]);
    memset(p[i], 0x5a, sizes[i]);
    rcoll_mem_info_t mi;
    cr_assert_eq(rcoll_mem_query(p[i], sizes[i], &mi), rcollSuccess);
    cr_expect_eq(mi.type, RCOLL_MEM_HOST, "no CUDA device here: host memory");
  }
  for (int i = 0; i < 5; i++)
    for (int j = i + 1; j < 5; j++)
      cr_expect(p[i] != p[j]);
  void *again;
  cr_assert_eq(rcollMemFree(p[3]), rcollSuccess);
  cr_assert_eq(rcollMemAlloc(&again, sizes[3]), rcollSuccess);
  cr_expect_eq(again, p[3], "a freed block of the same page count is handed out again");
  p[3] = again;
  for (int i = 0; i < 5; i++)
    cr_expect_eq(rcollMemFree(p[i]), rcollSuccess, "%s", rcollGetLastError(NULL));
}

Test(memalloc, misuse_is_refused) {
  expect_error(rcollMemAlloc(NULL, 16), rcollInvalidArgument, "ptr is NULL");
  void *p = (void *)1;
  cr_expect_eq(rcollMemAlloc(&p, 0), rcollSuccess, "size 0, as cudaMalloc");
  cr_expect_null(p);
  expect_error(rcollMemAlloc(&p, SIZE_MAX), rcollInvalidArgument, "too large");
  cr_expect_null(p);
  cr_expect_eq(rcollMemFree(NULL), rcollSuccess);
  char *heap = malloc(64);
  expect_error(rcollMemFree(heap), rcollInvalidArgument, "not allocated by rcollMemAlloc");
  free(heap);
  cr_assert_eq(rcollMemAlloc(&p, 100), rcollSuccess);
  cr_assert_eq(rcollMemFree(p), rcollSuccess);
  expect_error(rcollMemFree(p), rcollInvalidArgument, "freed already");
}

/* The pool's buffers carry a registered all-reduce between two ranks. */
Test(memalloc, buffers_serve_a_registered_collective) {
  enum { N = 100000 };
  rcollComm_t comms[2];
  cr_assert_eq(rcollCommInitAll(comms, 2, NULL), rcollSuccess, "%s", rcollGetLastError(NULL));
  float *buf[2];
  void *handle[2];
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(rcollMemAlloc((void **)&buf[r], N * sizeof(float)), rcollSuccess);
    for (int i = 0; i < N; i++)
      buf[r][i] = (float)(i % 100 + r);
    cr_assert_eq(rcollCommRegister(comms[r], buf[r], N * sizeof(float), &handle[r]), rcollSuccess, "%s",
                 rcollGetLastError(comms[r]));
  }
  cr_assert_eq(rcollGroupStart(), rcollSuccess);
  for (int r = 0; r < 2; r++)
    cr_assert_eq(rcollAllReduce(buf[r], buf[r], N, rcollFloat32, rcollSum, comms[r], NULL), rcollSuccess);
  cr_assert_eq(rcollGroupEnd(), rcollSuccess, "%s", rcollGetLastError(NULL));
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < N; i++)
      cr_assert_eq(buf[r][i], (float)(2 * (i % 100) + 1), "rank %d element %d", r, i);
    cr_expect_eq(rcollCommDeregister(comms[r], handle[r]), rcollSuccess);
    cr_expect_eq(rcollCommDestroy(comms[r]), rcollSuccess);
    cr_expect_eq(rcollMemFree(buf[r]), rcollSuccess);
  }
}

/* With a CUDA device (the fake's one): device memory, which rcollMemFree
 * hands back to cudaFree. Last in this file's order only by name; the fake
 * stays installed for this process, so it runs in its own test process. */
Test(memalloc, device_memory_when_there_is_a_device) {
  fake_cuda_install();
  void *p;
  cr_assert_eq(rcollMemAlloc(&p, 4096), rcollSuccess, "%s", rcollGetLastError(NULL));
  rcoll_mem_info_t mi;
  cr_assert_eq(rcoll_mem_query(p, 4096, &mi), rcollSuccess);
  cr_expect_eq(mi.type, RCOLL_MEM_CUDA, "device memory from cudaMalloc");
  cr_expect_eq(mi.device, 0);
  cr_expect_eq(rcollMemFree(p), rcollSuccess, "%s", rcollGetLastError(NULL));
}
