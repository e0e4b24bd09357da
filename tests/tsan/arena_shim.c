/* LD_PRELOAD shim for the Criterion binaries under ThreadSanitizer
 * (scripts/run-tsan.sh; built by `make tsan-build`, without TSan). Criterion's
 * runner (BoxFort) maps its arenas with MAP_FIXED at a random address in
 * [0x200000000000, 0x7f0000000000) that mincore says is free. TSan reserves
 * every gap between its application and shadow ranges, so mincore calls
 * nearly every candidate taken, and its mmap refuses a fixed address outside
 * the application ranges: Criterion aborts at start ("Could not initialize
 * inheritable arena") in all but a few percent of runs. Here mincore calls a
 * page of those gaps free, and mmap64 (Criterion is built with 64-bit file
 * offsets) turns such a fixed request into a hint inside TSan's middle
 * application range: the kernel places it there when that is free (BoxFort
 * accepts any address in its window, and its children map the arena at the
 * same, now valid, address), else elsewhere (BoxFort then tries another).
 * Addresses TSan accepts pass through untouched. mincore goes straight to
 * the system call, so that nothing here runs before dlsym can. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>
/* x86-64, 48-bit address space, GCC 12's libtsan: its application ranges
 * inside BoxFort's window are [MID_BEG, MID_END) and [HI_BEG, 0x800000000000). */
#define MID_BEG 0x550000000000ull
#define MID_END 0x568000000000ull
#define BXF_BEG 0x200000000000ull
#define BXF_END 0x7f0000000000ull
#define HI_BEG 0x7e8000000000ull
typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
static int tsan_gap(uintptr_t a, size_t len) {
  return a >= BXF_BEG && a < BXF_END && !(a >= MID_BEG && a + len <= MID_END) && !(a >= HI_BEG);
}
int mincore(void *addr, size_t len, unsigned char *vec) {
  if (tsan_gap((uintptr_t)addr, len)) { errno = ENOMEM; return -1; }
  return (int)syscall(SYS_mincore, addr, len, vec);
}
static void *fwd(const char *name, void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  mmap_fn next = (mmap_fn)dlsym(RTLD_NEXT, name);
  uintptr_t a = (uintptr_t)addr;
  if ((flags & MAP_FIXED) && tsan_gap(a, len)) {
    a = MID_BEG + (a - BXF_BEG) % (MID_END - MID_BEG - (len + (1ull << 30)));
    a &= ~(uintptr_t)0xffffff;
    return next((void *)a, len, prot, flags & ~MAP_FIXED, fd, off);
  }
  return next(addr, len, prot, flags, fd, off);
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  return fwd("mmap64", addr, len, prot, flags, fd, off);
}
