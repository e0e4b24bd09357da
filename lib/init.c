/* Public entry points that create communicators: from a unique id, several
 * in one process, or from the launcher's environment. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "bootstrap.h"
#include "comm.h"
#include "device.h"
#include "log.h"

static uint64_t random_secret(void) {
  uint64_t s = 0;
  if (getrandom(&s, sizeof s, 0) != sizeof s)
    s = (uint64_t)rcoll_now_us() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&s;
  return s | 1; /* never zero */
}

RCOLL_API rcollResult_t rcollGetUniqueId(rcollUniqueId *uniqueId) {
  if (uniqueId == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollGetUniqueId: uniqueId is NULL");
  rcoll_settings_t s;
  RCOLL_CHECK(rcoll_settings_load(&s));
  rcoll_sockaddr_t at, *listen_at = NULL;
  if (s.comm_id[0] != '\0') { /* like NCCL_COMM_ID: the root listens there */
    RCOLL_CHECK(rcoll_sockaddr_parse(s.comm_id, -1, &at));
    listen_at = &at;
  }
  return rcoll_bootstrap_root_start(&s, listen_at, random_secret(), uniqueId);
}

/* The checks every init entry makes; fn names the entry in errors. The
 * config is read into *cfg (comm_config.c). */
static rcollResult_t init_checks(const char *fn, rcollComm_t *comm, int nranks, int rank,
                                 const rcollConfig_t *config, rcollConfig_t *cfg) {
  if (comm == NULL)
    return rcoll_error(rcollInvalidArgument, "%s: comm is NULL", fn);
  *comm = NULL;
  if (nranks < 1)
    return rcoll_error(rcollInvalidArgument, "%s: nranks %d must be at least 1", fn, nranks);
  if (rank < 0 || rank >= nranks)
    return rcoll_error(rcollInvalidArgument, "%s: rank %d is not in [0, %d)", fn, rank, nranks);
  return rcoll_config_read(fn, config, cfg);
}

RCOLL_API rcollResult_t rcollCommInitRankConfig(rcollComm_t *comm, int nranks, rcollUniqueId commId,
                                                int rank, rcollConfig_t *config) {
  rcollConfig_t cfg;
  RCOLL_CHECK(init_checks("rcollCommInitRank", comm, nranks, rank, config, &cfg));
  rcoll_log_set_rank(rank);
  return rcoll_comm_create(comm, nranks, &commId, rank, &cfg);
}

/* Every rank passes the same nId ids in the same order; rank r meets at
 * commIds[k] for its block k (NCCL's blocks: lib/bootstrap.c), so each id's
 * root serves about nranks / nId ranks. */
RCOLL_API rcollResult_t rcollCommInitRankScalable(rcollComm_t *newcomm, int nranks, int myrank, int nId,
                                                  rcollUniqueId *commIds, rcollConfig_t *config) {
  static const char fn[] = "rcollCommInitRankScalable";
  rcollConfig_t cfg;
  RCOLL_CHECK(init_checks(fn, newcomm, nranks, myrank, config, &cfg));
  if (nId < 1 || nId > nranks)
    return rcoll_error(rcollInvalidArgument, "%s: nId %d must be in 1..nranks (%d): at most one unique id "
                       "per rank", fn, nId, nranks);
  if (commIds == NULL)
    return rcoll_error(rcollInvalidArgument, "%s: commIds is NULL", fn);
  for (int i = 0; i < nId; i++) {
    rcoll_bootstrap_id_t dec;
    if (rcoll_bootstrap_id_decode(&commIds[i], &dec) != rcollSuccess) {
      char why[RCOLL_ERROR_TEXT_MAX]; /* copied first: rcoll_error rewrites that text */
      snprintf(why, sizeof why, "%s", rcoll_error_text());
      return rcoll_error(rcollInvalidArgument, "%s: unique id %d of %d: %s", fn, i, nId, why);
    }
  }
  rcoll_log_set_rank(myrank);
  return rcoll_comm_create_ids(newcomm, nranks, commIds, nId, myrank, &cfg);
}

RCOLL_API rcollResult_t rcollCommInitRank(rcollComm_t *comm, int nranks, rcollUniqueId commId,
                                          int rank) {
  return rcollCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

typedef struct init_all_arg {
  rcollComm_t *comm;
  int nranks, rank;
  int device; /* devlist[rank], or -1 */
  rcollUniqueId id;
  rcollResult_t result;
  char error[RCOLL_ERROR_TEXT_MAX];
} init_all_arg_t;

static void *init_all_thread(void *p) {
  init_all_arg_t *a = p;
  /* The current device is per thread: this rank's thread makes its devlist
   * entry current, and the communicator binds it at init. */
  a->result = a->device >= 0 ? rcoll_device_ops.set_device(a->device) : rcollSuccess;
  if (a->result != rcollSuccess) {
    /* Rare: rcollCommInitAll tried every device first. The other ranks
     * then wait for this one until RCOLL_TIMEOUT. */
    snprintf(a->error, sizeof a->error, "devlist[%d] = %d: %s", a->rank, a->device, rcoll_error_text());
    return NULL;
  }
  a->result = rcollCommInitRank(a->comm, a->nranks, a->id, a->rank);
  snprintf(a->error, sizeof a->error, "%s", rcoll_error_text());
  return NULL;
}

/* Init is collective, so each rank joins from its own thread; the calling
 * thread waits for all of them. Communicator i is bound to CUDA device
 * devlist[i] (made current in its thread before init, as NCCL does); with
 * devlist NULL each takes the device current in a new thread (CUDA's 0), as
 * rcoll serves host buffers with more ranks than devices (NCCL would use
 * devices 0..ndev-1). Without CUDA the entries are checked, and unused. */
RCOLL_API rcollResult_t rcollCommInitAll(rcollComm_t *comms, int ndev, const int *devlist) {
  if (comms == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollCommInitAll: comms is NULL");
  if (ndev < 1)
    return rcoll_error(rcollInvalidArgument, "rcollCommInitAll: ndev %d must be at least 1", ndev);
  /* Every device is tried here first, in the calling thread (then made
   * current again as it was): a bad one fails the call at once, not after
   * the other ranks' threads time out waiting for its rank. */
  int current = rcoll_device_ops.current_device();
  for (int i = 0; devlist != NULL && i < ndev; i++) {
    rcollResult_t r = devlist[i] < 0 ? rcoll_error_quiet(rcollInvalidArgument, "not a device")
                                     : rcoll_device_ops.set_device(devlist[i]);
    if (r != rcollSuccess) {
      char why[RCOLL_ERROR_TEXT_MAX];
      snprintf(why, sizeof why, "%s", rcoll_error_text());
      if (current >= 0)
        rcoll_device_ops.set_device(current);
      return rcoll_error(rcollInvalidArgument, "rcollCommInitAll: devlist[%d] = %d: %s", i, devlist[i], why);
    }
  }
  if (devlist != NULL && current >= 0)
    rcoll_device_ops.set_device(current);
  rcollUniqueId id;
  RCOLL_CHECK(rcollGetUniqueId(&id));
  init_all_arg_t *args = calloc((size_t)ndev, sizeof *args);
  pthread_t *threads = calloc((size_t)ndev, sizeof *threads);
  if (args == NULL || threads == NULL) {
    free(args);
    free(threads);
    return rcoll_error(rcollSystemError, "rcollCommInitAll: out of memory");
  }
  int started = 0;
  for (; started < ndev; started++) {
    args[started] = (init_all_arg_t){.comm = &comms[started], .nranks = ndev, .rank = started, .id = id,
                                     .device = devlist != NULL ? devlist[started] : -1};
    if (pthread_create(&threads[started], NULL, init_all_thread, &args[started]) != 0)
      break;
  }
  for (int i = 0; i < started; i++)
    pthread_join(threads[i], NULL);
  rcollResult_t r = started == ndev ? rcollSuccess : rcollSystemError;
  const char *why = started == ndev ? "" : "cannot start threads";
  for (int i = 0; i < started; i++)
    if (args[i].result != rcollSuccess && r == rcollSuccess) {
      r = args[i].result;
      why = args[i].error;
    }
  if (r != rcollSuccess) {
    for (int i = 0; i < started; i++)
      if (args[i].result == rcollSuccess)
        rcollCommAbort(comms[i]);
    rcoll_error(r, "rcollCommInitAll: %s", why);
  }
  free(args);
  free(threads);
  return r;
}
