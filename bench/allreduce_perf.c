/* all-reduce benchmark: every rank ends with the reduction of all inputs. */
#include "common.h"

static void counts(size_t count, int nranks, bench_counts_t *c) {
  (void)nranks;
  *c = (bench_counts_t){.send_count = count, .recv_count = count, .param_count = count};
}

/* A ring moves 2(n-1)/n of the data over each link. */
static double busbw_factor(int nranks) {
  return 2.0 * (nranks - 1) / nranks;
}

static rcollResult_t run(bench_call_t *call) {
  call->failed = "rcollAllReduce";
  return rcollAllReduce(call->send, call->recv, call->counts.param_count, call->type, call->op,
                        call->comm, call->stream);
}

static bench_src_t source(const bench_call_t *call, size_t j) {
  (void)call;
  return (bench_src_t){.kind = BENCH_SRC_REDUCE, .index = j};
}

static const bench_coll_t allreduce = {
  .name = "all_reduce", .uses_op = 1, .uses_root = 0, .counts = counts,
  .busbw_factor = busbw_factor, .run = run, .source = source,
};

int main(int argc, char **argv) {
  return bench_main(argc, argv, &allreduce);
}
