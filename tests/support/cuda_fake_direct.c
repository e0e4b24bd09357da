/* The host fake's direct all-reduce kernels: the very block function the
 * GPU runs (lib/cuda/direct_kernel.h), compiled for the host, one "thread"
 * per block and the blocks in turn (they never wait for each other). */
#include "cuda_fake.h"

#include "cuda/direct_kernel.h"

RCOLL_DIRECT_ALL(RCOLL_DIRECT_BODY)

typedef int (*direct_fn_t)(const rcoll_direct_args_t *, uint32_t, uint32_t, uint32_t);

#define DIRECT_ENTRY(op, sfx, T) rcoll_direct_##op##_##sfx,
static const direct_fn_t direct_fns[4][rcollNumTypes] = {
    {RCOLL_DIRECT_TYPES(DIRECT_ENTRY, sum)},
    {RCOLL_DIRECT_TYPES(DIRECT_ENTRY, prod)},
    {RCOLL_DIRECT_TYPES(DIRECT_ENTRY, max)},
    {RCOLL_DIRECT_TYPES(DIRECT_ENTRY, min)},
};

void fake_direct_run(const rcoll_direct_args_t *a, rcollDataType_t t, rcollRedOp_t op) {
  direct_fn_t fn = direct_fns[op == rcollAvg ? rcollSum : op][t];
  if (a->inplace)
    atomic_fetch_add(&fake_stats.direct_inplace, 1);
  for (int m = atomic_load(&fake_stats.direct_max_blocks); m < (int)a->nblocks;)
    if (atomic_compare_exchange_weak(&fake_stats.direct_max_blocks, &m, (int)a->nblocks))
      break;
  for (uint32_t b = 0; b < a->nblocks; b++)
    if (fn(a, b, 0, 1))
      return; /* a wait gave up: *failed says so, as on a GPU */
}
