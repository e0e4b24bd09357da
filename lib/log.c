/* Logging. The level and subsystems are read from the environment once per
 * process: logging must work before any communicator (and its settings
 * snapshot) exists. */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_level = RCOLL_LOG_WARN;
static unsigned log_subsys = RCOLL_SUB_ALL;
static char log_host[64];
static _Thread_local int log_rank = -1;
static void (*_Atomic log_sink)(int level, const char *msg);
static FILE *log_out;      /* stderr unless RCOLL_DEBUG_FILE names a file */
static int log_timestamp;  /* RCOLL_DEBUG_TIMESTAMP=1 */

static const struct {
  const char *name;
  unsigned bit;
} subsys_names[] = {
    {"INIT", RCOLL_SUB_INIT}, {"BOOTSTRAP", RCOLL_SUB_BOOTSTRAP}, {"NET", RCOLL_SUB_NET},
    {"COLL", RCOLL_SUB_COLL}, {"ENV", RCOLL_SUB_ENV},             {"ALLOC", RCOLL_SUB_ALLOC},
    {"TUNE", RCOLL_SUB_TUNE}, {"P2P", RCOLL_SUB_P2P},             {"ALL", RCOLL_SUB_ALL},
};

int rcoll_log_parse_level(const char *s) {
  if (s == NULL || *s == '\0')
    return RCOLL_LOG_WARN;
  if (!strcasecmp(s, "NONE"))
    return RCOLL_LOG_NONE;
  if (!strcasecmp(s, "INFO"))
    return RCOLL_LOG_INFO;
  if (!strcasecmp(s, "TRACE"))
    return RCOLL_LOG_TRACE;
  return RCOLL_LOG_WARN; /* "WARN", and anything unknown: the safe default */
}

/* "INIT,NET" selects those; "^INIT,NET" selects all others. */
unsigned rcoll_log_parse_subsys(const char *s) {
  if (s == NULL || *s == '\0')
    return RCOLL_SUB_ALL;
  int invert = (*s == '^');
  if (invert)
    s++;
  unsigned mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
    for (size_t i = 0; i < sizeof subsys_names / sizeof subsys_names[0]; i++)
      if (!strcasecmp(tok, subsys_names[i].name))
        mask |= subsys_names[i].bit;
  return invert ? ~mask : mask;
}

static const char *env2(const char *a, const char *b) {
  const char *v = getenv(a);
  return v ? v : getenv(b);
}

int rcoll_log_expand_path(const char *pattern, const char *host, int pid, char *out, size_t len) {
  size_t n = 0;
  for (const char *p = pattern; *p != '\0'; p++) {
    int w;
    if (p[0] == '%' && p[1] == 'h')
      w = snprintf(out + n, len - n, "%s", host), p++;
    else if (p[0] == '%' && p[1] == 'p')
      w = snprintf(out + n, len - n, "%d", pid), p++;
    else
      w = snprintf(out + n, len - n, "%c", *p);
    if (w < 0 || (size_t)w >= len - n)
      return -1;
    n += (size_t)w;
  }
  return 0;
}

/* RCOLL_DEBUG_FILE: a file that cannot be opened leaves the lines on
 * stderr, with one line there saying why (logging cannot fail a job). */
static void log_open_file(const char *pattern) {
  char path[4096];
  log_out = stderr;
  if (pattern == NULL || pattern[0] == '\0')
    return;
  FILE *f = NULL;
  if (rcoll_log_expand_path(pattern, log_host, (int)getpid(), path, sizeof path) == 0)
    f = fopen(path, "ae");
  if (f == NULL) {
    fprintf(stderr, "%s:%d rcoll WARN RCOLL_DEBUG_FILE=%s: cannot open it (%s); logging to stderr\n",
            log_host, (int)getpid(), pattern, strerror(errno));
    return;
  }
  setvbuf(f, NULL, _IOLBF, 0);
  log_out = f;
}

/* An unknown level logs at WARN (logging cannot fail a job), saying so
 * once. NCCL's own VERSION and ABORT, met through NCCL_DEBUG, are quiet. */
static void log_check_level(const char *text) {
  static const char *const known[] = {"", "NONE", "WARN", "INFO", "TRACE", "VERSION", "ABORT"};
  if (text == NULL)
    return;
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcasecmp(text, known[i]) == 0)
      return;
  fprintf(log_out, "%s:%d rcoll WARN %s=%s is not accepted: one of NONE, WARN, INFO or TRACE; logging at WARN\n",
          log_host, (int)getpid(), getenv("RCOLL_DEBUG") ? "RCOLL_DEBUG" : "NCCL_DEBUG", text);
}

static void log_setup(void) {
  log_level = rcoll_log_parse_level(env2("RCOLL_DEBUG", "NCCL_DEBUG"));
  log_subsys = rcoll_log_parse_subsys(env2("RCOLL_DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS"));
  if (gethostname(log_host, sizeof log_host) != 0)
    snprintf(log_host, sizeof log_host, "?");
  log_host[sizeof log_host - 1] = '\0';
  const char *ts = getenv("RCOLL_DEBUG_TIMESTAMP");
  log_timestamp = ts != NULL && strcmp(ts, "1") == 0;
  log_open_file(env2("RCOLL_DEBUG_FILE", "NCCL_DEBUG_FILE"));
  log_check_level(env2("RCOLL_DEBUG", "NCCL_DEBUG"));
}

void rcoll_log_init(void) { pthread_once(&log_once, log_setup); }

int rcoll_log_enabled(int level, unsigned subsys) {
  rcoll_log_init();
  if (level > log_level)
    return 0;
  return level == RCOLL_LOG_WARN || (subsys & log_subsys) != 0;
}

void rcoll_log_set_rank(int rank) { log_rank = rank; }

void rcoll_log_set_sink(void (*sink)(int level, const char *msg)) { atomic_store(&log_sink, sink); }

/* "2026-12-01T15:04:05.123456Z ", or "" without RCOLL_DEBUG_TIMESTAMP=1. */
static const char *log_time(char *buf, size_t len) {
  buf[0] = '\0';
  if (!log_timestamp)
    return buf;
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + n, len - n, ".%06ldZ ", ts.tv_nsec / 1000);
  return buf;
}

static void log_write(int level, const char *label, const char *file, int line, const char *msg) {
  void (*sink)(int, const char *) = atomic_load(&log_sink);
  if (sink != NULL) {
    sink(level, msg);
    return;
  }
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char rank[24] = "", when[48];
  if (log_rank >= 0)
    snprintf(rank, sizeof rank, " [%d]", log_rank);
  log_time(when, sizeof when);
  FILE *out = log_out != NULL ? log_out : stderr;
  /* One fprintf per line so lines from threads and processes do not interleave. */
  if (level == RCOLL_LOG_TRACE)
    fprintf(out, "%s%s:%d:%ld%s rcoll %s %s:%d %s\n", when, log_host, (int)getpid(),
            (long)syscall(SYS_gettid), rank, label, base, line, msg);
  else
    fprintf(out, "%s%s:%d:%ld%s rcoll %s %s\n", when, log_host, (int)getpid(),
            (long)syscall(SYS_gettid), rank, label, msg);
}

void rcoll_log(int level, unsigned subsys, const char *file, int line, const char *fmt, ...) {
  (void)subsys;
  static const char *names[] = {"NONE", "WARN", "INFO", "TRACE"};
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  log_write(level, names[level], file, line, msg);
}

void rcoll_log_note(const char *fmt, ...) {
  rcoll_log_init();
  if (log_level < RCOLL_LOG_WARN)
    return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  log_write(RCOLL_LOG_INFO, "NOTE", __FILE__, __LINE__, msg);
}
