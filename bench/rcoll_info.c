/* rcoll_info: lists every setting with its effective value, where that value
 * came from, and its help text (the counterpart of `fi_info -e`), and the
 * algorithms the tuner chooses from.
 *
 *   bench/rcoll_info             all settings, then the algorithms
 *   bench/rcoll_info NET TIMEOUT only those (with or without the RCOLL_ prefix)
 *   bench/rcoll_info --algorithms  the table of algorithms only
 *   bench/rcoll_info --algo-names  the names RCOLL_ALGO takes, one per line
 *
 * The core's settings come first, then each transport's, under a line
 * naming it; the header names the transports built in (what RCOLL_NET
 * takes) in their order of preference.
 *
 * Exits non-zero when a setting in the environment does not parse, so that a
 * job script can validate its environment before launching ranks. It links
 * the static library because the settings table is internal. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "algo.h"
#include "config.h"
#include "error.h"
#include "net.h"
#include "rcoll.h"

static int wanted(const char *name, int argc, char **argv) {
  if (argc <= 1)
    return 1;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strncasecmp(arg, "RCOLL_", 6) == 0)
      arg += 6;
    if (strcasecmp(arg, name) == 0)
      return 1;
  }
  return 0;
}

static void print_setting(const rcoll_setting_info_t *s) {
  printf("RCOLL_%s=%s\n", s->name, s->value);
  printf("    source: %s; default: \"%s\"", s->source, s->def);
  if (s->nccl)
    printf("; NCCL name: %s", s->nccl);
  if (s->is_int && s->hi != INT64_MAX)
    printf("; accepted: %lld..%lld", (long long)s->lo, (long long)s->hi);
  else if (s->is_int && s->lo != INT64_MIN)
    printf("; accepted: %lld or more", (long long)s->lo);
  else if (s->choices != NULL)
    printf("; accepted: %s or empty", s->choices);
  printf("\n    %s\n", s->help);
}

/* "# transports built in (RCOLL_NET): shm, ib, socket, in that order of
 * preference without RCOLL_NET; ucx only when named". */
static void print_transports(void) {
  char line[512] = "";
  int n = rcoll_net_count();
  for (int prio = 0, listed = 0; prio < 64; prio++)
    for (int t = 0; t < n; t++)
      if (rcoll_net_auto_priority(rcoll_net_at(t)) == prio)
        snprintf(line + strlen(line), sizeof line - strlen(line), "%s%s", listed++ ? ", " : "",
                 rcoll_net_at(t)->name);
  snprintf(line + strlen(line), sizeof line - strlen(line), "%s", line[0] ? ", in that order of "
           "preference without RCOLL_NET" : "none automatic");
  for (int t = 0; t < n; t++)
    if (rcoll_net_auto_priority(rcoll_net_at(t)) < 0)
      snprintf(line + strlen(line), sizeof line - strlen(line), "; %s only when named", rcoll_net_at(t)->name);
  printf("# transports built in (RCOLL_NET): %s\n", line);
}

static int usage(const char *prog) {
  printf("usage: %s [-h] [--algorithms | --algo-names] [NAME...]\n"
         "Lists rcoll's settings: effective value, its source (default, RCOLL_<NAME> or the\n"
         "NCCL_<NAME> fallback) and help. NAMEs restrict the list. Then the algorithms: the\n"
         "name RCOLL_ALGO takes, the collective, a summary.\n", prog);
  return 0;
}

/* The generated table of algorithms (lib/algo.h), one line each. */
static void print_algorithms(void) {
  int n = 0;
  while (rcoll_algorithms[n] != NULL)
    n++;
  printf("# %d algorithms in %d families (RCOLL_ALGO names a family)\n", n, rcoll_algo_family_count());
  for (int i = 0; i < n; i++) {
    const rcoll_algorithm_t *a = rcoll_algorithms[i];
    printf("%-14s %-15s %s%s%s\n", a->name, rcoll_coll_name(a->coll), a->summary,
           a->flags & RCOLL_ALGO_ONLY ? " (always used: not named in RCOLL_ALGO)" : "",
           (a->flags & (RCOLL_ALGO_DETERMINISTIC | RCOLL_ALGO_AUTO)) == RCOLL_ALGO_DETERMINISTIC
               ? " (RCOLL_DETERMINISTIC=1 or by name only)"
           : a->flags & RCOLL_ALGO_DETERMINISTIC ? " (rank-order sums: RCOLL_DETERMINISTIC=1 uses it too)"
                                                 : "");
  }
}

/* One name per line, for scripts that test every algorithm. */
static void print_algo_names(void) {
  for (int f = 0; f < rcoll_algo_family_count(); f++) {
    int only = 1;
    for (int i = 0; rcoll_algorithms[i] != NULL; i++)
      if (rcoll_algorithm_family(rcoll_algorithms[i]) == f)
        only &= (rcoll_algorithms[i]->flags & RCOLL_ALGO_ONLY) != 0;
    if (!only)
      printf("%s\n", rcoll_algo_name(f));
  }
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
      return usage(argv[0]);
  if (argc == 2 && strcmp(argv[1], "--algorithms") == 0) {
    print_algorithms();
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--algo-names") == 0) {
    print_algo_names();
    return 0;
  }
  int version = 0;
  rcollGetVersion(&version);
  int n = rcoll_settings_count(), shown = 0;
  printf("# rcoll %d.%d.%d: %d settings, read from the environment when a communicator is "
         "created\n", version / 10000, version / 100 % 100, version % 100, n);
  print_transports();
  const char *group = NULL;
  for (int i = 0; i < n; i++) {
    rcoll_setting_info_t s;
    rcoll_settings_describe(i, &s);
    if (!wanted(s.name, argc, argv))
      continue;
    if (s.owner != NULL && s.owner != group)
      printf("# settings of the %s transport (transports/%s/)%s\n", s.owner, s.owner,
             rcoll_net_index(s.owner) < 0 ? ", not built here but checked all the same" : "");
    group = s.owner;
    print_setting(&s);
    shown++;
  }
  if (shown == 0 && argc > 1) {
    fprintf(stderr, "%s: no setting matches the names given\n", argv[0]);
    return 2;
  }
  if (argc <= 1) {
    printf("\n");
    print_algorithms();
  }
  rcoll_settings_t parsed;
  if (rcoll_settings_load(&parsed) != 0) {
    fprintf(stderr, "%s: invalid setting in the environment: %s\n", argv[0], rcoll_error_text());
    return 1;
  }
  return 0;
}
