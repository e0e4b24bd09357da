/* The settings tables read from the environment: the core's (config.h) and
 * each transport's (its description, net.h). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "log.h"
#include "net.h"

#define CORE_SETTING_DESC(...) RCOLL_SETTING_DESC_IN(rcoll_settings_t, __VA_ARGS__)
static const rcoll_setting_desc_t settings_table[] = {RCOLL_SETTINGS(CORE_SETTING_DESC)};
#undef CORE_SETTING_DESC
#define NSETTINGS ((int)(sizeof settings_table / sizeof settings_table[0]))

int rcoll_settings_parse_int(const char *text, int64_t *out) {
  if (text == NULL || *text == '\0')
    return -1;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(text, &end, 0);
  if (errno != 0 || end == text)
    return -1;
  int64_t mult = 1;
  switch (*end) {
  case 'k': case 'K': mult = 1ll << 10; end++; break;
  case 'm': case 'M': mult = 1ll << 20; end++; break;
  case 'g': case 'G': mult = 1ll << 30; end++; break;
  default: break;
  }
  if (*end != '\0')
    return -1;
  if (v > INT64_MAX / mult || v < INT64_MIN / mult)
    return -1; /* "9E18G" must not wrap round to a small number */
  *out = (int64_t)v * mult;
  return 0;
}

/* Effective text of a setting and where it came from. */
static const char *setting_text(const rcoll_setting_desc_t *d, const char **source) {
  static _Thread_local char envname[96];
  snprintf(envname, sizeof envname, "RCOLL_%s", d->name);
  const char *v = getenv(envname);
  if (v != NULL) {
    *source = envname;
    return v;
  }
  if (d->nccl != NULL && (v = getenv(d->nccl)) != NULL) {
    *source = d->nccl;
    return v;
  }
  *source = "default";
  return d->def;
}

/* A setting's error is logged once however many communicators (or ranks of
 * rcollCommInitAll) read the same environment; every load still fails. */
int rcoll_settings_error(const char *fmt, ...) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static char last_logged[RCOLL_ERROR_TEXT_MAX];
  char text[RCOLL_ERROR_TEXT_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  rcoll_error_quiet(rcollInvalidArgument, "%s", text);
  pthread_mutex_lock(&lock);
  int fresh = strcmp(last_logged, text) != 0;
  if (fresh)
    snprintf(last_logged, sizeof last_logged, "%s", text);
  pthread_mutex_unlock(&lock);
  if (fresh)
    RCOLL_WARN("%s", text);
  return rcollInvalidArgument;
}

/* "4096..67108864", "0 or more", "any integer". */
static const char *setting_range(const rcoll_setting_desc_t *d, char *buf, size_t len) {
  if (d->lo == INT64_MIN && d->hi == INT64_MAX)
    snprintf(buf, len, "any integer");
  else if (d->hi == INT64_MAX)
    snprintf(buf, len, "%lld or more", (long long)d->lo);
  else
    snprintf(buf, len, "%lld..%lld", (long long)d->lo, (long long)d->hi);
  return buf;
}

/* When the value came from NCCL's name, says how to give rcoll its own. */
static const char *setting_fallback_note(const rcoll_setting_desc_t *d, const char *source, char *buf,
                                         size_t len) {
  buf[0] = '\0';
  if (d->nccl != NULL && strcmp(source, d->nccl) == 0)
    snprintf(buf, len, "; rcoll read %s because RCOLL_%s is unset: set RCOLL_%s to override it", source,
             d->name, d->name);
  return buf;
}

static rcollResult_t setting_int(const rcoll_setting_desc_t *d, const char *source, const char *text,
                                 int64_t *v) {
  char range[64], note[160];
  if (rcoll_settings_parse_int(text, v) != 0)
    return rcoll_settings_error("%s=\"%s\" is not an integer: accepted %s, K, M or G suffixes allowed (%s)%s",
                                source, text, setting_range(d, range, sizeof range), d->help,
                                setting_fallback_note(d, source, note, sizeof note));
  if (*v < d->lo || *v > d->hi)
    return rcoll_settings_error("%s=%s is out of range: accepted %s (%s)%s", source, text,
                                setting_range(d, range, sizeof range), d->help,
                                setting_fallback_note(d, source, note, sizeof note));
  return rcollSuccess;
}

/* Whether text is one of a STR_OF's comma-separated words (any case), or
 * empty: the default behaviour. */
static int setting_choice_ok(const char *choices, const char *text) {
  size_t len = strlen(text);
  if (choices == NULL || len == 0)
    return 1;
  for (const char *w = choices; *w != '\0';) {
    size_t n = strcspn(w, ",");
    if (n == len && strncasecmp(w, text, n) == 0)
      return 1;
    w += n + (w[n] == ',');
  }
  return 0;
}

/* Reads one setting into the struct at base. */
static rcollResult_t setting_load(const rcoll_setting_desc_t *d, char *base) {
  const char *source;
  const char *text = setting_text(d, &source);
  char *field = base + d->offset;
  if (d->is_int) {
    int64_t v;
    RCOLL_CHECK(setting_int(d, source, text, &v));
    memcpy(field, &v, sizeof v);
  } else {
    char note[160];
    if (strlen(text) >= RCOLL_SETTING_STR_MAX)
      return rcoll_settings_error("%s is longer than %d characters", source, RCOLL_SETTING_STR_MAX - 1);
    if (!setting_choice_ok(d->choices, text))
      return rcoll_settings_error("%s=%s is not accepted: one of %s, or empty%s%s (%s)%s", source, text,
                                  d->choices, d->def[0] ? " for the default " : "", d->def, d->help,
                                  setting_fallback_note(d, source, note, sizeof note));
    strcpy(field, text);
  }
  return rcollSuccess;
}

/* Every transport's settings are read, whether or not it is built or will
 * be used: a malformed value is then found when the job starts, not on the
 * day another machine picks that transport. */
int rcoll_settings_load(rcoll_settings_t *s) {
  memset(s, 0, sizeof *s);
  rcoll_settings_warn_unknown();
  for (int i = 0; i < NSETTINGS; i++)
    RCOLL_CHECK(setting_load(&settings_table[i], (char *)s));
  for (int t = 0; t < rcoll_net_desc_count(); t++) {
    const rcoll_transport_desc_t *desc = rcoll_net_desc_at(t);
    if (desc->settings_size > sizeof s->nets[t])
      return rcoll_error(rcollInternalError, "transport %s: its settings take %zu bytes, more than "
                         "RCOLL_NET_SETTINGS_BYTES (%zu)", desc->name, desc->settings_size,
                         sizeof s->nets[t]);
    for (int i = 0; i < desc->nsettings; i++)
      RCOLL_CHECK(setting_load(&desc->settings[i], rcoll_net_settings(s, desc)));
  }
  return rcollSuccess;
}

/* The i-th setting of the listing, and the transport that declares it
 * (NULL for the core's). */
static const rcoll_setting_desc_t *setting_at(int i, const char **owner) {
  *owner = NULL;
  if (i < 0)
    return NULL;
  if (i < NSETTINGS)
    return &settings_table[i];
  i -= NSETTINGS;
  for (int t = 0; t < rcoll_net_desc_count(); t++) {
    const rcoll_transport_desc_t *desc = rcoll_net_desc_at(t);
    if (i < desc->nsettings) {
      *owner = desc->name;
      return &desc->settings[i];
    }
    i -= desc->nsettings;
  }
  return NULL;
}

int rcoll_settings_count(void) {
  int n = NSETTINGS;
  for (int t = 0; t < rcoll_net_desc_count(); t++)
    n += rcoll_net_desc_at(t)->nsettings;
  return n;
}

void rcoll_settings_describe(int i, rcoll_setting_info_t *info) {
  memset(info, 0, sizeof *info);
  const char *owner;
  const rcoll_setting_desc_t *d = setting_at(i, &owner);
  if (d == NULL)
    return;
  info->name = d->name;
  info->nccl = d->nccl;
  info->def = d->def;
  info->help = d->help;
  info->value = setting_text(d, &info->source);
  /* A listing is pasted into bug reports and logs: never show a secret. */
  size_t len = strlen(d->name);
  if (len >= 6 && strcmp(d->name + len - 6, "SECRET") == 0 && info->value[0] != '\0')
    info->value = "(set; not shown)";
  info->owner = owner;
  info->is_int = d->is_int;
  info->lo = d->lo;
  info->hi = d->hi;
  info->choices = d->choices;
}
