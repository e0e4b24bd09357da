/* NCCL_TESTS_SPLIT: nccl-tests splits the ranks into groups that run the same
 * test side by side, by a color computed from the MPI process index. rcoll
 * runs one rank per thread or process, so the color is computed from the
 * global rank, which is the process index when each process is one rank. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common_impl.h"

/* Decimal, 0x hexadecimal or 0b binary, after optional blanks. */
static int parse_value(const char *s, long *v) {
  while (isspace((unsigned char)*s))
    s++;
  char *end;
  if (strncasecmp(s, "0b", 2) == 0)
    *v = strtol(s + 2, &end, 2);
  else
    *v = strtol(s, &end, 0);
  while (isspace((unsigned char)*end))
    end++;
  return end != s && *end == '\0' ? 0 : -1;
}

int bench_split_color(int rank, int *color) {
  static const struct {
    const char *word, *sym;
  } ops[] = {{"AND", "&"}, {"OR", "|"}, {"MOD", "%"}, {"DIV", "/"}};
  const char *mask = getenv("NCCL_TESTS_SPLIT_MASK");
  const char *split = getenv("NCCL_TESTS_SPLIT");
  long v;
  *color = 0;
  if (mask && *mask) { /* a hexadecimal mask, as nccl-tests reads it */
    *color = rank & (int)strtol(mask, NULL, 16);
    return 0;
  }
  if (!split || !*split)
    return 0;
  for (int i = 0; i < 4; i++) {
    size_t wl = strlen(ops[i].word), sl = strlen(ops[i].sym);
    const char *arg = strncasecmp(split, ops[i].word, wl) == 0 ? split + wl
                      : strncmp(split, ops[i].sym, sl) == 0     ? split + sl
                                                                : NULL;
    if (!arg || parse_value(arg, &v) != 0)
      continue;
    if ((i >= 2 && v <= 0) || v < 0)
      break;
    *color = i == 0 ? rank & (int)v : i == 1 ? rank | (int)v : i == 2 ? rank % (int)v
                                                                      : rank / (int)v;
    return 0;
  }
  fprintf(stderr, "NCCL_TESTS_SPLIT='%s': expected AND, OR, MOD or DIV (or &, |, %%, /) and a "
                  "number (MOD and DIV: positive)\n", split);
  return -1;
}
