/* all-to-all benchmark: rank r's result block i is rank i's input block r.
 * As nccl-tests: size is the whole buffer (n blocks), count is per rank,
 * busbw = algbw x (n-1)/n. In place (one buffer) is checked too, since rcoll
 * defines it (nccl-tests times it but reports no errors, as NCCL leaves it
 * undefined). */
#include "common.h"

static void counts(size_t count, int nranks, bench_counts_t *c) {
  size_t per_rank = count / (size_t)nranks;
  *c = (bench_counts_t){.send_count = per_rank * (size_t)nranks,
                        .recv_count = per_rank * (size_t)nranks, .param_count = per_rank};
}

static double busbw_factor(int nranks) {
  return (double)(nranks - 1) / nranks;
}

static rcollResult_t run(bench_call_t *call) {
  call->failed = "rcollAlltoAll";
  return rcollAlltoAll(call->send, call->recv, call->counts.param_count, call->type, call->comm,
                       call->stream);
}

static bench_src_t source(const bench_call_t *call, size_t j) {
  size_t per_rank = call->counts.param_count;
  return (bench_src_t){.kind = BENCH_SRC_COPY, .rank = (int)(j / per_rank),
                       .index = (size_t)call->rank * per_rank + j % per_rank};
}

static const bench_coll_t alltoall = {
  .name = "alltoall", .uses_op = 0, .uses_root = 0, .counts = counts,
  .busbw_factor = busbw_factor, .run = run, .source = source,
};

int main(int argc, char **argv) {
  return bench_main(argc, argv, &alltoall);
}
