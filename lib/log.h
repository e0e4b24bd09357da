/* Logging: RCOLL_DEBUG=NONE|WARN|INFO|TRACE (NCCL_DEBUG fallback) and
 * RCOLL_DEBUG_SUBSYS=INIT,NET,COLL,... (with ^ to exclude, ALL for all);
 * RCOLL_DEBUG_FILE (NCCL_DEBUG_FILE) sends the lines to a file, and
 * RCOLL_DEBUG_TIMESTAMP=1 starts each with the time. */
#ifndef RCOLL_LOG_H
#define RCOLL_LOG_H

#include <stddef.h>

enum rcoll_log_level { RCOLL_LOG_NONE = 0, RCOLL_LOG_WARN, RCOLL_LOG_INFO, RCOLL_LOG_TRACE };

enum rcoll_log_subsys {
  RCOLL_SUB_INIT = 1u << 0,
  RCOLL_SUB_BOOTSTRAP = 1u << 1,
  RCOLL_SUB_NET = 1u << 2,
  RCOLL_SUB_COLL = 1u << 3,
  RCOLL_SUB_ENV = 1u << 4,
  RCOLL_SUB_ALLOC = 1u << 5,
  RCOLL_SUB_TUNE = 1u << 6,
  RCOLL_SUB_P2P = 1u << 7,
  RCOLL_SUB_ALL = ~0u
};

/* Parses the environment once per process (thread-safe). */
void rcoll_log_init(void);
int rcoll_log_enabled(int level, unsigned subsys);
void rcoll_log(int level, unsigned subsys, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Rank shown in the prefix of this thread's log lines (-1: none). */
void rcoll_log_set_rank(int rank);
/* Hands every line that passes the level filter to `sink` instead of
 * writing it to stderr (NULL restores stderr). For hosts with their own
 * logger, such as NCCL loading the net plugin; the line carries no prefix. */
void rcoll_log_set_sink(void (*sink)(int level, const char *msg));

/* A line shown at the default level (WARN) and above, labelled NOTE: what
 * an operator must see without asking, such as the transports a
 * communicator chose. RCOLL_DEBUG=NONE silences it. */
void rcoll_log_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* RCOLL_DEBUG_FILE's pattern with %h (host) and %p (pid) replaced; -1 when
 * out is too short. */
int rcoll_log_expand_path(const char *pattern, const char *host, int pid, char *out, size_t len);

/* Test hook: parse level and subsystem strings as the environment would. */
int rcoll_log_parse_level(const char *s);
unsigned rcoll_log_parse_subsys(const char *s);

#define RCOLL_LOG_(lvl, sub, ...)                                  \
  do {                                                             \
    if (rcoll_log_enabled((lvl), (sub)))                           \
      rcoll_log((lvl), (sub), __FILE__, __LINE__, __VA_ARGS__);    \
  } while (0)
#define RCOLL_WARN(...) RCOLL_LOG_(RCOLL_LOG_WARN, RCOLL_SUB_ALL, __VA_ARGS__)
#define RCOLL_INFO(sub, ...) RCOLL_LOG_(RCOLL_LOG_INFO, (sub), __VA_ARGS__)
#define RCOLL_TRACE(sub, ...) RCOLL_LOG_(RCOLL_LOG_TRACE, (sub), __VA_ARGS__)

#endif
