/* Seeded random sequences of device-buffer calls on the host fake of CUDA:
 * every collective, type, op, root, in place or not, counts from 0 to 40000
 * (across the bounce limit, the direct path's in-place limit and many
 * chunks), some of them two to a group, each on one of two streams chosen
 * per rank; about one in eight outside a group on host buffers instead,
 * which waits for the device calls before it. All calls are queued before any is waited for, then every rank
 * checks every call's result, its unchanged send buffer and its guard bytes
 * (conformance_case.h). Not the legacy stream: ranks that are threads of
 * one process share it, so one rank's wait for its call would hold the
 * others' calls queued behind it, on a GPU as on the fake.
 *
 * CUDA_MIX_SEED=N replays one sequence, CUDA_MIX_SHOW=1 (with Criterion's
 * --verbose) lists its calls. Asserts with Criterion. */
#ifndef RCOLL_TESTS_SUPPORT_CUDA_MIX_H
#define RCOLL_TESTS_SUPPORT_CUDA_MIX_H

#include <stdint.h>

/* Runs the sequences of `seeds` seeds from first_seed on n ranks, each on a
 * communicator of its own, expecting every call right. refuse_ipc_rank
 * (-1: none) is a rank whose buffers cannot be handed over through CUDA
 * IPC, as memory from cudaMallocAsync pools. With split, a third of the
 * calls go to a communicator split from it by the ranks' parity (as a
 * trainer's data- and tensor-parallel groups), a group's two calls each to
 * its own. */
void cuda_mix_run(int n, uint64_t first_seed, int seeds, int refuse_ipc_rank, int split);

#endif
