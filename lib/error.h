/* Error reporting: one result enum (include/rcoll.h), one place that records
 * the text. Log the error once, where it is first detected. */
#ifndef RCOLL_ERROR_H
#define RCOLL_ERROR_H

#include "rcoll.h"

#define RCOLL_ERROR_TEXT_MAX 512

/* Records a formatted message as the calling thread's last error, logs it at
 * WARN level, and returns `result` so callers can write
 * `return rcoll_error(rcollInvalidArgument, "...")`. */
rcollResult_t rcoll_error(rcollResult_t result, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Same, without logging (for errors a caller may retry or decorate). */
rcollResult_t rcoll_error_quiet(rcollResult_t result, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The calling thread's last error text ("" when none). */
const char *rcoll_error_text(void);

/* Propagate a failure: evaluate once, return it when it is not success. */
#define RCOLL_CHECK(call)                      \
  do {                                         \
    rcollResult_t rcoll_check_r_ = (call);     \
    if (rcoll_check_r_ != rcollSuccess)        \
      return rcoll_check_r_;                   \
  } while (0)

#endif
