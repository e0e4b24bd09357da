/* RCOLL_IB_HCA: which devices and ports the verbs transport may use, in
 * NCCL_IB_HCA's syntax (see ib_select.h). Pure string logic. */
#if RCOLL_HAVE_IBVERBS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "ib_select.h"

/* One `name[:port]` item of the list. */
static rcollResult_t ib_hca_item(const char *spec, const char *item, size_t len, ib_hca_entry_t *e) {
  const char *colon = memchr(item, ':', len);
  size_t nlen = colon ? (size_t)(colon - item) : len;
  if (nlen == 0 || nlen >= sizeof e->name)
    return rcoll_error_quiet(rcollInvalidArgument, "RCOLL_IB_HCA=\"%s\": device name in \"%.*s\" is %s", spec,
                       (int)len, item, nlen == 0 ? "empty" : "too long");
  memcpy(e->name, item, nlen);
  e->name[nlen] = '\0';
  e->port = -1;
  if (colon == NULL)
    return rcollSuccess;
  char num[16];
  size_t plen = len - nlen - 1;
  char *end = NULL;
  long port = -1;
  if (plen > 0 && plen < sizeof num) {
    memcpy(num, colon + 1, plen);
    num[plen] = '\0';
    port = strtol(num, &end, 10);
  }
  if (end == NULL || *end != '\0' || port < 1 || port > 255)
    return rcoll_error_quiet(rcollInvalidArgument,
                       "RCOLL_IB_HCA=\"%s\": port in \"%.*s\" must be a number 1..255", spec, (int)len,
                       item);
  e->port = (int)port;
  return rcollSuccess;
}

rcollResult_t ib_hca_parse(const char *text, ib_hca_spec_t *out) {
  memset(out, 0, sizeof *out);
  const char *p = text ? text : "";
  while (*p == ' ')
    p++;
  if (*p == '^') {
    out->exclude = 1;
    p++;
  }
  if (*p == '=') {
    out->exact = 1;
    p++;
  }
  while (*p != '\0') {
    size_t len = strcspn(p, ",");
    while (len > 0 && p[len - 1] == ' ')
      len--;
    if (len > 0) {
      if (out->n == IB_HCA_MAX)
        return rcoll_error_quiet(rcollInvalidArgument, "RCOLL_IB_HCA=\"%s\": more than %d entries", text,
                           IB_HCA_MAX);
      RCOLL_CHECK(ib_hca_item(text, p, len, &out->e[out->n]));
      out->n++;
    }
    p += strcspn(p, ",");
    while (*p == ',' || *p == ' ')
      p++;
  }
  if (out->n == 0 && (out->exclude || out->exact))
    return rcoll_error_quiet(rcollInvalidArgument, "RCOLL_IB_HCA=\"%s\": no device named after ^ or =",
                       text);
  return rcollSuccess;
}

static int ib_hca_entry_match(const ib_hca_spec_t *s, const ib_hca_entry_t *e, const char *dev,
                              int port) {
  int name_ok = s->exact ? strcmp(e->name, dev) == 0 : strncmp(e->name, dev, strlen(e->name)) == 0;
  return name_ok && (e->port < 0 || e->port == port);
}

int ib_hca_match(const ib_hca_spec_t *s, const char *dev, int port) {
  if (s->n == 0)
    return 1;
  int hit = 0;
  for (int i = 0; i < s->n && !hit; i++)
    hit = ib_hca_entry_match(s, &s->e[i], dev, port);
  return s->exclude ? !hit : hit;
}
#endif
