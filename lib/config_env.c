/* Names in the environment that look like settings but are none: a
 * misspelled RCOLL_TIMOUT would otherwise be ignored without a word, and the
 * job would run with the default the operator meant to change. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"

extern char **environ;

/* RCOLL_* variables that programs around the library read from the same
 * environment (the Python package, the test and CI scripts): not settings,
 * but not mistakes either. A name ending in '_' is a prefix. */
static const char *const not_settings[] = {
    "LIBRARY", "NCCL_PLUGIN", "NETNS_HOSTS", "SKIP_DEPS", "EXTRA_DEPS", "ROOT", "MPI", "BENCH", "LIBOUT",
    "PYTHON", "TORCH_", "HAVE_", "TEST_",
};

static int is_not_setting(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof not_settings / sizeof not_settings[0]; i++) {
    size_t n = strlen(not_settings[i]);
    int prefix = not_settings[i][n - 1] == '_';
    if ((prefix ? len >= n : len == n) && strncmp(name, not_settings[i], n) == 0)
      return 1;
  }
  return 0;
}

/* Levenshtein distance of a[0..la) and b, one row at a time. */
static size_t edit_distance(const char *a, size_t la, const char *b) {
  size_t lb = strlen(b), row[RCOLL_SETTING_STR_MAX];
  if (la >= RCOLL_SETTING_STR_MAX || lb >= RCOLL_SETTING_STR_MAX)
    return (size_t)-1;
  for (size_t j = 0; j <= lb; j++)
    row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best)
        best = up + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

/* Which setting `name` (len bytes, no prefix) is, or the closest one. */
static const char *closest(const char *name, size_t len, size_t *dist) {
  const char *best = NULL;
  *dist = (size_t)-1;
  rcoll_setting_info_t info;
  for (int i = 0; i < rcoll_settings_count(); i++) {
    rcoll_settings_describe(i, &info);
    size_t d = edit_distance(name, len, info.name);
    if (d < *dist)
      best = info.name, *dist = d;
  }
  return best;
}

/* A third of the name's letters may be wrong (TIMOUT, CHUNKSIZE, SHM_DISABLED),
 * and at least two; further than that a suggestion is more noise than help. */
static const char *suggest(const char *name, size_t len) {
  size_t dist;
  const char *best = closest(name, len, &dist);
  size_t allowed = len / 3 < 2 ? 2 : len / 3;
  return dist <= allowed ? best : NULL;
}

const char *rcoll_settings_suggest(const char *name) { return suggest(name, strlen(name)); }

static void warn_unknown(void) {
  for (char **e = environ; e != NULL && *e != NULL; e++) {
    if (strncmp(*e, "RCOLL_", 6) != 0)
      continue;
    const char *name = *e + 6;
    size_t len = strcspn(name, "=");
    size_t dist;
    closest(name, len, &dist);
    if (dist == 0 || is_not_setting(name, len))
      continue;
    const char *best = suggest(name, len);
    if (best != NULL)
      RCOLL_WARN("RCOLL_%.*s is not an rcoll setting and is ignored; did you mean RCOLL_%s? "
                 "(bench/rcoll_info lists every setting)", (int)len, name, best);
    else
      RCOLL_WARN("RCOLL_%.*s is not an rcoll setting and is ignored (bench/rcoll_info lists every "
                 "setting)", (int)len, name);
  }
}

void rcoll_settings_warn_unknown(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, warn_unknown);
}

const char *rcoll_settings_source(const char *name, char *buf, size_t len) {
  snprintf(buf, len, "RCOLL_%s", name);
  if (getenv(buf) != NULL)
    return buf;
  rcoll_setting_info_t info;
  for (int i = 0; i < rcoll_settings_count(); i++) {
    rcoll_settings_describe(i, &info);
    if (strcmp(info.name, name) == 0 && info.nccl != NULL && getenv(info.nccl) != NULL)
      snprintf(buf, len, "%s", info.nccl);
  }
  return buf;
}
