/*
 * tcp_pingpong: the reference round trip for the tuner's inter-node
 * latency. A TCP ping-pong of small messages (TCP_NODELAY, one send and one
 * receive per side and round), as a socket transport's small message would
 * see the link, without any library in between.
 *
 *   tcp_pingpong server PORT [SPIN_US]          echo until the client leaves
 *   tcp_pingpong client ADDR PORT [ROUNDS] [BYTES] [SPIN_US]
 *       prints "rounds N bytes B spin_us S rtt_us min M p10 M median M max M"
 *
 * A wait tries the socket without blocking, yielding the core between
 * tries, for SPIN_US (default 50, what MPICH's, Open MPI's and rcoll's
 * waits do in some form), then sleeps in poll. SPIN_US 0 is the plain
 * blocking ping-pong. Why the spin: a process asleep in poll is woken on
 * the core its peer's packet was sent from, so two processes in two
 * namespaces of one machine can end up sharing a core while the other
 * idles. On the 2-core test VM the blocking form's median round trip was
 * 7.1 us in one run and 57.2 us in the next (both over the same veth); that
 * measures where the scheduler put the processes, not the link.
 *
 * The first 10 rounds are not counted (connection warm-up). Every wait has
 * a 10 s timeout, so a missing peer ends the program with an error.
 * Built by bench/compare/compare_netns.sh with cc; needs only libc.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 10
#define TIMEOUT_MS 10000

static double spin_us = 50;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int wait_fd(int fd, short ev, const char *what) {
  struct pollfd p = {fd, ev, 0};
  int r = poll(&p, 1, TIMEOUT_MS);
  if (r <= 0) {
    fprintf(stderr, "tcp_pingpong: %s: %s\n", what, r == 0 ? "no progress for 10 s" : strerror(errno));
    return -1;
  }
  return 0;
}

/* All of len bytes, or -1 (0 bytes at end of stream: returns 0). */
static long xfer(int fd, char *buf, size_t len, int out, const char *peer) {
  size_t done = 0;
  double spin_end = now_us() + spin_us;
  while (done < len) {
    ssize_t n = out ? send(fd, buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                    : recv(fd, buf + done, len - done, MSG_DONTWAIT);
    if (n == 0 && !out)
      return (long)done;
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (now_us() < spin_end)
          sched_yield();
        else if (wait_fd(fd, out ? POLLOUT : POLLIN, out ? "send to peer" : "receive from peer") != 0)
          return -1;
        continue;
      }
      fprintf(stderr, "tcp_pingpong: %s %s: %s\n", out ? "send to" : "receive from", peer, strerror(errno));
      return -1;
    }
    done += (size_t)n;
  }
  return (long)done;
}

static void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int server(int port) {
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 1) != 0) {
    fprintf(stderr, "tcp_pingpong: listen on port %d: %s\n", port, strerror(errno));
    return 1;
  }
  printf("tcp_pingpong: listening\n");
  fflush(stdout);
  if (wait_fd(ls, POLLIN, "accept a client") != 0)
    return 1;
  int fd = accept(ls, NULL, NULL);
  if (fd < 0)
    return 1;
  nodelay(fd);
  char buf[65536];
  for (;;) {
    uint32_t len;
    long n = xfer(fd, (char *)&len, sizeof len, 0, "client");
    if (n == 0)
      return 0; /* the client is done */
    if (n < 0 || len > sizeof buf || xfer(fd, buf, len, 0, "client") < 0)
      return 1;
    if (xfer(fd, buf, len, 1, "client") < 0)
      return 1;
  }
}

static int client(const char *addr, int port, int rounds, int bytes) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
  if (inet_pton(AF_INET, addr, &a.sin_addr) != 1 || bytes < 1 || bytes > 65536 || rounds < 1) {
    fprintf(stderr, "tcp_pingpong: bad address, rounds or bytes (1..65536)\n");
    return 2;
  }
  int fd = -1;
  for (int tries = 0; tries < 100; tries++) { /* the server may still be starting */
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
      break;
    close(fd);
    fd = -1;
    usleep(50000);
  }
  if (fd < 0) {
    fprintf(stderr, "tcp_pingpong: connect to %s:%d: %s\n", addr, port, strerror(errno));
    return 1;
  }
  nodelay(fd);
  char *buf = calloc(1, (size_t)bytes + 4);
  double *rtt = calloc((size_t)rounds, sizeof *rtt);
  if (buf == NULL || rtt == NULL)
    return 1;
  uint32_t len = (uint32_t)bytes;
  for (int i = -WARMUP; i < rounds; i++) {
    double t0 = now_us();
    /* Header and payload in one send: one segment per direction. */
    memcpy(buf, &len, sizeof len);
    if (xfer(fd, buf, (size_t)bytes + 4, 1, addr) < 0 || xfer(fd, buf + 4, (size_t)bytes, 0, addr) != bytes)
      return 1;
    if (i >= 0)
      rtt[i] = now_us() - t0;
  }
  qsort(rtt, (size_t)rounds, sizeof *rtt, cmp);
  printf("rounds %d bytes %d spin_us %g rtt_us min %.1f p10 %.1f median %.1f max %.1f\n", rounds, bytes,
         spin_us, rtt[0],
         rtt[rounds / 10], rtt[rounds / 2], rtt[rounds - 1]);
  close(fd);
  free(buf);
  free(rtt);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "server")) {
    spin_us = argc > 3 ? atof(argv[3]) : spin_us;
    return server(atoi(argv[2]));
  }
  if (argc >= 4 && !strcmp(argv[1], "client")) {
    spin_us = argc > 6 ? atof(argv[6]) : spin_us;
    return client(argv[2], atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 1000, argc > 5 ? atoi(argv[5]) : 8);
  }
  fprintf(stderr, "usage: tcp_pingpong server PORT [SPIN_US] | client ADDR PORT [ROUNDS] [BYTES] [SPIN_US]\n");
  return 2;
}
