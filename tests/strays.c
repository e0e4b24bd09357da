/* Driver for tests/check_strays.sh: a rank that pauses between init and its
 * first collective, and the strays that crowd its listeners meanwhile.
 *
 *   strays rank
 *       joins through the environment (RANK, WORLD_SIZE, RCOLL_COMM_ID),
 *       prints "init ok in N ms" (after STRAYS_INITS - 1 communicators came
 *       and went, when set), waits until the file $STRAYS_GO exists
 *       (the window in which the script crowds the transport listeners, which
 *       serve their first peers only at the first collective), then runs an
 *       all-reduce, checks the sums and prints "allreduce ok in N ms".
 *   strays knock HOST:PORT IDLE GARBAGE HALF FLOOD HOLD_S
 *       opens IDLE silent connections, GARBAGE that send 128 bytes of junk,
 *       HALF that send 5 bytes and stop, then FLOOD silent ones; prints each
 *       one's local address ("stray 127.0.0.1:PORT"), then "knocked N", and
 *       holds them open for HOLD_S seconds.
 *
 * Exits 0 on success; on failure prints what went wrong and exits 1. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rcoll.h"

#define COUNT 4096

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int fail(const char *what, rcollComm_t comm, rcollResult_t r) {
  printf("%s FAILED: %s: %s\n", what, rcollGetErrorString(r), rcollGetLastError(comm));
  return 1;
}

/* Waits up to a minute for the script's go-ahead. */
static int wait_go(void) {
  const char *go = getenv("STRAYS_GO");
  struct stat st;
  for (long end = now_ms() + 60000; go != NULL && now_ms() < end; usleep(20 * 1000))
    if (stat(go, &st) == 0)
      return 0;
  printf("no go-ahead: set STRAYS_GO to a file the script creates\n");
  return 1;
}

static int run_rank(void) {
  rcollComm_t comm = NULL;
  int rank = 0, nranks = 0;
  long t0 = now_ms();
  /* STRAYS_INITS=N: N - 1 communicators come and go first (the warnings of
   * init must not repeat per communicator). */
  const char *inits = getenv("STRAYS_INITS");
  for (int k = 1; inits != NULL && k < atoi(inits); k++) {
    rcollResult_t r = rcollCommInitFromEnv(&comm, NULL);
    if (r != rcollSuccess)
      return fail("init", NULL, r);
    rcollCommDestroy(comm);
  }
  rcollResult_t r = rcollCommInitFromEnv(&comm, NULL);
  if (r != rcollSuccess)
    return fail("init", NULL, r);
  rcollCommUserRank(comm, &rank);
  rcollCommCount(comm, &nranks);
  printf("init ok in %ld ms\n", now_ms() - t0);
  fflush(stdout);
  if (wait_go() != 0)
    return 1;
  float *buf = malloc(COUNT * sizeof(float));
  for (int i = 0; i < COUNT; i++)
    buf[i] = (float)(rank + 1) * (float)(i % 7);
  t0 = now_ms();
  r = rcollAllReduce(buf, buf, COUNT, rcollFloat32, rcollSum, comm, NULL);
  if (r != rcollSuccess)
    return fail("allreduce", comm, r);
  int wrong = 0;
  float ranksum = (float)nranks * (float)(nranks + 1) / 2;
  for (int i = 0; i < COUNT; i++)
    wrong += buf[i] != ranksum * (float)(i % 7);
  free(buf);
  if (wrong) {
    printf("allreduce FAILED: %d wrong sums\n", wrong);
    return 1;
  }
  printf("allreduce ok in %ld ms\n", now_ms() - t0);
  return rcollCommDestroy(comm) == rcollSuccess ? 0 : fail("destroy", NULL, rcollSystemError);
}

/* Opens one stray that sends `len` bytes of junk; -1 when connect fails. */
static int knock_one(const struct sockaddr_in *at, size_t len) {
  char junk[128];
  struct sockaddr_in me;
  socklen_t mlen = sizeof me;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (const struct sockaddr *)at, sizeof *at) != 0)
    return -1;
  memset(junk, 0xa5, sizeof junk);
  if (len > 0 && send(fd, junk, len, MSG_NOSIGNAL) != (ssize_t)len)
    return -1;
  getsockname(fd, (struct sockaddr *)&me, &mlen);
  printf("stray %s:%d\n", inet_ntoa(me.sin_addr), ntohs(me.sin_port));
  return fd;
}

static int run_knock(int argc, char **argv) {
  struct sockaddr_in at = {.sin_family = AF_INET};
  char host[64];
  int port = 0, counts[4], hold, n = 0;
  if (argc != 8 || sscanf(argv[2], "%63[^:]:%d", host, &port) != 2 ||
      inet_pton(AF_INET, host, &at.sin_addr) != 1) {
    printf("usage: strays knock IPV4:PORT IDLE GARBAGE HALF FLOOD HOLD_S\n");
    return 1;
  }
  at.sin_port = htons((uint16_t)port);
  for (int k = 0; k < 4; k++)
    counts[k] = atoi(argv[3 + k]);
  hold = atoi(argv[7]);
  const size_t sizes[4] = {0, 128, 5, 0};
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < counts[k]; i++, n++)
      if (knock_one(&at, sizes[k]) < 0) {
        printf("knock FAILED: stray %d could not connect to %s\n", n, argv[2]);
        return 1;
      }
  printf("knocked %d\n", n);
  fflush(stdout);
  sleep((unsigned)hold);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc >= 2 && strcmp(argv[1], "rank") == 0)
    return run_rank();
  if (argc >= 2 && strcmp(argv[1], "knock") == 0)
    return run_knock(argc, argv);
  printf("usage: strays rank | strays knock IPV4:PORT IDLE GARBAGE HALF FLOOD HOLD_S\n");
  return 1;
}
