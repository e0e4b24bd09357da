/* Every thread's stack, printed from inside a process that has hung: what a
 * GPU test's watchdog prints before it gives up (tests/gpu/gpu_conformance.c).
 *
 * A deadlock between a held stream, the CUDA driver and rcoll's proxy thread
 * shows no error anywhere: the only evidence is where each thread sits. gdb
 * says it best, so it is tried first (attached by a forked child, which the
 * parent allows with PR_SET_PTRACER). Without gdb, each thread in turn is sent
 * SIGUSR2 and prints its own backtrace() as "file +0xoffset" lines, which
 * tests/gpu/lib.sh turns into function and line with addr2line. */
#ifndef RCOLL_TESTS_GPU_HANG_DUMP_H
#define RCOLL_TESTS_GPU_HANG_DUMP_H

#include <dirent.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int hang_dump_done;

static void hang_dump_self(int sig) {
  (void)sig;
  void *frames[48];
  int n = backtrace(frames, 48);
  char line[600];
  int len = snprintf(line, sizeof line, "  thread %ld:\n", (long)syscall(SYS_gettid));
  if (write(2, line, (size_t)len) < 0)
    return;
  for (int i = 0; i < n; i++) {
    Dl_info info;
    if (dladdr(frames[i], &info) != 0 && info.dli_fname != NULL)
      len = snprintf(line, sizeof line, "    #%d %s +0x%lx (%s)\n", i, info.dli_fname,
                     (unsigned long)((char *)frames[i] - (char *)info.dli_fbase),
                     info.dli_sname != NULL ? info.dli_sname : "?");
    else
      len = snprintf(line, sizeof line, "    #%d %p\n", i, frames[i]);
    if (write(2, line, (size_t)len) < 0)
      break;
  }
  atomic_store(&hang_dump_done, 1);
}

/* Call once at the start, before any thread exists to inherit the mask. */
static void hang_dump_init(void) {
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = hang_dump_self;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR2, &sa, NULL);
  void *warm[2];
  backtrace(warm, 2); /* loads the unwinder now, not inside a handler */
}

static int hang_dump_gdb(void) {
  char pid[24];
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  pid_t child = fork();
  if (child < 0)
    return 0;
  if (child == 0) {
    dup2(2, 1);
    execlp("gdb", "gdb", "-q", "-batch", "-p", pid, "-ex", "info threads", "-ex",
           "thread apply all bt 30", (char *)NULL);
    _exit(127);
  }
  int st = 0;
  while (waitpid(child, &st, 0) < 0) {
  }
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Prints every thread's stack to stderr. */
static void hang_dump_all(void) {
  if (hang_dump_gdb())
    return;
  DIR *d = opendir("/proc/self/task");
  if (d == NULL)
    return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    long tid = atol(e->d_name);
    if (tid <= 0)
      continue;
    atomic_store(&hang_dump_done, 0);
    if (syscall(SYS_tgkill, getpid(), tid, SIGUSR2) != 0)
      continue;
    for (int i = 0; i < 200 && !atomic_load(&hang_dump_done); i++) {
      struct timespec ts = {0, 10000000};
      nanosleep(&ts, NULL);
    }
  }
  closedir(d);
}

#endif
