/* Accepted connections waiting for their first message (the "hello"), shared
 * by every TCP listener: the bootstrap root, the bootstrap ring, and the
 * socket and ucx transports.
 *
 * A listener must serve its real peers at full speed however many strays
 * (port scanners, health checks, stale jobs, floods) connect to it. So hellos
 * are read concurrently: every pending connection is polled together and
 * has its own deadline, and none can delay another. Pending connections are
 * capped; past the cap the oldest is dropped, since a real peer sends its
 * hello at once and the oldest is the likeliest to be a stray. Drops are
 * reported in one rate-limited warning naming the strays' addresses, so a
 * flood cannot flood the log as well. */
#ifndef RCOLL_HELLO_PENDING_H
#define RCOLL_HELLO_PENDING_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "sockutil.h"

/* The largest hello any listener reads (the bootstrap hello is the largest). */
#define RCOLL_PENDING_HELLO_MAX 128
/* Pending connections a listener keeps by default; a real peer leaves the set
 * within a round trip, so this only bounds what strays can hold. */
#define RCOLL_PENDING_CAP 256
/* How long a connection may take to send its hello by default. Real peers
 * send it right after connecting; the limit only frees strays' sockets. */
#define RCOLL_PENDING_FIRST_MSG_MS 5000
/* At most one warning about strays per listener in this many milliseconds. */
#define RCOLL_PENDING_WARN_MS 10000

/* Called with each complete hello. Returns NULL when it takes the fd (the
 * set forgets it), or the reason to drop it as a stray (the set closes it;
 * the text is copied at once). */
typedef const char *(*rcoll_pending_done_fn)(void *arg, int fd, const rcoll_sockaddr_t *addr,
                                             const void *hello);

typedef struct rcoll_pending_conn {
  int fd;
  rcoll_sockaddr_t addr;
  uint64_t seq; /* arrival order: the lowest is the oldest */
  int64_t deadline_ms;
  size_t got;
  unsigned char hello[RCOLL_PENDING_HELLO_MAX];
} rcoll_pending_conn_t;

typedef struct rcoll_pending {
  char who[96]; /* names the listener in warnings */
  size_t hello_bytes;
  int64_t first_msg_ms;
  int cap, n;
  uint64_t next_seq;
  rcoll_pending_conn_t *conns; /* cap entries */
  struct pollfd *pfds;         /* cap + 1 entries, for rcoll_pending_wait */
  rcoll_pending_done_fn done;
  void *arg;
  /* Strays dropped since the last warning, reported by the next one. */
  int unreported;
  char strays[512];
  int64_t next_warn_ms;
} rcoll_pending_t;

/* Sets up an empty set for hellos of hello_bytes (1..RCOLL_PENDING_HELLO_MAX);
 * cap and first_msg_ms <= 0 take the defaults above. */
rcollResult_t rcoll_pending_init(rcoll_pending_t *p, const char *who, size_t hello_bytes,
                                 int cap, int64_t first_msg_ms, rcoll_pending_done_fn done,
                                 void *arg);
/* Closes what is still pending (reported as strays) and flushes the warning. */
void rcoll_pending_free(rcoll_pending_t *p);
/* Accepts every connection waiting on the non-blocking listener, then reads
 * what has arrived on every pending connection, completing hellos through
 * `done` and dropping connections that closed, broke or passed their
 * deadline. Never blocks. Fails only when accept itself fails. */
rcollResult_t rcoll_pending_progress(rcoll_pending_t *p, int listen_fd);
/* Blocks until the listener or a pending connection has something to read,
 * a pending deadline passes, or deadline_ms (absolute, rcoll_now_ms) does. */
void rcoll_pending_wait(rcoll_pending_t *p, int listen_fd, int64_t deadline_ms);
/* Records a connection dropped as a stray after it left the set (the caller
 * closes it); for callers that vet a hello in more than one step. */
void rcoll_pending_stray(rcoll_pending_t *p, const rcoll_sockaddr_t *addr, const char *why);

#endif
