/* Driver for tests/check_lifetimes.sh: many communicator lifetimes in a row
 * must leave nothing behind.
 *
 *   lifetimes -m threads -c 200     one process: rcollCommInitAll(2), one
 *                                   small all-reduce (a group driven by this
 *                                   thread), rcollCommDestroy, c times
 *   lifetimes -m procs -c 200       two forked processes, one rank each: a
 *                                   fresh unique id from rank 0 (over a
 *                                   socketpair), rcollCommInitRank, the
 *                                   all-reduce, rcollCommDestroy, c times
 *   -w 20                           warm-up cycles before the baseline
 *
 * The transport is whatever RCOLL_NET says (the script runs socket, shm and
 * ucx). Each process counts, after the warm-up and again at the end, its
 * open file descriptors (/proc/self/fd), threads (/proc/self/task), mappings
 * (/proc/self/maps: all of them, and those of files in the shared-memory
 * directories, which is where a leaked shm ring or UCX segment shows) and
 * VmRSS; the segments left in RCOLL_SHM_DIR are counted after the ranks are
 * done. Descriptors, threads, shm mappings and segments must come back to
 * the baseline exactly; mappings may grow by LIFETIMES_MAPS_SLACK (default
 * 16: malloc's own) and VmRSS by a fixed LIFETIMES_RSS_SLACK_KB (default
 * 8192), never by something proportional to the cycles. Threads and
 * descriptors may take a moment to go (a detached bootstrap thread ends on
 * its own): the end counts are retaken for up to 10 s until they settle.
 * Prints the before and after numbers, then "lifetimes: PASS" or
 * "lifetimes: FAIL ..."; exits 0 only on PASS. Under AddressSanitizer the
 * VmRSS figure means nothing (its quarantine keeps freed memory: +12 MB in
 * 30 cycles); under ThreadSanitizer it grows by ~2-3 MB in 30 cycles. An fd
 * leaked per destroy (dup(2) injected into comm_free) fails it: "40 file
 * descriptors left open" after 20 cycles of 2 ranks. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rcoll.h"

#define COUNT 1024
#define SETTLE_MS 10000

typedef struct counts {
  long fds, threads, maps, shm_maps, rss_kb;
} counts_t;

/* What each rank process reports to the parent (shared memory). */
typedef struct report {
  int done, ok;
  counts_t before, after;
  char why[512];
} report_t;

static const char *shm_dir(void) {
  const char *d = getenv("RCOLL_SHM_DIR");
  return d != NULL && d[0] != '\0' ? d : "/dev/shm";
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long count_dir(const char *path, const char *prefix) {
  DIR *d = opendir(path);
  long n = 0;
  if (d == NULL)
    return -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.' && (prefix == NULL || strncmp(e->d_name, prefix, strlen(prefix)) == 0))
      n++;
  closedir(d);
  return n - (prefix == NULL && strcmp(path, "/proc/self/fd") == 0); /* opendir's own */
}

static void count_maps(counts_t *c) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[1024];
  c->maps = c->shm_maps = 0;
  if (f == NULL)
    return;
  while (fgets(line, sizeof line, f) != NULL) {
    c->maps++;
    if (strstr(line, " /dev/shm/") != NULL || strstr(line, shm_dir()) != NULL)
      c->shm_maps++;
  }
  fclose(f);
}

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
      break;
  fclose(f);
  return kb;
}

static counts_t take_counts(void) {
  counts_t c;
  c.fds = count_dir("/proc/self/fd", NULL);
  c.threads = count_dir("/proc/self/task", NULL);
  count_maps(&c);
  c.rss_kb = rss_kb();
  return c;
}

static long env_long(const char *name, long dflt) {
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0' ? strtol(v, NULL, 10) : dflt;
}

/* The end counts once threads and descriptors have had time to go. */
static counts_t settled_counts(const counts_t *before) {
  counts_t c = take_counts();
  for (int ms = 0; ms < SETTLE_MS && (c.fds > before->fds || c.threads > before->threads ||
                                      c.shm_maps > before->shm_maps); ms += 50) {
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
    c = take_counts();
  }
  return c;
}

/* Empty string when after is within the limits of before; else why not. */
static void judge(const counts_t *b, const counts_t *a, char *why, size_t len) {
  long maps_slack = env_long("LIFETIMES_MAPS_SLACK", 16);
  long rss_slack = env_long("LIFETIMES_RSS_SLACK_KB", 8192);
  why[0] = '\0';
  if (a->fds > b->fds)
    snprintf(why + strlen(why), len - strlen(why), " %ld file descriptors left open;", a->fds - b->fds);
  if (a->threads > b->threads)
    snprintf(why + strlen(why), len - strlen(why), " %ld threads left running;", a->threads - b->threads);
  if (a->shm_maps > b->shm_maps)
    snprintf(why + strlen(why), len - strlen(why), " %ld shared-memory mappings left;",
             a->shm_maps - b->shm_maps);
  if (a->maps > b->maps + maps_slack)
    snprintf(why + strlen(why), len - strlen(why), " mappings grew by %ld (slack %ld);", a->maps - b->maps,
             maps_slack);
  if (a->rss_kb > b->rss_kb + rss_slack)
    snprintf(why + strlen(why), len - strlen(why), " VmRSS grew by %ld kB (slack %ld kB);",
             a->rss_kb - b->rss_kb, rss_slack);
}

static void print_counts(const char *who, const counts_t *b, const counts_t *a) {
  printf("lifetimes: %s: fds %ld -> %ld, threads %ld -> %ld, mappings %ld -> %ld (shm %ld -> %ld), "
         "VmRSS %ld -> %ld kB (%+ld)\n",
         who, b->fds, a->fds, b->threads, a->threads, b->maps, a->maps, b->shm_maps, a->shm_maps, b->rss_kb,
         a->rss_kb, a->rss_kb - b->rss_kb);
}

/* Every rank contributes rank + 1 + cycle; the sum is checked everywhere. */
static void fill(float *buf, int rank, int cycle) {
  for (int i = 0; i < COUNT; i++)
    buf[i] = (float)(rank + 1 + cycle % 100 + i % 7);
}

static int check_sum(const float *buf, int nranks, int cycle, char *why, size_t len) {
  for (int i = 0; i < COUNT; i++) {
    float want = (float)(nranks * (nranks + 1) / 2 + nranks * (cycle % 100 + i % 7));
    if (buf[i] != want) {
      snprintf(why, len, "cycle %d: element %d is %g, expected %g", cycle, i, buf[i], want);
      return 0;
    }
  }
  return 1;
}

/* ---- threads: two ranks in this process ---- */

static int thread_cycle(int cycle, char *why, size_t len) {
  rcollComm_t comms[2];
  static float buf[2][COUNT];
  rcollResult_t r = rcollCommInitAll(comms, 2, NULL);
  if (r != rcollSuccess) {
    snprintf(why, len, "cycle %d: rcollCommInitAll: %s", cycle, rcollGetLastError(NULL));
    return 0;
  }
  for (int k = 0; k < 2; k++)
    fill(buf[k], k, cycle);
  r = rcollGroupStart();
  for (int k = 0; k < 2 && r == rcollSuccess; k++)
    r = rcollAllReduce(buf[k], buf[k], COUNT, rcollFloat32, rcollSum, comms[k], NULL);
  rcollResult_t g = rcollGroupEnd();
  int ok = r == rcollSuccess && g == rcollSuccess;
  if (!ok)
    snprintf(why, len, "cycle %d: all-reduce: %s", cycle, rcollGetLastError(comms[0]));
  for (int k = 0; k < 2 && ok; k++)
    ok = check_sum(buf[k], 2, cycle, why, len);
  for (int k = 0; k < 2; k++)
    if (rcollCommDestroy(comms[k]) != rcollSuccess && ok) {
      snprintf(why, len, "cycle %d: rcollCommDestroy: %s", cycle, rcollGetLastError(NULL));
      ok = 0;
    }
  return ok;
}

static int run_threads(int cycles, int warmup) {
  char why[512] = "";
  counts_t before = {0}, after;
  double t0 = now_s();
  for (int i = 0; i < warmup + cycles; i++) {
    if (i == warmup) {
      before = take_counts();
      t0 = now_s();
    }
    if (!thread_cycle(i, why, sizeof why)) {
      printf("lifetimes: FAIL: %s\n", why);
      return 1;
    }
  }
  double secs = now_s() - t0;
  after = settled_counts(&before);
  long segs = count_dir(shm_dir(), "rcoll-shm-");
  printf("lifetimes: threads: %d cycles in %.1f s (%.1f ms each)\n", cycles, secs, 1e3 * secs / cycles);
  print_counts("process", &before, &after);
  printf("lifetimes: segments left in %s: %ld\n", shm_dir(), segs);
  judge(&before, &after, why, sizeof why);
  if (segs > 0)
    snprintf(why + strlen(why), sizeof why - strlen(why), " %ld rcoll-shm segments left in %s;", segs,
             shm_dir());
  if (why[0] != '\0') {
    printf("lifetimes: FAIL:%s\n", why);
    return 1;
  }
  printf("lifetimes: PASS\n");
  return 0;
}

/* ---- processes: one rank each ---- */

static int full_io(int fd, void *p, size_t n, int writing) {
  char *b = p;
  while (n > 0) {
    ssize_t k = writing ? write(fd, b, n) : read(fd, b, n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return 0;
    b += k;
    n -= (size_t)k;
  }
  return 1;
}

static int proc_cycle(int rank, int fd, int cycle, char *why, size_t len) {
  static float buf[COUNT];
  rcollUniqueId id;
  rcollComm_t comm;
  if (rank == 0 && rcollGetUniqueId(&id) != rcollSuccess) {
    snprintf(why, len, "cycle %d: rcollGetUniqueId: %s", cycle, rcollGetLastError(NULL));
    return 0;
  }
  if (!full_io(fd, &id, sizeof id, rank == 0)) {
    snprintf(why, len, "cycle %d: the other rank's process went away (socketpair closed)", cycle);
    return 0;
  }
  if (rcollCommInitRank(&comm, 2, id, rank) != rcollSuccess) {
    snprintf(why, len, "cycle %d: rcollCommInitRank: %s", cycle, rcollGetLastError(NULL));
    return 0;
  }
  fill(buf, rank, cycle);
  int ok = rcollAllReduce(buf, buf, COUNT, rcollFloat32, rcollSum, comm, NULL) == rcollSuccess;
  if (!ok)
    snprintf(why, len, "cycle %d: all-reduce: %s", cycle, rcollGetLastError(comm));
  ok = ok && check_sum(buf, 2, cycle, why, len);
  if (rcollCommDestroy(comm) != rcollSuccess && ok) {
    snprintf(why, len, "cycle %d: rcollCommDestroy: %s", cycle, rcollGetLastError(NULL));
    ok = 0;
  }
  return ok;
}

static void rank_main(int rank, int fd, int cycles, int warmup, report_t *rep) {
  for (int i = 0; i < warmup + cycles; i++) {
    if (i == warmup)
      rep->before = take_counts();
    if (!proc_cycle(rank, fd, i, rep->why, sizeof rep->why)) {
      rep->done = 1;
      return;
    }
  }
  rep->after = settled_counts(&rep->before);
  judge(&rep->before, &rep->after, rep->why, sizeof rep->why);
  rep->ok = rep->why[0] == '\0';
  rep->done = 1;
}

/* Waits for both ranks for up to limit_s; kills them past it. */
static int wait_ranks(const pid_t *pid, double limit_s) {
  int left = 2, ok = 1;
  double end = now_s() + limit_s;
  while (left > 0) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      left--;
      ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
      continue;
    }
    if (now_s() > end) {
      printf("lifetimes: FAIL: the ranks did not finish within %.0f s; killing them\n", limit_s);
      for (int k = 0; k < 2; k++)
        kill(pid[k], SIGKILL);
      while (wait(NULL) > 0) {
      }
      return 0;
    }
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return ok;
}

static int run_procs(int cycles, int warmup) {
  int sv[2];
  pid_t pid[2];
  report_t *rep = mmap(NULL, 2 * sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (rep == MAP_FAILED || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    printf("lifetimes: FAIL: setting up: %s\n", strerror(errno));
    return 1;
  }
  memset(rep, 0, 2 * sizeof *rep);
  fflush(stdout);
  double t0 = now_s();
  for (int k = 0; k < 2; k++) {
    pid[k] = fork();
    if (pid[k] == 0) {
      close(sv[1 - k]);
      rank_main(k, sv[k], cycles, warmup, &rep[k]);
      _exit(rep[k].ok ? 0 : 1);
    }
  }
  close(sv[0]);
  close(sv[1]);
  int ok = wait_ranks(pid, 60.0 + 2.0 * (cycles + warmup));
  double secs = now_s() - t0;
  long segs = count_dir(shm_dir(), "rcoll-shm-");
  printf("lifetimes: processes: %d cycles (+%d warm-up) in %.1f s\n", cycles, warmup, secs);
  for (int k = 0; k < 2; k++) {
    char who[32];
    snprintf(who, sizeof who, "rank %d", k);
    if (rep[k].done && rep[k].ok)
      print_counts(who, &rep[k].before, &rep[k].after);
    else
      printf("lifetimes: %s: %s\n", who, rep[k].done ? rep[k].why : "did not finish");
    ok = ok && rep[k].ok;
  }
  printf("lifetimes: segments left in %s: %ld\n", shm_dir(), segs);
  if (segs > 0)
    ok = 0;
  printf("lifetimes: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  int cycles = 200, warmup = 20, procs = 0, opt;
  while ((opt = getopt(argc, argv, "m:c:w:")) != -1) {
    if (opt == 'm' && (strcmp(optarg, "threads") == 0 || strcmp(optarg, "procs") == 0))
      procs = strcmp(optarg, "procs") == 0;
    else if (opt == 'c' && atoi(optarg) > 0)
      cycles = atoi(optarg);
    else if (opt == 'w' && atoi(optarg) >= 0)
      warmup = atoi(optarg);
    else {
      fprintf(stderr, "usage: %s -m threads|procs [-c cycles > 0] [-w warm-up cycles >= 0]\n", argv[0]);
      return 2;
    }
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  return procs ? run_procs(cycles, warmup) : run_threads(cycles, warmup);
}
