/* Every path of device calls side by side (tests/support/cuda_mix.h):
 * seeded random sequences of calls of every kind, queued on two streams per
 * rank and checked at the end. The other fake-CUDA suites check one path
 * at a time and wait after each call; these runs put the paths together on
 * one communicator (bounced host plans, proxy device plans, direct kernels
 * through the regions and in place) with many calls in flight on streams
 * that run in any order, which is where ordering mistakes between them
 * show. test_cuda_gdr.c runs the same over GPUDirect. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "support/cuda_fake.h"
#include "support/cuda_mix.h"
#include "support/cuda_ranks.h"

TestSuite(cuda_mix, .init = cuda_ranks_setup, .timeout = 240);

/* What the tests' own seeds reach (a path taken, a count above zero): one
 * sequence replayed with CUDA_MIX_SEED may not, and is judged on its
 * results alone. */
#define expect_reached(a, b, ...) \
  cr_expect(getenv("CUDA_MIX_SEED") != NULL || atomic_load(&(a)) > (b), __VA_ARGS__)

/* Within a node over CUDA IPC: calls whose largest buffer is at most 16 KiB
 * are host plans on pinned copies, the others device plans through the
 * proxy in 4 KiB parts. */
static void ipc_setup(void) {
  setenv("RCOLL_P2P_DISABLE", "0", 1);
  setenv("RCOLL_CHUNK_SIZE", "4096", 1);
  setenv("RCOLL_CUDA_BOUNCE", "16384", 1);
}

Test(cuda_mix, ipc_bounced_and_device_plans) {
  ipc_setup();
  cuda_mix_run(3, 1, 4, -1, 0);
  expect_reached(fake_stats.reduce_kernels, 0, "no device plan reduced");
}

/* The same with the bounce kernel rather than two copies and a wait. */
Test(cuda_mix, ipc_bounce_kernel_and_device_plans) {
  ipc_setup();
  setenv("RCOLL_CUDA_BOUNCE_KERNEL", "1", 1);
  cuda_mix_run(2, 11, 3, -1, 0);
  expect_reached(fake_stats.bounce_kernels, 0, "no call bounced through the kernel");
}

/* Over CUDA IPC, every call a device plan and every copy taking 100 us: a
 * send's copies into its ring run on the proxy's second stream, the
 * receives' copies and reductions on the first (ipc.c), so data that one
 * stream wrote and the other read too early shows as stale. */
Test(cuda_mix, ipc_with_slow_copies) {
  ipc_setup();
  setenv("RCOLL_CUDA_BOUNCE", "0", 1);
  atomic_store(&fake_stats.copy_delay_us, 100);
  cuda_mix_run(3, 31, 3, -1, 0);
  expect_reached(fake_stats.reduce_kernels, 0, "no device plan reduced");
}

/* Staged through pinned slots over sockets, every copy taking 100 us, so
 * that data not waited for shows as stale. */
Test(cuda_mix, staged_over_sockets_with_slow_copies) {
  setenv("RCOLL_SHM_DISABLE", "1", 1);
  setenv("RCOLL_P2P_DISABLE", "1", 1);
  setenv("RCOLL_CHUNK_SIZE", "4096", 1);
  setenv("RCOLL_CUDA_BOUNCE", "16384", 1);
  atomic_store(&fake_stats.copy_delay_us, 100);
  cuda_mix_run(3, 21, 3, -1, 0);
}

/* The direct path: collectives from 16 KiB in place, smaller ones through
 * 4 KiB regions in many rounds, all on the same flags; point-to-point calls
 * through the proxy until the first collective, kernels of their own after
 * it; a group's collectives a kernel each. */
static void direct_setup(void) {
  setenv("RCOLL_P2P_DISABLE", "0", 1);
  setenv("RCOLL_CUDA_DIRECT", "1", 1);
  setenv("RCOLL_CUDA_DIRECT_CHUNK", "4096", 1);
  setenv("RCOLL_CUDA_DIRECT_INPLACE", "16384", 1);
  setenv("RCOLL_CHUNK_SIZE", "4096", 1);
}

Test(cuda_mix, direct_two_ranks) {
  direct_setup();
  cuda_mix_run(2, 31, 4, -1, 0);
  expect_reached(fake_stats.direct_inplace, 0, "no direct call ran in place");
  expect_reached(fake_stats.direct_kernels, atomic_load(&fake_stats.direct_inplace),
                 "no direct call went through the regions");
}

Test(cuda_mix, direct_four_ranks) {
  direct_setup();
  cuda_mix_run(4, 41, 3, -1, 0);
  expect_reached(fake_stats.direct_inplace, 0, "no direct call ran in place");
}

/* A rank that cannot hand over its buffers sends every call through the
 * regions. */
Test(cuda_mix, direct_with_a_rank_without_ipc_handles) {
  direct_setup();
  cuda_mix_run(3, 51, 3, 1, 0);
  cr_expect_eq(atomic_load(&fake_stats.direct_inplace), 0,
               "a call ran in place without every rank's handles");
  expect_reached(fake_stats.direct_kernels, 0, "no direct kernel ran");
}

/* A third of the calls on a communicator split by parity, as a trainer's
 * data- and tensor-parallel groups: over IPC with bounced calls, and on the
 * direct path (each communicator its own boxes, flags and meetings). */
Test(cuda_mix, ipc_two_communicators) {
  ipc_setup();
  cuda_mix_run(3, 71, 3, -1, 1);
}

Test(cuda_mix, direct_two_communicators) {
  direct_setup();
  cuda_mix_run(4, 81, 3, -1, 1);
  expect_reached(fake_stats.direct_inplace, 0, "no direct call ran in place");
}
