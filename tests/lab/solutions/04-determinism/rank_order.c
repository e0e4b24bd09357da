/* Lab exercise 04, reference solution: what RCOLL_DETERMINISTIC=1
 * promises, computed here: every element summed in rank order,
 * ((x0 + x1) + x2) + ..., in float, one rounding per addition. */
#include <stddef.h>

void lab_rank_order_sum(const float *const *inputs, int nranks, size_t count, float *out);

void lab_rank_order_sum(const float *const *inputs, int nranks, size_t count, float *out) {
  for (size_t i = 0; i < count; i++) {
    float acc = inputs[0][i];
    for (int r = 1; r < nranks; r++)
      acc += inputs[r][i]; /* float + float: rounded to float at each step */
    out[i] = acc;
  }
}
