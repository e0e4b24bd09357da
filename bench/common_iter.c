/* -I's per-iteration summary, and the number and time formats nccl-tests
 * prints, kept here so that the table and the JSON agree to the digit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common_impl.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Nearest-rank percentile, as nccl-tests: with fewer than 100 samples p99
 * may be the maximum. */
static int percentile_index(int n, int pct) {
  int i = (n * pct + 99) / 100 - 1;
  return i < n - 1 ? i : n - 1;
}

void bench_iter_stats(const double *us, int n, bench_iter_stats_t *s) {
  memset(s, 0, sizeof(*s));
  double *sorted = n > 0 ? malloc((size_t)n * sizeof(double)) : NULL;
  if (!sorted)
    return;
  memcpy(sorted, us, (size_t)n * sizeof(double));
  qsort(sorted, (size_t)n, sizeof(double), cmp_double);
  double sum = 0, var = 0;
  for (int i = 0; i < n; i++)
    sum += sorted[i];
  s->avg = sum / n;
  for (int i = 0; i < n; i++)
    var += (sorted[i] - s->avg) * (sorted[i] - s->avg);
  s->stdev = sqrt(var / n); /* population stdev, as nccl-tests */
  s->min = sorted[0];
  s->max = sorted[n - 1];
  s->p50 = sorted[n / 2];
  s->p95 = sorted[percentile_index(n, 95)];
  s->p99 = sorted[percentile_index(n, 99)];
  s->cv_pct = s->avg > 0 ? s->stdev / s->avg * 100.0 : 0.0;
  free(sorted);
}

void bench_format_num(char *buf, int width, double v) {
  size_t len = (size_t)width + 1;
  if (snprintf(buf, len, "%*.2f", width, v) <= width)
    return;
  if (snprintf(buf, len, "%*.1f", width, v) <= width)
    return;
  if (snprintf(buf, len, "%*.0f", width, v) <= width)
    return;
  snprintf(buf, len, width >= 7 ? "%*.1e" : "%*.0e", width, v);
}

void bench_format_now(char *buf, size_t len) {
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}
