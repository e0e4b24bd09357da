/* A call's first message to a peer travels inside its fingerprint message
 * when it has at most RCOLL_FP_INLINE bytes and depends on nothing
 * (lib/fingerprint.c): one message per peer instead of two, which over TCP
 * halved the time of a 2-rank all-reduce of 512 B to 4 KiB. Two ranks of
 * one process (rcollCommInitAll), planned inside a group so that the plan
 * can be read before it runs: at the limit the data send is inline, one
 * element past it is a message of its own; either way the group then runs
 * and every element is checked. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "call.h"
#include "comm.h"
#include "plan.h"
#include "rcoll.h"

/* Send steps of rank r's plan: all of them, and those that ride inline. */
static void count_sends(const rcoll_plan_t *p, int *sends, int *inlined) {
  *sends = *inlined = 0;
  for (int i = 0; i < p->nsteps; i++)
    if (p->steps[i].kind == RCOLL_STEP_SEND && !(p->steps[i].flags & RCOLL_STEP_FP)) {
      ++*sends;
      *inlined += (p->steps[i].flags & RCOLL_STEP_INLINE) != 0;
    }
}

static void allreduce_pair(const char *net, size_t count, int want_inline) {
  setenv("RCOLL_NET", net, 1);
  setenv("RCOLL_ALGO", "recdbl", 1); /* one exchange: the data send is the first message */
  setenv("RCOLL_TIMEOUT", "20", 1);
  rcollComm_t comms[2];
  cr_assert_eq(rcollCommInitAll(comms, 2, NULL), rcollSuccess, "%s", rcollGetLastError(NULL));
  float *buf[2];
  for (int r = 0; r < 2; r++) {
    buf[r] = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++)
      buf[r][i] = (float)(i % 97) + (float)r;
  }
  cr_assert_eq(rcollGroupStart(), rcollSuccess);
  for (int r = 0; r < 2; r++)
    cr_assert_eq(rcollAllReduce(buf[r], buf[r], count, rcollFloat32, rcollSum, comms[r], NULL), rcollSuccess,
                 "%s", rcollGetLastError(NULL));
  for (int r = 0; r < 2; r++) {
    int sends, inlined;
    count_sends(&comms[r]->plan, &sends, &inlined);
    cr_assert_eq(sends, 1, "%s, %zu B, rank %d: %d data sends", net, count * sizeof(float), r, sends);
    cr_assert_eq(inlined, want_inline, "%s, %zu B, rank %d: the data send is %sinline", net,
                 count * sizeof(float), r, inlined ? "" : "not ");
  }
  cr_assert_eq(rcollGroupEnd(), rcollSuccess, "%s", rcollGetLastError(NULL));
  for (int r = 0; r < 2; r++) {
    for (size_t i = 0; i < count; i++)
      cr_assert_eq(buf[r][i], 2.0f * (float)(i % 97) + 1.0f, "%s, rank %d, element %zu", net, r, i);
    cr_assert_eq(rcollCommDestroy(comms[r]), rcollSuccess);
    free(buf[r]);
  }
}

Test(fp_inline, first_message_up_to_the_limit_rides_in_the_fingerprint, .timeout = 120) {
  const char *nets[] = {"shm", "socket"};
  for (int n = 0; n < 2; n++) {
    allreduce_pair(nets[n], 2, 1);
    allreduce_pair(nets[n], RCOLL_FP_INLINE / sizeof(float), 1);
    allreduce_pair(nets[n], RCOLL_FP_INLINE / sizeof(float) + 1, 0);
  }
}
