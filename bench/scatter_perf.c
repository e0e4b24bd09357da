/* scatter benchmark: rank r ends with block r of the root's buffer. As
 * nccl-tests: size is the root's send buffer (n blocks), count is per rank,
 * busbw = algbw x (n-1)/n; in place, a rank's result is its block of the
 * send buffer. */
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
  call->failed = "rcollScatter";
  return rcollScatter(call->send, call->recv, call->counts.param_count, call->type, call->root,
                      call->comm, call->stream);
}

static bench_src_t source(const bench_call_t *call, size_t j) {
  return (bench_src_t){.kind = BENCH_SRC_COPY, .rank = call->root,
                       .index = (size_t)call->rank * call->counts.param_count + j};
}

static const bench_coll_t scatter = {
  .name = "scatter", .uses_op = 0, .uses_root = 1, .counts = counts,
  .busbw_factor = busbw_factor, .run = run, .source = source,
};

int main(int argc, char **argv) {
  return bench_main(argc, argv, &scatter);
}
