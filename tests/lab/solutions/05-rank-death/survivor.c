/* Lab exercise 05, reference solution: what a surviving rank does when a
 * call fails because another rank died or hung. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcoll.h"

int lab_on_failure(rcollComm_t comm, int self, rcollResult_t result, char *report, size_t len);

/* The first rank other than `self` that text names as "rank N" (or
 * "ranks N"); -1 when none. Messages start with the reporting rank's own
 * number, which is why self is skipped. */
static int named_rank(const char *text, int self) {
  for (const char *p = strstr(text, "rank"); p != NULL; p = strstr(p + 4, "rank")) {
    const char *q = p + 4 + (p[4] == 's');
    char *end;
    if (*q != ' ')
      continue;
    long v = strtol(q + 1, &end, 10);
    if (end != q + 1 && v >= 0 && v != self)
      return (int)v;
  }
  return -1;
}

int lab_on_failure(rcollComm_t comm, int self, rcollResult_t result, char *report, size_t len) {
  /* Read the text before aborting: the communicator goes with it. */
  const char *text = rcollGetLastError(comm);
  int suspect = named_rank(text, self);
  snprintf(report, len, "rank %d: all-reduce failed (%s); suspect rank %d; library said: %s", self,
           rcollGetErrorString(result), suspect, text);
  rcollCommAbort(comm); /* the others may be stuck too: do not wait for them */
  return suspect;
}
