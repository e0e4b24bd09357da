/* Who the ranks are, and the few collectives the driver itself needs (a
 * barrier, combining times and error counts, listing the ranks).
 *
 * Three launch modes, as cluster operators use nccl-tests:
 * - threads: -t N ranks in this process sharing one rcollUniqueId;
 * - MPI (built with -DRCOLL_HAVE_MPI, run under mpiexec with more than one
 *   process): rank 0 makes the id and MPI_Bcast's it; each process runs -t
 *   ranks. MPI only carries the id and the timings, never benchmark data;
 * - environment (RANK/WORLD_SIZE, PMI_RANK/PMI_SIZE, OMPI_COMM_WORLD_*):
 *   rcollCommInitFromEnv, and the timings travel over rcoll itself.
 *
 * Local threads meet under one mutex; local thread 0, which is the main
 * thread (MPI_THREAD_FUNNELED suffices), talks to the other processes. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef RCOLL_HAVE_MPI
#include <mpi.h>
#endif

#include "common_impl.h"

#ifdef RCOLL_HAVE_MPI
/* Completes a nonblocking MPI call, yielding between tests. MPICH's blocking
 * collectives poll without yielding: where ranks outnumber cores, a rank
 * that waits in one runs whole scheduler slices, and the kernel then holds
 * its core-mate back for about as long (EEVDF runs only tasks that have not
 * had more than their share). The first timed calls after the bench's
 * barrier took 0.2-2 ms where the rest took 3 us (4 ranks on 2 cores, 64 B,
 * -I 1), adding up to 2.5 us to a 2000-call mean; with this wait, 3-7 us. */
static void mpi_wait(MPI_Request *rq) {
  int done = 0;
  for (;;) {
    MPI_Test(rq, &done, MPI_STATUS_IGNORE);
    if (done)
      return;
    sched_yield();
  }
}
#endif

static int env_int(const char *name) {
  const char *s = getenv(name);
  return s && *s ? atoi(s) : -1;
}

/* World size announced by a launcher in the environment, or -1. */
static int env_world_size(void) {
  static const char *names[] = {"WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (env_int(names[i]) > 0)
      return env_int(names[i]);
  return -1;
}

static int env_rank(void) {
  static const char *names[] = {"RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (env_int(names[i]) >= 0)
      return env_int(names[i]);
  return -1;
}

#ifdef RCOLL_HAVE_MPI
/* Returns 1 when this is a multi-process MPI run (the id is then shared). */
static int world_init_mpi(bench_world_t *w, int *argc, char ***argv) {
  int provided, size, rank;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (size <= 1)
    return 0;
  w->launch = BENCH_LAUNCH_MPI;
  w->nprocs = size;
  w->proc = rank;
  if (rank == 0) {
    rcollResult_t r = rcollGetUniqueId(&w->id);
    if (r != rcollSuccess)
      bench_fail(w, 0, NULL, "rcollGetUniqueId", r);
  }
  MPI_Bcast(&w->id, (int)sizeof(w->id), MPI_BYTE, 0, MPI_COMM_WORLD);
  return 1;
}
#endif

int bench_world_init(bench_world_t *w, int *argc, char ***argv, int nthreads) {
  memset(w, 0, sizeof(*w));
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  w->nthreads = nthreads;
  w->nprocs = 1;
  w->lines = calloc((size_t)nthreads, sizeof(*w->lines));
  if (!w->lines)
    return -1;
#ifdef RCOLL_HAVE_MPI
  if (world_init_mpi(w, argc, argv)) {
    w->nranks = w->nprocs * nthreads;
    return 0;
  }
#else
  (void)argc;
  (void)argv;
#endif
  if (env_world_size() > 1) {
    if (nthreads > 1) {
      fprintf(stderr, "-t %d cannot be combined with a launch from the environment "
                      "(WORLD_SIZE/PMI_SIZE): each process is one rank\n", nthreads);
      return -1;
    }
    w->launch = BENCH_LAUNCH_ENV; /* proc, nprocs and nranks come with the communicator */
    w->nprocs = w->nranks = env_world_size();
    w->proc = env_rank();
    return 0;
  }
  w->launch = BENCH_LAUNCH_THREADS;
  w->nranks = nthreads;
  rcollResult_t r = rcollGetUniqueId(&w->id);
  if (r != rcollSuccess)
    bench_fail(w, 0, NULL, "rcollGetUniqueId", r);
  return 0;
}

int bench_world_comm_init(bench_world_t *w, int thread, rcollComm_t *comm) {
  rcollResult_t r;
  if (w->launch != BENCH_LAUNCH_ENV) {
    int rank = w->proc * w->nthreads + thread;
    r = rcollCommInitRank(comm, w->nranks, w->id, rank);
    if (r != rcollSuccess)
      bench_fail(w, rank, NULL, "rcollCommInitRank", r);
    return rank;
  }
  r = rcollCommInitFromEnv(comm, NULL);
  if (r != rcollSuccess)
    bench_fail(w, env_rank(), NULL, "rcollCommInitFromEnv", r);
  int rank, nranks;
  if ((r = rcollCommUserRank(*comm, &rank)) != rcollSuccess)
    bench_fail(w, env_rank(), *comm, "rcollCommUserRank", r);
  if ((r = rcollCommCount(*comm, &nranks)) != rcollSuccess)
    bench_fail(w, rank, *comm, "rcollCommCount", r);
  w->proc = rank;
  w->nprocs = w->nranks = nranks;
  w->env_comm = *comm;
  return rank;
}

void bench_world_finalize(bench_world_t *w) {
#ifdef RCOLL_HAVE_MPI
  MPI_Finalize();
#endif
  free(w->lines);
  free(w->vec);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
}

void bench_world_abort(bench_world_t *w, int status) {
  fflush(stdout);
  fflush(stderr);
#ifdef RCOLL_HAVE_MPI
  if (w->launch == BENCH_LAUNCH_MPI)
    MPI_Abort(MPI_COMM_WORLD, status);
#else
  (void)w;
#endif
  /* Other ranks' threads may be inside the library: leave without running
   * exit handlers under them. */
  _exit(status);
}

void bench_fail(bench_world_t *w, int rank, rcollComm_t comm, const char *fn, rcollResult_t r) {
  fflush(stdout);
  fprintf(stderr, "rank %d: %s failed: %s : %s\n", rank, fn, rcollGetErrorString(r),
          rcollGetLastError(comm));
  if (comm)
    rcollCommAbort(comm);
  bench_world_abort(w, BENCH_EXIT_ERROR);
}

/* ---- process-level steps, run by local thread 0 ---- */

static double proc_reduce(bench_world_t *w, double v, int how) {
  if (w->nprocs == 1)
    return v;
#ifdef RCOLL_HAVE_MPI
  if (w->launch == BENCH_LAUNCH_MPI) {
    MPI_Request rq;
    if (how == BENCH_RED_RANK0) {
      MPI_Ibcast(&v, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD, &rq);
      mpi_wait(&rq);
      return v;
    }
    MPI_Op op = how == BENCH_RED_MIN ? MPI_MIN : how == BENCH_RED_MAX ? MPI_MAX : MPI_SUM;
    MPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, op, MPI_COMM_WORLD, &rq);
    mpi_wait(&rq);
    return v;
  }
#endif
  rcollResult_t r;
  if (how == BENCH_RED_RANK0) {
    r = rcollBroadcast(&v, &v, 1, rcollFloat64, 0, w->env_comm, NULL);
    if (r != rcollSuccess)
      bench_fail(w, w->proc, w->env_comm, "rcollBroadcast", r);
    return v;
  }
  rcollRedOp_t op = how == BENCH_RED_MIN ? rcollMin : how == BENCH_RED_MAX ? rcollMax : rcollSum;
  r = rcollAllReduce(&v, &v, 1, rcollFloat64, op, w->env_comm, NULL);
  if (r != rcollSuccess)
    bench_fail(w, w->proc, w->env_comm, "rcollAllReduce", r);
  return v;
}

/* Collects every local thread's line, then every process's, into out. */
static void proc_gather_lines(bench_world_t *w, char *out) {
  size_t local = (size_t)w->nthreads * BENCH_LINE_MAX;
  if (w->nprocs == 1) {
    memcpy(out, w->lines, local);
    return;
  }
#ifdef RCOLL_HAVE_MPI
  if (w->launch == BENCH_LAUNCH_MPI) {
    MPI_Request rq;
    MPI_Igather(w->lines, (int)local, MPI_CHAR, out, (int)local, MPI_CHAR, 0, MPI_COMM_WORLD, &rq);
    mpi_wait(&rq);
    return;
  }
#endif
  rcollResult_t r = rcollAllGather(w->lines, out, BENCH_LINE_MAX, rcollInt8, w->env_comm, NULL);
  if (r != rcollSuccess)
    bench_fail(w, w->proc, w->env_comm, "rcollAllGather", r);
}

/* Gathers n doubles from every process into out (nprocs x n, process
 * order) on process 0; the environment launch has only an all-gather. */
static void proc_gather_doubles(bench_world_t *w, const double *v, int n, double *out) {
  if (w->nprocs == 1) {
    if (out)
      memcpy(out, v, (size_t)n * sizeof(double));
    return;
  }
#ifdef RCOLL_HAVE_MPI
  if (w->launch == BENCH_LAUNCH_MPI) {
    MPI_Request rq;
    MPI_Igather(v, n, MPI_DOUBLE, out, n, MPI_DOUBLE, 0, MPI_COMM_WORLD, &rq);
    mpi_wait(&rq);
    return;
  }
#endif
  double *all = out ? out : malloc((size_t)w->nprocs * (size_t)n * sizeof(double));
  if (!all)
    bench_fail(w, w->proc, w->env_comm, "malloc", rcollSystemError);
  rcollResult_t r = rcollAllGather(v, all, (size_t)n, rcollFloat64, w->env_comm, NULL);
  if (r != rcollSuccess)
    bench_fail(w, w->proc, w->env_comm, "rcollAllGather", r);
  if (all != out)
    free(all);
}

/* ---- local meeting ---- */

typedef struct bench_meet {
  int how;
  double v;
  const char *line; /* when set: a gather of lines into out */
  char *out;
  const double *vec; /* when set: the max over local threads of n doubles, */
  int n;             /* gathered per process into vec_out */
  double *vec_out;
} bench_meet_t;

/* Folds one thread's vector into the process's (max), under w->mu. */
static void fold_vec(bench_world_t *w, const bench_meet_t *m) {
  if (w->arrived == 0) {
    if ((size_t)m->n > w->vec_cap) {
      double *p = realloc(w->vec, (size_t)m->n * sizeof(double));
      if (!p)
        bench_fail(w, w->proc, NULL, "realloc", rcollSystemError);
      w->vec = p;
      w->vec_cap = (size_t)m->n;
    }
    memcpy(w->vec, m->vec, (size_t)m->n * sizeof(double));
    return;
  }
  for (int i = 0; i < m->n; i++)
    w->vec[i] = m->vec[i] > w->vec[i] ? m->vec[i] : w->vec[i];
}

static double combine(int how, double acc, double v, int thread) {
  switch (how) {
  case BENCH_RED_RANK0: return thread == 0 ? v : acc;
  case BENCH_RED_MIN: return v < acc ? v : acc;
  case BENCH_RED_MAX: return v > acc ? v : acc;
  default: return acc + v;
  }
}

/* Every local thread arrives; the last arrival wakes thread 0, which does the
 * process-level step and opens the next generation. */
static double meet(bench_world_t *w, int thread, const bench_meet_t *m) {
  pthread_mutex_lock(&w->mu);
  unsigned gen = w->generation;
  w->acc = w->arrived == 0 ? m->v : combine(m->how, w->acc, m->v, thread);
  if (m->line)
    snprintf(w->lines[thread], BENCH_LINE_MAX, "%s", m->line);
  if (m->vec)
    fold_vec(w, m);
  w->arrived++;
  if (thread == 0) {
    while (w->arrived < w->nthreads)
      pthread_cond_wait(&w->cv, &w->mu);
    if (m->line) {
      proc_gather_lines(w, m->out);
    } else if (m->vec) {
      proc_gather_doubles(w, w->vec, m->n, m->vec_out);
    } else {
      double r = proc_reduce(w, w->acc, m->how);
      w->result = m->how == BENCH_RED_MEAN ? r / w->nranks : r;
    }
    w->arrived = 0;
    w->generation++;
    pthread_cond_broadcast(&w->cv);
  } else {
    if (w->arrived == w->nthreads)
      pthread_cond_broadcast(&w->cv);
    while (w->generation == gen)
      pthread_cond_wait(&w->cv, &w->mu);
  }
  double result = w->result;
  pthread_mutex_unlock(&w->mu);
  return result;
}

double bench_world_reduce(bench_world_t *w, int thread, double v, int how) {
  bench_meet_t m = {.how = how, .v = v};
  return meet(w, thread, &m);
}

void bench_world_barrier(bench_world_t *w, int thread) {
  bench_world_reduce(w, thread, 0, BENCH_RED_SUM);
}

void bench_world_gather_lines(bench_world_t *w, int thread, const char *line, char *out) {
  bench_meet_t m = {.how = BENCH_RED_SUM, .line = line, .out = out};
  meet(w, thread, &m);
}

void bench_world_gather_iters(bench_world_t *w, int thread, const double *times, int n,
                              double *rows) {
  bench_meet_t m = {.how = BENCH_RED_SUM, .vec = times, .n = n, .vec_out = rows};
  meet(w, thread, &m);
}
