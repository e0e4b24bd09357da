/* Removing the segments of processes that died. A segment lives in the
 * directory only while its connection is being made (the acceptor unlinks
 * it once mapped, and the connecting side on any failure), so a file is left
 * only when the connecting process was killed in that window: SIGKILL, the
 * OOM killer, a crash. Every context's init and finalize (which is where the
 * survivors of a dead rank end up) sweep the directory for such files.
 *
 * A name carries its creator's pid and the inode of its pid namespace
 * (shm_seg_name). A file is removed only when that namespace is ours and
 * kill(pid, 0) says ESRCH: a process of another container sharing /dev/shm
 * has pids we cannot judge, EPERM means the process lives under another
 * user, and a reused pid only keeps a dead file a little longer. Names
 * without the namespace (older versions, other programs) are never touched. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "shm_priv.h"

/* The inode of this process's pid namespace, or 0 where it cannot be read
 * (namespace inodes are proc inodes, which are 32 bits). */
static unsigned shm_pidns(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned)st.st_ino : 0;
}

void shm_seg_name(char name[SHM_NAME_MAX], unsigned seq, uint64_t rnd) {
  snprintf(name, SHM_NAME_MAX, SHM_PREFIX "-%d-%u-%u-%016llx", (int)getpid(), shm_pidns(), seq,
           (unsigned long long)rnd);
}

/* The creator of a segment named by shm_seg_name: 1 with *pid set when the
 * name parses and its namespace is ns. */
static int shm_seg_owner(const char *name, unsigned ns, pid_t *pid) {
  int p, end = 0;
  unsigned their_ns, seq;
  char rnd[17];
  if (sscanf(name, SHM_PREFIX "-%d-%u-%u-%16[0-9a-f]%n", &p, &their_ns, &seq, rnd, &end) != 4 ||
      name[end] != '\0' || strlen(rnd) != 16 || p <= 0)
    return 0;
  *pid = p;
  return their_ns == ns && ns != 0;
}

int shm_seg_sweep(const char *dir) {
  unsigned ns = shm_pidns();
  DIR *d = opendir(dir);
  int removed = 0;
  if (d == NULL)
    return 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    pid_t pid;
    if (!shm_seg_owner(e->d_name, ns, &pid) || kill(pid, 0) == 0 || errno != ESRCH)
      continue;
    if (unlinkat(dirfd(d), e->d_name, 0) == 0) {
      removed++;
      RCOLL_INFO(RCOLL_SUB_NET, "shm: removed %s/%s, left by pid %d, which is gone", dir, e->d_name,
                 (int)pid);
    }
  }
  closedir(d);
  return removed;
}
