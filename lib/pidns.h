/* Whose pid numbers a pid is in: a key of this boot of this kernel and of
 * the calling process's pid namespace. Two processes with equal keys see
 * the same pid numbers, so a peer's pid can be compared with getpid() or
 * asked about with kill(pid, 0) only when its key equals ours. Containers
 * have their own pid namespaces (their pid 1, 2, ... are other processes
 * than ours), and RCOLL_HOSTID can make two machines one node, so a pid
 * alone names no process. Used by the shm transport (is the listener's
 * process gone?) and by CUDA IPC (is the peer this very process?). */
#ifndef RCOLL_PIDNS_H
#define RCOLL_PIDNS_H

#include <stdint.h>

/* FNV-1a over the boot id and the pid namespace's link text, with the low
 * bit set; 0 when either cannot be read: a caller then must not claim to
 * know the peer's pid. */
uint64_t rcoll_pid_ns_key(void);

#endif
