/* Why a peer's listener cannot be reached. A unix socket in the abstract
 * namespace is private to its network namespace, and it also vanishes when
 * its process dies; the connect fails the same way in both cases. The pid
 * in the peer's handle tells them apart, but only when it is a pid of our
 * own pid namespace on this same boot of this machine (RCOLL_HOSTID can
 * make two machines one "node"; containers have their own pid numbers): the
 * handle carries a key of both, and the pid is asked about only when the
 * keys match. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shm_priv.h"

/* FNV-1a over the text of a file or link, folded into h. */
static uint64_t shm_fold(uint64_t h, const char *s, ssize_t n) {
  for (ssize_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return h;
}

uint64_t shm_ns_key(void) {
  char buf[128];
  uint64_t h = 0xcbf29ce484222325ull;
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
  if (f)
    fclose(f);
  if (n == 0)
    return 0; /* unknown: never claim to know the peer's pid */
  h = shm_fold(h, buf, (ssize_t)n);
  ssize_t k = readlink("/proc/self/ns/pid", buf, sizeof buf);
  if (k <= 0)
    return 0;
  return shm_fold(h, buf, k) | 1;
}

void shm_unreachable_why(const shm_handle_t *h, int err, char *buf, size_t len) {
  const char *hint = "in another network namespace?";
  if (h->ns_key != 0 && h->ns_key == shm_ns_key() && h->pid > 0) {
    if (kill(h->pid, 0) != 0 && errno == ESRCH) {
      snprintf(buf, len, "cannot reach the listener of pid %d: %s (pid %d has exited)", (int)h->pid,
               strerror(err), (int)h->pid);
      return;
    }
    hint = "it is running: in another network namespace, or has it closed its communicator?";
  }
  snprintf(buf, len, "cannot reach the listener of pid %d: %s (%s RCOLL_SHM_DISABLE=1 avoids shared "
           "memory)", (int)h->pid, strerror(err), hint);
}
