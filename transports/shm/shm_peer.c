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

#include "pidns.h"
#include "shm_priv.h"

void shm_unreachable_why(const shm_handle_t *h, int err, char *buf, size_t len) {
  const char *hint = "in another network namespace?";
  if (h->ns_key != 0 && h->ns_key == rcoll_pid_ns_key() && h->pid > 0) {
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
