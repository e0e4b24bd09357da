/* Lab exercise 05's experiment: ranks as forked processes run all-reduces
 * until one of them is killed (SIGKILL) or frozen (SIGSTOP) mid-call; each
 * survivor's failed call goes to the student's handler
 * (docs/lab/05-rank-death/survivor.c):
 *
 *   int lab_on_failure(rcollComm_t comm, int self, rcollResult_t result,
 *                      char *report, size_t len);
 *
 * which returns the rank it suspects (read from the library's error text),
 * writes a one-line report and aborts the communicator.
 *
 *   lab_rank_death -n 3 -d 1 -m kill
 *   lab_rank_death -n 4 -d 2 -m stop     (only RCOLL_TIMEOUT frees the others)
 *
 * Judges each survivor: its call failed within RCOLL_TIMEOUT plus a margin
 * (a hang is caught by the script's `timeout`, never graded on speed); the
 * rank it returned is another rank that the error text names ("rank N");
 * its report names that rank. At least one survivor must suspect the rank
 * that died. Prints one line per rank and "lab_rank_death: PASS|FAIL". */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rcoll.h"

#define MAX_RANKS 8
#define COUNT (1u << 20)
#define MAX_CALLS 2000

int lab_on_failure(rcollComm_t comm, int self, rcollResult_t result, char *report, size_t len);

typedef struct outcome {
  int reported, result, suspect, calls_ok;
  double fail_s;
  char error[400], report[400];
} outcome_t;

static outcome_t *out;
static int nranks = 3, dead = 1, stop_mode;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void rank_main(int rank, int ids[2], int ready) {
  outcome_t *o = &out[rank];
  rcollUniqueId id;
  rcollComm_t comm;
  if (rank == 0) {
    if (rcollGetUniqueId(&id) != rcollSuccess)
      _exit(2);
    for (int i = 1; i < nranks; i++)
      if (write(ids[1], &id, sizeof id) != (ssize_t)sizeof id)
        _exit(2);
  } else if (read(ids[0], &id, sizeof id) != (ssize_t)sizeof id) {
    _exit(2);
  }
  if (rcollCommInitRank(&comm, nranks, id, rank) != rcollSuccess)
    _exit(3);
  float *buf = calloc(COUNT, sizeof *buf);
  if (buf == NULL)
    _exit(2);
  for (int i = 0; i < MAX_CALLS; i++) {
    if (rank == dead && i == 3 && write(ready, "k", 1) != 1) /* under way: the parent strikes */
      _exit(2);
    double t0 = now_s();
    rcollResult_t r = rcollAllReduce(buf, buf, COUNT, rcollFloat32, rcollSum, comm, NULL);
    if (r != rcollSuccess) {
      o->fail_s = now_s() - t0;
      o->result = r;
      snprintf(o->error, sizeof o->error, "%s", rcollGetLastError(comm));
      o->suspect = lab_on_failure(comm, rank, r, o->report, sizeof o->report);
      o->report[sizeof o->report - 1] = '\0';
      o->reported = 1;
      _exit(0);
    }
    o->calls_ok++;
  }
  o->reported = 1; /* never failed */
  o->suspect = -2;
  rcollCommDestroy(comm);
  _exit(0);
}

/* Whether text has "rank N" or "ranks N" for this N. */
static int names(const char *text, int n) {
  for (const char *p = strstr(text, "rank"); p != NULL; p = strstr(p + 4, "rank")) {
    const char *q = p + 4 + (p[4] == 's');
    char *end;
    if (*q == ' ' && strtol(q + 1, &end, 10) == n && end != q + 1)
      return 1;
  }
  return 0;
}

static int judge(int rank, int limit, int *found_dead) {
  const outcome_t *o = &out[rank];
  const char *why = NULL;
  if (!o->reported)
    why = "no report: the rank hung or crashed";
  else if (o->suspect == -2)
    why = "every call succeeded: the failure was never seen";
  else if (o->fail_s > limit)
    why = "the failing call took longer than RCOLL_TIMEOUT plus the margin";
  else if (o->suspect < 0 || o->suspect >= nranks || o->suspect == rank)
    why = "lab_on_failure returned no other rank";
  else if (!names(o->error, o->suspect))
    why = "the error text does not name the rank lab_on_failure returned";
  else if (!names(o->report, o->suspect))
    why = "the report does not name the suspected rank as \"rank N\"";
  *found_dead |= o->reported && o->suspect == dead;
  printf("  rank %d: %s after %d good calls, failing call %.1f s; suspects rank %d%s%s\n"
         "          error:  %s\n          report: %s\n",
         rank, o->reported ? rcollGetErrorString((rcollResult_t)o->result) : "-", o->calls_ok, o->fail_s,
         o->suspect, why ? "  <-- FAIL: " : "", why ? why : "", o->error, o->report);
  return why == NULL;
}

int main(int argc, char **argv) {
  int c;
  while ((c = getopt(argc, argv, "n:d:m:")) != -1) {
    if (c == 'n')
      nranks = atoi(optarg);
    else if (c == 'd')
      dead = atoi(optarg);
    else if (c == 'm')
      stop_mode = strcmp(optarg, "stop") == 0;
  }
  if (nranks < 2 || nranks > MAX_RANKS || dead < 0 || dead >= nranks) {
    fprintf(stderr, "usage: lab_rank_death -n 2..%d -d rank -m kill|stop\n", MAX_RANKS);
    return 2;
  }
  const char *t = getenv("RCOLL_TIMEOUT");
  int limit = (t ? atoi(t) : 30) + 20;
  out = mmap(NULL, sizeof *out * MAX_RANKS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int ids[2], ready[2];
  if (out == MAP_FAILED || pipe(ids) != 0 || pipe(ready) != 0)
    return 2;
  memset(out, 0, sizeof *out * MAX_RANKS);
  pid_t pid[MAX_RANKS];
  for (int r = 0; r < nranks; r++)
    if ((pid[r] = fork()) == 0)
      rank_main(r, ids, ready[1]);
  char k;
  if (read(ready[0], &k, 1) == 1) {
    struct timespec ts = {0, 20 * 1000 * 1000}; /* inside the call by now */
    nanosleep(&ts, NULL);
    kill(pid[dead], stop_mode ? SIGSTOP : SIGKILL);
    printf("  killed rank %d with %s inside an all-reduce\n", dead, stop_mode ? "SIGSTOP (it hangs)" : "SIGKILL");
  }
  for (int r = 0; r < nranks; r++)
    if (r != dead)
      waitpid(pid[r], NULL, 0);
  kill(pid[dead], SIGKILL);
  waitpid(pid[dead], NULL, 0);
  int ok = 1, found_dead = 0;
  for (int r = 0; r < nranks; r++)
    if (r != dead)
      ok &= judge(r, limit, &found_dead);
  if (!found_dead)
    printf("  no survivor suspected rank %d, the one that died  <-- FAIL\n", dead);
  ok &= found_dead;
  printf("lab_rank_death: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
