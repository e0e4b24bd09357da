/* rcoll_copy_out (lib/copy_out.h): a copy that streams past the cache from
 * RCOLL_COPY_OUT_STREAM_MIN bytes. It must still be a plain copy: every
 * byte at every alignment of either end, nothing written past the end, and
 * overlapping buffers moved as memmove would. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "copy_out.h"

#define MIN RCOLL_COPY_OUT_STREAM_MIN

static unsigned char pattern(size_t i) { return (unsigned char)(i * 131 + (i >> 9) * 7 + 1); }

/* Copies n bytes from src + so to dst + d0 and checks the copy and the
 * guard bytes on either side. */
static void check(size_t n, size_t so, size_t d0) {
  size_t room = n + 64;
  unsigned char *src = malloc(room), *dst = malloc(room);
  cr_assert(src && dst);
  for (size_t i = 0; i < room; i++)
    src[i] = pattern(i);
  memset(dst, 0xEE, room);
  rcoll_copy_out(dst + d0, src + so, n);
  for (size_t i = 0; i < d0; i++)
    cr_assert_eq(dst[i], 0xEE, "byte %zu before the copy written (n %zu, offsets %zu %zu)", i, n, so, d0);
  cr_assert_eq(memcmp(dst + d0, src + so, n), 0, "copy of %zu bytes, offsets %zu %zu, differs", n, so, d0);
  for (size_t i = d0 + n; i < room; i++)
    cr_assert_eq(dst[i], 0xEE, "byte %zu past the copy written (n %zu, offsets %zu %zu)", i, n, so, d0);
  free(src);
  free(dst);
}

Test(copy_out, every_alignment_around_the_threshold) {
  const size_t sizes[] = {0, 1, 63, 64, 65, 4096, MIN - 1, MIN, MIN + 1, MIN + 63, 3 * MIN + 17};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
    for (size_t so = 0; so < 17; so += 3)
      for (size_t d0 = 0; d0 < 17; d0 += 2)
        check(sizes[k], so, d0);
}

/* Overlapping buffers, either way round, above the threshold: memmove's
 * result. */
Test(copy_out, overlap_moves_like_memmove) {
  const size_t n = MIN + 4096, shifts[] = {1, 64, 4096};
  unsigned char *a = malloc(n + 8192), *b = malloc(n + 8192);
  cr_assert(a && b);
  for (size_t k = 0; k < 3; k++)
    for (int up = 0; up < 2; up++) {
      for (size_t i = 0; i < n + 8192; i++)
        a[i] = b[i] = pattern(i);
      size_t s = shifts[k];
      if (up) {
        rcoll_copy_out(a + s, a, n);
        memmove(b + s, b, n);
      } else {
        rcoll_copy_out(a, a + s, n);
        memmove(b, b + s, n);
      }
      cr_assert_eq(memcmp(a, b, n + 8192), 0, "overlap by %zu %s", s, up ? "upwards" : "downwards");
    }
  free(a);
  free(b);
}
