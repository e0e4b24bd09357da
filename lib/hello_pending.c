/* Accepted connections waiting for their hello: read together, each with
 * its own deadline, capped, strays reported in one rate-limited warning.
 * See hello_pending.h for why. */
#include "hello_pending.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "log.h"

rcollResult_t rcoll_pending_init(rcoll_pending_t *p, const char *who, size_t hello_bytes,
                                 int cap, int64_t first_msg_ms, rcoll_pending_done_fn done,
                                 void *arg) {
  memset(p, 0, sizeof *p);
  if (hello_bytes == 0 || hello_bytes > RCOLL_PENDING_HELLO_MAX || done == NULL)
    return rcoll_error(rcollInternalError, "%s: a hello of %zu bytes cannot be awaited", who,
                       hello_bytes);
  snprintf(p->who, sizeof p->who, "%s", who);
  p->hello_bytes = hello_bytes;
  p->cap = cap > 0 ? cap : RCOLL_PENDING_CAP;
  p->first_msg_ms = first_msg_ms > 0 ? first_msg_ms : RCOLL_PENDING_FIRST_MSG_MS;
  p->done = done;
  p->arg = arg;
  p->conns = calloc((size_t)p->cap, sizeof *p->conns);
  p->pfds = calloc((size_t)p->cap + 1, sizeof *p->pfds);
  if (p->conns == NULL || p->pfds == NULL) {
    free(p->conns);
    free(p->pfds);
    p->conns = NULL;
    p->pfds = NULL;
    return rcoll_error(rcollSystemError, "%s: out of memory for %d pending connections", who,
                       p->cap);
  }
  return rcollSuccess;
}

/* ------------------------------------------------------------------ */
/* The warning                                                          */

static void pending_warn_flush(rcoll_pending_t *p, int64_t now) {
  if (p->unreported == 0)
    return;
  RCOLL_WARN("%s: dropped %d stray connection%s (no valid hello): %s", p->who,
             p->unreported, p->unreported == 1 ? "" : "s", p->strays);
  p->unreported = 0;
  p->strays[0] = '\0';
  p->next_warn_ms = now + RCOLL_PENDING_WARN_MS;
}

/* Lists the stray in the next warning while there is room (then only counts
 * it), and sends the warning when the last one is old enough. */
void rcoll_pending_stray(rcoll_pending_t *p, const rcoll_sockaddr_t *addr, const char *why) {
  char a[80];
  size_t used = strlen(p->strays);
  int64_t now = rcoll_now_ms();
  if (used + 8 < sizeof p->strays) {
    int k = snprintf(p->strays + used, sizeof p->strays - used, "%s%s (%s)", used ? ", " : "",
                     rcoll_sockaddr_str(addr, a, sizeof a), why);
    /* Cut short: end with a mark that more were dropped than listed. */
    if (k < 0 || (size_t)k >= sizeof p->strays - used)
      memcpy(p->strays + sizeof p->strays - 5, " ...", 5);
  }
  p->unreported++;
  if (now >= p->next_warn_ms)
    pending_warn_flush(p, now);
}

/* ------------------------------------------------------------------ */
/* The set                                                              */

/* Forgets entry i; the last entry takes its slot. */
static rcoll_pending_conn_t pending_remove(rcoll_pending_t *p, int i) {
  rcoll_pending_conn_t c = p->conns[i];
  p->conns[i] = p->conns[--p->n];
  return c;
}

static void pending_drop(rcoll_pending_t *p, int i, const char *why) {
  rcoll_pending_conn_t c = pending_remove(p, i);
  close(c.fd);
  rcoll_pending_stray(p, &c.addr, why);
}

/* The hello of entry i is complete: hand it over. */
static void pending_complete(rcoll_pending_t *p, int i) {
  char why[160];
  rcoll_pending_conn_t c = pending_remove(p, i);
  const char *reason = p->done(p->arg, c.fd, &c.addr, c.hello);
  if (reason == NULL)
    return;
  snprintf(why, sizeof why, "%s", reason);
  close(c.fd);
  rcoll_pending_stray(p, &c.addr, why);
}

/* Reads what entry i has received. Returns 1 when the entry left the set
 * (completed or dropped), 0 when it still waits. */
static int pending_step(rcoll_pending_t *p, int i, int64_t now) {
  rcoll_pending_conn_t *c = &p->conns[i];
  char why[64];
  while (c->got < p->hello_bytes) {
    ssize_t k = recv(c->fd, c->hello + c->got, p->hello_bytes - c->got, MSG_DONTWAIT);
    if (k > 0) {
      c->got += (size_t)k;
    } else if (k < 0 && errno == EINTR) {
      continue;
    } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (now < c->deadline_ms)
        return 0;
      snprintf(why, sizeof why, "%zu of %zu hello bytes within %lld ms", c->got, p->hello_bytes,
               (long long)p->first_msg_ms);
      pending_drop(p, i, why);
      return 1;
    } else {
      pending_drop(p, i, k == 0 ? "closed before its hello" : strerror(errno));
      return 1;
    }
  }
  pending_complete(p, i);
  return 1;
}

/* Over the cap: the oldest entry goes, unless its hello has arrived since. */
static void pending_evict(rcoll_pending_t *p, int64_t now) {
  int oldest = 0;
  for (int i = 1; i < p->n; i++)
    if (p->conns[i].seq < p->conns[oldest].seq)
      oldest = i;
  if (!pending_step(p, oldest, now)) {
    char why[64];
    snprintf(why, sizeof why, "oldest of more than %d pending", p->cap);
    pending_drop(p, oldest, why);
  }
}

static int pending_take(void *arg, int fd, const rcoll_sockaddr_t *addr) {
  rcoll_pending_t *p = arg;
  int64_t now = rcoll_now_ms();
  while (p->n >= p->cap)
    pending_evict(p, now);
  p->conns[p->n++] = (rcoll_pending_conn_t){
      .fd = fd, .addr = *addr, .seq = p->next_seq++, .deadline_ms = now + p->first_msg_ms};
  return 1;
}

rcollResult_t rcoll_pending_progress(rcoll_pending_t *p, int listen_fd) {
  rcollResult_t rc = rcollSuccess;
  if (listen_fd >= 0)
    rc = rcoll_socket_accept_pending(listen_fd, p->who, pending_take, p);
  int64_t now = rcoll_now_ms();
  for (int i = 0; i < p->n;)
    if (!pending_step(p, i, now))
      i++; /* else slot i holds another entry now */
  if (now >= p->next_warn_ms)
    pending_warn_flush(p, now);
  return rc;
}

void rcoll_pending_wait(rcoll_pending_t *p, int listen_fd, int64_t deadline_ms) {
  int64_t until = deadline_ms;
  int n = 0;
  if (listen_fd >= 0)
    p->pfds[n++] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
  for (int i = 0; i < p->n; i++) {
    p->pfds[n++] = (struct pollfd){.fd = p->conns[i].fd, .events = POLLIN};
    if (p->conns[i].deadline_ms < until)
      until = p->conns[i].deadline_ms;
  }
  if (p->unreported > 0 && p->next_warn_ms < until)
    until = p->next_warn_ms;
  int64_t left = until - rcoll_now_ms();
  (void)poll(p->pfds, (nfds_t)n, left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left);
}

void rcoll_pending_free(rcoll_pending_t *p) {
  if (p->conns == NULL)
    return;
  /* Whatever is left goes into a single last warning. */
  p->next_warn_ms = INT64_MAX;
  while (p->n > 0)
    pending_drop(p, p->n - 1, "no hello before the listener closed");
  pending_warn_flush(p, rcoll_now_ms());
  free(p->conns);
  free(p->pfds);
  p->conns = NULL;
  p->pfds = NULL;
}
