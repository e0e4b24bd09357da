/* The CUDA path's host side on a machine as it is: the lazy loader without a
 * driver (every pointer is host memory, no CUDA call is made), the embedded
 * kernel image, kernel names, staging arithmetic, the memory rules of a
 * call, and rcollCommRegister/Deregister on host memory. Tests that need a
 * GPU skip with the reason; tests/gpu/run.sh runs them on one. The
 * stream-ordering bookkeeping is tested on a fake CUDA in test_cuda_stream.c
 * and test_cuda_proxy.c. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "cuda/cuda_api.h"
#include "cuda/cuda_comm.h"
#include "cuda/ipc.h"
#include "cuda/module.h"
#include "cuda/stage.h"
#include "memtype.h"
#include "pidns.h"
#include "rcoll.h"

static void need_no_driver(void) {
  if (rcoll_cuda_api() != NULL)
    cr_skip_test("this machine has a CUDA device: the no-driver behaviour is not observable here");
}

Test(cuda_host, without_a_driver_every_pointer_is_host_memory, .init = need_no_driver) {
  cr_expect_neq(rcoll_cuda_api_why()[0], '\0', "the loader says why CUDA is unavailable");
  cr_log_info("CUDA here: %s", rcoll_cuda_api_why());
  int local = 0;
  char *heap = malloc(100);
  /* Addresses a GPU could use under unified addressing, and garbage: none
   * may be taken for device memory or dereferenced. */
  const void *ptrs[] = {&local, heap, NULL, (void *)0x1000, (void *)0x7f0000000000ull,
                        (void *)0x200000000ull};
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) {
    rcoll_mem_info_t mi = {-5, -5};
    cr_assert_eq(rcoll_mem_query(ptrs[i], 64, &mi), rcollSuccess);
    cr_expect_eq(mi.type, RCOLL_MEM_HOST, "pointer %p", ptrs[i]);
    cr_expect_eq(mi.device, -1);
  }
  free(heap);
}

Test(cuda_host, device_functions_fail_cleanly_without_a_driver, .init = need_no_driver) {
  float x[4] = {0};
  cr_expect_eq(rcoll_cuda_reduce(x, x, x, 4, rcollFloat32, rcollSum, NULL), rcollUnhandledCudaError);
  cr_expect_eq(rcoll_cuda_module_load(0), rcollUnhandledCudaError);
  cr_expect(strstr(rcollGetLastError(NULL), "no CUDA") != NULL, "%s", rcollGetLastError(NULL));
}

Test(cuda_host, gpu_conformance_needs_a_gpu) {
  if (rcoll_cuda_api() == NULL)
    cr_skip_test("no CUDA device here (%s): device-buffer conformance and the bandwidth run are "
                 "tests/gpu/run.sh, for a machine with a GPU", rcoll_cuda_api_why());
  cr_log_info("a GPU is present: run tests/gpu/run.sh for the device-buffer tests");
}

/* ---- the embedded image ---- */

Test(cuda_host, kernel_image_holds_every_kernel) {
#if RCOLL_HAVE_CUDA
  cr_assert_gt(rcoll_cuda_fatbin_size, 4096, "nvcc -fatbin produced an image");
  uint32_t magic;
  memcpy(&magic, rcoll_cuda_fatbin, 4);
  cr_expect_eq(magic, 0xba55ed50u, "fatbin magic");
  char name[64];
  for (int t = 0; t < rcollNumTypes; t++) {
    for (int op = 0; op < rcollNumOps; op++) {
      cr_assert_eq(rcoll_cuda_kernel_name(RCOLL_CUDA_K_REDUCE, (rcollDataType_t)t, (rcollRedOp_t)op,
                                          name, sizeof name), 0);
      cr_expect_not_null(memmem(rcoll_cuda_fatbin, rcoll_cuda_fatbin_size, name, strlen(name) + 1),
                         "%s is in the image", name);
    }
    rcoll_cuda_kernel_name(RCOLL_CUDA_K_AVG, (rcollDataType_t)t, rcollAvg, name, sizeof name);
    cr_expect_not_null(memmem(rcoll_cuda_fatbin, rcoll_cuda_fatbin_size, name, strlen(name) + 1),
                       "%s is in the image", name);
  }
  cr_expect_not_null(memmem(rcoll_cuda_fatbin, rcoll_cuda_fatbin_size, "rcoll_k_wait_flag", 18));
  /* Both architectures: sm_90 (H100/H200) and sm_80 (A100) code. */
  cr_expect_not_null(memmem(rcoll_cuda_fatbin, rcoll_cuda_fatbin_size, "sm_90", 5));
  cr_expect_not_null(memmem(rcoll_cuda_fatbin, rcoll_cuda_fatbin_size, "sm_80", 5));
#else
  cr_expect_eq(rcoll_cuda_fatbin_size, 0);
  cr_skip_test("configure found no CUDA toolkit: the library carries no device code");
#endif
}

Test(cuda_host, kernel_names) {
  char a[64], b[64];
  rcoll_cuda_kernel_name(RCOLL_CUDA_K_REDUCE, rcollFloat32, rcollSum, a, sizeof a);
  cr_expect_str_eq(a, "rcoll_k_sum_f32");
  rcoll_cuda_kernel_name(RCOLL_CUDA_K_REDUCE, rcollBfloat16, rcollMin, a, sizeof a);
  cr_expect_str_eq(a, "rcoll_k_min_bf16");
  rcoll_cuda_kernel_name(RCOLL_CUDA_K_REDUCE, rcollUint8, rcollProd, a, sizeof a);
  cr_expect_str_eq(a, "rcoll_k_prod_u8");
  /* avg reduces with sum, then divides once. */
  rcoll_cuda_kernel_name(RCOLL_CUDA_K_REDUCE, rcollInt64, rcollAvg, a, sizeof a);
  rcoll_cuda_kernel_name(RCOLL_CUDA_K_REDUCE, rcollInt64, rcollSum, b, sizeof b);
  cr_expect_str_eq(a, b);
  rcoll_cuda_kernel_name(RCOLL_CUDA_K_AVG, rcollFloat16, rcollAvg, a, sizeof a);
  cr_expect_str_eq(a, "rcoll_k_avg_f16");
  cr_expect_eq(rcoll_cuda_kernel_name(RCOLL_CUDA_K_REDUCE, rcollNumTypes, rcollSum, a, sizeof a), -1);
  cr_expect_eq(rcoll_cuda_kernel_name(RCOLL_CUDA_K_REDUCE, rcollInt8, rcollNumOps, a, sizeof a), -1);
}

/* ---- staging arithmetic ---- */

Test(cuda_host, message_parts) {
  const size_t slot = 4096;
  struct { size_t bytes, parts, last; } cases[] = {
      {0, 1, 0}, {1, 1, 1}, {4095, 1, 4095}, {4096, 1, 4096}, {4097, 2, 1}, {3 * 4096, 3, 4096},
      {49156, 13, 4}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t n = rcoll_stage_nparts(cases[i].bytes, slot), sum = 0;
    cr_expect_eq(n, cases[i].parts, "%zu bytes", cases[i].bytes);
    for (size_t k = 0; k < n; k++)
      sum += rcoll_stage_part_bytes(cases[i].bytes, slot, k);
    cr_expect_eq(sum, cases[i].bytes, "parts of %zu bytes add up", cases[i].bytes);
    cr_expect_eq(rcoll_stage_part_bytes(cases[i].bytes, slot, n - 1), cases[i].last);
    cr_expect_eq(rcoll_stage_part_bytes(cases[i].bytes, slot, n), 0);
  }
}

/* Running the pieces as plain copies must give what memmove gives. */
static void check_pieces(size_t dst_off, size_t src_off, size_t bytes) {
  unsigned char want[256], got[256];
  for (int i = 0; i < 256; i++)
    want[i] = got[i] = (unsigned char)(i * 7 + 1);
  memmove(want + dst_off, want + src_off, bytes);
  rcoll_stage_piece_t p[256];
  size_t n = rcoll_stage_pieces(got + dst_off, got + src_off, bytes, p, 256);
  for (size_t i = 0; i < n; i++) {
    unsigned char *d = got + dst_off + p[i].dst_off;
    const unsigned char *s = got + src_off + p[i].src_off;
    cr_assert(d + p[i].bytes <= s || s + p[i].bytes <= d, "piece %zu overlaps itself", i);
    memcpy(d, s, p[i].bytes);
  }
  cr_expect_arr_eq(got, want, 256, "dst %zu src %zu bytes %zu", dst_off, src_off, bytes);
}

Test(cuda_host, overlapping_copy_pieces) {
  check_pieces(0, 5, 100);   /* towards lower addresses */
  check_pieces(5, 0, 100);   /* towards higher addresses */
  check_pieces(0, 100, 100); /* touching, not overlapping */
  check_pieces(7, 6, 200);   /* one byte apart: many pieces */
  check_pieces(3, 3, 50);    /* the same buffer: nothing to do */
  rcoll_stage_piece_t p[4];
  cr_expect_eq(rcoll_stage_pieces((char *)p + 1, p, 100, p, 4), 0, "more pieces than room");
}

Test(cuda_host, staging_slots_ring_and_big_buffer) {
  rcoll_cuda_slots_t s;
  memset(&s, 0, sizeof s);
  const int nslots = 3;
  const size_t slot = 1024;
  int order[4];
  for (int i = 0; i < 3; i++) {
    order[i] = rcoll_stage_pick(&s, nslots, slot, 100);
    cr_assert_geq(order[i], 0);
    rcoll_stage_take(&s, nslots, order[i]);
  }
  cr_expect(order[0] == 0 && order[1] == 1 && order[2] == 2, "slots are taken in ring order");
  cr_expect_eq(rcoll_stage_pick(&s, nslots, slot, 100), -1, "all busy");
  rcoll_stage_give(&s, 1);
  cr_expect_eq(rcoll_stage_pick(&s, nslots, slot, 100), -1, "the ring waits for slot 0, the oldest");
  rcoll_stage_give(&s, 0);
  order[3] = rcoll_stage_pick(&s, nslots, slot, slot);
  cr_expect_eq(order[3], 0);
  /* Larger than a slot: the big buffer, one message at a time. */
  cr_expect_eq(rcoll_stage_pick(&s, nslots, slot, slot + 1), -2);
  rcoll_stage_take(&s, nslots, -2);
  cr_expect_eq(rcoll_stage_pick(&s, nslots, slot, slot + 1), -1);
  rcoll_stage_give(&s, -2);
  cr_expect_eq(rcoll_stage_pick(&s, nslots, slot, 1 << 20), -2);
}

/* ---- the memory rule of a call ---- */

Test(cuda_host, memory_rules_of_a_call) {
  struct rcollComm c;
  memset(&c, 0, sizeof c);
  rcoll_mem_info_t host = {RCOLL_MEM_HOST, -1}, dev0 = {RCOLL_MEM_CUDA, 0}, dev1 = {RCOLL_MEM_CUDA, 1};
  void *stream = (void *)0x1234;
  int device = 99;
  cr_expect_eq(rcoll_mem_check_call(&c, "f", &host, &host, NULL, &device), rcollSuccess);
  cr_expect_eq(device, -1);
  cr_expect_eq(rcoll_mem_check_call(&c, "f", &host, NULL, stream, &device), rcollInvalidUsage,
               "host buffers take no stream");
  cr_expect_eq(rcoll_mem_check_call(&c, "f", &dev0, &dev0, stream, &device), rcollSuccess);
  cr_expect_eq(device, 0);
  cr_expect_eq(rcoll_mem_check_call(&c, "f", NULL, &dev1, NULL, &device), rcollSuccess,
               "device buffers on the default stream");
  cr_expect_eq(device, 1);
  cr_expect_eq(rcoll_mem_check_call(&c, "f", &dev0, &host, stream, &device), rcollInvalidUsage);
  cr_expect_eq(rcoll_mem_check_call(&c, "f", &host, &dev0, stream, &device), rcollInvalidUsage);
  cr_expect_eq(rcoll_mem_check_call(&c, "f", &dev0, &dev1, stream, &device), rcollInvalidUsage);
}

/* ---- registrations (host memory works everywhere) ---- */

static rcollComm_t one_rank_comm(void) {
  rcollUniqueId id;
  rcollComm_t comm;
  cr_assert_eq(rcollGetUniqueId(&id), rcollSuccess);
  cr_assert_eq(rcollCommInitRank(&comm, 1, id, 0), rcollSuccess);
  return comm;
}

Test(cuda_host, register_and_deregister_host_memory, .timeout = 60) {
  rcollComm_t comm = one_rank_comm(), other = one_rank_comm();
  char *buf = malloc(1 << 16);
  void *h1 = NULL, *h2 = NULL, *h3 = NULL;
  cr_assert_eq(rcollCommRegister(comm, buf, 1 << 16, &h1), rcollSuccess);
  cr_assert_eq(rcollCommRegister(comm, buf + 100, 50, &h2), rcollSuccess, "overlaps are allowed");
  cr_expect_neq(h1, h2);
  cr_expect_eq(rcoll_reg_count(comm), 2);
  const rcoll_reg_t *g = rcoll_reg_find(comm, buf + 1000, 2000);
  cr_assert_not_null(g);
  cr_expect(g->base == buf && g->bytes == (1 << 16) && g->mem.type == RCOLL_MEM_HOST);
  cr_expect_null(rcoll_reg_find(comm, buf + (1 << 16) - 10, 11), "a range past the end");
  cr_expect_null(rcoll_reg_find(comm, buf - 1, 2));
  cr_expect_null(rcoll_reg_find(other, buf, 10), "registrations belong to their comm");
  /* Results of calls do not depend on registration. */
  float x[3] = {1, 2, 3}, y[3];
  cr_assert_eq(rcollCommRegister(comm, x, sizeof x, &h3), rcollSuccess);
  cr_expect_eq(rcollAllReduce(x, y, 3, rcollFloat32, rcollSum, comm, NULL), rcollSuccess);
  cr_expect(y[0] == 1 && y[1] == 2 && y[2] == 3);
  /* Bad arguments, foreign and stale handles. */
  void *h = NULL;
  cr_expect_eq(rcollCommRegister(NULL, buf, 10, &h), rcollInvalidArgument);
  cr_expect_eq(rcollCommRegister(comm, NULL, 10, &h), rcollInvalidArgument);
  cr_expect_eq(rcollCommRegister(comm, buf, 0, &h), rcollInvalidArgument);
  cr_expect_eq(rcollCommRegister(comm, buf, 10, NULL), rcollInvalidArgument);
  cr_expect_eq(rcollCommRegister(comm, (void *)~(uintptr_t)15, 100, &h), rcollInvalidArgument);
  cr_expect_eq(rcollCommDeregister(other, h1), rcollInvalidArgument);
  cr_expect_eq(rcollCommDeregister(comm, NULL), rcollInvalidArgument);
  cr_expect_eq(rcollCommDeregister(comm, h1), rcollSuccess);
  cr_expect_eq(rcollCommDeregister(comm, h1), rcollInvalidArgument, "already deregistered");
  cr_expect_eq(rcoll_reg_count(comm), 2);
  cr_expect_eq(rcollCommDeregister(comm, h2), rcollSuccess);
  /* h3 is left registered: destroy frees it (ASan's leak check would say). */
  int dev = 5;
  cr_expect_eq(rcollCommCuDevice(comm, &dev), rcollSuccess);
  cr_expect_eq(dev, -1, "a comm that moved only host buffers has no device");
  cr_expect_eq(rcollCommDestroy(comm), rcollSuccess);
  cr_expect_eq(rcollCommDestroy(other), rcollSuccess);
  free(buf);
}

/* Seen while writing tests/fuzz/fuzz_ipc.c: the receiver of a CUDA IPC hello opened
 * and unlinked whatever path the hello named. Only rcoll's control pages
 * (rcoll-ipc-*) are taken now; the other checks still hold. */
Test(cuda_host, ipc_hello_names_only_a_control_page) {
  rcoll_ipc_hello_t h;
  memset(&h, 0, sizeof h);
  h.magic = RCOLL_IPC_MAGIC;
  h.nslots = 4;
  h.slot_bytes = 1 << 20;
  strcpy(h.path, "/dev/shm/rcoll-ipc-4242-0-0-1");
  cr_assert_null(rcoll_ipc_hello_check(&h, sizeof h));
  cr_assert_not_null(rcoll_ipc_hello_check(&h, sizeof h - 1), "short");
  strcpy(h.path, "/home/user/.bashrc");
  cr_assert_not_null(rcoll_ipc_hello_check(&h, sizeof h), "a file of the user's");
  strcpy(h.path, "/dev/shm/../../etc/rcoll-ipc-x");
  cr_assert_not_null(rcoll_ipc_hello_check(&h, sizeof h), "climbs out of the directory");
  strcpy(h.path, "/dev/shm/rcoll-ipc-4242-0-0-1");
  h.nslots = 0;
  cr_assert_not_null(rcoll_ipc_hello_check(&h, sizeof h), "no slots");
  h.nslots = 4;
  memset(h.path, 'a', sizeof h.path);
  cr_assert_not_null(rcoll_ipc_hello_check(&h, sizeof h), "unterminated path");
}

/* Issue 14: the receiver of a hello used the sender's ring pointer as is
 * whenever the hello's pid equalled its own, so a peer in another pid
 * namespace (a container) that happened to run under our pid number was
 * taken for this very process: its device pointer would have been used
 * here. Same process only with our pid and our boot and pid-namespace key
 * (lib/pidns.h, the shm transport's listener check uses the same one). */
Test(cuda_host, ipc_same_pid_elsewhere_is_another_process) {
  uint64_t key = rcoll_pid_ns_key();
  cr_assert_neq(key, 0, "no boot id or pid namespace to read here");
  rcoll_ipc_hello_t h;
  memset(&h, 0, sizeof h);
  h.magic = RCOLL_IPC_MAGIC;
  h.nslots = 4;
  h.slot_bytes = 1 << 20;
  strcpy(h.path, "/dev/shm/rcoll-ipc-4242-0-0-1");
  h.pid = getpid();
  h.ns_key = key;
  cr_assert_null(rcoll_ipc_hello_check(&h, sizeof h));
  cr_assert(rcoll_ipc_same_process(&h), "our own hello");
  h.ns_key = key ^ 0x100; /* our pid number in another pid namespace, or on another boot */
  cr_assert_not(rcoll_ipc_same_process(&h), "same pid, another pid namespace");
  h.ns_key = 0; /* a sender that could not read its key */
  cr_assert_not(rcoll_ipc_same_process(&h), "same pid, key unknown");
  h.ns_key = key;
  h.pid = (int64_t)getpid() + 1;
  cr_assert_not(rcoll_ipc_same_process(&h), "another pid of our namespace");
  /* A version-1 hello (no key, magic "rcollipc") is not taken for one. */
  h.magic = 0x6370696c6c6f6372ull;
  cr_assert_not_null(rcoll_ipc_hello_check(&h, sizeof h));
}
