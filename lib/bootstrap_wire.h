/* Private to lib/bootstrap*.c: the bytes the bootstrap puts on the wire.
 * Integers are little-endian there; addresses keep the sockaddr layout with
 * the family field little-endian too (port and address are already in
 * network order). Converting is its own inverse, so one function per type
 * serves both directions. */
#ifndef RCOLL_BOOTSTRAP_WIRE_H
#define RCOLL_BOOTSTRAP_WIRE_H

#include <endian.h>
#include <stdint.h>

#include "bootstrap.h"

/* What the root answers each rank: status 0 and the table of nranks hellos
 * follows, or an rcollResult_t and the reason (rejected hello, timeout). */
#define RCOLL_BOOTSTRAP_REPLY_TEXT 200
typedef struct rcoll_bootstrap_reply {
  int32_t status;
  int32_t reserved;
  char text[RCOLL_BOOTSTRAP_REPLY_TEXT];
} rcoll_bootstrap_reply_t;

/* The first bytes on every ring connection, from the connecting rank. */
typedef struct rcoll_bootstrap_intro {
  uint64_t secret;
  int32_t rank;
  int32_t reserved;
} rcoll_bootstrap_intro_t;

/* Garbage from the network must never make the root allocate without bound. */
#define RCOLL_BOOTSTRAP_MAX_RANKS (1 << 20)
/* How long one connection may take to send its first message. It bounds how
 * long a stray client (a port scanner, say) holds a socket of the root or of
 * a ring listener, not how long it delays anyone: hellos are read from all
 * connections at once (hello_pending.h), so real ranks never wait behind it. */
#define RCOLL_BOOTSTRAP_FIRST_MSG_MS 5000
/* How much longer than its own timeout a rank waits for the root's answer,
 * so that the root, which knows who is missing, gets to say it. */
#define RCOLL_BOOTSTRAP_VERDICT_MS 1000

/* Whether an address from the wire can be connected to: IPv4 or IPv6 with
 * a port. Port 0 never names a listener, and would have a rank retry the
 * connection until its timeout instead of failing at once. */
static inline int rcoll_bootstrap_addr_ok(const rcoll_sockaddr_t *a) {
  return rcoll_sockaddr_len(a) != 0 && rcoll_sockaddr_port(a) > 0;
}

static inline void rcoll_bootstrap_addr_swap(rcoll_sockaddr_t *a) {
  uint16_t fam = (uint16_t)a->sa.sa_family;
  a->sa.sa_family = (sa_family_t)htole16(fam);
  if (le16toh(fam) == AF_INET6 || fam == AF_INET6) {
    a->sin6.sin6_flowinfo = htole32(a->sin6.sin6_flowinfo);
    a->sin6.sin6_scope_id = htole32(a->sin6.sin6_scope_id);
  }
}

static inline void rcoll_bootstrap_hello_swap(rcoll_bootstrap_hello_t *h) {
  h->secret = htole64(h->secret);
  h->rank = (int32_t)htole32((uint32_t)h->rank);
  h->nranks = (int32_t)htole32((uint32_t)h->nranks);
  rcoll_bootstrap_addr_swap(&h->listen_addr);
}

static inline void rcoll_bootstrap_reply_swap(rcoll_bootstrap_reply_t *r) {
  r->status = (int32_t)htole32((uint32_t)r->status);
}

static inline void rcoll_bootstrap_intro_swap(rcoll_bootstrap_intro_t *in) {
  in->secret = htole64(in->secret);
  in->rank = (int32_t)htole32((uint32_t)in->rank);
}

/* The settings' timeout in milliseconds; a non-positive value would make
 * every wait fail at once, so it falls back to the documented default. */
static inline int64_t rcoll_bootstrap_timeout_ms(const rcoll_settings_t *s) {
  return (s && s->timeout > 0 ? s->timeout : 300) * 1000;
}

/* Decoders of the messages above (bootstrap_msg.c): each takes the bytes
 * exactly as read and their length, and never trusts a field it has not
 * checked. The hello: swapped to host order, host name terminated, checked
 * by rcoll_bootstrap_hello_check (error text quiet: the root reports it). */
#define RCOLL_BOOTSTRAP_HOST_MAX 64
_Static_assert(sizeof(((rcoll_bootstrap_hello_t *)0)->host) == RCOLL_BOOTSTRAP_HOST_MAX,
               "the hello's host name field");
rcollResult_t rcoll_bootstrap_hello_decode(const void *wire, size_t len, uint64_t secret,
                                           int expected_nranks, rcoll_bootstrap_hello_t *out);
/* The root's reply: *status is rcollSuccess, or a failure (unknown codes
 * read as rcollRemoteError); text is the root's reason, terminated. */
rcollResult_t rcoll_bootstrap_reply_decode(const void *wire, size_t len, rcollResult_t *status,
                                           char text[RCOLL_BOOTSTRAP_REPLY_TEXT]);
/* The root's table of nranks hellos, swapped in place, host names
 * terminated; each entry must carry the secret, its own rank, nranks and an
 * address. Entry i is rank (first + i) % total of the communicator (a root
 * of several unique ids answers for its block only): its host name goes to
 * hosts[(first + i) % total], hosts having total entries. */
rcollResult_t rcoll_bootstrap_table_decode(rcoll_bootstrap_hello_t *table, size_t len,
                                           uint64_t secret, int nranks,
                                           char (*hosts)[RCOLL_BOOTSTRAP_HOST_MAX], int first,
                                           int total);
/* A ring introduction: NULL and *rank set when the secret matches, else why
 * the connection is refused. */
const char *rcoll_bootstrap_intro_decode(const void *wire, size_t len, uint64_t secret, int *rank);

#endif
