/* Lab exercise 06's transport checks: the student's ops table lab_pipe_ops
 * (docs/lab/06-pipe-transport/pipe_transport.c) driven directly, as the
 * core drives a transport (lib/net.h's contract), before the conformance
 * program runs collectives over it:
 *   1. the table: size, version, name, description, no NULL slot;
 *   2. listen / connect / accept, which never block;
 *   3. messages of 0, 1, 7, 200000 (more than a pipe holds) and 1000
 *      bytes, in order, into receives posted larger, with the sizes reported;
 *   4. a connection that presents another communicator's secret is dropped;
 *   5. a message larger than its receive is an error, not a crash.
 * Prints one PASS or FAIL line per check; exits 1 when any failed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "net.h"

extern const rcoll_transport_ops_t lab_pipe_ops;
static const rcoll_transport_ops_t *ops = &lab_pipe_ops;
static int failed;

static void verdict(int ok, const char *what) {
  printf("  %s  %s\n", ok ? "PASS" : "FAIL", what);
  failed |= !ok;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *why(rcollResult_t r) {
  static char buf[300];
  snprintf(buf, sizeof buf, "%s: %s", rcollGetErrorString(r), rcollGetLastError(NULL));
  return buf;
}

/* Connects ctx b to a's listener and accepts it, within 10 s. */
static int pair(void *b, void *listen, const void *handle, void **send, void **recv) {
  *send = *recv = NULL;
  for (double end = now_s() + 10; (*send == NULL || *recv == NULL) && now_s() < end;) {
    rcollResult_t r;
    if (*send == NULL && (r = ops->connect(b, 0, handle, send)) != rcollSuccess)
      return printf("        connect failed: %s\n", why(r)), -1;
    if (*recv == NULL && (r = ops->accept(listen, recv)) != rcollSuccess)
      return printf("        accept failed: %s\n", why(r)), -1;
  }
  if (*send == NULL || *recv == NULL)
    printf("        after 10 s: connect gave %s, accept gave %s\n", *send ? "a connection" : "none",
           *recv ? "a connection" : "none");
  return *send != NULL && *recv != NULL ? 0 : -1;
}

#define NMSG 5
static const size_t sizes[NMSG] = {0, 1, 7, 200000, 1000};

/* Sends NMSG messages and receives them, testing both sides in turn. */
static int exchange(void *send, void *recv) {
  char *out[NMSG], *in[NMSG];
  void *sreq[NMSG] = {0}, *rreq[NMSG] = {0};
  int sdone[NMSG] = {0}, rdone[NMSG] = {0}, ok = 1, posted_s = 0, posted_r = 0;
  size_t got[NMSG] = {0};
  for (int i = 0; i < NMSG; i++) {
    out[i] = malloc(sizes[i] + 1), in[i] = calloc(1, sizes[i] + 16);
    for (size_t k = 0; k < sizes[i]; k++)
      out[i][k] = (char)(k * 7 + (size_t)i);
  }
  double end = now_s() + 20;
  int all = 0;
  while (!all && now_s() < end && ok) {
    /* Post what has a slot (a NULL request means: try again later). */
    while (posted_s < NMSG && ok) {
      rcollResult_t r = ops->isend(send, out[posted_s], sizes[posted_s], 0, NULL, &sreq[posted_s]);
      if (r != rcollSuccess)
        ok = 0, printf("        isend %d failed: %s\n", posted_s, why(r));
      if (sreq[posted_s] == NULL)
        break;
      posted_s++;
    }
    while (posted_r < NMSG && ok) {
      void *data = in[posted_r];
      size_t room = sizes[posted_r] + 16;
      int tag = 0;
      rcollResult_t r = ops->irecv(recv, 1, &data, &room, &tag, NULL, &rreq[posted_r]);
      if (r != rcollSuccess)
        ok = 0, printf("        irecv %d failed: %s\n", posted_r, why(r));
      if (rreq[posted_r] == NULL)
        break;
      posted_r++;
    }
    all = posted_s == NMSG && posted_r == NMSG;
    for (int i = 0; i < NMSG && ok; i++) {
      rcollResult_t r = rcollSuccess;
      if (i < posted_s && !sdone[i])
        r = ops->test(sreq[i], &sdone[i], NULL);
      if (r == rcollSuccess && i < posted_r && !rdone[i])
        r = ops->test(rreq[i], &rdone[i], &got[i]);
      if (r != rcollSuccess)
        ok = 0, printf("        test of message %d failed: %s\n", i, why(r));
      all &= sdone[i] && rdone[i];
    }
  }
  if (ok && !all)
    ok = 0, printf("        after 20 s, %d of %d sends and %d receives were posted, not all done "
                   "(does test() move bytes?)\n", posted_s, NMSG, posted_r);
  for (int i = 0; i < NMSG && ok; i++) {
    if (got[i] != sizes[i])
      ok = 0, printf("        message %d: %zu bytes sent, test() reported %zu received\n", i, sizes[i], got[i]);
    else if (memcmp(in[i], out[i], sizes[i]) != 0)
      ok = 0, printf("        message %d (%zu bytes): the bytes received differ from those sent\n", i, sizes[i]);
  }
  for (int i = 0; i < NMSG; i++)
    free(out[i]), free(in[i]);
  return ok;
}

/* A message larger than its receive must be an error from test(). */
static int too_large(void *send, void *recv) {
  static char out[100], in[10];
  void *sreq = NULL, *rreq = NULL, *data = in;
  size_t room = sizeof in;
  int tag = 0, sdone = 0, rdone = 0;
  if (ops->isend(send, out, sizeof out, 0, NULL, &sreq) != rcollSuccess || sreq == NULL ||
      ops->irecv(recv, 1, &data, &room, &tag, NULL, &rreq) != rcollSuccess || rreq == NULL)
    return printf("        could not post the send and the receive\n"), 0;
  for (double end = now_s() + 10; now_s() < end;) {
    if (!sdone && ops->test(sreq, &sdone, NULL) != rcollSuccess)
      return printf("        (the send failed: fine too)\n"), 1;
    if (ops->test(rreq, &rdone, NULL) != rcollSuccess)
      return printf("        error, as it should be: %s\n", rcollGetLastError(NULL)), 1;
    if (rdone)
      return printf("        the receive of 10 bytes finished without an error\n"), 0;
  }
  return printf("        after 10 s the receive neither failed nor finished\n"), 0;
}

int main(void) {
  rcollResult_t r = rcoll_net_check_ops(ops);
  if (r != rcollSuccess)
    printf("        %s\n", rcollGetLastError(NULL));
  verdict(r == rcollSuccess, "the ops table is one the library accepts (rcoll_net_check_ops)");
  if (r != rcollSuccess)
    return 1;
  rcoll_net_config_t cfg = {.settings = NULL, .secret = 0x5eC12e7, .rank = 0}, other = cfg;
  other.secret = 0xbad;
  void *a = NULL, *b = NULL, *c = NULL, *listen = NULL, *send = NULL, *recv = NULL;
  char handle[RCOLL_NET_HANDLE_BYTES];
  if ((r = ops->init(&cfg, &a)) != rcollSuccess || (r = ops->init(&cfg, &b)) != rcollSuccess ||
      (r = ops->init(&other, &c)) != rcollSuccess || (r = ops->listen(a, 0, handle, &listen)) != rcollSuccess) {
    printf("        %s\n", why(r));
    verdict(0, "init and listen");
    return 1;
  }
  int paired = pair(b, listen, handle, &send, &recv) == 0;
  verdict(paired, "connect and accept make a connection, without blocking");
  if (paired) {
    verdict(exchange(send, recv), "messages of 0, 1, 7, 200000 and 1000 bytes arrive whole and in order");
    /* Another communicator's connection: its connect may succeed, but
     * accept must never return it. */
    void *stray = NULL, *got = NULL;
    int dropped = 1;
    for (double end = now_s() + 0.5; now_s() < end && dropped;) {
      if (stray == NULL && ops->connect(c, 0, handle, &stray) != rcollSuccess)
        break;
      if (ops->accept(listen, &got) != rcollSuccess || got != NULL)
        dropped = 0;
    }
    verdict(dropped, "accept drops a connection that presents another secret");
    if (stray != NULL)
      ops->close_send(stray);
    if (got != NULL)
      ops->close_recv(got);
    verdict(too_large(send, recv), "a message larger than its receive is an error");
  }
  if (send != NULL)
    ops->close_send(send);
  if (recv != NULL)
    ops->close_recv(recv);
  ops->close_listen(listen);
  ops->finalize(a), ops->finalize(b), ops->finalize(c);
  return failed;
}
