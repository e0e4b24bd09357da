/* The TCP options the socket transport sets, each checked on the sockets
 * themselves and with data still arriving whole: congestion control, send
 * buffers, and delayed ACKs on the receiving control socket. Loopback, one
 * process (socket_pair.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../transports/socket/socket_priv.h"
#include "error.h"
#include "support/socket_pair.h"

/* The congestion control of the sockets a connection opens: every socket of
 * the sending side takes RCOLL_SOCKET_CONGESTION, and the data still arrives
 * whole; a name the kernel lacks fails init naming it and what is allowed. */
static void congestion_of(int fd, char name[SOCKET_CC_MAX]) {
  socklen_t len = SOCKET_CC_MAX;
  memset(name, 0, SOCKET_CC_MAX);
  cr_assert_eq(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len), 0, "%s", strerror(errno));
}

/* One this process may set that new sockets do not already get, so that the
 * setting visibly changes something; NULL when the kernel offers none. */
static const char *congestion_not_default(void) {
  static char names[256];
  char dflt[SOCKET_CC_MAX];
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  congestion_of(fd, dflt);
  FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_congestion_control", "r");
  const char *pick = NULL;
  if (f != NULL && fgets(names, sizeof names, f) != NULL)
    for (char *save = NULL, *n = strtok_r(names, " \n", &save); n && !pick; n = strtok_r(NULL, " \n", &save))
      if (strcmp(n, dflt) != 0 && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, n, (socklen_t)strlen(n)) == 0)
        pick = n;
  if (f != NULL)
    fclose(f);
  close(fd);
  return pick;
}

Test(socket, congestion_control_is_applied_and_checked, .timeout = 60) {
  const char *cc = congestion_not_default();
  if (cc == NULL)
    cr_skip_test("the kernel offers no congestion control but its default");
  pair_t p;
  memset(&p, 0, sizeof p);
  socket_pair_settings(&p.set, "AF_INET", 2, 2, INLINE, 30);
  snprintf(socket_settings(&p.set)->socket_congestion, RCOLL_SETTING_STR_MAX, "%s", cc);
  p.sctx = th_ctx_new(ops, &p.set, SECRET);
  th_pair_listen(&p, ops);
  th_pair_connect(&p, 5000, 0, cc);
  const socket_conn_t *c = p.send;
  char name[SOCKET_CC_MAX];
  congestion_of(c->ctrl_fd, name);
  cr_assert_str_eq(name, cc, "control socket");
  for (int s = 0; s < c->ndata; s++) {
    congestion_of(c->data[s].fd, name);
    cr_assert_str_eq(name, cc, "data socket %d", s);
  }
  const size_t sizes[] = {1, INLINE + 1, 3 * MIB + 5};
  socket_pair_exchange(&p, 3, sizes, 0);
  th_pair_close(&p);

  rcoll_settings_t s;
  rcoll_net_config_t cfg = {.settings = &s, .secret = 1};
  void *ctx = NULL;
  socket_pair_settings(&s, "AF_INET", 2, 1, INLINE, 30);
  snprintf(socket_settings(&s)->socket_congestion, RCOLL_SETTING_STR_MAX, "nosuchcc");
  cr_assert_eq(ops->init(&cfg, &ctx), rcollInvalidArgument);
  cr_assert_null(ctx);
  cr_assert(strstr(rcoll_error_text(), "RCOLL_SOCKET_CONGESTION=nosuchcc") &&
                strstr(rcoll_error_text(), "allowed here: "),
            "text: %s", rcoll_error_text());
  snprintf(socket_settings(&s)->socket_congestion, RCOLL_SETTING_STR_MAX, "%s", "a_name_of_sixteen");
  cr_assert_eq(ops->init(&cfg, &ctx), rcollInvalidArgument);
  cr_assert(strstr(rcoll_error_text(), "longer than 15"), "text: %s", rcoll_error_text());
}

/* RCOLL_SOCKET_SNDBUF: every data socket of the sending side gets it (the
 * kernel reports twice the figure), the control socket room for one inline
 * message; 0 leaves the kernel's autotuning (out of range: bad_settings_are_rejected). */
static int sndbuf_of(int fd) {
  int v = 0;
  socklen_t len = sizeof v;
  cr_assert_eq(getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &len), 0, "%s", strerror(errno));
  return v;
}

Test(socket, send_buffer_is_applied_and_checked, .timeout = 60) {
  for (int want = 0; want <= 131072; want += 131072) {
    pair_t p;
    memset(&p, 0, sizeof p);
    socket_pair_settings(&p.set, "AF_INET", 2, 2, 100000, 30);
    socket_settings(&p.set)->socket_sndbuf = want;
    p.sctx = th_ctx_new(ops, &p.set, SECRET);
    th_pair_listen(&p, ops);
    th_pair_connect(&p, 5000, 0, "sndbuf");
    const socket_conn_t *c = p.send;
    if (want == 0) {
      cr_assert_neq(sndbuf_of(c->ctrl_fd), 2 * 100000, "autotuned control socket");
      for (int s = 0; s < c->ndata; s++)
        cr_assert_neq(sndbuf_of(c->data[s].fd), 2 * 131072, "autotuned data socket %d", s);
    } else {
      cr_assert_eq(sndbuf_of(c->ctrl_fd), 2 * 100000, "control socket: one inline message");
      for (int s = 0; s < c->ndata; s++)
        cr_assert_eq(sndbuf_of(c->data[s].fd), 2 * want, "data socket %d", s);
    }
    const size_t sizes[] = {1, 100001, 3 * MIB + 5};
    socket_pair_exchange(&p, 3, sizes, 0);
    th_pair_close(&p);
  }
}

/* Whether the receiving control socket is in the kernel's delayed-ACK
 * ("pingpong") mode: TCP_QUICKACK reads 0 there. */
static int acks_delayed(int fd) {
  int v = -1;
  socklen_t len = sizeof v;
  cr_assert_eq(getsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &v, &len), 0, "%s", strerror(errno));
  return v == 0;
}

/* Segments the sender has not seen acknowledged. */
static unsigned unacked_of(int fd) {
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  cr_assert_eq(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len), 0, "%s", strerror(errno));
  return ti.tcpi_unacked;
}

/* One small message, sent and received whole. */
static void small_message(pair_t *p, int i) {
  char sb[8], rb[8] = "", *rbp = rb;
  size_t cap = sizeof rb, got = 0;
  void *sreq, *rreq;
  int tag = 0;
  memset(sb, 'm', sizeof sb);
  memcpy(sb, &i, sizeof i);
  cr_assert_eq(ops->isend(p->send, sb, sizeof sb, 0, NULL, &sreq), rcollSuccess);
  cr_assert_eq(ops->irecv(p->recv, 1, (void **)&rbp, &cap, &tag, NULL, &rreq), rcollSuccess);
  cr_assert_eq(th_wait_req(ops, sreq, NULL, 5000), rcollSuccess);
  cr_assert_eq(th_wait_req(ops, rreq, &got, 5000), rcollSuccess);
  cr_assert_eq(got, sizeof sb);
  cr_assert_arr_eq(rb, sb, sizeof sb, "message %d", i);
}

/* The receiving side delays ACKs of small messages (socket_delay_acks): a
 * message read leaves the sender's segment unacknowledged about every
 * other time (over loopback an ACK sent by the read is processed before
 * the read returns), where the kernel's default ACKs each at once: 0 of 41.
 * After an idle spell that made the kernel leave that mode, the next read
 * sets it again. */
Test(socket, small_messages_do_not_each_get_an_ack, .timeout = 30) {
  pair_t p;
  socket_pair_open(&p, "AF_INET", 1, 1, INLINE, 30);
  const socket_conn_t *s = p.send, *r = p.recv;
  int left_unacked = 0;
  for (int i = 0; i < 41; i++) {
    small_message(&p, i);
    left_unacked += unacked_of(s->ctrl_fd) > 0;
  }
  cr_assert(acks_delayed(r->ctrl_fd), "the receiving control socket is not in delayed-ACK mode");
  cr_assert_geq(left_unacked, 10, "only %d of 41 reads left the message unacknowledged", left_unacked);
  /* With one ACK pending, its timer (at most 200 ms) sends it and takes the
   * socket out of the mode. */
  int i = 41;
  while (unacked_of(s->ctrl_fd) == 0 && i < 45)
    small_message(&p, i++);
  cr_assert_gt(unacked_of(s->ctrl_fd), 0, "every read was acknowledged at once");
  usleep(500 * 1000);
  cr_assert_not(acks_delayed(r->ctrl_fd), "the kernel kept delayed-ACK mode after an idle spell");
  small_message(&p, i);
  cr_assert(acks_delayed(r->ctrl_fd), "delayed-ACK mode was not set again after a pause");
  th_pair_close(&p);
}
