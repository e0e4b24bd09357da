/* Writing the flight recorder out (flight_recorder.h): the text format, the
 * destination (RCOLL_FR_DUMP_FILE or the log), and SIGUSR1.
 *
 * SIGUSR1: a signal handler may only make async-signal-safe calls, and a
 * dump formats text, takes locks and opens files, any of which could
 * deadlock if the signal lands while the interrupted thread holds the same
 * lock (malloc's, stdio's, the log's). So the handler only writes one byte
 * to a pipe; a thread of ours, blocked reading that pipe, does the dump.
 * That thread also works when every other thread is stuck (in the engine or
 * in the application), which is when an operator sends the signal. The
 * handler is installed only where the signal still has its default action,
 * so an application's own handler is never replaced (MPICH's MPI_Init takes
 * SIGUSR1: RCOLL_FR_SIGNAL=SIGUSR2 then). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "call.h"
#include "clock.h"
#include "comm.h"
#include "flight_recorder.h"
#include "log.h"
#include "reduce.h"

#define RELAXED memory_order_relaxed
#define GET(field) atomic_load_explicit(&(field), RELAXED)

static pthread_mutex_t fr_lock = PTHREAD_MUTEX_INITIALIZER; /* the list, and one dump at a time */
static rcoll_fr_t *fr_list;
static int fr_pipe[2] = {-1, -1};
static int fr_signo;          /* RCOLL_FR_SIGNAL of the first communicator */
static const char *fr_signame;

static const char *const state_names[] = {"empty", "posted", "running", "done", "failed", "discarded",
                                          "device"};

/* RCOLL_FR_DUMP_FILE with %r (rank), %h (host), %p (pid) replaced. */
static int fr_path(const rcoll_fr_t *fr, char *out, size_t len) {
  char pattern[1024];
  size_t n = 0;
  for (const char *p = fr->comm->settings.fr_dump_file; *p != '\0' && n + 16 < sizeof pattern; p++) {
    if (p[0] == '%' && p[1] == 'r')
      n += (size_t)snprintf(pattern + n, sizeof pattern - n, "%d", fr->comm->rank), p++;
    else
      pattern[n++] = *p;
  }
  pattern[n] = '\0';
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  return rcoll_log_expand_path(pattern, host, (int)getpid(), out, len);
}

static void fr_emit(FILE *f, const char *line) {
  if (f != NULL)
    fprintf(f, "%s\n", line);
  else
    rcoll_log_note("%s", line);
}

/* One entry's line; 0 when the slot is empty or was reused while read. */
static int fr_entry_line(const rcoll_fr_t *fr, const rcoll_fr_entry_t *e, char *buf, size_t len) {
  uint64_t id = GET(e->id);
  int state = GET(e->state);
  if (id == 0 || state <= RCOLL_FR_EMPTY || state > RCOLL_FR_DEVICE)
    return 0;
  rcoll_fp_t fp = {.seq = GET(e->seq), .count = GET(e->count), .kind = (uint8_t)GET(e->kind),
                   .dtype = (uint8_t)GET(e->dtype), .op = GET(e->op), .root = GET(e->root)};
  const char *algo = GET(e->algo);
  if (algo != NULL && !rcoll_coll_is_p2p(fp.kind))
    memcpy(fp.algo, algo, strnlen(algo, sizeof fp.algo));
  char wait[64] = "-", desc[160];
  int peer = GET(e->wait_peer);
  if (peer >= 0 && (state == RCOLL_FR_RUNNING || state == RCOLL_FR_FAILED))
    snprintf(wait, sizeof wait, "%s:%d:%d/%d", GET(e->wait_sending) ? "send" : "recv", peer,
             GET(e->msgs_done), GET(e->msgs));
  int64_t start = GET(e->start_us), end = GET(e->end_us);
  int steps = GET(e->steps), done = GET(e->steps_done), result = GET(e->result);
  if (GET(e->id) != id)
    return 0;
  snprintf(buf, len,
           "rcoll-fr comm=%016llx rank=%d id=%llu state=%s kind=%s seq=%llu count=%llu type=%s "
           "op=%d root=%d algo=%s start_us=%lld end_us=%lld steps=%d/%d wait=%s result=%d call=%s",
           (unsigned long long)fr->comm->id_hash, fr->comm->rank, (unsigned long long)id,
           state_names[state], rcoll_coll_name(fp.kind), (unsigned long long)fp.seq,
           (unsigned long long)fp.count, rcoll_type_name((rcollDataType_t)fp.dtype), fp.op, fp.root,
           fp.algo[0] ? algo : "-", (long long)start, (long long)end, done, steps, wait, result,
           rcoll_fp_describe(&fp, fr->comm->rank, desc, sizeof desc));
  return 1;
}

static void fr_dump_locked(rcoll_fr_t *fr, const char *reason) {
  struct rcollComm *c = fr->comm;
  FILE *f = NULL;
  char path[4096], line[1024];
  if (c->settings.fr_dump_file[0] != '\0') {
    if (fr_path(fr, path, sizeof path) == 0)
      f = fopen(path, "ae");
    if (f == NULL)
      RCOLL_WARN("rank %d: RCOLL_FR_DUMP_FILE=%s: cannot open it (%s); the flight recorder goes "
                 "to the log", c->rank, c->settings.fr_dump_file, strerror(errno));
  }
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  uint64_t next = atomic_load_explicit(&fr->next_id, RELAXED);
  snprintf(line, sizeof line,
           "rcoll-fr-dump comm=%016llx rank=%d nranks=%d host=%s pid=%d reason=%s mono_us=%lld "
           "wall_us=%lld entries=%llu calls=%llu", (unsigned long long)c->id_hash, c->rank,
           c->nranks, fr->host, (int)getpid(), reason, (long long)rcoll_now_us(),
           (long long)wall.tv_sec * 1000000 + wall.tv_nsec / 1000, (unsigned long long)fr->n,
           (unsigned long long)(next - 1));
  fr_emit(f, line);
  uint64_t first = next > fr->n ? next - fr->n : 1;
  for (uint64_t id = first; id < next; id++)
    if (fr_entry_line(fr, rcoll_fr_slot(fr, id), line, sizeof line))
      fr_emit(f, line);
  snprintf(line, sizeof line, "rcoll-fr-end comm=%016llx rank=%d", (unsigned long long)c->id_hash,
           c->rank);
  fr_emit(f, line);
  if (f != NULL)
    fclose(f);
}

void rcoll_fr_dump(struct rcollComm *c, const char *reason) {
  if (c->fr == NULL)
    return;
  pthread_mutex_lock(&fr_lock);
  fr_dump_locked(c->fr, reason);
  pthread_mutex_unlock(&fr_lock);
}

static void fr_on_signal(int sig) {
  (void)sig;
  int saved = errno;
  ssize_t w = write(fr_pipe[1], "d", 1); /* full pipe: a dump is pending anyway */
  (void)w;
  errno = saved;
}

static void *fr_dumper(void *arg) {
  (void)arg;
  for (;;) {
    char b;
    ssize_t r = read(fr_pipe[0], &b, 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return NULL;
    pthread_mutex_lock(&fr_lock);
    for (rcoll_fr_t *fr = fr_list; fr != NULL; fr = fr->next_registered)
      fr_dump_locked(fr, fr_signame);
    pthread_mutex_unlock(&fr_lock);
  }
}

/* Once per process, at the first communicator with a recorder. */
static void fr_signal_setup(void) {
  struct sigaction old;
  if (fr_signo == 0)
    return;
  if (sigaction(fr_signo, NULL, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) {
    if (getenv("RCOLL_FR_SIGNAL") != NULL)
      RCOLL_WARN("RCOLL_FR_SIGNAL=%s: the application has a handler for it; no flight-recorder "
                 "dumps on that signal", fr_signame);
    else
      RCOLL_INFO(RCOLL_SUB_INIT, "%s has a handler already (MPICH takes it): no flight-recorder "
                 "dumps on it; RCOLL_FR_SIGNAL=SIGUSR2 chooses another", fr_signame);
    return;
  }
  if (pipe2(fr_pipe, O_CLOEXEC) != 0 || fcntl(fr_pipe[1], F_SETFL, O_NONBLOCK) != 0) {
    RCOLL_WARN("flight recorder: no pipe for SIGUSR1 dumps (%s)", strerror(errno));
    return;
  }
  /* The thread blocks every signal, so that none meant for the
   * application's threads is delivered to it. */
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int err = pthread_create(&th, &attr, fr_dumper, NULL);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  if (err != 0) {
    RCOLL_WARN("flight recorder: no thread for SIGUSR1 dumps (%s)", strerror(err));
    return;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fr_on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(fr_signo, &sa, NULL);
}

void rcoll_fr_register(rcoll_fr_t *fr) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_mutex_lock(&fr_lock);
  if (fr_signame == NULL) {
    const char *want = fr->comm->settings.fr_signal;
    fr_signo = strcasecmp(want, "none") == 0 ? 0 : strcasecmp(want, "SIGUSR2") == 0 ? SIGUSR2 : SIGUSR1;
    fr_signame = fr_signo == SIGUSR2 ? "SIGUSR2" : "SIGUSR1";
  }
  pthread_mutex_unlock(&fr_lock);
  pthread_once(&once, fr_signal_setup);
  pthread_mutex_lock(&fr_lock);
  fr->next_registered = fr_list;
  fr_list = fr;
  pthread_mutex_unlock(&fr_lock);
}

void rcoll_fr_unregister(rcoll_fr_t *fr) {
  pthread_mutex_lock(&fr_lock);
  for (rcoll_fr_t **p = &fr_list; *p != NULL; p = &(*p)->next_registered)
    if (*p == fr) {
      *p = fr->next_registered;
      break;
    }
  pthread_mutex_unlock(&fr_lock);
}
