/* Driver for tests/check_rank_death.sh: what the other ranks see when one
 * rank dies, or never comes.
 *
 *   rank_death -n 4 -d 2 -m exit    rank 2 calls _exit() in the middle of an
 *                                   all-reduce (a thread of its own ends the
 *                                   process while the call is running)
 *   rank_death -n 3 -d 1 -m kill    the parent SIGKILLs rank 1 while it is
 *                                   inside an all-reduce
 *   rank_death -n 4 -d 1 -m stop    the parent SIGSTOPs rank 1 mid-call: it
 *                                   hangs without closing anything, so only
 *                                   RCOLL_TIMEOUT can free the others
 *   rank_death -n 4 -d 3 -m nojoin  rank 3 never calls rcollCommInitRank
 *   rank_death -n 4 -d 2 -m hang    rank 2 stops calling (it sleeps in its own
 *                                   code, alive): the others time out; then
 *                                   the parent sends it SIGUSR1 (a flight-
 *                                   recorder dump) before killing it
 *   -c                              cycle through all-reduce, broadcast (root
 *                                   = call number mod n), all-gather and
 *                                   reduce-scatter instead of all-reducing
 *   -s                              all-reduce 8 bytes (the flat board) instead
 *   -w MS                           -m kill and stop: signal the victim MS ms
 *                                   after it is in its stream of calls (20)
 *
 * The ranks are forked processes joined through a unique id passed in a pipe.
 * Every survivor must get a non-success result within RCOLL_TIMEOUT plus a
 * margin, with error text that names a rank other than its own; at least one survivor (the dead
 * rank's neighbour) must name the dead rank itself; rcollCommAbort must then
 * return promptly. Prints one line per rank and "rank_death: PASS" or
 * "rank_death: FAIL"; exits 0 only on PASS. Every survivor's error must also
 * name the call it failed in and its number ("allreduce #4"). */
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rcoll.h"

#define MAX_RANKS 16
#define COUNT (4u << 20) /* 16 MB of float32: each call takes long enough to die in */
/* All-reduce elements: COUNT, or with -s 2, which meet on the flat board
 * (lib/flat.h): the victim dies between or inside calls of microseconds. */
static size_t count = COUNT;
#define MAX_CALLS 400
#define CALLS_BEFORE_DEATH 3
static int max_calls = MAX_CALLS; /* -s: calls of microseconds, enough for tens of seconds */

enum mode { MODE_EXIT, MODE_KILL, MODE_STOP, MODE_NOJOIN, MODE_HANG };

/* What each rank reports, in memory shared with the parent. */
typedef struct outcome {
  int reported;
  int result;         /* rcollResult_t of the call that failed (or of init) */
  int calls_ok;       /* calls that succeeded before it */
  int wrong_data;     /* a successful call returned a wrong sum */
  double fail_s;      /* how long the failing call took */
  double abort_s;     /* how long rcollCommAbort took */
  int abort_result;
  int later_result;   /* a call after the failure: must fail too */
  char error[400];
} outcome_t;

static outcome_t *out;
static int nranks, dead, timeout_s, cycle, delay_ms = 20;
static enum mode mode;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The id maker writes one copy of the id per other rank into the pipe. */
static rcollResult_t join(rcollComm_t *comm, int rank, int maker, int fds[2]) {
  rcollUniqueId id;
  if (rank == maker) {
    rcollResult_t r = rcollGetUniqueId(&id);
    if (r != rcollSuccess)
      return r;
    for (int i = 0; i < nranks - 1; i++)
      if (write(fds[1], &id, sizeof id) != (ssize_t)sizeof id)
        return rcollSystemError;
  } else if (read(fds[0], &id, sizeof id) != (ssize_t)sizeof id) {
    return rcollSystemError;
  }
  return rcollCommInitRank(comm, nranks, id, rank);
}

/* Call i of every rank: the same collective everywhere. With -c they cycle;
 * each rank contributes ones, so an all-reduce gives nranks everywhere. */
static rcollResult_t call(int i, const float *ones, float *buf, rcollComm_t comm) {
  size_t block = COUNT / (size_t)nranks;
  switch (cycle ? i % 4 : 0) {
  case 1: return rcollBroadcast(ones, buf, COUNT, rcollFloat32, i % nranks, comm, NULL);
  case 2: return rcollAllGather(ones, buf, block, rcollFloat32, comm, NULL);
  case 3: return rcollReduceScatter(ones, buf, block, rcollFloat32, rcollSum, comm, NULL);
  default: return rcollAllReduce(ones, buf, count, rcollFloat32, rcollSum, comm, NULL);
  }
}

static void *die_soon(void *arg) {
  (void)arg;
  struct timespec ts = {0, 20 * 1000 * 1000}; /* the call is under way by now */
  nanosleep(&ts, NULL);
  _exit(0);
  return NULL;
}

/* The victim: a few good calls, then it dies inside the next one. With
 * -m kill or stop it tells the parent (through `ready`) and keeps calling
 * until the parent's signal arrives. */
static void victim(rcollComm_t comm, const float *ones, float *buf, int ready) {
  int i = 0;
  for (; i < CALLS_BEFORE_DEATH; i++)
    call(i, ones, buf, comm);
  pthread_t th;
  if (mode == MODE_EXIT)
    pthread_create(&th, NULL, die_soon, NULL);
  else if (mode != MODE_HANG && write(ready, "k", 1) != 1)
    _exit(3);
  for (; mode == MODE_HANG;) /* alive, but no longer calling: the parent ends it */
    pause();
  for (;; i++)
    call(i, ones, buf, comm);
}

static void survivor(rcollComm_t comm, const float *ones, float *buf, outcome_t *o) {
  /* Every rank contributes ones, so each element is nranks after any call. */
  for (int i = 0; i < max_calls; i++) {
    buf[0] = buf[count - 1] = 0.0f;
    double t0 = now_s();
    rcollResult_t r = call(i, ones, buf, comm);
    o->fail_s = now_s() - t0;
    o->result = r;
    if (r != rcollSuccess) {
      snprintf(o->error, sizeof o->error, "%s", rcollGetLastError(comm));
      break;
    }
    o->calls_ok++;
    if (!cycle || i % 4 == 0)
      o->wrong_data |= buf[0] != (float)nranks || buf[count - 1] != (float)nranks;
  }
  float x = 1.0f;
  o->later_result = rcollAllReduce(&x, &x, 1, rcollFloat32, rcollSum, comm, NULL);
  double t0 = now_s();
  o->abort_result = rcollCommAbort(comm);
  o->abort_s = now_s() - t0;
}

static void rank_main(int rank, int fds[2], int ready) {
  outcome_t *o = &out[rank];
  int maker = dead == 0 ? 1 : 0; /* a rank that will be there makes the id */
  rcollComm_t comm = NULL;
  double t0 = now_s();
  rcollResult_t r = join(&comm, rank, maker, fds);
  o->fail_s = now_s() - t0;
  o->result = r;
  if (r != rcollSuccess || mode == MODE_NOJOIN) {
    snprintf(o->error, sizeof o->error, "%s", rcollGetLastError(NULL));
    o->reported = 1;
    if (rank == maker) { /* our process hosts the root: let it answer the others */
      struct timespec ts = {2, 0};
      nanosleep(&ts, NULL);
    }
    return;
  }
  float *ones = malloc(COUNT * sizeof *ones), *buf = malloc(COUNT * sizeof *buf);
  if (ones == NULL || buf == NULL)
    _exit(2);
  for (size_t i = 0; i < COUNT; i++)
    ones[i] = 1.0f;
  if (rank == dead)
    victim(comm, ones, buf, ready);
  survivor(comm, ones, buf, o);
  free(ones);
  free(buf);
  o->reported = 1;
}

/* Whether text names a rank (as "rank N" or "ranks N") other than `self`;
 * each message starts with the reporting rank's own, which does not count.
 * Sets *named_dead when one of them is the dead rank. */
static int names_other_rank(const char *text, int self, int *named_dead) {
  int found = 0;
  for (const char *p = strstr(text, "rank"); p != NULL; p = strstr(p + 4, "rank")) {
    const char *q = p + 4 + (p[4] == 's');
    char *end;
    long v = *q == ' ' ? strtol(q + 1, &end, 10) : -1;
    if (*q != ' ' || end == q + 1 || v == self)
      continue;
    found = 1;
    *named_dead |= v == dead;
  }
  return found;
}

/* Whether text names the call it failed in with its number ("allreduce #4"). */
static int names_call(const char *text) {
  regex_t re;
  if (regcomp(&re, "(allreduce|broadcast|allgather|reduce_scatter) #[0-9]+", REG_EXTENDED) != 0)
    return 0;
  int found = regexec(&re, text, 0, NULL, 0) == 0;
  regfree(&re);
  return found;
}

/* Judges one survivor; prints its line. Returns 1 if it did what it must. */
static int judge(int rank, int *named_dead) {
  const outcome_t *o = &out[rank];
  int names_rank = names_other_rank(o->error, rank, named_dead);
  if (mode != MODE_NOJOIN && !names_call(o->error)) {
    printf("  rank %d: the error names no call and number  <-- FAIL\n", rank);
    names_rank = 0;
  }
  double limit = timeout_s + 10.0;
  int ok = o->reported && o->result != rcollSuccess && o->fail_s <= limit && names_rank &&
           !o->wrong_data;
  if (mode != MODE_NOJOIN)
    ok &= o->later_result != rcollSuccess && o->abort_result == rcollSuccess && o->abort_s < 5.0;
  printf("  rank %d: %s after %d good calls; failing call %.2f s (limit %.0f s), abort %.2f s%s%s\n"
         "          error: %s\n",
         rank, o->reported ? rcollGetErrorString((rcollResult_t)o->result) : "NO REPORT (hung or died)",
         o->calls_ok, o->fail_s, limit, o->abort_s, o->wrong_data ? ", WRONG DATA" : "",
         ok ? "" : "  <-- FAIL", o->error);
  return ok;
}

static int parse_args(int argc, char **argv) {
  int c;
  nranks = 4;
  dead = 2;
  while ((c = getopt(argc, argv, "n:d:m:csw:")) != -1) {
    if (c == 'n')
      nranks = atoi(optarg);
    else if (c == 'd')
      dead = atoi(optarg);
    else if (c == 'm' && strcmp(optarg, "exit") == 0)
      mode = MODE_EXIT;
    else if (c == 'm' && strcmp(optarg, "kill") == 0)
      mode = MODE_KILL;
    else if (c == 'm' && strcmp(optarg, "stop") == 0)
      mode = MODE_STOP;
    else if (c == 'm' && strcmp(optarg, "nojoin") == 0)
      mode = MODE_NOJOIN;
    else if (c == 'm' && strcmp(optarg, "hang") == 0)
      mode = MODE_HANG;
    else if (c == 'c')
      cycle = 1;
    else if (c == 's')
      count = 2, max_calls = 1 << 30;
    else if (c == 'w')
      delay_ms = atoi(optarg);
    else
      return -1;
  }
  const char *t = getenv("RCOLL_TIMEOUT");
  timeout_s = t ? atoi(t) : 300;
  return nranks >= 2 && nranks <= MAX_RANKS && dead >= 0 && dead < nranks ? 0 : -1;
}

/* Signals the victim once it is inside its stream of calls (-m kill, stop). */
static void signal_victim(pid_t victim_pid, int ready, int sig) {
  char k;
  if (read(ready, &k, 1) == 1) {
    struct timespec ts = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  kill(victim_pid, sig);
}

int main(int argc, char **argv) {
  if (parse_args(argc, argv) != 0) {
    fprintf(stderr, "usage: %s -n NRANKS -d DEAD_RANK -m exit|kill|stop|nojoin|hang [-c] [-w MS]\n",
            argv[0]);
    return 2;
  }
  out = mmap(NULL, MAX_RANKS * sizeof *out, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int fds[2], ready[2];
  if (out == MAP_FAILED || pipe(fds) != 0 || pipe(ready) != 0)
    return perror("setup"), 1;
  fflush(stdout);
  pid_t pids[MAX_RANKS] = {0};
  for (int r = 0; r < nranks; r++) {
    if (mode == MODE_NOJOIN && r == dead)
      continue; /* this rank never exists */
    pids[r] = fork();
    if (pids[r] == 0) {
      close(ready[0]);
      rank_main(r, fds, ready[1]);
      _exit(0);
    }
  }
  close(ready[1]);
  if (mode == MODE_KILL || mode == MODE_STOP)
    signal_victim(pids[dead], ready[0], mode == MODE_KILL ? SIGKILL : SIGSTOP);
  for (int r = 0; r < nranks; r++)
    if (pids[r] > 0 && r != dead)
      waitpid(pids[r], NULL, 0);
  if (pids[dead] > 0 && mode == MODE_HANG) { /* alive: its flight recorder can still dump */
    kill(pids[dead], SIGUSR1);
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
  }
  if (pids[dead] > 0) { /* a stopped victim is still there: end it now */
    kill(pids[dead], SIGKILL);
    waitpid(pids[dead], NULL, 0);
  }
  static const char *const names[] = {"exit", "kill", "stop", "nojoin", "hang"};
  static const char *const what[] = {"calls _exit() mid-call", "is SIGKILLed mid-call",
                                     "is SIGSTOPped mid-call", "never joins",
                                     "stops calling (alive)"};
  printf("rank_death: %d ranks, rank %d %s, RCOLL_TIMEOUT=%d\n", nranks, dead, what[mode],
         timeout_s);
  int ok = 1, named_dead = 0;
  for (int r = 0; r < nranks; r++)
    if (r != dead)
      ok &= judge(r, &named_dead);
  if (!named_dead)
    printf("  no survivor's error names rank %d  <-- FAIL\n", dead);
  ok &= named_dead;
  printf("rank_death (%s): %s\n", names[mode], ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
