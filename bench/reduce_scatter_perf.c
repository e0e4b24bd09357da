/* reduce-scatter benchmark: rank r ends with block r of the reduction. As
 * nccl-tests, size is the bytes sent and count is the block per rank. */
#include "common.h"

static void counts(size_t count, int nranks, bench_counts_t *c) {
  size_t per_rank = count / (size_t)nranks;
  *c = (bench_counts_t){.send_count = per_rank * (size_t)nranks, .recv_count = per_rank,
                        .param_count = per_rank, .recv_inplace_off = per_rank};
}

static double busbw_factor(int nranks) {
  return (double)(nranks - 1) / nranks;
}

static rcollResult_t run(bench_call_t *call) {
  call->failed = "rcollReduceScatter";
  return rcollReduceScatter(call->send, call->recv, call->counts.param_count, call->type,
                            call->op, call->comm, call->stream);
}

static bench_src_t source(const bench_call_t *call, size_t j) {
  return (bench_src_t){.kind = BENCH_SRC_REDUCE,
                       .index = (size_t)call->rank * call->counts.param_count + j};
}

static const bench_coll_t reduce_scatter = {
  .name = "reduce_scatter", .uses_op = 1, .uses_root = 0, .counts = counts,
  .busbw_factor = busbw_factor, .run = run, .source = source,
};

int main(int argc, char **argv) {
  return bench_main(argc, argv, &reduce_scatter);
}
