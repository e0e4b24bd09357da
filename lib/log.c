/* Logging. The level and subsystems are read from the environment once per
 * process: logging must work before any communicator (and its settings
 * snapshot) exists. */
#include "log.h"

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

static void log_setup(void) {
  log_level = rcoll_log_parse_level(env2("RCOLL_DEBUG", "NCCL_DEBUG"));
  log_subsys = rcoll_log_parse_subsys(env2("RCOLL_DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS"));
  if (gethostname(log_host, sizeof log_host) != 0)
    snprintf(log_host, sizeof log_host, "?");
  log_host[sizeof log_host - 1] = '\0';
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

void rcoll_log(int level, unsigned subsys, const char *file, int line, const char *fmt, ...) {
  (void)subsys;
  static const char *names[] = {"NONE", "WARN", "INFO", "TRACE"};
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  void (*sink)(int, const char *) = atomic_load(&log_sink);
  if (sink != NULL) {
    sink(level, msg);
    return;
  }
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char rank[24] = "";
  if (log_rank >= 0)
    snprintf(rank, sizeof rank, " [%d]", log_rank);
  /* One fprintf per line so lines from threads and processes do not interleave. */
  if (level == RCOLL_LOG_TRACE)
    fprintf(stderr, "%s:%d:%ld%s rcoll %s %s:%d %s\n", log_host, (int)getpid(),
            (long)syscall(SYS_gettid), rank, names[level], base, line, msg);
  else
    fprintf(stderr, "%s:%d:%ld%s rcoll %s %s\n", log_host, (int)getpid(),
            (long)syscall(SYS_gettid), rank, names[level], msg);
}
