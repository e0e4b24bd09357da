/* reduce benchmark: the root ends with the reduction of all inputs; the
 * other ranks' receive buffers are not defined, so only the root is checked. */
#include "common.h"

static void counts(size_t count, int nranks, bench_counts_t *c) {
  (void)nranks;
  *c = (bench_counts_t){.send_count = count, .recv_count = count, .param_count = count};
}

static double busbw_factor(int nranks) {
  (void)nranks;
  return 1.0;
}

static rcollResult_t run(bench_call_t *call) {
  call->failed = "rcollReduce";
  return rcollReduce(call->send, call->recv, call->counts.param_count, call->type, call->op,
                     call->root, call->comm, call->stream);
}

static bench_src_t source(const bench_call_t *call, size_t j) {
  if (call->rank != call->root)
    return (bench_src_t){.kind = BENCH_SRC_SKIP};
  return (bench_src_t){.kind = BENCH_SRC_REDUCE, .index = j};
}

static const bench_coll_t reduce = {
  .name = "reduce", .uses_op = 1, .uses_root = 1, .counts = counts,
  .busbw_factor = busbw_factor, .run = run, .source = source,
};

int main(int argc, char **argv) {
  return bench_main(argc, argv, &reduce);
}
