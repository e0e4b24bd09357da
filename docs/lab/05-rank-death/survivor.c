/* Lab exercise 05 (README.md next to this file): what a surviving rank does
 * when a call fails because another rank died or hung. Grade with
 * `make lab-check EX=5`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcoll.h"

int lab_on_failure(rcollComm_t comm, int self, rcollResult_t result, char *report, size_t len);

/* Called on rank `self` when rcollAllReduce returned `result` (not
 * rcollSuccess). Returns the rank it suspects, read from the library's
 * error text (rcollGetLastError), or -1; writes a one-line report into
 * report[len] that names the suspect as "rank N"; aborts the communicator
 * (rcollCommAbort), which the caller does not touch afterwards. */
int lab_on_failure(rcollComm_t comm, int self, rcollResult_t result, char *report, size_t len) {
  (void)comm, (void)self, (void)result;
  /* TODO */
  snprintf(report, len, "TODO");
  return -1;
}
