/* TCP plumbing shared by the bootstrap and the socket transport: addresses
 * (IPv4 and IPv6), interface choice, and blocking I/O with deadlines.
 *
 * The deadlines are absolute times of the library's clock, so this header
 * includes clock.h: a caller that computes one needs rcoll_now_ms() too. */
#ifndef RCOLL_SOCKUTIL_H
#define RCOLL_SOCKUTIL_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "clock.h"
#include "rcoll.h"

typedef union rcoll_sockaddr {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
} rcoll_sockaddr_t;

#define RCOLL_IFNAME_MAX 32

/* Parses "host:port", "[v6addr]:port" or "v6addr" with a port given apart
 * (port_default >= 0 when the text has none). Host names are resolved. */
rcollResult_t rcoll_sockaddr_parse(const char *text, int port_default, rcoll_sockaddr_t *out);
/* The same with getaddrinfo's ai_flags: AI_NUMERICHOST parses without ever
 * asking a resolver (the fuzzer's way, tests/fuzz/fuzz_settings.c). */
rcollResult_t rcoll_sockaddr_parse_flags(const char *text, int port_default, int ai_flags,
                                         rcoll_sockaddr_t *out);
/* "1.2.3.4:5" or "[::1]:5" into buf. Returns buf. */
const char *rcoll_sockaddr_str(const rcoll_sockaddr_t *a, char *buf, size_t len);
socklen_t rcoll_sockaddr_len(const rcoll_sockaddr_t *a);
int rcoll_sockaddr_port(const rcoll_sockaddr_t *a);

/* Picks the address to listen on: the first interface (in getifaddrs order,
 * non-loopback before loopback) that matches `ifname_spec` (NCCL syntax:
 * comma-separated prefixes, leading ^ excludes, leading = matches exactly;
 * empty takes any) and `family` ("AF_INET", "AF_INET6" or "" for any).
 * Link-local IPv6 addresses are skipped. */
rcollResult_t rcoll_socket_pick_addr(const char *ifname_spec, const char *family,
                                     rcoll_sockaddr_t *out, char ifname[RCOLL_IFNAME_MAX]);
/* Whether `ifname` matches an NCCL-style spec (exported for tests). */
int rcoll_ifname_match(const char *spec, const char *ifname);

/* Listening socket bound to addr (port 0 picks one; addr is updated with the
 * port chosen). Non-blocking, close-on-exec. Returns the fd or -1 (error set). */
int rcoll_socket_listen(rcoll_sockaddr_t *addr, int backlog);
/* Blocking connect that retries refused/unreachable until the deadline
 * (monotonic ms, see rcoll_now_ms). Returns a blocking fd with TCP_NODELAY. */
int rcoll_socket_connect(const rcoll_sockaddr_t *addr, int64_t deadline_ms);
/* Accept with a deadline; -1 with rcollTimeout set when it passes. */
int rcoll_socket_accept(int listen_fd, int64_t deadline_ms);
/* Takes every connection waiting on a non-blocking listener, without
 * blocking. Each socket (non-blocking, close-on-exec, TCP_NODELAY) goes to
 * take(arg, fd, addr), which keeps it (returns 1) or refuses it (0: it is
 * closed here). Fails only when accept itself does; `who` names the caller
 * in that error. */
rcollResult_t rcoll_socket_accept_pending(int listen_fd, const char *who,
                                          int (*take)(void *arg, int fd, const rcoll_sockaddr_t *addr),
                                          void *arg);
/* Move exactly len bytes or fail: on timeout, error, or EOF (peer closed). */
rcollResult_t rcoll_socket_send_all(int fd, const void *buf, size_t len, int64_t deadline_ms);
rcollResult_t rcoll_socket_recv_all(int fd, void *buf, size_t len, int64_t deadline_ms);
void rcoll_socket_set_nodelay(int fd);
void rcoll_socket_set_bufsize(int fd, int bytes);

#endif
