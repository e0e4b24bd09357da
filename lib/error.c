/* Result names and messages, and the per-thread last-error text. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

static _Thread_local char last_error[RCOLL_ERROR_TEXT_MAX];

RCOLL_API const char *rcollGetErrorString(rcollResult_t result) {
  switch (result) {
#define RCOLL_RESULT_CASE(name, value, msg) \
  case name:                                \
    return #name ": " msg;
    RCOLL_RESULT_MAP(RCOLL_RESULT_CASE)
#undef RCOLL_RESULT_CASE
  default:
    return "unknown rcoll result code";
  }
}

static rcollResult_t record(rcollResult_t result, int log, const char *fmt, va_list ap) {
  /* Format apart first: callers often decorate the previous error, passing
   * rcoll_error_text() itself as an argument. */
  char text[RCOLL_ERROR_TEXT_MAX];
  vsnprintf(text, sizeof text, fmt, ap);
  memcpy(last_error, text, sizeof text);
  if (log)
    RCOLL_WARN("%s", last_error);
  return result;
}

rcollResult_t rcoll_error(rcollResult_t result, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(result, 1, fmt, ap);
  va_end(ap);
  return result;
}

rcollResult_t rcoll_error_quiet(rcollResult_t result, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(result, 0, fmt, ap);
  va_end(ap);
  return result;
}

const char *rcoll_error_text(void) { return last_error; }

RCOLL_API rcollResult_t rcollGetVersion(int *version) {
  if (version == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollGetVersion: version is NULL");
  *version = RCOLL_VERSION_CODE;
  return rcollSuccess;
}
