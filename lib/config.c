/* The settings table (config.h) read from the environment. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

typedef struct setting_desc {
  int is_int;
  size_t offset;
  const char *name;
  const char *nccl;
  const char *def;
  const char *help;
} setting_desc_t;

#define RCOLL_IS_INT_INT 1
#define RCOLL_IS_INT_STR 0
static const setting_desc_t settings_table[] = {
#define RCOLL_SETTING_DESC(type, field, name, nccl, def, help) \
  {RCOLL_IS_INT_##type, offsetof(rcoll_settings_t, field), name, nccl, def, help},
    RCOLL_SETTINGS(RCOLL_SETTING_DESC)
#undef RCOLL_SETTING_DESC
};
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
  *out = (int64_t)v * mult;
  return 0;
}

/* Effective text of a setting and where it came from. */
static const char *setting_text(const setting_desc_t *d, const char **source) {
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

int rcoll_settings_load(rcoll_settings_t *s) {
  memset(s, 0, sizeof *s);
  for (int i = 0; i < NSETTINGS; i++) {
    const setting_desc_t *d = &settings_table[i];
    const char *source;
    const char *text = setting_text(d, &source);
    char *field = (char *)s + d->offset;
    if (d->is_int) {
      int64_t v;
      if (rcoll_settings_parse_int(text, &v) != 0)
        return rcoll_error(rcollInvalidArgument, "setting %s=\"%s\" is not an integer (%s)", source,
                           text, d->help);
      memcpy(field, &v, sizeof v);
    } else {
      if (strlen(text) >= RCOLL_SETTING_STR_MAX)
        return rcoll_error(rcollInvalidArgument, "setting %s is longer than %d characters", source,
                           RCOLL_SETTING_STR_MAX - 1);
      strcpy(field, text);
    }
  }
  return rcollSuccess;
}

int rcoll_settings_count(void) { return NSETTINGS; }

void rcoll_settings_describe(int i, rcoll_setting_info_t *info) {
  memset(info, 0, sizeof *info);
  if (i < 0 || i >= NSETTINGS)
    return;
  const setting_desc_t *d = &settings_table[i];
  info->name = d->name;
  info->nccl = d->nccl;
  info->def = d->def;
  info->help = d->help;
  info->value = setting_text(d, &info->source);
}
