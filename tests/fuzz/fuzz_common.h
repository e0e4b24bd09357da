/* What every libFuzzer harness of tests/fuzz/ shares: a cursor over the
 * input, and a quiet library (warnings about the garbage the fuzzer feeds
 * would fill the terminal and slow every run). A harness aborts on any
 * broken invariant; ASan and UBSan report memory and arithmetic faults. */
#ifndef RCOLL_FUZZ_COMMON_H
#define RCOLL_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fails the run with a message: libFuzzer saves the input as a crash. */
#define FUZZ_ASSERT(cond, ...)                                                  \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "fuzz invariant broken (%s:%d): ", __FILE__, __LINE__);   \
      fprintf(stderr, __VA_ARGS__);                                             \
      fputc('\n', stderr);                                                      \
      abort();                                                                  \
    }                                                                           \
  } while (0)

typedef struct fuzz_in {
  const uint8_t *p;
  size_t left;
} fuzz_in_t;

/* Up to n bytes into buf, zero-padded when the input runs out. */
static inline void fuzz_take(fuzz_in_t *in, void *buf, size_t n) {
  size_t k = n < in->left ? n : in->left;
  memcpy(buf, in->p, k);
  memset((char *)buf + k, 0, n - k);
  in->p += k;
  in->left -= k;
}

static inline uint8_t fuzz_u8(fuzz_in_t *in) {
  uint8_t v;
  fuzz_take(in, &v, 1);
  return v;
}

/* Quiet logs for the whole run (rcoll reads RCOLL_DEBUG once). */
static inline void fuzz_quiet(void) { setenv("RCOLL_DEBUG", "NONE", 1); }

#endif
