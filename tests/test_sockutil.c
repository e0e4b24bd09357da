/* sockutil: address parsing and printing, interface choice, and blocking
 * socket I/O that honours deadlines. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "sockutil.h"

/* ------------------------------------------------------------------ */
/* Parsing and printing                                                 */

static void expect_v4(const char *text, int port_default, const char *ip, int port) {
  rcoll_sockaddr_t a;
  struct in_addr want;
  cr_assert_eq(inet_pton(AF_INET, ip, &want), 1);
  cr_assert_eq(rcoll_sockaddr_parse(text, port_default, &a), rcollSuccess, "%s: %s", text,
               rcoll_error_text());
  cr_assert_eq(a.sa.sa_family, AF_INET, "%s", text);
  cr_assert_eq(a.sin.sin_addr.s_addr, want.s_addr, "%s", text);
  cr_assert_eq(rcoll_sockaddr_port(&a), port, "%s", text);
  cr_assert_eq(rcoll_sockaddr_len(&a), sizeof(struct sockaddr_in));
}

static void expect_v6(const char *text, int port_default, const char *ip, int port) {
  rcoll_sockaddr_t a;
  struct in6_addr want;
  cr_assert_eq(inet_pton(AF_INET6, ip, &want), 1);
  cr_assert_eq(rcoll_sockaddr_parse(text, port_default, &a), rcollSuccess, "%s: %s", text,
               rcoll_error_text());
  cr_assert_eq(a.sa.sa_family, AF_INET6, "%s", text);
  cr_assert_eq(memcmp(&a.sin6.sin6_addr, &want, sizeof(want)), 0, "%s", text);
  cr_assert_eq(rcoll_sockaddr_port(&a), port, "%s", text);
  cr_assert_eq(rcoll_sockaddr_len(&a), sizeof(struct sockaddr_in6));
}

Test(sockutil, parses_ipv4_with_and_without_port) {
  expect_v4("10.1.2.3:4567", -1, "10.1.2.3", 4567);
  expect_v4("192.0.2.200", 80, "192.0.2.200", 80);
  expect_v4("127.0.0.1:0", 9, "127.0.0.1", 0);
  expect_v4("1.2.3.4:65535", -1, "1.2.3.4", 65535);
}

Test(sockutil, parses_bracketed_and_bare_ipv6) {
  expect_v6("[2001:db8::5]:80", -1, "2001:db8::5", 80);
  expect_v6("[::1]:12345", 7, "::1", 12345);
  expect_v6("[fd00::2]", 1000, "fd00::2", 1000);
  expect_v6("2001:db8:0:1::7", 443, "2001:db8:0:1::7", 443);
}

Test(sockutil, resolves_host_names) {
  rcoll_sockaddr_t a;
  cr_assert_eq(rcoll_sockaddr_parse("localhost:6000", -1, &a), rcollSuccess, "%s",
               rcoll_error_text());
  cr_assert_eq(rcoll_sockaddr_port(&a), 6000);
  if (a.sa.sa_family == AF_INET)
    cr_assert_eq(ntohl(a.sin.sin_addr.s_addr) >> 24, 127u);
  else
    cr_assert(a.sa.sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&a.sin6.sin6_addr));
}

Test(sockutil, rejects_garbage, .timeout = 30) {
  const char *bad[] = {"",
                       "1.2.3.4:",
                       "1.2.3.4:99999",
                       "1.2.3.4:-1",
                       "[::1",
                       "[::1]x",
                       "[::1]:http",
                       "host:abc",
                       "[]:5",
                       ":80",
                       "no.such.host.invalid:80",
                       "300.1.1.1:5"};
  rcoll_sockaddr_t a;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    cr_expect_eq(rcoll_sockaddr_parse(bad[i], -1, &a), rcollInvalidArgument, "'%s' accepted",
                 bad[i]);
  /* No port in the text and none given apart. */
  cr_expect_eq(rcoll_sockaddr_parse("127.0.0.1", -1, &a), rcollInvalidArgument);
  cr_expect_eq(rcoll_sockaddr_parse(NULL, 1, &a), rcollInvalidArgument);
}

Test(sockutil, prints_and_round_trips) {
  const char *texts[] = {"127.0.0.1:5", "10.20.30.40:65535", "[::1]:80", "[2001:db8::1:2]:7"};
  for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
    rcoll_sockaddr_t a, b;
    char buf[80];
    cr_assert_eq(rcoll_sockaddr_parse(texts[i], -1, &a), rcollSuccess);
    cr_assert_str_eq(rcoll_sockaddr_str(&a, buf, sizeof(buf)), texts[i]);
    cr_assert_eq(rcoll_sockaddr_parse(buf, -1, &b), rcollSuccess);
    cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0, "%s did not round-trip", texts[i]);
  }
  /* A short buffer truncates rather than overflows. */
  rcoll_sockaddr_t a;
  char small[6];
  rcoll_sockaddr_parse("10.20.30.40:1", -1, &a);
  cr_assert_str_eq(rcoll_sockaddr_str(&a, small, sizeof(small)), "10.20");
}

/* ------------------------------------------------------------------ */
/* Interfaces                                                           */

Test(sockutil, ifname_spec_follows_nccl_syntax) {
  struct {
    const char *spec, *name;
    int match;
  } cases[] = {
      {"", "eth0", 1},
      {NULL, "lo", 1},
      {"eth", "eth0", 1},
      {"eth", "ib0", 0},
      {"eth0", "eth", 0},
      {"^eth", "eth0", 0},
      {"^eth", "ib0", 1},
      {"=eth", "eth0", 0},
      {"=eth0", "eth0", 1},
      {"=eth0", "eth01", 0},
      {"eth,ib", "ib1", 1},
      {"eth,ib", "lo", 0},
      {"^docker,lo", "lo", 0},
      {"^docker,lo", "docker0", 0},
      {"^docker,lo", "enp1s0", 1},
      {"^=eth0", "eth0", 0},
      {"^=eth0", "eth01", 1},
      {"=eth0,ib0", "ib0", 1},
      {"eth,,ib", "ib0", 1},
      {"^", "eth0", 1},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    cr_expect_eq(rcoll_ifname_match(cases[i].spec, cases[i].name), cases[i].match,
                 "spec '%s' name '%s'", cases[i].spec ? cases[i].spec : "(null)", cases[i].name);
}

Test(sockutil, picks_loopback_when_asked) {
  rcoll_sockaddr_t a;
  char ifname[RCOLL_IFNAME_MAX];
  cr_assert_eq(rcoll_socket_pick_addr("=lo", "AF_INET", &a, ifname), rcollSuccess, "%s",
               rcoll_error_text());
  cr_assert_str_eq(ifname, "lo");
  cr_assert_eq(a.sa.sa_family, AF_INET);
  cr_assert_eq(ntohl(a.sin.sin_addr.s_addr), INADDR_LOOPBACK);
  cr_assert_eq(rcoll_sockaddr_port(&a), 0);
}

Test(sockutil, pick_rejects_unknown_family_and_unmatched_spec) {
  rcoll_sockaddr_t a;
  char ifname[RCOLL_IFNAME_MAX];
  cr_assert_eq(rcoll_socket_pick_addr("", "AF_UNIX", &a, ifname), rcollInvalidArgument);
  cr_assert_neq(rcoll_socket_pick_addr("=no_such_if9", "", &a, ifname), rcollSuccess);
}

/* Whether this host has an up, non-loopback interface with a usable address. */
static int have_non_loopback(int family) {
  struct ifaddrs *list;
  int found = 0;
  cr_assert_eq(getifaddrs(&list), 0);
  for (struct ifaddrs *i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
      continue;
    if (i->ifa_addr->sa_family == AF_INET && (family == AF_INET || family == AF_UNSPEC))
      found = 1;
    if (i->ifa_addr->sa_family == AF_INET6 && (family == AF_INET6 || family == AF_UNSPEC) &&
        !IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
      found = 1;
  }
  freeifaddrs(list);
  return found;
}

Test(sockutil, empty_spec_prefers_non_loopback_and_skips_link_local) {
  rcoll_sockaddr_t a;
  char ifname[RCOLL_IFNAME_MAX];
  cr_assert_eq(rcoll_socket_pick_addr("", "", &a, ifname), rcollSuccess, "%s", rcoll_error_text());
  int is_lo = (a.sa.sa_family == AF_INET && (ntohl(a.sin.sin_addr.s_addr) >> 24) == 127) ||
              (a.sa.sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&a.sin6.sin6_addr));
  cr_assert_eq(is_lo, !have_non_loopback(AF_UNSPEC), "picked %s", ifname);
  if (rcoll_socket_pick_addr("", "AF_INET6", &a, ifname) == rcollSuccess) {
    cr_assert_eq(a.sa.sa_family, AF_INET6);
    cr_assert(!IN6_IS_ADDR_LINKLOCAL(&a.sin6.sin6_addr), "picked a link-local address on %s",
              ifname);
  }
}

/* ------------------------------------------------------------------ */
/* Sockets                                                              */

static int listen_on(const char *text, rcoll_sockaddr_t *a) {
  cr_assert_eq(rcoll_sockaddr_parse(text, -1, a), rcollSuccess);
  return rcoll_socket_listen(a, 16);
}

Test(sockutil, listen_on_port_zero_reports_the_port) {
  rcoll_sockaddr_t a, bound;
  socklen_t len = sizeof(bound);
  int fd = listen_on("127.0.0.1:0", &a);
  cr_assert_geq(fd, 0, "%s", rcoll_error_text());
  cr_assert_eq(getsockname(fd, &bound.sa, &len), 0);
  cr_assert_neq(rcoll_sockaddr_port(&a), 0);
  cr_assert_eq(rcoll_sockaddr_port(&a), rcoll_sockaddr_port(&bound));
  cr_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
  cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
  close(fd);
}

Test(sockutil, listen_and_connect_over_ipv6_loopback) {
  rcoll_sockaddr_t a;
  int probe = socket(AF_INET6, SOCK_STREAM, 0);
  struct sockaddr_in6 lo6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  if (probe < 0 || bind(probe, (struct sockaddr *)&lo6, sizeof(lo6)) != 0) {
    if (probe >= 0)
      close(probe);
    cr_skip_test("no ::1 on this host");
  }
  close(probe);
  int lfd = listen_on("[::1]:0", &a);
  cr_assert_geq(lfd, 0, "%s", rcoll_error_text());
  cr_assert_neq(rcoll_sockaddr_port(&a), 0);
  int c = rcoll_socket_connect(&a, rcoll_now_ms() + 2000);
  int s = rcoll_socket_accept(lfd, rcoll_now_ms() + 2000);
  cr_assert(c >= 0 && s >= 0, "%s", rcoll_error_text());
  char out[4] = {0};
  cr_assert_eq(rcoll_socket_send_all(c, "v6!", 4, rcoll_now_ms() + 1000), rcollSuccess);
  cr_assert_eq(rcoll_socket_recv_all(s, out, 4, rcoll_now_ms() + 1000), rcollSuccess);
  cr_assert_str_eq(out, "v6!");
  close(c);
  close(s);
  close(lfd);
}

typedef struct {
  int fd;
  unsigned char *buf;
  size_t len;
  rcollResult_t rc;
} io_job_t;

static void *recv_job(void *arg) {
  io_job_t *j = arg;
  j->rc = rcoll_socket_recv_all(j->fd, j->buf, j->len, rcoll_now_ms() + 10000);
  return NULL;
}

/* A pair of connected blocking sockets over 127.0.0.1. */
static void tcp_pair(int *client, int *server) {
  rcoll_sockaddr_t a;
  int lfd = listen_on("127.0.0.1:0", &a);
  cr_assert_geq(lfd, 0);
  *client = rcoll_socket_connect(&a, rcoll_now_ms() + 2000);
  *server = rcoll_socket_accept(lfd, rcoll_now_ms() + 2000);
  cr_assert(*client >= 0 && *server >= 0, "%s", rcoll_error_text());
  cr_assert_eq(fcntl(*client, F_GETFL) & O_NONBLOCK, 0, "connect must return a blocking fd");
  close(lfd);
}

Test(sockutil, moves_a_large_buffer_intact, .timeout = 30) {
  int c, s;
  size_t len = 8u << 20; /* far more than the socket buffers hold */
  unsigned char *src = malloc(len), *dst = calloc(len, 1);
  pthread_t t;
  tcp_pair(&c, &s);
  for (size_t i = 0; i < len; i++)
    src[i] = (unsigned char)(i * 131 + (i >> 13));
  io_job_t job = {.fd = s, .buf = dst, .len = len};
  pthread_create(&t, NULL, recv_job, &job);
  cr_assert_eq(rcoll_socket_send_all(c, src, len, rcoll_now_ms() + 10000), rcollSuccess, "%s",
               rcoll_error_text());
  pthread_join(t, NULL);
  cr_assert_eq(job.rc, rcollSuccess);
  cr_assert_eq(memcmp(src, dst, len), 0);
  free(src);
  free(dst);
  close(c);
  close(s);
}

Test(sockutil, recv_after_peer_close_is_a_remote_error) {
  int c, s;
  char buf[8];
  tcp_pair(&c, &s);
  cr_assert_eq(rcoll_socket_send_all(c, "abc", 3, rcoll_now_ms() + 1000), rcollSuccess);
  close(c);
  /* The 3 bytes sent arrive; the 5 missing ones never will. */
  int64_t t0 = rcoll_now_ms();
  cr_assert_eq(rcoll_socket_recv_all(s, buf, 8, t0 + 5000), rcollRemoteError);
  cr_assert_lt(rcoll_now_ms() - t0, 1000, "EOF must be seen at once, not at the deadline");
  cr_assert(strstr(rcoll_error_text(), "peer closed the connection"), "%s", rcoll_error_text());
  cr_assert_eq(memcmp(buf, "abc", 3), 0);
  close(s);
}

Test(sockutil, send_to_a_closed_peer_fails_without_sigpipe, .timeout = 10) {
  int c, s;
  static char block[1 << 16];
  rcollResult_t rc = rcollSuccess;
  tcp_pair(&c, &s);
  close(s);
  for (int i = 0; i < 1000 && rc == rcollSuccess; i++)
    rc = rcoll_socket_send_all(c, block, sizeof(block), rcoll_now_ms() + 1000);
  cr_assert_eq(rc, rcollRemoteError, "%s", rcoll_error_text());
  close(c);
}

Test(sockutil, recv_times_out_at_the_deadline) {
  int c, s;
  char buf[4];
  tcp_pair(&c, &s);
  int64_t t0 = rcoll_now_ms();
  cr_assert_eq(rcoll_socket_recv_all(s, buf, 4, t0 + 300), rcollTimeout);
  int64_t dt = rcoll_now_ms() - t0;
  cr_assert(dt >= 299 && dt < 1000, "returned after %lld ms", (long long)dt);
  close(c);
  close(s);
}

Test(sockutil, accept_times_out_at_the_deadline) {
  rcoll_sockaddr_t a;
  int lfd = listen_on("127.0.0.1:0", &a);
  int64_t t0 = rcoll_now_ms();
  errno = 0;
  cr_assert_eq(rcoll_socket_accept(lfd, t0 + 250), -1);
  int64_t dt = rcoll_now_ms() - t0;
  cr_assert_eq(errno, ETIMEDOUT);
  cr_assert(dt >= 249 && dt < 1000, "returned after %lld ms", (long long)dt);
  close(lfd);
}

Test(sockutil, connect_to_nobody_times_out_at_the_deadline) {
  rcoll_sockaddr_t a;
  int lfd = listen_on("127.0.0.1:0", &a);
  close(lfd); /* the port is now (almost certainly) refused */
  int64_t t0 = rcoll_now_ms();
  cr_assert_eq(rcoll_socket_connect(&a, t0 + 300), -1);
  int64_t dt = rcoll_now_ms() - t0;
  cr_assert_eq(errno, ETIMEDOUT);
  cr_assert(dt >= 299 && dt < 1000, "returned after %lld ms", (long long)dt);
}

typedef struct {
  rcoll_sockaddr_t addr;
  int fd;
} late_listener_t;

static void *listen_late(void *arg) {
  late_listener_t *l = arg;
  usleep(300 * 1000);
  l->fd = rcoll_socket_listen(&l->addr, 4);
  return NULL;
}

Test(sockutil, connect_retries_until_the_listener_appears, .timeout = 10) {
  late_listener_t l;
  pthread_t t;
  l.fd = listen_on("127.0.0.1:0", &l.addr);
  close(l.fd);
  pthread_create(&t, NULL, listen_late, &l);
  int64_t t0 = rcoll_now_ms();
  int c = rcoll_socket_connect(&l.addr, t0 + 5000);
  pthread_join(t, NULL);
  cr_assert_geq(c, 0, "%s", rcoll_error_text());
  cr_assert_geq(rcoll_now_ms() - t0, 250, "connected before anyone listened");
  int s = rcoll_socket_accept(l.fd, rcoll_now_ms() + 1000);
  cr_assert_geq(s, 0);
  close(c);
  close(s);
  close(l.fd);
}

Test(sockutil, clock_is_monotonic_and_in_the_right_unit) {
  int64_t m0 = rcoll_now_ms(), u0 = rcoll_now_us();
  usleep(50 * 1000);
  int64_t dm = rcoll_now_ms() - m0, du = rcoll_now_us() - u0;
  cr_assert(dm >= 50 && dm < 2000, "%lld ms", (long long)dm);
  cr_assert(du >= 50000 && du < 2000000, "%lld us", (long long)du);
}

/* ------------------------------------------------------------------ */
/* Accepting whatever is pending (the transports' listeners)            */

typedef struct taker {
  int keep;         /* how many more to keep */
  int fds[4], nfds; /* kept */
  int refused;
  int port_seen;
} taker_t;

static int take_some(void *arg, int fd, const rcoll_sockaddr_t *addr) {
  taker_t *t = arg;
  t->port_seen += rcoll_sockaddr_port(addr) != 0;
  if (t->keep == 0) {
    t->refused++;
    return 0;
  }
  t->keep--;
  t->fds[t->nfds++] = fd;
  return 1;
}

Test(sockutil, accept_pending_takes_what_waits_and_closes_what_is_refused, .timeout = 10) {
  rcoll_sockaddr_t a;
  int lfd = listen_on("127.0.0.1:0", &a);
  taker_t t = {.keep = 2};
  /* Nothing waiting: returns at once with nothing taken. */
  cr_assert_eq(rcoll_socket_accept_pending(lfd, "test", take_some, &t), rcollSuccess);
  cr_assert_eq(t.nfds + t.refused, 0);
  int c[3];
  for (int i = 0; i < 3; i++) {
    c[i] = rcoll_socket_connect(&a, rcoll_now_ms() + 2000);
    cr_assert_geq(c[i], 0, "%s", rcoll_error_text());
  }
  for (int64_t end = rcoll_now_ms() + 2000; t.nfds + t.refused < 3 && rcoll_now_ms() < end;)
    cr_assert_eq(rcoll_socket_accept_pending(lfd, "test", take_some, &t), rcollSuccess);
  cr_assert_eq(t.nfds, 2);
  cr_assert_eq(t.refused, 1);
  cr_assert_eq(t.port_seen, 3, "the peer's address comes with each socket");
  for (int i = 0; i < t.nfds; i++) {
    int nodelay = 0;
    socklen_t len = sizeof nodelay;
    cr_assert(fcntl(t.fds[i], F_GETFL) & O_NONBLOCK);
    cr_assert(fcntl(t.fds[i], F_GETFD) & FD_CLOEXEC);
    cr_assert_eq(getsockopt(t.fds[i], IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
    cr_assert_neq(nodelay, 0);
  }
  /* Exactly one client sees its socket closed: the refused one. */
  int closed = 0;
  for (int i = 0; i < 3; i++) {
    struct pollfd p = {.fd = c[i], .events = POLLIN};
    char b;
    if (poll(&p, 1, 500) == 1 && recv(c[i], &b, 1, MSG_DONTWAIT) == 0)
      closed++;
  }
  cr_assert_eq(closed, 1);
  for (int i = 0; i < 3; i++)
    close(c[i]);
  for (int i = 0; i < t.nfds; i++)
    close(t.fds[i]);
  /* A socket that is not listening fails, with the caller's name. */
  int plain = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert_eq(rcoll_socket_accept_pending(plain, "test", take_some, &t), rcollSystemError);
  cr_assert(strstr(rcoll_error_text(), "test: accept failed") != NULL, "%s", rcoll_error_text());
  close(plain);
  close(lfd);
}
