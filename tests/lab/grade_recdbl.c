/* Lab exercise 02's plan checks: the student's all-reduce "recdbl", found in
 * the table of a build that added their file (tests/lab/check_02.sh), is
 * planned on fake communicators for 1..9 ranks and run in the library's
 * in-memory simulator (lib/plan_world.h, lib/plan_sim.h: what
 * tests/test_plans.c and bench/rcoll_sched use), then its per-rank totals
 * are held to recursive doubling's formula.
 *
 *   grade_recdbl plans     results, deadlock freedom, message sizes
 *   grade_recdbl formula   bytes and reductions per rank against log2(p2) S
 *
 * Prints what it checked in words and one line per failure (the first few
 * only), ends with "grade_recdbl <part>: PASS" or "...: FAIL"; exits 1 on
 * failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "plan_world.h"
#include "reduce.h"

#define MAX_REPORTS 6

static int failures;

static void fail(const char *fmt, const char *what, const char *detail) {
  if (++failures <= MAX_REPORTS)
    printf(fmt, what, detail);
  if (failures == MAX_REPORTS + 1)
    printf("  (further failures not shown)\n");
}

static const rcoll_algorithm_t *find_recdbl(void) {
  for (int i = 0; rcoll_algorithms[i] != NULL; i++)
    if (rcoll_algorithms[i]->coll == RCOLL_COLL_ALLREDUCE && !strcmp(rcoll_algorithms[i]->name, "recdbl"))
      return rcoll_algorithms[i];
  return NULL;
}

static double input(int r, size_t i) { return (double)((r + 1) * 1000 + (int)(i % 1013)); }

/* Every dependency points to an earlier step; every peer is another rank. */
static int check_structure(const rcoll_world_t *w, const char *what) {
  char d[160];
  for (int r = 0; r < w->n; r++) {
    const rcoll_plan_t *p = w->plans[r];
    for (int i = 0; i < p->nsteps; i++) {
      const rcoll_step_t *st = &p->steps[i];
      for (int k = 0; k < 2; k++)
        if (st->dep[k] != RCOLL_NO_DEP && (st->dep[k] < 0 || st->dep[k] >= i)) {
          snprintf(d, sizeof d, "rank %d step %d depends on step %d, which is not an earlier step", r, i,
                   st->dep[k]);
          return fail("  FAIL %s: %s\n", what, d), -1;
        }
      if (st->kind != RCOLL_STEP_COPY && (st->peer < 0 || st->peer >= w->n || st->peer == r)) {
        snprintf(d, sizeof d, "rank %d step %d talks to peer %d (ranks are 0..%d, not itself)", r, i,
                 st->peer, w->n - 1);
        return fail("  FAIL %s: %s\n", what, d), -1;
      }
    }
  }
  return 0;
}

/* Plans one call, runs it, checks every rank's result. */
static void run_case(const rcoll_algorithm_t *al, int n, size_t count, int inplace, int unbuffered, int avg) {
  static rcoll_sim_t sim; /* large: off the stack */
  char what[160], d[200];
  snprintf(what, sizeof what, "%d ranks, %zu elements%s, %s%s", n, count, inplace ? ", in place" : "",
           unbuffered ? "unbuffered" : "buffered", avg ? ", int64 avg" : "");
  rcoll_world_t w;
  if (rcoll_world_init(&w, n, NULL, 64, 64, 2) != rcollSuccess) {
    fail("  FAIL %s: %s\n", what, "could not make the fake communicators");
    return;
  }
  rcollDataType_t t = avg ? rcollInt64 : rcollFloat64;
  rcoll_world_call_t call = {al, count, t, avg ? rcollAvg : rcollSum, 0, inplace};
  if (rcoll_world_plan(&w, &call) != rcollSuccess) {
    fail("  FAIL %s: %s\n", what, "planning failed (see the message above)");
    goto out;
  }
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < count; i++) {
      if (avg)
        ((int64_t *)w.args[r].sendbuff)[i] = (int64_t)input(r, i);
      else
        ((double *)w.args[r].sendbuff)[i] = input(r, i);
    }
  if (check_structure(&w, what) != 0)
    goto out;
  rcoll_sim_init(&sim, w.plans, n, unbuffered, 2, (unsigned)(n * 7919 + count));
  if (rcoll_sim_run(&sim, unbuffered ? 30 : 0) != 0) {
    fail("  FAIL %s: the simulator stopped: %s\n", what, sim.error);
    goto out;
  }
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < count; i++) {
      double want = 0;
      for (int q = 0; q < n; q++)
        want += input(q, i);
      double got = avg ? (double)((const int64_t *)w.args[r].recvbuff)[i]
                       : ((const double *)w.args[r].recvbuff)[i];
      if (avg)
        want = (double)((int64_t)want / n);
      if (got != want) {
        snprintf(d, sizeof d, "rank %d element %zu is %.17g, the sum over ranks is %.17g", r, i, got, want);
        fail("  FAIL %s: %s\n", what, d);
        goto out;
      }
    }
out:
  rcoll_world_free(&w);
}

static int part_plans(const rcoll_algorithm_t *al) {
  printf("Plans of recdbl at 1..9 ranks, counts 0 1 2 7 n+1 37 1000 (chunks of 8 elements), in place\n"
         "and not, run in the simulator with buffered and unbuffered (rendezvous) connections:\n");
  for (int n = 1; n <= 9; n++) {
    int before = failures;
    size_t counts[] = {0, 1, 2, 7, (size_t)n + 1, 37, 1000};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
      for (int mode = 0; mode < 4; mode++)
        run_case(al, n, counts[c], mode & 1, mode >> 1, 0);
    run_case(al, n, 37, 0, 1, 1); /* avg: divided exactly once */
    printf("  %d ranks: %s\n", n, failures == before ? "ok" : "FAILED");
  }
  return failures == 0;
}

/* What recursive doubling moves at rank r, folding the extra ranks. */
static void textbook(int n, int r, double s, double c, double out[3]) {
  int p2 = 1, k = 0;
  while (2 * p2 <= n)
    p2 *= 2, k++;
  int rem = n - p2, folded = r < 2 * rem && r % 2 == 0, helper = r < 2 * rem && r % 2;
  double move = folded ? s : k * s + helper * s;
  out[0] = out[1] = move;
  out[2] = folded ? 0 : k * c + helper * c;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int part_formula(const rcoll_algorithm_t *al) {
  const size_t count = 960; /* 120 chunks of 8 doubles */
  printf("Per-rank totals of the plans (sent bytes, received bytes, reduced elements), %zu doubles:\n"
         "  against your traffic() formula, rank by rank, and against recursive doubling's\n"
         "  (log2(p2) S each way, a folded pair S more; compared as a set over the ranks)\n", count);
  for (int n = 2; n <= 8; n++) {
    int before = failures;
    rcoll_world_t w;
    rcoll_world_call_t call = {al, count, rcollFloat64, rcollSum, 0, 0};
    if (rcoll_world_init(&w, n, NULL, 64, 64, 2) != rcollSuccess || rcoll_world_plan(&w, &call) != rcollSuccess) {
      fail("  FAIL %s: %s\n", "formula", "could not plan");
      return 0;
    }
    double plans[3][RCOLL_WORLD_MAX_RANKS], book[3][RCOLL_WORLD_MAX_RANKS];
    char d[240];
    for (int r = 0; r < n; r++) {
      rcoll_traffic_t got, formula;
      rcoll_world_totals(&w, r, &got);
      rcoll_world_formula(&w, al, r, &formula);
      plans[0][r] = got.sent, plans[1][r] = got.received, plans[2][r] = got.reduced;
      double tb[3];
      textbook(n, r, (double)count * 8, (double)count, tb);
      for (int k = 0; k < 3; k++)
        book[k][r] = tb[k];
      if (fabs(got.sent - formula.sent) > 0.5 || fabs(got.received - formula.received) > 0.5 ||
          fabs(got.reduced - formula.reduced) > 0.5) {
        snprintf(d, sizeof d, "%d ranks, rank %d: the plan sends %.0f B, receives %.0f B, reduces %.0f; "
                 "your traffic() says %.0f, %.0f, %.0f", n, r, got.sent, got.received, got.reduced,
                 formula.sent, formula.received, formula.reduced);
        fail("  FAIL %s: %s\n", "traffic()", d);
      }
    }
    static const char *names[3] = {"bytes sent", "bytes received", "elements reduced"};
    for (int k = 0; k < 3; k++) {
      qsort(plans[k], (size_t)n, sizeof(double), cmp_dbl);
      qsort(book[k], (size_t)n, sizeof(double), cmp_dbl);
      for (int r = 0; r < n; r++)
        if (fabs(plans[k][r] - book[k][r]) > 0.5) {
          snprintf(d, sizeof d, "%d ranks: %s per rank, sorted, are not recursive doubling's "
                   "(%.0f where the formula has %.0f)", n, names[k], plans[k][r], book[k][r]);
          fail("  FAIL %s: %s\n", "formula", d);
          break;
        }
    }
    rcoll_world_free(&w);
    printf("  %d ranks: %s\n", n, failures == before ? "ok" : "FAILED");
  }
  return failures == 0;
}

int main(int argc, char **argv) {
  const char *part = argc > 1 ? argv[1] : "";
  const rcoll_algorithm_t *al = find_recdbl();
  if (al == NULL) {
    printf("  FAIL: the table has no all-reduce algorithm named \"recdbl\": does your file end with\n"
           "        RCOLL_ALGORITHM(allreduce_recdbl) = { .name = \"recdbl\", .coll = RCOLL_COLL_ALLREDUCE, ...}?\n"
           "grade_recdbl %s: FAIL\n", part);
    return 1;
  }
  int ok;
  if (!strcmp(part, "plans"))
    ok = part_plans(al);
  else if (!strcmp(part, "formula"))
    ok = part_formula(al);
  else {
    fprintf(stderr, "usage: grade_recdbl plans|formula\n");
    return 2;
  }
  printf("grade_recdbl %s: %s\n", part, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
