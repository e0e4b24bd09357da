/* The direct path (RCOLL_CUDA_DIRECT) against a rank that made the same call
 * in a group, which the proxy runs: on the host fake of CUDA, as
 * test_cuda_direct.c (which had grown past 600 lines). Such ranks cannot
 * see each other's call, so both wait until RCOLL_TIMEOUT; the tests check
 * that every error says grouping may be why. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "rcoll.h"
#include "support/cuda_fake.h"
#include "support/cuda_ranks.h"

static void direct_setup(void) {
  cuda_ranks_setup();
  setenv("RCOLL_CUDA_DIRECT", "1", 1);
  setenv("RCOLL_TIMEOUT", "2", 1);
}

TestSuite(cuda_direct_groups, .init = direct_setup, .timeout = 120);

/* Rank 0 makes its second all-reduce in a group (the proxy's plan), rank 1
 * outside one (a direct kernel): neither sees the other's call, so both
 * wait until RCOLL_TIMEOUT (rank 0 for a connection rank 1 never makes),
 * and each error says that grouping may be why. */
static void one_rank_groups(rank_ctx_t *x, rcollComm_t comm) {
  rcoll_cuda_stream_t s = cuda_ranks_stream_new();
  const size_t n = 100;
  const int connected = x->user != NULL; /* a send/recv first: the proxy's connections exist */
  float *a = cuda_ranks_dev_alloc(n * 4), *b = cuda_ranks_dev_alloc(n * 4);
  cuda_ranks_fill(a, n, x->rank);
  x->result = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  if (connected && x->result == rcollSuccess) {
    rcollGroupStart();
    rcollSend(a, n, rcollFloat32, 1 - x->rank, comm, s);
    rcollRecv(b, n, rcollFloat32, 1 - x->rank, comm, s);
    x->result = rcollGroupEnd();
  }
  fake_stream_sync(s);
  if (x->result != rcollSuccess)
    return;
  if (x->rank == 0)
    rcollGroupStart();
  rcollResult_t r = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  if (x->rank == 0) {
    rcollResult_t e = rcollGroupEnd();
    r = r != rcollSuccess ? r : e;
  }
  fake_stream_sync(s);
  if (r == rcollSuccess) /* rank 1's kernel failed on the device: its next call says so */
    r = rcollAllReduce(a, a, n, rcollFloat32, rcollSum, comm, s);
  if (r == rcollSuccess)
    rcollCommGetAsyncError(comm, &r);
  const char *msg = rcollGetLastError(comm);
  cr_log_info("rank %d: %s", x->rank, msg);
  x->wrong += r == rcollSuccess || strstr(msg, "in a group on every rank or on none") == NULL;
  const char *why = x->rank == 1 ? "made the call in a group"
                    : connected  ? "or ran it as a direct kernel"
                                 : "a kernel that needs no connection";
  x->wrong += strstr(msg, why) == NULL;
  fake_free(a);
  fake_free(b);
  rcoll_cuda_api()->stream_destroy(s);
}

Test(cuda_direct_groups, a_call_in_a_group_on_one_rank_only_is_explained) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  cuda_ranks_run(2, 0, one_rank_groups, ctx);
  cr_expect_eq(atomic_load(&fake_stats.direct_kernels), 2 + 1, /* rank 1's third call is refused */
               "%d direct kernels, not 3", atomic_load(&fake_stats.direct_kernels));
}

Test(cuda_direct_groups, a_call_in_a_group_on_one_rank_only_is_explained_once_connected) {
  rank_ctx_t ctx[MAX_RANKS] = {0};
  ctx[0].user = ctx[1].user = ctx; /* any non-NULL: connect first */
  cuda_ranks_run(2, 0, one_rank_groups, ctx);
}
