/* Algorithm families by name (lib/algo.h numbers them from the generated
 * table), for tests that pin down one algorithm's behaviour. */
#ifndef RCOLL_TEST_ALGO_IDS_H
#define RCOLL_TEST_ALGO_IDS_H

#include <criterion/criterion.h>
#include <string.h>

#include "algo.h"

static inline int algo_id(const char *name) {
  int a = rcoll_algo_from_name(name, strlen(name));
  cr_assert(a >= 0, "no algorithm named \"%s\" in the table", name);
  return a;
}
#define ALGO(name) algo_id(#name)

#endif
