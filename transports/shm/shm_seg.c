/* Segments: files in the shared-memory directory (RCOLL_SHM_DIR; /dev/shm by
 * default, which is where shm_open puts them too). Opening the file by path
 * rather than through shm_open lets tests point the transport at a directory
 * that is missing or full. A segment is created with O_EXCL under a name that
 * carries the creator's pid and pid namespace (so that shm_sweep.c can tell
 * whether its creator is gone) and 64 random bits, and reserved with fallocate
 * so that a full tmpfs fails here with ENOSPC instead of killing the process
 * with SIGBUS when a page is first touched.
 *
 * Placement: on a machine with several NUMA nodes the ring's slots belong
 * on the receiver's node, whose reads wait on memory while the sender's
 * writes are posted. The sender creates the segment but cannot know that
 * node, so it leaves the slots untouched (fallocate's pages are mapped by
 * no one), and the receiver, when it maps the ring, binds the slots to its
 * node (hwtopo.c), which moves those pages, before any message uses them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "hwtopo.h"
#include "log.h"
#include "shm_priv.h"

_Static_assert(sizeof(shm_seg_t) <= SHM_HDR_BYTES, "segment header must fit its page");
_Static_assert(sizeof(shm_slot_t) <= SHM_SLOT_HDR, "slot header too large");
_Static_assert(sizeof(shm_handle_t) <= RCOLL_NET_HANDLE_BYTES, "shm handle too large");

size_t shm_seg_bytes(uint32_t nslots, size_t slot_size) {
  return SHM_HDR_BYTES + (size_t)nslots * slot_size;
}

uint64_t shm_random64(void) {
  uint64_t v;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
    return v;
  /* No entropy yet (early boot): time and pid still keep names apart. */
  return (uint64_t)rcoll_now_us() * 0x9e3779b97f4a7c15ull ^ ((uint64_t)getpid() << 32);
}

static void shm_path(char *buf, size_t len, const char *dir, const char *name) {
  snprintf(buf, len, "%s/%s", dir, name);
}

/* The directory must exist, be writable, and have room for `need` bytes. */
rcollResult_t shm_dir_check(const char *dir, size_t need) {
  struct statvfs st;
  if (statvfs(dir, &st) != 0 || access(dir, W_OK | X_OK) != 0)
    return rcoll_error_quiet(rcollSystemError, "shm: shared-memory directory %s is unusable: %s "
                             "(RCOLL_SHM_DIR)", dir, strerror(errno));
  unsigned long long avail = (unsigned long long)st.f_bavail * st.f_frsize;
  if (avail < need)
    return rcoll_error_quiet(rcollSystemError,
                             "shm: %s has %llu KiB free, less than the %zu KiB two rings need "
                             "(RCOLL_SHM_SLOTS x RCOLL_SHM_SLOT_SIZE each); enlarge it or lower them",
                             dir, avail >> 10, need >> 10);
  return rcollSuccess;
}

static void shm_seg_init(shm_seg_t *seg, uint32_t nslots, size_t slot_size, size_t bytes) {
  seg->magic = SHM_MAGIC;
  seg->nslots = nslots;
  seg->slot_size = slot_size;
  seg->bytes = bytes;
  seg->sender_pid = (int32_t)getpid();
}

/* Creates, reserves and maps one file of `bytes`; 0 or an errno. */
static int shm_seg_try(const char *path, size_t bytes, int populate, void **out) {
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return errno;
  int e = posix_fallocate(fd, 0, (off_t)bytes);
  void *p = MAP_FAILED;
  if (e == 0) {
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
    e = p == MAP_FAILED ? errno : 0;
  }
  close(fd);
  if (e != 0)
    unlink(path);
  *out = p;
  return e;
}

/* A directory too full for a ring of the configured size gets a ring with
 * half the slots, down to the minimum, before the connection fails: a small
 * /dev/shm (containers often have 64 MiB) costs speed, not the job. */
rcollResult_t shm_seg_create(const shm_ctx_t *ctx, char name[SHM_NAME_MAX], shm_seg_t **out) {
  static _Atomic unsigned counter;
  char path[512];
  shm_seg_name(name, atomic_fetch_add(&counter, 1), shm_random64());
  shm_path(path, sizeof path, ctx->dir, name);
  uint32_t n = ctx->nslots;
  void *p = NULL;
  int touch = rcoll_hwtopo_numa_count() == 1; /* else the receiver places the slots */
  int e = shm_seg_try(path, shm_seg_bytes(n, ctx->slot_size), touch, &p);
  while (e == ENOSPC && n / 2 >= SHM_MIN_SLOTS) {
    n /= 2;
    e = shm_seg_try(path, shm_seg_bytes(n, ctx->slot_size), touch, &p);
  }
  if (e != 0)
    return rcoll_error_quiet(rcollSystemError, "shm: cannot create a ring in %s: %s%s", ctx->dir, strerror(e),
                             e == ENOSPC ? " (the directory is full; RCOLL_SHM_DISABLE=1 avoids it)" : "");
  if (n != ctx->nslots)
    RCOLL_INFO(RCOLL_SUB_NET, "shm: %s is short of room: ring of %u slots instead of %u", ctx->dir, n,
               ctx->nslots);
  size_t bytes = shm_seg_bytes(n, ctx->slot_size);
  /* Touch every page now, so that no message pays for a page fault; a
   * child the application forks has no use for the ring. With several NUMA
   * nodes only the header: the slots wait for the receiver's placement. */
  memset(p, 0, touch ? bytes : SHM_HDR_BYTES);
  madvise(p, bytes, MADV_DONTFORK);
  shm_seg_init(p, n, ctx->slot_size, bytes);
  *out = p;
  return rcollSuccess;
}

/* A name from a peer is used as a path component: only our own pattern. */
int shm_seg_name_ok(const char *name) {
  size_t len = strnlen(name, SHM_NAME_MAX);
  return len < SHM_NAME_MAX && strncmp(name, SHM_PREFIX "-", sizeof SHM_PREFIX) == 0 &&
         strchr(name, '/') == NULL;
}

int shm_seg_valid(const shm_seg_t *seg, size_t bytes) {
  return seg->magic == SHM_MAGIC && seg->bytes == bytes && seg->nslots >= SHM_MIN_SLOTS &&
         seg->nslots <= SHM_MAX_SLOTS && seg->slot_size >= SHM_MIN_SLOT &&
         seg->slot_size <= SHM_MAX_SLOT && seg->slot_size % SHM_LINE == 0 &&
         shm_seg_bytes(seg->nslots, seg->slot_size) == bytes;
}

/* The receiver's half of placement (see the top of the file). MAP_POPULATE
 * mapped the slots into this process first, which is what lets the kernel
 * find and move them. */
static void shm_seg_place(shm_seg_t *seg, size_t len, const char *name) {
  char who[SHM_NAME_MAX + 48];
  snprintf(who, sizeof who, "shm: ring %s from pid %d", name, (int)seg->sender_pid);
  rcoll_hwtopo_place_area((char *)seg + SHM_HDR_BYTES, len - SHM_HDR_BYTES, who);
}

rcollResult_t shm_seg_open(const char *dir, const char *name, shm_seg_t **out, size_t *bytes) {
  char path[512];
  struct stat st;
  if (!shm_seg_name_ok(name))
    return rcoll_error_quiet(rcollInvalidArgument, "shm: peer named a segment outside our pattern");
  shm_path(path, sizeof path, dir, name);
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return rcoll_error_quiet(rcollSystemError, "shm: cannot open %s: %s", path, strerror(errno));
  if (fstat(fd, &st) != 0 || st.st_size < SHM_HDR_BYTES) {
    close(fd);
    return rcoll_error_quiet(rcollSystemError, "shm: %s is not a ring segment", path);
  }
  size_t len = (size_t)st.st_size;
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED)
    return rcoll_error_quiet(rcollSystemError, "shm: cannot map %s: %s", path, strerror(e));
  madvise(p, len, MADV_DONTFORK);
  if (!shm_seg_valid(p, len)) {
    munmap(p, len);
    return rcoll_error_quiet(rcollSystemError, "shm: %s has a bad header", path);
  }
  shm_seg_place(p, len, name);
  *out = p;
  *bytes = len;
  return rcollSuccess;
}

void shm_seg_unlink(const char *dir, const char *name) {
  char path[512];
  if (name[0] == '\0')
    return;
  shm_path(path, sizeof path, dir, name);
  unlink(path); /* ENOENT: the other end was first */
}
