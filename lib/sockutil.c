/* TCP plumbing: addresses, interface choice, and blocking I/O with deadlines.
 *
 * Conventions shared by every function here:
 * - Deadlines are absolute monotonic milliseconds (rcoll_now_ms() + budget).
 * - Configuration mistakes (a bad address text, no matching interface, a
 *   failed bind) are logged with rcoll_error(): nobody above can say more.
 * - Connection and I/O failures are recorded with rcoll_error_quiet(), since
 *   the caller knows which peer rank was at the other end and logs a message
 *   that names it.
 * - connect/accept return -1 and leave errno at ETIMEDOUT when the deadline
 *   passed, so a caller can map that case to rcollTimeout. */
#include "sockutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "error.h"

/* Pause between connection attempts: short, so a peer that starts listening a
 * moment later is reached quickly, but long enough not to spin on 2 cores. */
#define RCOLL_CONNECT_RETRY_MS 20

/* Milliseconds left before the deadline, clamped to what poll() takes. */
static int rcoll_ms_left(int64_t deadline_ms) {
  int64_t left = deadline_ms - rcoll_now_ms();
  if (left < 0)
    return 0;
  return left > INT_MAX ? INT_MAX : (int)left;
}

/* ------------------------------------------------------------------ */
/* Addresses                                                            */

socklen_t rcoll_sockaddr_len(const rcoll_sockaddr_t *a) {
  if (a->sa.sa_family == AF_INET6)
    return sizeof(struct sockaddr_in6);
  if (a->sa.sa_family == AF_INET)
    return sizeof(struct sockaddr_in);
  return 0;
}

int rcoll_sockaddr_port(const rcoll_sockaddr_t *a) {
  if (a->sa.sa_family == AF_INET6)
    return ntohs(a->sin6.sin6_port);
  if (a->sa.sa_family == AF_INET)
    return ntohs(a->sin.sin_port);
  return -1;
}

static void rcoll_sockaddr_set_port(rcoll_sockaddr_t *a, int port) {
  if (a->sa.sa_family == AF_INET6)
    a->sin6.sin6_port = htons((uint16_t)port);
  else
    a->sin.sin_port = htons((uint16_t)port);
}

const char *rcoll_sockaddr_str(const rcoll_sockaddr_t *a, char *buf, size_t len) {
  char host[INET6_ADDRSTRLEN];
  if (len == 0)
    return buf;
  if (a->sa.sa_family == AF_INET && inet_ntop(AF_INET, &a->sin.sin_addr, host, sizeof(host)))
    snprintf(buf, len, "%s:%d", host, rcoll_sockaddr_port(a));
  else if (a->sa.sa_family == AF_INET6 &&
           inet_ntop(AF_INET6, &a->sin6.sin6_addr, host, sizeof(host)))
    snprintf(buf, len, "[%s]:%d", host, rcoll_sockaddr_port(a));
  else
    snprintf(buf, len, "<no address, family %d>", (int)a->sa.sa_family);
  return buf;
}

/* Splits text into a host part and a port part. Bracketed IPv6 and bare IPv6
 * (more than one colon) are told apart from "host:port" here. */
static rcollResult_t rcoll_sockaddr_split(const char *text, char *host, size_t hostlen,
                                          const char **port) {
  const char *orig = text;
  const char *colon = strrchr(text, ':');
  size_t n;
  *port = NULL;
  if (text[0] == '[') {
    const char *close = strchr(text, ']');
    if (!close || (close[1] != '\0' && close[1] != ':'))
      return rcoll_error(rcollInvalidArgument, "address '%s': unbalanced '[' or junk after ']'",
                         text);
    n = (size_t)(close - text - 1);
    if (close[1] == ':')
      *port = close + 2;
    text++;
  } else if (colon && strchr(text, ':') == colon) {
    n = (size_t)(colon - text); /* exactly one colon: host:port */
    *port = colon + 1;
  } else {
    n = strlen(text); /* no colon, or a bare IPv6 address */
  }
  if (n == 0 || n >= hostlen)
    return rcoll_error(rcollInvalidArgument, "address '%s': missing or overlong host", orig);
  memcpy(host, text, n);
  host[n] = '\0';
  return rcollSuccess;
}

static rcollResult_t rcoll_port_parse(const char *orig, const char *port, int port_default,
                                      int *out) {
  char *end;
  long v;
  if (!port) {
    if (port_default < 0 || port_default > 65535)
      return rcoll_error(rcollInvalidArgument, "address '%s': no port given", orig);
    *out = port_default;
    return rcollSuccess;
  }
  errno = 0;
  v = strtol(port, &end, 10);
  if (port[0] == '\0' || *end != '\0' || errno || v < 0 || v > 65535)
    return rcoll_error(rcollInvalidArgument, "address '%s': port '%s' is not 0..65535", orig, port);
  *out = (int)v;
  return rcollSuccess;
}

rcollResult_t rcoll_sockaddr_parse(const char *text, int port_default, rcoll_sockaddr_t *out) {
  return rcoll_sockaddr_parse_flags(text, port_default, 0, out);
}

rcollResult_t rcoll_sockaddr_parse_flags(const char *text, int port_default, int ai_flags,
                                         rcoll_sockaddr_t *out) {
  char host[NI_MAXHOST];
  const char *port_text;
  struct addrinfo hints, *res = NULL;
  int port = 0, rc;
  if (!text || !out)
    return rcoll_error(rcollInvalidArgument, "address parse: NULL argument");
  RCOLL_CHECK(rcoll_sockaddr_split(text, host, sizeof(host), &port_text));
  RCOLL_CHECK(rcoll_port_parse(text, port_text, port_default, &port));
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = ai_flags;
  rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0)
    return rcoll_error(rcollInvalidArgument, "address '%s': cannot resolve '%s': %s", text, host,
                       gai_strerror(rc));
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
      continue;
    memset(out, 0, sizeof(*out));
    memcpy(out, ai->ai_addr, ai->ai_addrlen);
    rcoll_sockaddr_set_port(out, port);
    freeaddrinfo(res);
    return rcollSuccess;
  }
  freeaddrinfo(res);
  return rcoll_error(rcollInvalidArgument, "address '%s': no IPv4 or IPv6 address", text);
}

/* ------------------------------------------------------------------ */
/* Interface choice                                                     */

/* Whether ifname matches one comma-separated entry list; exact or prefix. */
static int rcoll_ifname_in_list(const char *list, const char *ifname, int exact) {
  size_t len = strlen(ifname);
  while (*list) {
    const char *end = strchr(list, ',');
    size_t n = end ? (size_t)(end - list) : strlen(list);
    if (n > 0 && (exact ? (n == len) : (n <= len)) && strncmp(list, ifname, n) == 0)
      return 1;
    list += n;
    if (*list == ',')
      list++;
  }
  return 0;
}

int rcoll_ifname_match(const char *spec, const char *ifname) {
  int exclude = 0, exact = 0;
  if (!spec || spec[0] == '\0')
    return 1;
  if (spec[0] == '^') {
    exclude = 1;
    spec++;
  }
  if (spec[0] == '=') {
    exact = 1;
    spec++;
  }
  return rcoll_ifname_in_list(spec, ifname, exact) != exclude;
}

static rcollResult_t rcoll_family_parse(const char *family, int *out) {
  if (!family || family[0] == '\0')
    *out = AF_UNSPEC;
  else if (strcasecmp(family, "AF_INET") == 0)
    *out = AF_INET;
  else if (strcasecmp(family, "AF_INET6") == 0)
    *out = AF_INET6;
  else {
    char var[64];
    return rcoll_settings_error("%s=%s is not accepted: AF_INET, AF_INET6 or empty (either)",
                                rcoll_settings_source("SOCKET_FAMILY", var, sizeof var), family);
  }
  return rcollSuccess;
}

/* Preference of an interface address, lower is better, -1 unusable. With no
 * spec, loopback comes last: another host can never reach it. */
static int rcoll_ifaddr_rank(const struct ifaddrs *ifa, const char *spec, int family) {
  int fam;
  if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP))
    return -1;
  fam = ifa->ifa_addr->sa_family;
  if ((fam != AF_INET && fam != AF_INET6) || (family != AF_UNSPEC && fam != family))
    return -1;
  if (fam == AF_INET6 &&
      IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr))
    return -1; /* needs a scope id that other hosts cannot know */
  if (!rcoll_ifname_match(spec, ifa->ifa_name))
    return -1;
  return (ifa->ifa_flags & IFF_LOOPBACK) ? 1 : 0;
}

static int rcoll_ifaddr_usable(const struct ifaddrs *ifa) {
  return rcoll_ifaddr_rank(ifa, NULL, AF_UNSPEC) >= 0;
}

/* The interfaces an address could come from, each once, for the message
 * that says none matches the operator's list. */
static void rcoll_ifnames_present(const struct ifaddrs *list, char *buf, size_t len) {
  buf[0] = '\0';
  for (const struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
    const struct ifaddrs *prev = list;
    while (prev != ifa && !(rcoll_ifaddr_usable(prev) && strcmp(prev->ifa_name, ifa->ifa_name) == 0))
      prev = prev->ifa_next;
    if (prev == ifa && rcoll_ifaddr_usable(ifa))
      snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? ", " : "", ifa->ifa_name);
  }
  if (buf[0] == '\0')
    snprintf(buf, len, "none");
}

/* No address matched: a list of names that exist nowhere here is the
 * operator's mistake (rcollInvalidArgument), named with what does exist. */
static rcollResult_t rcoll_no_ifaddr(const struct ifaddrs *list, const char *spec, const char *family) {
  char present[512], var[64];
  rcoll_ifnames_present(list, present, sizeof present);
  if (spec == NULL || spec[0] == '\0')
    return rcoll_error(rcollSystemError, "no interface is up with an %s address (present: %s)",
                       family && family[0] ? family : "IPv4 or IPv6", present);
  return rcoll_settings_error("%s=%s matches no interface that is up with an %s address (present: %s; "
                              "prefixes, ^ to exclude, = for exact names)",
                              rcoll_settings_source("SOCKET_IFNAME", var, sizeof var), spec,
                              family && family[0] ? family : "IPv4 or IPv6", present);
}

rcollResult_t rcoll_socket_pick_addr(const char *ifname_spec, const char *family,
                                     rcoll_sockaddr_t *out, char ifname[RCOLL_IFNAME_MAX]) {
  struct ifaddrs *list, *best = NULL;
  int fam = AF_UNSPEC, best_rank = 2;
  RCOLL_CHECK(rcoll_family_parse(family, &fam));
  if (getifaddrs(&list) != 0)
    return rcoll_error(rcollSystemError, "getifaddrs: %s", strerror(errno));
  for (struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
    int r = rcoll_ifaddr_rank(ifa, ifname_spec, fam);
    if (r >= 0 && r < best_rank) {
      best = ifa;
      best_rank = r;
    }
  }
  if (!best) {
    rcollResult_t r = rcoll_no_ifaddr(list, ifname_spec, family);
    freeifaddrs(list);
    return r;
  }
  memset(out, 0, sizeof(*out));
  memcpy(out, best->ifa_addr,
         best->ifa_addr->sa_family == AF_INET6 ? sizeof(out->sin6) : sizeof(out->sin));
  if (ifname)
    snprintf(ifname, RCOLL_IFNAME_MAX, "%s", best->ifa_name);
  freeifaddrs(list);
  return rcollSuccess;
}

/* ------------------------------------------------------------------ */
/* Connections                                                          */

rcollResult_t rcoll_socket_accept_pending(int listen_fd, const char *who,
                                          int (*take)(void *arg, int fd, const rcoll_sockaddr_t *addr),
                                          void *arg) {
  for (;;) {
    rcoll_sockaddr_t addr;
    socklen_t len = sizeof addr;
    memset(&addr, 0, sizeof addr);
    int fd = accept4(listen_fd, &addr.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return rcollSuccess;
      /* The peer gave up between SYN and accept: not our failure. */
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
        continue;
      return rcoll_error(rcollSystemError, "%s: accept failed: %s", who, strerror(errno));
    }
    rcoll_socket_set_nodelay(fd);
    if (!take(arg, fd, &addr))
      close(fd);
  }
}

void rcoll_socket_set_nodelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void rcoll_socket_set_bufsize(int fd, int bytes) {
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

static void rcoll_fd_set_blocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0)
    (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
}

int rcoll_socket_listen(rcoll_sockaddr_t *addr, int backlog) {
  char str[80];
  int one = 1;
  rcoll_sockaddr_t bound;
  socklen_t blen = sizeof(bound);
  int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    rcoll_error(rcollSystemError, "socket for %s: %s", rcoll_sockaddr_str(addr, str, sizeof(str)),
                strerror(errno));
    return -1;
  }
  /* A restarted job must be able to reuse a port still in TIME_WAIT. */
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, &addr->sa, rcoll_sockaddr_len(addr)) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, &bound.sa, &blen) != 0) {
    int err = errno;
    close(fd);
    rcoll_error(rcollSystemError, "listen on %s: %s", rcoll_sockaddr_str(addr, str, sizeof(str)),
                strerror(err));
    return -1;
  }
  rcoll_sockaddr_set_port(addr, rcoll_sockaddr_port(&bound));
  return fd;
}

static int rcoll_connect_retriable(int err) {
  return err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH || err == ETIMEDOUT ||
         err == ECONNRESET || err == EAGAIN || err == EINTR;
}

/* Retrying a connect to a local port nobody listens on can make TCP connect
 * the socket to itself (source port == destination port); the caller would
 * then read back its own bytes. Such a connection counts as refused. */
static int rcoll_socket_self_connected(int fd) {
  rcoll_sockaddr_t me, peer;
  socklen_t ml = sizeof(me), pl = sizeof(peer);
  if (getsockname(fd, &me.sa, &ml) != 0 || getpeername(fd, &peer.sa, &pl) != 0)
    return 0;
  return ml == pl && memcmp(&me, &peer, ml) == 0;
}

/* One non-blocking connection attempt bounded by the deadline. Returns the fd
 * (still non-blocking) or -1 with errno telling why. */
static int rcoll_connect_once(const rcoll_sockaddr_t *addr, int64_t deadline_ms) {
  struct pollfd p;
  int n, err = 0;
  socklen_t elen = sizeof(err);
  int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  if (connect(fd, &addr->sa, rcoll_sockaddr_len(addr)) == 0)
    goto connected;
  if (errno != EINPROGRESS)
    goto fail;
  p.fd = fd;
  p.events = POLLOUT;
  /* An unreachable host can take minutes to refuse: never wait past the deadline. */
  n = poll(&p, 1, rcoll_ms_left(deadline_ms));
  if (n == 0)
    errno = ETIMEDOUT;
  if (n <= 0)
    goto fail;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
    goto fail;
  errno = err;
  if (err != 0)
    goto fail;
connected:
  if (!rcoll_socket_self_connected(fd))
    return fd;
  errno = ECONNREFUSED;
fail:
  err = errno;
  close(fd);
  errno = err;
  return -1;
}

int rcoll_socket_connect(const rcoll_sockaddr_t *addr, int64_t deadline_ms) {
  char str[80];
  for (;;) {
    int fd = rcoll_connect_once(addr, deadline_ms);
    if (fd >= 0) {
      rcoll_fd_set_blocking(fd);
      rcoll_socket_set_nodelay(fd);
      return fd;
    }
    int err = errno;
    int left = rcoll_ms_left(deadline_ms);
    if (!rcoll_connect_retriable(err) || left == 0) {
      rcoll_error_quiet(left == 0 ? rcollTimeout : rcollSystemError, "connect to %s: %s%s",
                        rcoll_sockaddr_str(addr, str, sizeof(str)),
                        left == 0 ? "timed out, last error: " : "", strerror(err));
      errno = left == 0 ? ETIMEDOUT : err;
      return -1;
    }
    /* The peer may simply not be listening yet: wait a little and retry. */
    poll(NULL, 0, left < RCOLL_CONNECT_RETRY_MS ? left : RCOLL_CONNECT_RETRY_MS);
  }
}

int rcoll_socket_accept(int listen_fd, int64_t deadline_ms) {
  for (;;) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) {
      rcoll_fd_set_blocking(fd);
      rcoll_socket_set_nodelay(fd);
      return fd;
    }
    /* ECONNABORTED: the peer gave up between SYN and accept; wait for the next. */
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      int err = errno;
      rcoll_error_quiet(rcollSystemError, "accept: %s", strerror(err));
      errno = err;
      return -1;
    }
    struct pollfd p = {.fd = listen_fd, .events = POLLIN};
    int left = rcoll_ms_left(deadline_ms);
    if (left == 0 || (poll(&p, 1, left) == 0 && rcoll_ms_left(deadline_ms) == 0)) {
      rcoll_error_quiet(rcollTimeout, "accept: no connection before the deadline");
      errno = ETIMEDOUT;
      return -1;
    }
  }
}

/* ------------------------------------------------------------------ */
/* Data                                                                 */

/* Waits until fd is ready for `events`; rcollTimeout when the deadline passes. */
static rcollResult_t rcoll_socket_wait(int fd, short events, int64_t deadline_ms, size_t done,
                                       size_t len, const char *what) {
  struct pollfd p = {.fd = fd, .events = events};
  int left = rcoll_ms_left(deadline_ms);
  int n = left > 0 ? poll(&p, 1, left) : 0;
  if (n > 0 || (n < 0 && errno == EINTR))
    return rcollSuccess;
  if (n < 0)
    return rcoll_error_quiet(rcollSystemError, "%s: poll: %s", what, strerror(errno));
  return rcoll_error_quiet(rcollTimeout, "%s: timed out with %zu of %zu bytes moved", what, done,
                           len);
}

static rcollResult_t rcoll_socket_io_error(int err, const char *what) {
  if (err == EPIPE || err == ECONNRESET)
    return rcoll_error_quiet(rcollRemoteError, "%s: peer closed the connection (%s)", what,
                             strerror(err));
  return rcoll_error_quiet(rcollSystemError, "%s: %s", what, strerror(err));
}

/* MSG_DONTWAIT on every call lets a blocking fd still honour the deadline,
 * and MSG_NOSIGNAL turns a dead peer into EPIPE instead of SIGPIPE. */
rcollResult_t rcoll_socket_send_all(int fd, const void *buf, size_t len, int64_t deadline_ms) {
  const char *p = buf;
  size_t done = 0;
  while (done < len) {
    ssize_t n = send(fd, p + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      RCOLL_CHECK(rcoll_socket_wait(fd, POLLOUT, deadline_ms, done, len, "send"));
    } else {
      return rcoll_socket_io_error(errno, "send");
    }
  }
  return rcollSuccess;
}

rcollResult_t rcoll_socket_recv_all(int fd, void *buf, size_t len, int64_t deadline_ms) {
  char *p = buf;
  size_t done = 0;
  while (done < len) {
    ssize_t n = recv(fd, p + done, len - done, MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
    } else if (n == 0) {
      return rcoll_error_quiet(rcollRemoteError,
                               "recv: peer closed the connection with %zu of %zu bytes received",
                               done, len);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      RCOLL_CHECK(rcoll_socket_wait(fd, POLLIN, deadline_ms, done, len, "recv"));
    } else {
      return rcoll_socket_io_error(errno, "recv");
    }
  }
  return rcollSuccess;
}
