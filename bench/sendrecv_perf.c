/* send/recv benchmark: in one group, every rank sends its buffer to the next
 * rank and receives the previous rank's, so every link carries count elements. */
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
  int next = (call->rank + 1) % call->nranks;
  int prev = (call->rank - 1 + call->nranks) % call->nranks;
  size_t n = call->counts.param_count;
  rcollResult_t r;
  call->failed = "rcollGroupStart";
  if ((r = rcollGroupStart()) != rcollSuccess)
    return r;
  call->failed = "rcollSend";
  r = rcollSend(call->send, n, call->type, next, call->comm, call->stream);
  if (r == rcollSuccess) {
    call->failed = "rcollRecv";
    r = rcollRecv(call->recv, n, call->type, prev, call->comm, call->stream);
  }
  /* Close the group even after a failure, so the thread is not left in it. */
  rcollResult_t end = rcollGroupEnd();
  if (r != rcollSuccess)
    return r;
  call->failed = "rcollGroupEnd";
  return end;
}

static bench_src_t source(const bench_call_t *call, size_t j) {
  return (bench_src_t){.kind = BENCH_SRC_COPY,
                       .rank = (call->rank - 1 + call->nranks) % call->nranks, .index = j};
}

/* As nccl-tests: the redop column names -o (which only shapes the input
 * values), and in place - one buffer both sent and received into, a race -
 * is timed but not checked. */
static const bench_coll_t sendrecv = {
  .name = "sendrecv", .uses_op = 1, .uses_root = 0, .in_place_unchecked = 1, .counts = counts,
  .busbw_factor = busbw_factor, .run = run, .source = source,
};

int main(int argc, char **argv) {
  return bench_main(argc, argv, &sendrecv);
}
