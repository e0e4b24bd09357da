/* Conformance sweep: real ranks over the real library, every result checked
 * element by element against an expectation computed here with plain
 * arithmetic (tests/support/conformance_ref.c).
 *
 *   conformance -t 1,2,3,4,5,8      ranks as threads, one communicator each
 *   conformance -p 2,3,4 [-e]       ranks as forked processes; the unique id
 *                                   travels through a pipe, or with -e every
 *                                   rank calls rcollCommInitFromEnv with
 *                                   RCOLL_COMM_ID=127.0.0.1:<free port>
 *   -c 100003,7                     element counts instead of the default
 *                                   {0, 1, 7, nranks-1, large}
 *   -s sweep,types,initall          the passes to run (default: all three;
 *                                   initall runs in thread mode only)
 *   -s storm -r 40                  40 fresh communicators whose first call is
 *                                   an all-to-all, so every pair of ranks
 *                                   connects at the same moment
 *   -s mix                          a seeded random sequence of MIX_CASES
 *                                   calls (any collective, type, op, root, in
 *                                   place or not, counts 0 to 100003), about
 *                                   one in six grouped with the next
 *
 * The sweep covers every collective, in place and out of place, every root,
 * with type and op rotated so that any 50 consecutive cases use all 10 x 5
 * pairs; a second pass runs every pair through allreduce, reduce and
 * reduce-scatter. The large count is 1048577 elements for every rank count:
 * the 8-rank sweep takes about 15 s on two cores, so nothing needs cutting.
 * Prints one line per failed case and ends with
 * "conformance: N passed, M failed"; exits 1 if anything failed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/conformance_case.h"
#include "support/conformance_ref.h"

#define MAX_CASES 16384
#define MAX_RANKS 64
#define MAX_COUNTS 16
#define LARGE_COUNT 1048577
#define TYPES_PASS_COUNT 65537
#define TYPES_PASS_SMALL 1031

/* Results of one communicator's run, in memory every rank can see (shared
 * with forked children in process mode). A case failed if any rank flagged it. */
typedef struct results {
  _Atomic int ncases;
  _Atomic int extra_failures; /* failures outside any case: init, crash, finalize */
  _Atomic unsigned char failed[MAX_CASES];
} results_t;

enum { PASS_SWEEP = 1, PASS_TYPES = 2, PASS_INITALL = 4, PASS_STORM = 8, PASS_MIX = 16 };
#define MIX_CASES 160

typedef struct options {
  size_t counts[MAX_COUNTS];
  int ncounts; /* 0: the default counts */
  int passes;  /* PASS_* bits */
  int repeat;  /* fresh communicators per rank count (storm pass) */
} options_t;

static options_t opt = {.passes = PASS_SWEEP | PASS_TYPES | PASS_INITALL, .repeat = 1};
static results_t *results;
static long total_passed, total_failed;

/* ------------------------------------------------------------------ cases */

static size_t default_counts(int n, size_t *out) {
  size_t want[5] = {0, 1, 7, (size_t)n - 1, LARGE_COUNT};
  size_t k = 0;
  for (int i = 0; i < 5; i++) {
    int dup = 0;
    for (size_t j = 0; j < k; j++)
      dup |= out[j] == want[i];
    if (!dup)
      out[k++] = want[i];
  }
  return k;
}

static void add_case(ccase_t *cases, size_t *k, ccase_t c) {
  if (*k >= MAX_CASES)
    return;
  c.seed = ref_hash(0x636f6e66ull + *k);
  cases[(*k)++] = c;
}

/* The rotation (k + k/12) % 5 pairs each of the 12 types with each op once
 * in any 60 consecutive cases. */
static void add_rotated(ccase_t *cases, size_t *k, int coll, size_t count, int inplace, int root) {
  rcollDataType_t t = (rcollDataType_t)(*k % rcollNumTypes);
  rcollRedOp_t op = (rcollRedOp_t)((*k + *k / rcollNumTypes) % rcollNumOps);
  add_case(cases, k, (ccase_t){coll, count, t, op, root, inplace, 0, 0});
}

/* The large count is per rank for all-to-all, gather and scatter, whose
 * vectors are n blocks: there it is cut to LARGE_COUNT / n + 1, so that
 * their vectors stay the size of the others' and the sweep of every root
 * keeps its time (n blocks of LARGE_COUNT at every root tripled it). */
static size_t sweep_count(int coll, size_t count, int n) {
  int blocks = coll == ALLTOALL || coll == GATHER || coll == SCATTER;
  return blocks && count == LARGE_COUNT ? LARGE_COUNT / (size_t)n + 1 : count;
}

static size_t build_sweep(int n, const size_t *counts, size_t ncounts, ccase_t *cases, size_t k) {
  for (size_t ci = 0; ci < ncounts; ci++)
    for (int coll = 0; coll < NCOLLS; coll++)
      for (int inplace = coll_only_inplace(coll); inplace <= coll_has_inplace(coll); inplace++)
        for (int root = 0; root < (coll_has_root(coll) ? n : 1); root++)
          add_rotated(cases, &k, coll, sweep_count(coll, counts[ci], n), inplace, root);
  return k;
}

/* Every type with every op through each reducing collective. */
static size_t build_types_pass(int n, ccase_t *cases, size_t k) {
  for (int t = 0; t < rcollNumTypes; t++)
    for (int op = 0; op < rcollNumOps; op++) {
      int j = t * rcollNumOps + op;
      add_case(cases, &k, (ccase_t){ALLREDUCE, TYPES_PASS_COUNT, t, op, 0, 0, 0, 0});
      add_case(cases, &k, (ccase_t){REDUCE, TYPES_PASS_SMALL, t, op, j % n, j % 2, 0, 0});
      add_case(cases, &k, (ccase_t){REDUCE_SCATTER, TYPES_PASS_SMALL, t, op, 0, j % 2, 0, 0});
    }
  /* Every type through the calls that only move data, in place and not. */
  for (int t = 0; t < rcollNumTypes; t++)
    for (int inplace = 0; inplace < 2; inplace++) {
      add_case(cases, &k, (ccase_t){ALLTOALL, TYPES_PASS_SMALL, t, rcollSum, 0, inplace, 0, 0});
      add_case(cases, &k, (ccase_t){GATHER, TYPES_PASS_SMALL, t, rcollSum, t % n, inplace, 0, 0});
      add_case(cases, &k, (ccase_t){SCATTER, TYPES_PASS_SMALL, t, rcollSum, (t + 1) % n, inplace, 0, 0});
      add_case(cases, &k, (ccase_t){BCAST, TYPES_PASS_SMALL, t, rcollSum, t % n, 1, 0, 0});
    }
  return k;
}

/* The cases every rank of an n-rank communicator runs, in the same order. */
static size_t build_cases(int n, ccase_t *cases) {
  size_t counts[MAX_COUNTS], ncounts = (size_t)opt.ncounts;
  if (ncounts)
    memcpy(counts, opt.counts, ncounts * sizeof counts[0]);
  else
    ncounts = default_counts(n, counts);
  size_t k = 0;
  if (opt.passes & PASS_STORM) /* first use of every connection, all at once */
    add_rotated(cases, &k, A2A_SENDRECV, 7, 0, 0);
  if (opt.passes & PASS_SWEEP)
    k = build_sweep(n, counts, ncounts, cases, k);
  if (opt.passes & PASS_TYPES)
    k = build_types_pass(n, cases, k);
  /* Calls of every kind and size after each other, some two to a group:
   * what a trainer's step does, rather than one kind at a time. */
  static const size_t mix_counts[] = {0, 1, 5, 33, 1000, 4099, 16385, 100003};
  const size_t nmix = sizeof mix_counts / sizeof mix_counts[0];
  for (int i = 0; i < MIX_CASES && (opt.passes & PASS_MIX) && k < MAX_CASES; i++)
    cases[k++] = ccase_random((uint64_t)n, i, MIX_CASES, n, mix_counts, nmix);
  return k;
}

/* ------------------------------------------------------------------ reporting */

static void report(const char *mode, int n, const ccase_t *c, int rank, const char *what) {
  char root[16] = "-";
  if (coll_has_root(c->coll))
    snprintf(root, sizeof root, "%d", c->root);
  printf("FAIL %s %s ranks=%d count=%zu type=%s op=%s root=%s inplace=%d rank=%d: %s\n", mode,
         coll_names[c->coll], n, c->count, ref_type_names[c->type],
         coll_has_op(c->coll) ? ref_op_names[c->op] : "-", root, c->inplace, rank, what);
  fflush(stdout);
}

/* Flags case i as failed; only the first rank to flag it prints. */
static void case_failed(size_t i, const char *mode, int n, const ccase_t *c, int rank,
                        const char *what) {
  if (atomic_exchange(&results->failed[i], 1) == 0)
    report(mode, n, c, rank, what);
}

static void extra_failure(const char *mode, int n, int rank, const char *what) {
  atomic_fetch_add(&results->extra_failures, 1);
  printf("FAIL %s ranks=%d rank=%d: %s\n", mode, n, rank, what);
  fflush(stdout);
}

static void results_reset(void) { memset(results, 0, sizeof *results); }

/* Adds one communicator's run to the totals. */
static void results_collect(void) {
  int nc = atomic_load(&results->ncases), bad = 0;
  for (int i = 0; i < nc; i++)
    bad += atomic_load(&results->failed[i]) != 0;
  total_passed += nc - bad;
  total_failed += bad + atomic_load(&results->extra_failures);
}

static void note_cases(size_t ncases) {
  int prev = atomic_load(&results->ncases);
  while ((size_t)prev < ncases &&
         !atomic_compare_exchange_weak(&results->ncases, &prev, (int)ncases)) {
  }
}

/* ------------------------------------------------------------------ one rank */

/* Runs every case on one rank's communicator. A call that fails leaves the
 * communicator unusable, so the rank aborts it (peers then fail fast instead
 * of waiting for the timeout) and stops. */
static void rank_sweep(rcollComm_t comm, int rank, int n, const char *mode) {
  ccase_t *cases = malloc(MAX_CASES * sizeof *cases);
  size_t ncases = cases ? build_cases(n, cases) : 0;
  note_cases(ncases);
  /* Room for the whole error: tests/rxe/guest.sh's retry of rxe's stopped
   * send queue looks for words at its end ("kick", "closed the
   * connection"), which 256 bytes cut off. */
  char what[1024];
  for (size_t i = 0; i < ncases; i++) {
    /* A grouped case and the next one are made in one group. */
    size_t m = cases[i].grouped && i + 1 < ncases ? 2 : 1;
    rank_bufs_t b[2];
    case_fault_t f;
    int ready = 1;
    for (size_t j = 0; j < m; j++)
      if (case_prepare(&cases[i + j], rank, n, &b[j]) != 0) {
        case_failed(i + j, mode, n, &cases[i + j], rank, "out of memory for the buffers");
        ready = 0;
      }
    rcollResult_t r = ready && m > 1 ? rcollGroupStart() : rcollSuccess;
    for (size_t j = 0; j < m && ready && r == rcollSuccess; j++)
      r = case_call(&cases[i + j], rank, n, &b[j], comm);
    if (ready && m > 1) {
      rcollResult_t e = rcollGroupEnd();
      r = r != rcollSuccess ? r : e;
    }
    if (r != rcollSuccess) {
      snprintf(what, sizeof what, "call%s returned %s: %s", m > 1 ? " (grouped with the next)" : "",
               rcollGetErrorString(r), rcollGetLastError(comm));
      case_failed(i, mode, n, &cases[i], rank, what);
      for (size_t j = 0; j < m; j++)
        rank_bufs_free(&b[j]);
      rcollCommAbort(comm);
      free(cases);
      return;
    }
    for (size_t j = 0; j < m && ready; j++)
      if (case_check(&cases[i + j], rank, n, &b[j], &f) != 0)
        case_failed(i + j, mode, n, &cases[i + j], rank, f.what);
    for (size_t j = 0; j < m; j++)
      rank_bufs_free(&b[j]);
    i += m - 1;
  }
  free(cases);
  rcollResult_t r = rcollCommFinalize(comm);
  if (r == rcollSuccess)
    r = rcollCommDestroy(comm);
  if (r != rcollSuccess) {
    snprintf(what, sizeof what, "finalize/destroy returned %s: %s", rcollGetErrorString(r),
             rcollGetLastError(NULL));
    extra_failure(mode, n, rank, what);
  }
}

/* ------------------------------------------------------------------ threads */

typedef struct thread_arg {
  rcollUniqueId id;
  int rank, n;
} thread_arg_t;

static void *rank_thread(void *p) {
  thread_arg_t *a = p;
  rcollComm_t comm = NULL;
  rcollResult_t r = rcollCommInitRank(&comm, a->n, a->id, a->rank);
  if (r != rcollSuccess) {
    char what[256];
    snprintf(what, sizeof what, "rcollCommInitRank returned %s: %s", rcollGetErrorString(r),
             rcollGetLastError(NULL));
    extra_failure("threads", a->n, a->rank, what);
    return NULL;
  }
  rank_sweep(comm, a->rank, a->n, "threads");
  return NULL;
}

static void run_threads(int n) {
  thread_arg_t args[MAX_RANKS];
  pthread_t th[MAX_RANKS];
  results_reset();
  rcollUniqueId id;
  rcollResult_t r = rcollGetUniqueId(&id);
  if (r != rcollSuccess) {
    extra_failure("threads", n, -1, rcollGetLastError(NULL));
    results_collect();
    return;
  }
  int started = 0;
  for (; started < n; started++) {
    args[started] = (thread_arg_t){id, started, n};
    if (pthread_create(&th[started], NULL, rank_thread, &args[started]) != 0) {
      extra_failure("threads", n, started, "pthread_create failed");
      break;
    }
  }
  for (int i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  results_collect();
}

/* ------------------------------------------------------------------ processes */

/* A port the kernel just handed out, so very likely still free. */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    close(fd);
  return port;
}

/* Joins rank `rank`: through the environment, or with the id rank 0 makes
 * and writes into the pipe once for every other rank. */
static rcollResult_t process_join(rcollComm_t *comm, int rank, int n, int use_env, int pipefd[2]) {
  if (use_env) {
    char text[16];
    snprintf(text, sizeof text, "%d", rank);
    setenv("RANK", text, 1);
    snprintf(text, sizeof text, "%d", n);
    setenv("WORLD_SIZE", text, 1);
    return rcollCommInitFromEnv(comm, NULL);
  }
  rcollUniqueId id;
  if (rank == 0) {
    rcollResult_t r = rcollGetUniqueId(&id);
    if (r != rcollSuccess)
      return r;
    for (int i = 1; i < n; i++) /* 128 bytes < PIPE_BUF: each write is atomic */
      if (write(pipefd[1], &id, sizeof id) != (ssize_t)sizeof id)
        return rcollSystemError;
  } else if (read(pipefd[0], &id, sizeof id) != (ssize_t)sizeof id) {
    return rcollSystemError;
  }
  return rcollCommInitRank(comm, n, id, rank);
}

static void process_rank(int rank, int n, int use_env, int pipefd[2]) {
  const char *mode = use_env ? "processes-env" : "processes-id";
  rcollComm_t comm = NULL;
  rcollResult_t r = process_join(&comm, rank, n, use_env, pipefd);
  close(pipefd[0]);
  close(pipefd[1]);
  if (r != rcollSuccess) {
    char what[256];
    snprintf(what, sizeof what, "joining returned %s: %s", rcollGetErrorString(r),
             rcollGetLastError(NULL));
    extra_failure(mode, n, rank, what);
    return;
  }
  rank_sweep(comm, rank, n, mode);
}

static void run_processes(int n, int use_env) {
  const char *mode = use_env ? "processes-env" : "processes-id";
  pid_t pids[MAX_RANKS];
  int pipefd[2];
  results_reset();
  if (pipe(pipefd) != 0) {
    extra_failure(mode, n, -1, "pipe failed");
    results_collect();
    return;
  }
  if (use_env) {
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", free_port());
    setenv("RCOLL_COMM_ID", addr, 1);
  }
  fflush(stdout);
  int started = 0;
  for (; started < n; started++) {
    pids[started] = fork();
    if (pids[started] == 0) {
      process_rank(started, n, use_env, pipefd);
      fflush(stdout);
      _exit(0);
    }
    if (pids[started] < 0) {
      extra_failure(mode, n, started, "fork failed");
      break;
    }
  }
  close(pipefd[0]);
  close(pipefd[1]);
  for (int i = 0; i < started; i++) {
    int status = 0;
    waitpid(pids[i], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      char what[96];
      snprintf(what, sizeof what, "process died (%s %d)",
               WIFSIGNALED(status) ? "signal" : "exit status",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      extra_failure(mode, n, i, what);
    }
  }
  if (use_env)
    unsetenv("RCOLL_COMM_ID");
  results_collect();
}

/* ------------------------------------------------------------------ InitAll */

/* One thread drives every rank of rcollCommInitAll: each case is one group
 * holding the call of every rank. */
static void run_init_all(int n) {
  rcollComm_t comms[MAX_RANKS];
  rank_bufs_t bufs[MAX_RANKS];
  ccase_t *cases = malloc(MAX_CASES * sizeof *cases);
  size_t counts[4] = {7, (size_t)n + 1, 1000, TYPES_PASS_SMALL * 3};
  results_reset();
  rcollResult_t r = cases ? rcollCommInitAll(comms, n, NULL) : rcollSystemError;
  if (r != rcollSuccess) {
    extra_failure("initall", n, -1, rcollGetLastError(NULL));
    results_collect();
    free(cases);
    return;
  }
  size_t ncases = build_sweep(n, counts, 4, cases, 0);
  note_cases(ncases);
  for (size_t i = 0; i < ncases && r == rcollSuccess; i++) {
    for (int k = 0; k < n; k++)
      if (case_prepare(&cases[i], k, n, &bufs[k]) != 0)
        case_failed(i, "initall", n, &cases[i], k, "out of memory for the buffers");
    rcollResult_t rk = rcollSuccess;
    r = rcollGroupStart();
    for (int k = 0; k < n && r == rcollSuccess && rk == rcollSuccess; k++)
      rk = case_call(&cases[i], k, n, &bufs[k], comms[k]);
    rcollResult_t re = r == rcollSuccess ? rcollGroupEnd() : r;
    r = rk != rcollSuccess ? rk : re;
    if (r != rcollSuccess) {
      char what[256];
      snprintf(what, sizeof what, "group returned %s: %s", rcollGetErrorString(r),
               rcollGetLastError(NULL));
      case_failed(i, "initall", n, &cases[i], -1, what);
    }
    for (int k = 0; k < n; k++) {
      case_fault_t f;
      if (r == rcollSuccess && case_check(&cases[i], k, n, &bufs[k], &f) != 0)
        case_failed(i, "initall", n, &cases[i], k, f.what);
      rank_bufs_free(&bufs[k]);
    }
  }
  for (int k = 0; k < n; k++)
    (r == rcollSuccess ? rcollCommDestroy : rcollCommAbort)(comms[k]);
  free(cases);
  results_collect();
}

/* ------------------------------------------------------------------ launched */

/* One rank of a job started by a launcher (mpiexec, srun, the namespace
 * harness): rank, size and rendezvous come from the environment
 * (rcollCommInitFromEnv). Each process reports its own cases. */
static void run_external(void) {
  results_reset();
  rcollComm_t comm = NULL;
  rcollResult_t r = rcollCommInitFromEnv(&comm, NULL);
  int n = 0, rank = -1;
  if (r == rcollSuccess)
    r = rcollCommCount(comm, &n);
  if (r == rcollSuccess)
    r = rcollCommUserRank(comm, &rank);
  if (r != rcollSuccess) {
    char what[256];
    snprintf(what, sizeof what, "rcollCommInitFromEnv returned %s: %s", rcollGetErrorString(r),
             rcollGetLastError(NULL));
    extra_failure("launched", n, rank, what);
  } else {
    rank_sweep(comm, rank, n, "launched");
  }
  results_collect();
}

/* ------------------------------------------------------------------ main */

static int parse_list(const char *text, size_t *out, int max) {
  int k = 0;
  for (const char *p = text; *p && k < max;) {
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p)
      return -1;
    out[k++] = (size_t)v;
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0')
      return -1;
  }
  return k;
}

static int parse_passes(const char *text) {
  static const char *const names[5] = {"sweep", "types", "initall", "storm", "mix"};
  int passes = 0;
  for (int i = 0; i < 5; i++) {
    if (strstr(text, names[i]) != NULL)
      passes |= 1 << i;
  }
  return passes;
}

static int usage(const char *argv0) {
  fprintf(stderr, "usage: %s (-t RANKS | -p RANKS [-e] | -x) [-c COUNTS] [-s sweep,types,initall,storm,mix]"
                  " [-r REPEAT] [-m]\n"
                  "  -m: buffers from rcollMemAlloc (shared blocks that peers map) instead of malloc\n"
                  "  -x: this process is one rank of a launched job (rank and rendezvous from the\n"
                  "      environment, see rcollCommInitFromEnv)\n"
                  "  RANKS, COUNTS: comma lists, e.g. -t 1,2,3,4,5,8 -c 0,1,7,1048577\n",
          argv0);
  return 2;
}

int main(int argc, char **argv) {
  size_t ranks[MAX_COUNTS];
  int nranks_list = 0, processes = 0, use_env = 0, external = 0, c;
  while ((c = getopt(argc, argv, "t:p:ec:s:r:xm")) != -1) {
    switch (c) {
    case 't': case 'p':
      processes = c == 'p';
      nranks_list = parse_list(optarg, ranks, MAX_COUNTS);
      break;
    case 'e': use_env = 1; break;
    case 'x': external = 1; break;
    case 'm': ccase_pool_buffers = 1; break;
    case 'c': opt.ncounts = parse_list(optarg, opt.counts, MAX_COUNTS); break;
    case 's': opt.passes = parse_passes(optarg); break;
    case 'r': opt.repeat = atoi(optarg); break;
    default: return usage(argv[0]);
    }
  }
  if ((nranks_list <= 0 && !external) || opt.ncounts < 0 || opt.passes == 0 || opt.repeat < 1)
    return usage(argv[0]);
  for (int i = 0; i < nranks_list; i++)
    if (ranks[i] < 1 || ranks[i] > MAX_RANKS)
      return usage(argv[0]);
  results = mmap(NULL, sizeof *results, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (results == MAP_FAILED)
    return perror("mmap"), 1;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (external)
    run_external();
  for (int i = 0; i < nranks_list; i++) {
    int n = (int)ranks[i];
    for (int k = 0; k < opt.repeat && (opt.passes & (PASS_SWEEP | PASS_TYPES | PASS_STORM | PASS_MIX)); k++) {
      if (processes)
        run_processes(n, use_env);
      else
        run_threads(n);
    }
    if (!processes && (opt.passes & PASS_INITALL))
      run_init_all(n);
  }
  printf("conformance: %ld passed, %ld failed\n", total_passed, total_failed);
  return total_failed != 0;
}
