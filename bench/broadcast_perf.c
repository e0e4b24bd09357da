/* broadcast benchmark: every rank ends with the root's buffer. */
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
  call->failed = "rcollBroadcast";
  return rcollBroadcast(call->send, call->recv, call->counts.param_count, call->type, call->root,
                        call->comm, call->stream);
}

static bench_src_t source(const bench_call_t *call, size_t j) {
  return (bench_src_t){.kind = BENCH_SRC_COPY, .rank = call->root, .index = j};
}

static const bench_coll_t broadcast = {
  .name = "broadcast", .uses_op = 0, .uses_root = 1, .counts = counts,
  .busbw_factor = busbw_factor, .run = run, .source = source,
};

int main(int argc, char **argv) {
  return bench_main(argc, argv, &broadcast);
}
