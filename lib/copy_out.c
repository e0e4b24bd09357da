/* Copies past the cache (copy_out.h). */
#include "copy_out.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

void rcoll_copy_stream(void *dst, const void *src, size_t n) {
  char *d = dst;
  const char *s = src;
#if defined(__x86_64__)
  /* Align the destination to 16 bytes, stream whole lines, then the tail. */
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  head = head < n ? head : n;
  memcpy(d, s, head);
  size_t i = head;
  for (; i + 64 <= n; i += 64)
    for (int k = 0; k < 64; k += 16)
      _mm_stream_si128((__m128i *)(d + i + k), _mm_loadu_si128((const __m128i *)(s + i + k)));
  memcpy(d + i, s + i, n - i);
  _mm_sfence();
#else
  memcpy(d, s, n);
#endif
}

void rcoll_copy_out(void *dst, const void *src, size_t n) {
  uintptr_t a = (uintptr_t)dst, b = (uintptr_t)src;
  int overlap = a < b + n && b < a + n;
  if (n >= RCOLL_COPY_OUT_STREAM_MIN && !overlap)
    rcoll_copy_stream(dst, src, n);
  else
    memmove(dst, src, n);
}
