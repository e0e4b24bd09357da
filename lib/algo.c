/* The table of algorithms (algo.h): families, lookups, and RCOLL_ALGO. The
 * table itself is generated from the files of algorithms/; nothing here names an
 * algorithm. */
#include "algo.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "reduce.h"

static const char *const coll_names[RCOLL_COLL_NKINDS] = {
    "allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "send", "recv",
    "alltoall",  "gather",    "scatter"};

const char *rcoll_coll_name(int coll) {
  return coll >= 0 && coll < RCOLL_COLL_NKINDS ? coll_names[coll] : "invalid";
}

int rcoll_coll_reduces(int coll) {
  return coll == RCOLL_COLL_ALLREDUCE || coll == RCOLL_COLL_REDUCE || coll == RCOLL_COLL_REDUCE_SCATTER;
}

int rcoll_coll_is_p2p(int coll) { return coll == RCOLL_COLL_SEND || coll == RCOLL_COLL_RECV; }

int rcoll_coll_per_rank(int coll) {
  return coll == RCOLL_COLL_ALLGATHER || coll == RCOLL_COLL_REDUCE_SCATTER || coll == RCOLL_COLL_ALLTOALL ||
         coll == RCOLL_COLL_GATHER || coll == RCOLL_COLL_SCATTER;
}

int rcoll_coll_rooted(int coll) {
  return coll == RCOLL_COLL_BROADCAST || coll == RCOLL_COLL_REDUCE || coll == RCOLL_COLL_GATHER ||
         coll == RCOLL_COLL_SCATTER;
}

double rcoll_traffic_bytes(const rcoll_coll_args_t *a) {
  return (double)a->count * (double)rcoll_type_size(a->dtype);
}

void rcoll_traffic_set(rcoll_traffic_t *out, double sent, double received, double reduced,
                       const char *formula) {
  *out = (rcoll_traffic_t){sent, received, reduced, formula};
}

/* Families, numbered once (pthread_once: communicators of several threads
 * may be created at once). The table has a few dozen entries. */
#define MAX_FAMILIES 32 /* the tuner's masks have a bit per family */
static struct {
  int nfamilies, overflow;
  const rcoll_algorithm_t *head[MAX_FAMILIES]; /* first descriptor of each family */
} fam;
static pthread_once_t fam_once = PTHREAD_ONCE_INIT;

/* Families are numbered by tie_order, then by first appearance: listings
 * then show the simple algorithms first. */
static void number_families(void) {
  for (int i = 0; rcoll_algorithms[i] != NULL; i++) {
    const rcoll_algorithm_t *d = rcoll_algorithms[i];
    int f = 0;
    while (f < fam.nfamilies && strcmp(fam.head[f]->name, d->name) != 0)
      f++;
    if (f < fam.nfamilies)
      continue;
    if (f == MAX_FAMILIES) {
      fam.overflow = 1;
      return;
    }
    for (; f > 0 && fam.head[f - 1]->tie_order > d->tie_order; f--)
      fam.head[f] = fam.head[f - 1];
    fam.head[f] = d;
    fam.nfamilies++;
  }
}

static int families(void) {
  pthread_once(&fam_once, number_families);
  return fam.nfamilies;
}

int rcoll_algo_family_count(void) { return families(); }

const char *rcoll_algo_name(int family) {
  return family >= 0 && family < families() ? fam.head[family]->name : "invalid";
}

int rcoll_algo_from_name(const char *name, size_t len) {
  for (int f = 0; f < families(); f++)
    if (strlen(fam.head[f]->name) == len && strncasecmp(name, fam.head[f]->name, len) == 0)
      return f;
  return -1;
}

int rcoll_algorithm_family(const rcoll_algorithm_t *a) {
  return rcoll_algo_from_name(a->name, strlen(a->name));
}

const rcoll_algorithm_t *rcoll_algorithm_find(int coll, int family) {
  if (family < 0 || family >= families())
    return NULL;
  for (int i = 0; rcoll_algorithms[i] != NULL; i++)
    if (rcoll_algorithms[i]->coll == (rcoll_coll_kind_t)coll &&
        strcmp(rcoll_algorithms[i]->name, fam.head[family]->name) == 0)
      return rcoll_algorithms[i];
  return NULL;
}

/* Families with a descriptor carrying any of `flags`. */
static unsigned families_with(unsigned flags) {
  unsigned mask = 0;
  for (int i = 0; rcoll_algorithms[i] != NULL; i++)
    if (rcoll_algorithms[i]->flags & flags)
      mask |= 1u << rcoll_algorithm_family(rcoll_algorithms[i]);
  return mask;
}

unsigned rcoll_algo_auto_mask(void) {
  unsigned all = (unsigned)((1ull << rcoll_algo_family_count()) - 1);
  return all & ~(families_with(RCOLL_ALGO_DETERMINISTIC) & ~families_with(RCOLL_ALGO_AUTO));
}

const char *rcoll_algo_list(char *buf, size_t len) {
  unsigned only = families_with(RCOLL_ALGO_ONLY);
  size_t used = 0;
  buf[0] = '\0';
  for (int f = 0; f < rcoll_algo_family_count() && used < len; f++)
    if (!(only >> f & 1))
      used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "", rcoll_algo_name(f));
  return buf;
}

rcollResult_t rcoll_algo_parse(const char *text, unsigned *allowed) {
  if (families() > 0 && fam.overflow)
    return rcoll_error(rcollInternalError, "more than %d algorithm families: the tuner's masks hold "
                       "%d", MAX_FAMILIES, MAX_FAMILIES);
  unsigned only = families_with(RCOLL_ALGO_ONLY);
  const char *s = text ? text : "";
  while (*s == ' ')
    s++;
  int exclude = *s == '^';
  s += exclude;
  unsigned listed = 0;
  while (*s != '\0') {
    size_t len = strcspn(s, ",");
    while (len > 0 && s[len - 1] == ' ')
      len--;
    if (len > 0) {
      int a = rcoll_algo_from_name(s, len);
      if (a < 0 || (only >> a & 1)) {
        char known[256];
        return rcoll_error(rcollInvalidArgument, "RCOLL_ALGO=\"%s\": unknown algorithm \"%.*s\" "
                           "(known: %s; a leading ^ excludes)", text, (int)len, s,
                           rcoll_algo_list(known, sizeof known));
      }
      listed |= 1u << a;
    }
    s += strcspn(s, ",");
    while (*s == ',' || *s == ' ')
      s++;
  }
  unsigned autom = rcoll_algo_auto_mask();
  if (listed == 0)
    *allowed = autom;
  else
    *allowed = (exclude ? autom & ~listed : listed) | only;
  return rcollSuccess;
}
