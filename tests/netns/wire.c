/*
 * netns_wire: a userspace link emulator for the multi-node tests.
 *
 * Kernels without sch_netem (this CI's) cannot give the namespaces' veth
 * links delay or loss, so tests/netns/netns.sh can join the namespaces
 * through this program instead of a bridge. It opens one TAP device per
 * port, switches Ethernet frames between the ports like a learning switch,
 * and shapes every frame it forwards the way netem shapes a qdisc: a fixed
 * delay plus uniform jitter, random loss, an optional rate cap and a queue
 * limit (in frames, netem's default 1000). Each frame crosses the wire once
 * per direction, so delay=1ms gives a 2 ms round trip between namespaces.
 * Unlike netem, jitter never reorders the frames of one output port (a frame
 * leaves no earlier than the one before it), which TCP would take for loss.
 *
 *   netns_wire [key=value...] PORT...     run the switch (stops on SIGTERM,
 *                                         SIGINT, or when its parent dies)
 *       delay=1ms jitter=100us loss=1% rate=1gbit limit=1000 mtu=9000 seed=N
 *   netns_wire udp-echo PORT              echo UDP datagrams (for udp-ping)
 *   netns_wire udp-ping ADDR PORT COUNT [INTERVAL_US]
 *                                         round trips and losses, one line
 *
 * The switch prints "netns_wire: ready" once every TAP device exists, so the
 * caller can move them into namespaces (`ip link set PORT netns NS`; the
 * open file keeps the device attached to this process). It waits in ppoll()
 * with the next frame's due time as the timeout: no CPU while idle.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WIRE_MAX_PORTS 32
#define WIRE_MAX_FRAME 65600 /* TAP MTU tops out at 65535, plus the header */
#define WIRE_MAC_SLOTS 64
#define WIRE_READ_BATCH 64   /* frames read from one port before the next */

struct wire_frame {
  struct wire_frame *next;
  uint64_t due_ns;
  size_t len;
  unsigned char data[];
};

/* Frames waiting for their due time on one output port, in due order. */
struct wire_queue {
  struct wire_frame *head, *tail;
  unsigned len;
  uint64_t last_due_ns;   /* jitter never reorders a port's frames */
  uint64_t busy_until_ns; /* end of the last frame's serialisation (rate) */
};

struct wire_port {
  int fd;
  char name[IFNAMSIZ];
  struct wire_queue queue;
  unsigned long rx, tx, lost, overflow, failed;
  int last_errno; /* of the last failed write, for the report */
};

struct wire_shape {
  uint64_t delay_ns, jitter_ns, rate_bps, seed;
  double loss; /* probability per forwarded frame */
  unsigned limit, mtu;
};

struct wire_mac {
  unsigned char addr[6];
  int port;
};

struct wire {
  struct wire_port ports[WIRE_MAX_PORTS];
  int nports;
  struct wire_shape shape;
  struct wire_mac macs[WIRE_MAC_SLOTS];
  int nmacs, next_mac_victim;
  uint64_t rng;
};

static uint64_t wire_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* splitmix64: enough randomness for loss and jitter, and reproducible with
 * seed=N when a failure needs replaying. */
static uint64_t wire_random(struct wire *w) {
  uint64_t z = (w->rng += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static double wire_random_unit(struct wire *w) { return (double)(wire_random(w) >> 11) / 9007199254740992.0; }

/* ------------------------------------------------------------ options */

/* "1ms", "200us", "50ns", "2s" or a bare number of microseconds (tc's unit). */
static int wire_parse_time(const char *s, uint64_t *ns) {
  char *end;
  double v = strtod(s, &end);
  double scale = 1e3;
  if (end == s || v < 0)
    return -1;
  if (!strcmp(end, "s") || !strcmp(end, "sec"))
    scale = 1e9;
  else if (!strcmp(end, "ms") || !strcmp(end, "msec"))
    scale = 1e6;
  else if (!strcmp(end, "us") || !strcmp(end, "usec"))
    scale = 1e3;
  else if (!strcmp(end, "ns") || !strcmp(end, "nsec"))
    scale = 1;
  else if (*end)
    return -1;
  *ns = (uint64_t)(v * scale + 0.5);
  return 0;
}

/* "1gbit", "100mbit", "10kbit", "1000bit", or bytes per second with tc's
 * "bps" suffixes ("125mbps" is 1 gbit). */
static int wire_parse_rate(const char *s, uint64_t *bps) {
  static const struct { const char *suffix; double scale; } units[] = {
      {"bit", 1},     {"kbit", 1e3},   {"mbit", 1e6},   {"gbit", 1e9},
      {"bps", 8},     {"kbps", 8e3},   {"mbps", 8e6},   {"gbps", 8e9},
  };
  char *end;
  double v = strtod(s, &end);
  if (end == s || v <= 0)
    return -1;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (!strcasecmp(end, units[i].suffix)) {
      *bps = (uint64_t)(v * units[i].scale);
      return *bps ? 0 : -1;
    }
  return -1;
}

/* A whole unsigned number within [lo, hi]. */
static int wire_parse_uint(const char *s, unsigned long long lo, unsigned long long hi, unsigned long long *v) {
  char *end;
  *v = strtoull(s, &end, 0);
  return end != s && !*end && *v >= lo && *v <= hi ? 0 : -1;
}

static int wire_parse_option(struct wire_shape *sh, const char *key, const char *val) {
  unsigned long long v;
  char *end;
  if (!strcmp(key, "delay"))
    return wire_parse_time(val, &sh->delay_ns);
  if (!strcmp(key, "jitter"))
    return wire_parse_time(val, &sh->jitter_ns);
  if (!strcmp(key, "rate"))
    return wire_parse_rate(val, &sh->rate_bps);
  if (!strcmp(key, "loss")) {
    sh->loss = strtod(val, &end) / (*end == '%' ? 100.0 : 1.0);
    return end != val && (!*end || !strcmp(end, "%")) && sh->loss >= 0 && sh->loss <= 1 ? 0 : -1;
  }
  if (!strcmp(key, "limit") && !wire_parse_uint(val, 1, 1000000, &v))
    return sh->limit = (unsigned)v, 0;
  if (!strcmp(key, "mtu") && !wire_parse_uint(val, 68, 65535, &v))
    return sh->mtu = (unsigned)v, 0;
  if (!strcmp(key, "seed") && !wire_parse_uint(val, 0, UINT64_MAX, &v))
    return sh->seed = v, 0;
  return -1;
}

/* ------------------------------------------------------------ ports */

static int wire_port_open(struct wire_port *p, const char *name, unsigned mtu) {
  struct ifreq ifr = {.ifr_flags = IFF_TAP | IFF_NO_PI};
  if (strlen(name) >= IFNAMSIZ) {
    fprintf(stderr, "netns_wire: port name too long: %s\n", name);
    return -1;
  }
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
  p->fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (p->fd < 0 || ioctl(p->fd, TUNSETIFF, &ifr) < 0) {
    fprintf(stderr, "netns_wire: TAP device %s: %s\n", name, strerror(errno));
    return -1;
  }
  snprintf(p->name, sizeof p->name, "%s", ifr.ifr_name);
  if (mtu) {
    /* Set here rather than by the caller: the MTU survives the move into
     * another namespace, and it must match the largest frame we read. */
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifr.ifr_mtu = (int)mtu;
    if (s < 0 || ioctl(s, SIOCSIFMTU, &ifr) < 0) {
      fprintf(stderr, "netns_wire: mtu %u on %s: %s\n", mtu, name, strerror(errno));
      if (s >= 0)
        close(s);
      return -1;
    }
    close(s);
  }
  return 0;
}

static void wire_port_send(struct wire_port *p, const unsigned char *data, size_t len) {
  /* A TAP write hands the frame to the namespace's stack as if received; it
   * fails only when the device is down (not moved or configured yet). */
  if (write(p->fd, data, len) == (ssize_t)len) {
    p->tx++;
  } else {
    p->failed++;
    p->last_errno = errno;
  }
}

/* ------------------------------------------------------------ delay queue */

static uint64_t wire_due_time(struct wire *w, struct wire_queue *q, size_t len, uint64_t now) {
  const struct wire_shape *sh = &w->shape;
  uint64_t start = now, due;
  int64_t jitter = 0;
  if (sh->rate_bps) {
    /* The frame leaves after the ones already serialising on this port. */
    if (q->busy_until_ns > start)
      start = q->busy_until_ns;
    q->busy_until_ns = start + (uint64_t)((double)len * 8e9 / (double)sh->rate_bps);
    start = q->busy_until_ns;
  }
  if (sh->jitter_ns)
    jitter = (int64_t)(wire_random(w) % (2 * sh->jitter_ns + 1)) - (int64_t)sh->jitter_ns;
  due = start + sh->delay_ns;
  due = jitter < 0 && (uint64_t)-jitter > due - now ? now : due + (uint64_t)jitter;
  return due < q->last_due_ns ? q->last_due_ns : due;
}

static void wire_enqueue(struct wire *w, struct wire_port *p, const unsigned char *data, size_t len,
                         uint64_t now) {
  struct wire_queue *q = &p->queue;
  struct wire_frame *f;
  uint64_t due;
  if (w->shape.loss > 0 && wire_random_unit(w) < w->shape.loss) {
    p->lost++;
    return;
  }
  if (q->len >= w->shape.limit) {
    p->overflow++;
    return;
  }
  due = wire_due_time(w, q, len, now);
  q->last_due_ns = due;
  if (due <= now && !q->head) {
    wire_port_send(p, data, len); /* no delay configured: skip the queue */
    return;
  }
  f = malloc(sizeof *f + len);
  if (!f) {
    p->overflow++;
    return;
  }
  *f = (struct wire_frame){.due_ns = due, .len = len};
  memcpy(f->data, data, len);
  if (q->tail)
    q->tail->next = f;
  else
    q->head = f;
  q->tail = f;
  q->len++;
}

/* Sends every frame that is due; returns the earliest due time left, or
 * UINT64_MAX when every queue is empty. */
static uint64_t wire_release(struct wire *w, uint64_t now) {
  uint64_t next = UINT64_MAX;
  for (int i = 0; i < w->nports; i++) {
    struct wire_port *p = &w->ports[i];
    struct wire_queue *q = &p->queue;
    while (q->head && q->head->due_ns <= now) {
      struct wire_frame *f = q->head;
      q->head = f->next;
      if (!q->head)
        q->tail = NULL;
      q->len--;
      wire_port_send(p, f->data, f->len);
      free(f);
    }
    if (q->head && q->head->due_ns < next)
      next = q->head->due_ns;
  }
  return next;
}

/* ------------------------------------------------------------ switching */

/* Remembers which port a source address was last seen on; returns the port
 * a destination lives on, or -1 (unknown, broadcast or multicast: flood). */
static void wire_learn(struct wire *w, const unsigned char *src, int port) {
  if (src[0] & 1)
    return;
  for (int i = 0; i < w->nmacs; i++)
    if (!memcmp(w->macs[i].addr, src, 6)) {
      w->macs[i].port = port;
      return;
    }
  int slot = w->nmacs < WIRE_MAC_SLOTS ? w->nmacs++ : w->next_mac_victim++ % WIRE_MAC_SLOTS;
  memcpy(w->macs[slot].addr, src, 6);
  w->macs[slot].port = port;
}

static int wire_lookup(const struct wire *w, const unsigned char *dst) {
  if (dst[0] & 1)
    return -1;
  for (int i = 0; i < w->nmacs; i++)
    if (!memcmp(w->macs[i].addr, dst, 6))
      return w->macs[i].port;
  return -1;
}

static void wire_switch(struct wire *w, int in, const unsigned char *frame, size_t len, uint64_t now) {
  int out;
  if (len < 14)
    return;
  w->ports[in].rx++;
  wire_learn(w, frame + 6, in);
  out = wire_lookup(w, frame);
  if (out == in)
    return; /* both ends behind the same port: nothing to forward */
  if (out >= 0) {
    wire_enqueue(w, &w->ports[out], frame, len, now);
    return;
  }
  for (int i = 0; i < w->nports; i++)
    if (i != in)
      wire_enqueue(w, &w->ports[i], frame, len, now);
}

/* Returns -1 when the port is gone (its namespace was deleted, say), so
 * that the loop stops polling it instead of waking for it forever. */
static int wire_read_port(struct wire *w, int in) {
  static unsigned char buf[WIRE_MAX_FRAME];
  for (int n = 0; n < WIRE_READ_BATCH; n++) {
    ssize_t len = read(w->ports[in].fd, buf, sizeof buf);
    if (len < 0)
      return errno == EAGAIN || errno == EINTR ? 0 : -1;
    if (len == 0)
      return -1;
    wire_switch(w, in, buf, (size_t)len, wire_now_ns());
  }
  return 0;
}

/* ------------------------------------------------------------ main loop */

/* SIGTERM, SIGINT and SIGHUP stay blocked and arrive through a signalfd
 * polled with the ports: a handler run by ppoll() would never run while
 * some port is always readable (ppoll only delivers signals when it would
 * otherwise wait). The parent's death sends SIGTERM too, so a killed test
 * leaves no switch behind. Returns the signalfd, or -1. */
static int wire_signals_setup(void) {
  sigset_t set;
  pid_t parent = getppid();
  int sfd;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigprocmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0 || prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
    return -1;
  /* Frames due in 200 us must not wake 50 us late (the default slack). */
  prctl(PR_SET_TIMERSLACK, 1UL);
  return sfd;
}

static struct timespec *wire_timeout(struct timespec *ts, uint64_t next, uint64_t now) {
  uint64_t wait = next > now ? next - now : 0;
  if (next == UINT64_MAX)
    return NULL;
  *ts = (struct timespec){.tv_sec = (time_t)(wait / 1000000000u), .tv_nsec = (long)(wait % 1000000000u)};
  return ts;
}

/* The ports are pfds[0..nports-1], the signalfd is pfds[nports]. A port
 * that fails is dropped from the poll set (fd -1); with fewer than two
 * left there is nothing to switch. */
static void wire_loop(struct wire *w, int sfd) {
  struct pollfd pfds[WIRE_MAX_PORTS + 1];
  int live = w->nports;
  for (int i = 0; i < w->nports; i++)
    pfds[i] = (struct pollfd){.fd = w->ports[i].fd, .events = POLLIN};
  pfds[w->nports] = (struct pollfd){.fd = sfd, .events = POLLIN};
  while (live >= 2) {
    struct timespec ts;
    uint64_t now = wire_now_ns(), next = wire_release(w, now);
    if (ppoll(pfds, (nfds_t)w->nports + 1, wire_timeout(&ts, next, now), NULL) <= 0)
      continue; /* a frame is due: sent at the top */
    if (pfds[w->nports].revents)
      return;
    for (int i = 0; i < w->nports; i++) {
      if (!pfds[i].revents)
        continue;
      if (((pfds[i].revents & POLLIN) ? wire_read_port(w, i) : -1) < 0) {
        fprintf(stderr, "netns_wire: port %s is gone\n", w->ports[i].name);
        pfds[i].fd = -1;
        live--;
      }
    }
  }
}

static void wire_report(const struct wire *w) {
  for (int i = 0; i < w->nports; i++) {
    const struct wire_port *p = &w->ports[i];
    fprintf(stderr, "netns_wire: %s rx %lu tx %lu lost %lu queue-full %lu write-failed %lu%s%s\n", p->name,
            p->rx, p->tx, p->lost, p->overflow, p->failed, p->failed ? " last: " : "",
            p->failed ? strerror(p->last_errno) : "");
  }
}

/* Options first, wherever they stand, so that mtu= applies to every port;
 * the remaining words name the ports. */
static int wire_parse_args(struct wire *w, int argc, char **argv, const char **names) {
  int n = 0;
  for (int i = 1; i < argc; i++) {
    char *eq = strchr(argv[i], '='), key[16];
    if (!eq) {
      if (n == WIRE_MAX_PORTS) {
        fprintf(stderr, "netns_wire: at most %d ports\n", WIRE_MAX_PORTS);
        return -1;
      }
      names[n++] = argv[i];
      continue;
    }
    snprintf(key, sizeof key, "%.*s", (int)(eq - argv[i]), argv[i]);
    if (wire_parse_option(&w->shape, key, eq + 1) < 0) {
      fprintf(stderr, "netns_wire: bad option %s\n", argv[i]);
      return -1;
    }
  }
  if (n < 2)
    fprintf(stderr, "usage: netns_wire [delay=T jitter=T loss=P%% rate=R limit=N mtu=N seed=N] PORT PORT...\n");
  return n < 2 ? -1 : n;
}

static int wire_main(int argc, char **argv) {
  static struct wire w = {.shape = {.limit = 1000}};
  const char *names[WIRE_MAX_PORTS];
  int n = wire_parse_args(&w, argc, argv, names), sfd;
  if (n < 0)
    return 2;
  for (w.nports = 0; w.nports < n; w.nports++)
    if (wire_port_open(&w.ports[w.nports], names[w.nports], w.shape.mtu) < 0)
      return 1;
  w.rng = w.shape.seed ? w.shape.seed : wire_now_ns() ^ (uint64_t)getpid() << 32;
  sfd = wire_signals_setup();
  if (sfd < 0)
    return 1; /* the parent is already gone */
  printf("netns_wire: ready, %d ports\n", w.nports);
  fflush(stdout);
  wire_loop(&w, sfd);
  wire_report(&w);
  return 0;
}

/* ------------------------------------------------------------ udp-echo / udp-ping */

struct wire_probe {
  uint32_t seq;
  uint64_t sent_ns;
};

/* Large receive buffers: a probe dropped because the echo was descheduled
 * on a busy machine would be counted as the wire's loss. */
static int wire_udp_socket(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), size = 8 << 20;
  if (s < 0)
    perror("netns_wire: socket");
  else if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  return s;
}

static int wire_echo_main(int argc, char **argv) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
  int s = wire_udp_socket();
  if (argc != 3 || s < 0)
    return 2;
  addr.sin_port = htons((uint16_t)atoi(argv[2]));
  if (bind(s, (struct sockaddr *)&addr, sizeof addr) < 0) {
    perror("netns_wire: bind");
    return 1;
  }
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  for (;;) {
    unsigned char buf[2048];
    struct sockaddr_in from;
    socklen_t fromlen = sizeof from;
    ssize_t n = recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *)&from, &fromlen);
    if (n > 0)
      sendto(s, buf, (size_t)n, 0, (struct sockaddr *)&from, fromlen);
  }
}

/* Reads every echo that has arrived, waiting at most until `until`. */
static void wire_ping_collect(int s, uint64_t until, double *rtt, unsigned count, unsigned *received) {
  for (;;) {
    uint64_t now = wire_now_ns();
    struct pollfd pfd = {.fd = s, .events = POLLIN};
    struct wire_probe p;
    uint64_t wait = now >= until ? 0 : until - now;
    struct timespec ts = {.tv_sec = (time_t)(wait / 1000000000u), .tv_nsec = (long)(wait % 1000000000u)};
    if (ppoll(&pfd, 1, &ts, NULL) <= 0) {
      if (wire_now_ns() >= until)
        return;
      continue;
    }
    while (recv(s, &p, sizeof p, MSG_DONTWAIT) == (ssize_t)sizeof p)
      if (p.seq < count && rtt[p.seq] < 0) {
        rtt[p.seq] = (double)(wire_now_ns() - p.sent_ns) / 1e3;
        (*received)++;
      }
  }
}

static int wire_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void wire_ping_report(double *rtt, unsigned count, unsigned received) {
  double sum = 0, lost = count ? (double)(count - received) / count : 0;
  unsigned n = 0;
  for (unsigned i = 0; i < count; i++)
    if (rtt[i] >= 0)
      rtt[n++] = rtt[i], sum += rtt[i];
  qsort(rtt, n, sizeof *rtt, wire_cmp_double);
  /* Each probe crosses the wire twice: one-way loss p loses 1-(1-p)^2. */
  printf("sent %u received %u lost %.2f%% oneway_loss %.2f%% rtt_us min %.0f median %.0f avg %.0f max %.0f\n",
         count, received, 100 * lost, 100 * (1 - sqrt(1 - lost)), n ? rtt[0] : -1, n ? rtt[n / 2] : -1,
         n ? sum / n : -1, n ? rtt[n - 1] : -1);
}

static int wire_ping_main(int argc, char **argv) {
  struct sockaddr_in addr = {.sin_family = AF_INET};
  unsigned count = argc > 4 ? (unsigned)atoi(argv[4]) : 0, received = 0;
  uint64_t interval = argc > 5 ? (uint64_t)atoll(argv[5]) * 1000 : 1000000;
  int s = wire_udp_socket();
  double *rtt = calloc(count ? count : 1, sizeof *rtt);
  if (argc < 5 || !count || s < 0 || !rtt || inet_pton(AF_INET, argv[2], &addr.sin_addr) != 1)
    return 2;
  addr.sin_port = htons((uint16_t)atoi(argv[3]));
  if (connect(s, (struct sockaddr *)&addr, sizeof addr) < 0) {
    perror("netns_wire: connect");
    return 1;
  }
  for (unsigned i = 0; i < count; i++)
    rtt[i] = -1;
  for (unsigned i = 0; i < count; i++) {
    struct wire_probe p = {.seq = i, .sent_ns = wire_now_ns()};
    send(s, &p, sizeof p, 0);
    wire_ping_collect(s, p.sent_ns + interval, rtt, count, &received);
  }
  wire_ping_collect(s, wire_now_ns() + 1000000000u, rtt, count, &received); /* stragglers */
  wire_ping_report(rtt, count, received);
  free(rtt);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "udp-echo"))
    return wire_echo_main(argc, argv);
  if (argc > 1 && !strcmp(argv[1], "udp-ping"))
    return wire_ping_main(argc, argv);
  return wire_main(argc, argv);
}
