/* The bootstrap's messages as they arrive from the network, decoded and
 * checked apart from the sockets that carry them, so that each decoder can
 * be fed arbitrary bytes (tests/fuzz/fuzz_bootstrap.c does). Each takes the
 * bytes and their length exactly as read: a short message is refused here
 * rather than trusted to the caller's read loop. */
#include <stdio.h>
#include <string.h>

#include "bootstrap.h"
#include "bootstrap_wire.h"
#include "error.h"

rcollResult_t rcoll_bootstrap_hello_decode(const void *wire, size_t len, uint64_t secret,
                                           int expected_nranks, rcoll_bootstrap_hello_t *out) {
  rcoll_bootstrap_hello_t h;
  if (wire == NULL || len != sizeof h)
    return rcoll_error_quiet(rcollInvalidArgument, "a hello of %zu bytes, expected %zu", len,
                             sizeof h);
  memcpy(&h, wire, sizeof h);
  rcoll_bootstrap_hello_swap(&h);
  h.host[sizeof(h.host) - 1] = '\0';
  RCOLL_CHECK(rcoll_bootstrap_hello_check(&h, secret, expected_nranks));
  *out = h;
  return rcollSuccess;
}

rcollResult_t rcoll_bootstrap_reply_decode(const void *wire, size_t len, rcollResult_t *status,
                                           char text[RCOLL_BOOTSTRAP_REPLY_TEXT]) {
  rcoll_bootstrap_reply_t r;
  if (wire == NULL || len != sizeof r)
    return rcoll_error_quiet(rcollRemoteError, "a reply of %zu bytes, expected %zu", len, sizeof r);
  memcpy(&r, wire, sizeof r);
  rcoll_bootstrap_reply_swap(&r);
  r.text[sizeof(r.text) - 1] = '\0';
  /* A status this library does not know (a newer root, or garbage) is
   * still a failure: it must never read as success or index a table. */
  if (r.status == rcollSuccess)
    *status = rcollSuccess;
  else
    *status = r.status > 0 && r.status < rcollNumResults ? (rcollResult_t)r.status
                                                         : rcollRemoteError;
  memcpy(text, r.text, sizeof r.text);
  return rcollSuccess;
}

rcollResult_t rcoll_bootstrap_table_decode(rcoll_bootstrap_hello_t *table, size_t len,
                                           uint64_t secret, int nranks,
                                           char (*hosts)[RCOLL_BOOTSTRAP_HOST_MAX], int first,
                                           int total) {
  if (first < 0 || total < nranks || first >= total)
    return rcoll_error_quiet(rcollRemoteError, "a table of %d entries from rank %d of %d", nranks, first,
                             total);
  if (table == NULL || nranks < 1 || len != sizeof(*table) * (size_t)nranks)
    return rcoll_error_quiet(rcollRemoteError, "a table of %zu bytes for %d ranks", len, nranks);
  for (int i = 0; i < nranks; i++) {
    rcoll_bootstrap_hello_swap(&table[i]);
    /* Every entry passed the root's hello check; one that would not now was
     * corrupted on the way, and its address must not be connected to. */
    if (table[i].secret != secret || table[i].rank != i || table[i].nranks != nranks ||
        !rcoll_bootstrap_addr_ok(&table[i].listen_addr))
      return rcoll_error_quiet(rcollRemoteError, "corrupt table (entry %d)", i);
    /* Terminated in the table too: its entries are hellos like any other
     * and may be read as such (found by fuzz_bootstrap). */
    table[i].host[RCOLL_BOOTSTRAP_HOST_MAX - 1] = '\0';
    memcpy(hosts[(first + i) % total], table[i].host, RCOLL_BOOTSTRAP_HOST_MAX);
  }
  return rcollSuccess;
}

const char *rcoll_bootstrap_intro_decode(const void *wire, size_t len, uint64_t secret, int *rank) {
  rcoll_bootstrap_intro_t in;
  if (wire == NULL || len != sizeof in)
    return "an introduction of the wrong size";
  memcpy(&in, wire, sizeof in);
  rcoll_bootstrap_intro_swap(&in);
  if (in.secret != secret)
    return "wrong secret (another job, or a stale unique id)";
  *rank = in.rank;
  return NULL;
}
