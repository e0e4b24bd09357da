/* rcollMemAlloc and rcollMemFree (lib/memalloc.c) on a machine without a
 * CUDA device: host memory from the pool, page-aligned, writable, reused
 * after a free, good for a registered collective; and every misuse refused
 * with a message. The device side (lib/cuda/mem_alloc.c) with the CUDA fake. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool.h"
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

/* Blocks of 64 KiB and more are memory files a peer can map
 * (transports/shm/shm_pool.c); rcoll_pool_find names the block of a range
 * that lies inside one live block, and nothing else. */
Test(memalloc, large_host_blocks_are_shared_files_that_ranges_find) {
  char *big = NULL, *small = NULL;
  cr_assert_eq(rcollMemAlloc((void **)&big, 65536 + 1), rcollSuccess, "%s", rcollGetLastError(NULL));
  cr_assert_eq(rcollMemAlloc((void **)&small, 4096), rcollSuccess);
  rcoll_pool_ref_t ref, other;
  cr_assert(rcoll_pool_find(big + 100, 1000, &ref), "a range inside a 68 KiB block");
  cr_expect_eq(ref.offset, 100);
  cr_expect_eq(ref.bytes, 65536 + 4096, "whole pages: %llu", (unsigned long long)ref.bytes);
  struct stat st;
  cr_assert_eq(fstat(ref.fd, &st), 0, "fd %d: %s", ref.fd, strerror(errno));
  cr_expect(S_ISREG(st.st_mode) && (uint64_t)st.st_size == ref.bytes, "a memory file of the block's size");
  cr_assert(rcoll_pool_find(big, ref.bytes, &other), "the whole block");
  cr_expect(other.gen == ref.gen && other.offset == 0);
  cr_expect(!rcoll_pool_find(big + 100, ref.bytes, &other), "a range that runs past the block's end");
  cr_expect(!rcoll_pool_find(small, 16, &other), "a 4 KiB block is not shared");
  char stack[16];
  cr_expect(!rcoll_pool_find(stack, sizeof stack, &other), "memory rcollMemAlloc did not give");
  cr_assert_eq(rcollMemFree(big), rcollSuccess);
  cr_expect(!rcoll_pool_find(big + 100, 1000, &other), "a freed block (kept for reuse) is not live");
  char *again = NULL;
  cr_assert_eq(rcollMemAlloc((void **)&again, 65536 + 1), rcollSuccess);
  cr_assert(rcoll_pool_find(again, 1, &other));
  cr_expect(again != big || other.gen == ref.gen, "a reused block keeps its file, so it keeps its number");
  cr_expect_eq(rcollMemFree(again), rcollSuccess);
  cr_expect_eq(rcollMemFree(small), rcollSuccess);
}

/* A shared block is not inherited by fork (MADV_DONTFORK): a child that
 * wrote into shared pages would change the parent's data, where private
 * pages are copied on write. */
Test(memalloc, shared_blocks_stay_out_of_forked_children) {
  char *big = NULL, *small = NULL;
  cr_assert_eq(rcollMemAlloc((void **)&big, 1 << 20), rcollSuccess);
  cr_assert_eq(rcollMemAlloc((void **)&small, 4096), rcollSuccess);
  memset(big, 1, 1 << 20);
  pid_t pid = fork();
  if (pid == 0) {
    /* msync fails with ENOMEM on a range that is not mapped. */
    int big_gone = msync(big, 1 << 20, MS_ASYNC) != 0 && errno == ENOMEM;
    int small_kept = msync(small, 4096, MS_ASYNC) == 0;
    _exit(big_gone && small_kept ? 0 : 1);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "the child must see the shared block unmapped and the small private one mapped (0x%x)", status);
  cr_expect_eq(rcollMemFree(big), rcollSuccess);
  cr_expect_eq(rcollMemFree(small), rcollSuccess);
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
