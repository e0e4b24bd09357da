/* The bootstrap root: a detached thread that collects one hello per rank and
 * answers every rank with the table of all listening addresses and host
 * names. Also the unique id's encoding and the hello validation, which only
 * the root applies. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.h"
#include "bootstrap_wire.h"
#include "error.h"
#include "hello_pending.h"
#include "log.h"

_Static_assert(sizeof(rcoll_bootstrap_id_t) <= RCOLL_UNIQUE_ID_BYTES,
               "the bootstrap id must fit in rcollUniqueId");
_Static_assert(sizeof(rcoll_bootstrap_hello_t) <= RCOLL_PENDING_HELLO_MAX,
               "the root reads hellos through the pending set");

typedef struct rcoll_bootstrap_root {
  int listen_fd;
  uint64_t secret;
  int64_t timeout_ms;
  int64_t deadline_ms;
  int nranks; /* 0 until the first valid hello announces it */
  int narrived;
  int *fds;                       /* per rank, -1 until that rank's hello arrived */
  rcoll_bootstrap_hello_t *table; /* wire format, forwarded as received */
  int out_of_memory;
  char where[80];
  char why[RCOLL_ERROR_TEXT_MAX]; /* the reason the last hello was refused */
  rcoll_pending_t pending;        /* connections whose hello is on its way */
} rcoll_bootstrap_root_t;

/* ------------------------------------------------------------------ */
/* Unique id and hello                                                  */

rcollResult_t rcoll_bootstrap_id_decode(const rcollUniqueId *id, rcoll_bootstrap_id_t *out) {
  rcoll_bootstrap_id_t d;
  if (!id || !out)
    return rcoll_error(rcollInvalidArgument, "bootstrap: unique id or output is NULL");
  memcpy(&d, id->internal, sizeof(d));
  d.magic = le64toh(d.magic);
  d.secret = le64toh(d.secret);
  rcoll_bootstrap_addr_swap(&d.root);
  if (d.magic != RCOLL_BOOTSTRAP_ID_MAGIC)
    return rcoll_error(rcollInvalidArgument,
                       "unique id is not an rcoll id (magic 0x%016llx, expected 0x%016llx)",
                       (unsigned long long)d.magic, (unsigned long long)RCOLL_BOOTSTRAP_ID_MAGIC);
  if (!rcoll_bootstrap_addr_ok(&d.root)) {
    char where[80];
    return rcoll_error(rcollInvalidArgument, "unique id holds no root address to connect to (%s)",
                       rcoll_sockaddr_str(&d.root, where, sizeof(where)));
  }
  *out = d;
  return rcollSuccess;
}

static void rcoll_bootstrap_id_encode(uint64_t secret, const rcoll_sockaddr_t *root,
                                      rcollUniqueId *id) {
  rcoll_bootstrap_id_t e;
  memset(&e, 0, sizeof(e));
  e.magic = htole64(RCOLL_BOOTSTRAP_ID_MAGIC);
  e.secret = htole64(secret);
  e.root = *root;
  rcoll_bootstrap_addr_swap(&e.root);
  memset(id, 0, sizeof(*id));
  memcpy(id->internal, &e, sizeof(e));
}

rcollResult_t rcoll_bootstrap_hello_check(const rcoll_bootstrap_hello_t *h, uint64_t secret,
                                          int expected_nranks) {
  if (h->secret != secret)
    return rcoll_error_quiet(rcollInvalidUsage, "wrong secret (another job, or a stale unique id)");
  if (h->nranks < 1 || h->nranks > RCOLL_BOOTSTRAP_MAX_RANKS)
    return rcoll_error_quiet(rcollInvalidArgument, "nranks %d is not 1..%d", h->nranks,
                             RCOLL_BOOTSTRAP_MAX_RANKS);
  if (expected_nranks > 0 && h->nranks != expected_nranks)
    return rcoll_error_quiet(rcollInvalidUsage, "rank %d says nranks %d, earlier ranks said %d",
                             h->rank, h->nranks, expected_nranks);
  if (h->rank < 0 || h->rank >= h->nranks)
    return rcoll_error_quiet(rcollInvalidArgument, "rank %d is not in 0..%d", h->rank,
                             h->nranks - 1);
  if (!rcoll_bootstrap_addr_ok(&h->listen_addr)) {
    char where[80];
    return rcoll_error_quiet(rcollInvalidArgument, "rank %d sent no listening address to connect to (%s)",
                             h->rank, rcoll_sockaddr_str(&h->listen_addr, where, sizeof(where)));
  }
  return rcollSuccess;
}

/* ------------------------------------------------------------------ */
/* Root thread                                                          */

/* Best effort: the rank may be gone, and the root must not wait on it long. */
static void rcoll_root_reply(int fd, rcollResult_t status, const char *text) {
  rcoll_bootstrap_reply_t r;
  memset(&r, 0, sizeof(r));
  r.status = (int32_t)status;
  /* Cut long reasons to the wire's field; memset left the terminator. */
  memcpy(r.text, text, strnlen(text, sizeof(r.text) - 1));
  rcoll_bootstrap_reply_swap(&r);
  (void)rcoll_socket_send_all(fd, &r, sizeof(r), rcoll_now_ms() + 1000);
}

/* Answers a refused hello with the reason, which the set then reports. */
static const char *rcoll_root_reject(rcoll_bootstrap_root_t *root, int fd, rcollResult_t status) {
  rcoll_root_reply(fd, status, root->why);
  return root->why;
}

static int rcoll_root_alloc(rcoll_bootstrap_root_t *root, int nranks) {
  root->fds = malloc(sizeof(int) * (size_t)nranks);
  root->table = calloc((size_t)nranks, sizeof(rcoll_bootstrap_hello_t));
  if (!root->fds || !root->table)
    return -1;
  for (int i = 0; i < nranks; i++)
    root->fds[i] = -1;
  root->nranks = nranks;
  return 0;
}

/* Validates one complete hello (the pending set's callback); keeps the
 * connection, or returns why it is dropped. */
static const char *rcoll_root_take(void *arg, int fd, const rcoll_sockaddr_t *addr,
                                   const void *hello) {
  rcoll_bootstrap_root_t *root = arg;
  rcoll_bootstrap_hello_t wire, h;
  (void)addr;
  memcpy(&wire, hello, sizeof(wire));
  rcollResult_t rc =
      rcoll_bootstrap_hello_decode(&wire, sizeof(wire), root->secret, root->nranks, &h);
  if (rc != rcollSuccess) {
    snprintf(root->why, sizeof(root->why), "%s", rcoll_error_text());
    return rcoll_root_reject(root, fd, rc);
  }
  if (root->nranks == 0 && rcoll_root_alloc(root, h.nranks) != 0) {
    RCOLL_WARN("bootstrap root %s: out of memory for %d ranks", root->where, h.nranks);
    root->out_of_memory = 1;
    return "the root ran out of memory";
  }
  if (root->fds[h.rank] >= 0) {
    snprintf(root->why, sizeof(root->why), "rank %d joined twice (now from host %s)", h.rank,
             h.host);
    return rcoll_root_reject(root, fd, rcollInvalidUsage);
  }
  root->fds[h.rank] = fd;
  root->table[h.rank] = wire;
  root->narrived++;
  RCOLL_TRACE(RCOLL_SUB_BOOTSTRAP, "bootstrap root %s: rank %d of %d arrived from %s", root->where,
              h.rank, h.nranks, h.host);
  return NULL;
}

/* "2, 5, 7" (cut short with "..." when long). */
static void rcoll_root_missing(const rcoll_bootstrap_root_t *root, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < root->nranks && used + 16 < len; i++) {
    if (root->fds[i] < 0)
      used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? ", " : "", i);
  }
  if (used + 16 >= len)
    snprintf(buf + used, len - used, ", ...");
}

static void rcoll_root_give_up(rcoll_bootstrap_root_t *root) {
  char missing[120], text[320];
  if (root->nranks == 0) {
    RCOLL_WARN("bootstrap root %s: no rank arrived within %lld s", root->where,
               (long long)(root->timeout_ms / 1000));
    return;
  }
  rcoll_root_missing(root, missing, sizeof(missing));
  snprintf(text, sizeof(text), "ranks %s of %d never reached the root %s within %lld s", missing,
           root->nranks, root->where, (long long)(root->timeout_ms / 1000));
  RCOLL_WARN("bootstrap root: %s", text);
  for (int i = 0; i < root->nranks; i++)
    if (root->fds[i] >= 0)
      rcoll_root_reply(root->fds[i], rcollTimeout, text);
}

static void rcoll_root_answer(rcoll_bootstrap_root_t *root) {
  size_t bytes = sizeof(rcoll_bootstrap_hello_t) * (size_t)root->nranks;
  int64_t d = rcoll_now_ms() + root->timeout_ms;
  for (int i = 0; i < root->nranks; i++) {
    rcoll_root_reply(root->fds[i], rcollSuccess, "");
    if (rcoll_socket_send_all(root->fds[i], root->table, bytes, d) != rcollSuccess)
      RCOLL_WARN("bootstrap root %s: could not send the table to rank %d: %s", root->where, i,
                 rcoll_error_text());
  }
  RCOLL_INFO(RCOLL_SUB_BOOTSTRAP, "bootstrap root %s: answered all %d ranks", root->where,
             root->nranks);
}

static void rcoll_root_free(rcoll_bootstrap_root_t *root) {
  rcoll_pending_free(&root->pending);
  for (int i = 0; i < root->nranks; i++)
    if (root->fds[i] >= 0)
      close(root->fds[i]);
  close(root->listen_fd);
  free(root->fds);
  free(root->table);
  free(root);
}

/* Hellos are read from every connection at once (hello_pending.h): ranks
 * are served as they arrive, whatever strays hold connections open. */
static void *rcoll_root_main(void *arg) {
  rcoll_bootstrap_root_t *root = arg;
  int ok = 1;
  while (ok && (root->nranks == 0 || root->narrived < root->nranks)) {
    if (rcoll_now_ms() >= root->deadline_ms) {
      ok = 0;
      break;
    }
    rcoll_pending_wait(&root->pending, root->listen_fd, root->deadline_ms);
    if (rcoll_pending_progress(&root->pending, root->listen_fd) != rcollSuccess) {
      RCOLL_WARN("bootstrap root %s: %s", root->where, rcoll_error_text());
      ok = 0;
    }
    if (root->out_of_memory)
      ok = 0;
  }
  if (ok)
    rcoll_root_answer(root);
  else
    rcoll_root_give_up(root);
  rcoll_root_free(root);
  return NULL;
}

/* ------------------------------------------------------------------ */
/* Start                                                                */

/* Where to listen, and the address ranks are told to connect to: the same,
 * except that a wildcard listen address is replaced by a reachable one. */
static rcollResult_t rcoll_root_addrs(const rcoll_settings_t *s, const rcoll_sockaddr_t *listen_at,
                                      rcoll_sockaddr_t *bind_addr, rcoll_sockaddr_t *public_addr) {
  char ifname[RCOLL_IFNAME_MAX];
  const char *fam = s->socket_family;
  if (!listen_at)
    RCOLL_CHECK(rcoll_socket_pick_addr(s->socket_ifname, fam, bind_addr, ifname));
  else
    *bind_addr = *listen_at;
  *public_addr = *bind_addr;
  if ((bind_addr->sa.sa_family == AF_INET && bind_addr->sin.sin_addr.s_addr == htonl(INADDR_ANY)) ||
      (bind_addr->sa.sa_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&bind_addr->sin6.sin6_addr)))
    RCOLL_CHECK(rcoll_socket_pick_addr(s->socket_ifname,
                                       bind_addr->sa.sa_family == AF_INET ? "AF_INET" : "AF_INET6",
                                       public_addr, ifname));
  return rcollSuccess;
}

static rcollResult_t rcoll_root_spawn(rcoll_bootstrap_root_t *root) {
  pthread_attr_t attr;
  pthread_t tid;
  int rc;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  rc = pthread_create(&tid, &attr, rcoll_root_main, root);
  pthread_attr_destroy(&attr);
  if (rc != 0)
    return rcoll_error(rcollSystemError, "bootstrap root: pthread_create: %s", strerror(rc));
  return rcollSuccess;
}

rcollResult_t rcoll_bootstrap_root_start(const rcoll_settings_t *s,
                                         const rcoll_sockaddr_t *listen_at, uint64_t secret,
                                         rcollUniqueId *id) {
  rcoll_sockaddr_t bind_addr, public_addr;
  rcoll_bootstrap_root_t *root;
  if (!s || !id)
    return rcoll_error(rcollInvalidArgument, "bootstrap root: settings or id is NULL");
  RCOLL_CHECK(rcoll_root_addrs(s, listen_at, &bind_addr, &public_addr));
  root = calloc(1, sizeof(*root));
  if (!root)
    return rcoll_error(rcollSystemError, "bootstrap root: out of memory");
  root->listen_fd = rcoll_socket_listen(&bind_addr, 1024);
  if (root->listen_fd < 0) {
    free(root);
    return rcollSystemError;
  }
  if (public_addr.sa.sa_family == AF_INET6)
    public_addr.sin6.sin6_port = htons((uint16_t)rcoll_sockaddr_port(&bind_addr));
  else
    public_addr.sin.sin_port = htons((uint16_t)rcoll_sockaddr_port(&bind_addr));
  root->secret = secret;
  root->timeout_ms = rcoll_bootstrap_timeout_ms(s);
  root->deadline_ms = rcoll_now_ms() + root->timeout_ms;
  rcoll_sockaddr_str(&public_addr, root->where, sizeof(root->where));
  rcoll_bootstrap_id_encode(secret, &public_addr, id);
  char who[120];
  snprintf(who, sizeof(who), "bootstrap root %s", root->where);
  rcollResult_t rc = rcoll_pending_init(&root->pending, who, sizeof(rcoll_bootstrap_hello_t), 0,
                                        RCOLL_BOOTSTRAP_FIRST_MSG_MS, rcoll_root_take, root);
  /* Logged before the thread starts: from then on the thread owns root. */
  if (rc == rcollSuccess)
    RCOLL_INFO(RCOLL_SUB_BOOTSTRAP, "bootstrap root listening on %s", root->where);
  if (rc == rcollSuccess && rcoll_root_spawn(root) != rcollSuccess)
    rc = rcollSystemError;
  if (rc != rcollSuccess) {
    rcoll_pending_free(&root->pending);
    close(root->listen_fd);
    free(root);
    return rc;
  }
  return rcollSuccess;
}
