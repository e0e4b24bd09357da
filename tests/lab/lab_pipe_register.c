/* Lab exercise 06: adds the student's pipe transport to the table of
 * transports before main() runs, so that the conformance program, linked
 * with this file and theirs, finds it by RCOLL_NET=pipe. The library's hook
 * for tests (rcoll_net_add_for_tests) checks the table first and refuses
 * one it cannot use, saying why. */
#include <stdio.h>

#include "net.h"

extern const rcoll_transport_ops_t lab_pipe_ops;

__attribute__((constructor)) static void lab_pipe_register(void) {
  if (rcoll_net_add_for_tests(&lab_pipe_ops) != rcollSuccess)
    fprintf(stderr, "lab: the pipe transport was not added: %s\n", rcollGetLastError(NULL));
}
