/* Ring reduce-scatter: the first half of ring all-reduce, with blocks
 * numbered so that rank r ends with block r. At step t rank r sends its
 * partial sum of block r-t-1 to the right and receives the partial sum of
 * block r-t-2 from the left, adding its own contribution. Partial sums have
 * no home in the user's buffers (recvbuff holds one block), so they live in
 * the communicator's scratch ring until they have been sent on. */
#include "algo.h"
#include "reduce.h"

typedef struct partial {
  int step;    /* the receive-reduce that produced it */
  char *piece; /* scratch piece holding it */
} partial_t;

void rcoll_reduce_scatter_ring(rcoll_plan_t *p, const rcoll_coll_args_t *a) {
  int n = a->nranks, r = a->rank;
  size_t tsz = rcoll_type_size(a->dtype), block = a->count * tsz;
  char *rb = a->recvbuff;
  const char *sb = a->sendbuff;
  if (n == 1) {
    rcoll_plan_copy(p, rb, sb, block, RCOLL_NO_DEP, RCOLL_NO_DEP);
    return;
  }
  int right = (r + 1) % n, left = (r + n - 1) % n;
  size_t chunk = p->chunk_bytes, nchunks = rcoll_chunk_count(block, chunk);
  partial_t *prev = rcoll_plan_tmp(p, nchunks * sizeof *prev);
  if (prev == NULL)
    return;
  for (int t = 0; t < n - 1; t++) {
    size_t sblk = (size_t)((r - t - 1 + 2 * n) % n), rblk = (size_t)((r - t - 2 + 2 * n) % n);
    int last = (t == n - 2); /* rblk == r: the result goes to recvbuff */
    for (size_t j = 0; j < nchunks; j++) {
      size_t off = j * chunk, len = block - off < chunk ? block - off : chunk;
      if (t == 0) {
        rcoll_plan_send(p, right, sb + sblk * block + off, len, RCOLL_NO_DEP, RCOLL_NO_DEP);
      } else {
        int s = rcoll_plan_send(p, right, prev[j].piece, len, prev[j].step, RCOLL_NO_DEP);
        rcoll_plan_scratch_set_reader(p, prev[j].piece, s);
      }
      int reuse = RCOLL_NO_DEP;
      char *dst = last ? rb + off : rcoll_plan_scratch_get(p, &reuse);
      prev[j].piece = dst;
      prev[j].step = rcoll_plan_recv_reduce(p, left, dst, sb + rblk * block + off, len / tsz,
                                            a->dtype, a->op, last ? RCOLL_STEP_FINISH : 0, reuse,
                                            RCOLL_NO_DEP);
    }
  }
}
