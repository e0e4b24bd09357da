/* gather benchmark: the root ends with every rank's block, in rank order.
 * As nccl-tests: size is the root's receive buffer (n blocks), count is per
 * rank, busbw = algbw x (n-1)/n; in place, a rank's block is its place in
 * the receive buffer. */
#include "common.h"

static void counts(size_t count, int nranks, bench_counts_t *c) {
  size_t per_rank = count / (size_t)nranks;
  *c = (bench_counts_t){.send_count = per_rank, .recv_count = per_rank * (size_t)nranks,
                        .param_count = per_rank, .send_inplace_off = per_rank};
}

static double busbw_factor(int nranks) {
  return (double)(nranks - 1) / nranks;
}

static rcollResult_t run(bench_call_t *call) {
  call->failed = "rcollGather";
  return rcollGather(call->send, call->recv, call->counts.param_count, call->type, call->root,
                     call->comm, call->stream);
}

/* Only the root has a result. */
static bench_src_t source(const bench_call_t *call, size_t j) {
  size_t per_rank = call->counts.param_count;
  if (call->rank != call->root)
    return (bench_src_t){.kind = BENCH_SRC_SKIP};
  return (bench_src_t){.kind = BENCH_SRC_COPY, .rank = (int)(j / per_rank), .index = j % per_rank};
}

static const bench_coll_t gather = {
  .name = "gather", .uses_op = 0, .uses_root = 1, .counts = counts,
  .busbw_factor = busbw_factor, .run = run, .source = source,
};

int main(int argc, char **argv) {
  return bench_main(argc, argv, &gather);
}
