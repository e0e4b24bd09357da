/* rcollCommInitFromEnv: rank, size and rendezvous from what launchers other
 * than MPI set. The root address is RCOLL_COMM_ID (NCCL_COMM_ID) when set;
 * otherwise torchrun's MASTER_ADDR with MASTER_PORT + 1, because torchrun's
 * own store already listens on MASTER_PORT. Rank 0 hosts the root there.
 * Without an id to pass around, the secret is derived from what every rank of
 * the job shares: the address and, when set, RCOLL_COMM_SECRET and the job id
 * of torchrun or Slurm. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "comm.h"
#include "log.h"

static const char *const rank_vars[][2] = {
    {"RANK", "WORLD_SIZE"},
    {"PMI_RANK", "PMI_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"SLURM_PROCID", "SLURM_NTASKS"},
};

static rcollResult_t env_rank_size(int *rank, int *size) {
  for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++) {
    const char *r = getenv(rank_vars[i][0]), *s = getenv(rank_vars[i][1]);
    if (r == NULL || s == NULL)
      continue;
    char *end1, *end2;
    long rv = strtol(r, &end1, 10), sv = strtol(s, &end2, 10);
    if (*end1 || *end2 || sv < 1 || rv < 0 || rv >= sv)
      return rcoll_error(rcollInvalidArgument, "rcollCommInitFromEnv: %s=%s %s=%s is not a rank "
                         "within a size", rank_vars[i][0], r, rank_vars[i][1], s);
    *rank = (int)rv;
    *size = (int)sv;
    return rcollSuccess;
  }
  return rcoll_error(rcollInvalidUsage, "rcollCommInitFromEnv: no rank in the environment (set "
                     "RANK and WORLD_SIZE, or launch with mpiexec, srun or torchrun)");
}

static rcollResult_t env_root_addr(const rcoll_settings_t *s, char *text, size_t len) {
  if (s->comm_id[0] != '\0') {
    snprintf(text, len, "%s", s->comm_id);
    return rcollSuccess;
  }
  const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
  if (addr == NULL || port == NULL)
    return rcoll_error(rcollInvalidUsage, "rcollCommInitFromEnv: set RCOLL_COMM_ID=host:port, or "
                       "MASTER_ADDR and MASTER_PORT as torchrun does");
  int p = atoi(port);
  if (p <= 0 || p >= 65535)
    return rcoll_error(rcollInvalidArgument, "rcollCommInitFromEnv: MASTER_PORT=%s is not a port",
                       port);
  snprintf(text, len, strchr(addr, ':') ? "[%s]:%d" : "%s:%d", addr, p + 1);
  return rcollSuccess;
}

/* FNV-1a over the strings every rank of the job shares. */
static uint64_t env_secret(const char *addr) {
  const char *parts[] = {addr, getenv("RCOLL_COMM_SECRET"), getenv("TORCHELASTIC_RUN_ID"),
                         getenv("SLURM_JOB_ID")};
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    for (const char *c = parts[i] ? parts[i] : ""; ; c++) {
      h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
      if (*c == '\0')
        break;
    }
  return h | 1;
}

RCOLL_API rcollResult_t rcollCommInitFromEnv(rcollComm_t *comm, rcollConfig_t *config) {
  if (comm == NULL)
    return rcoll_error(rcollInvalidArgument, "rcollCommInitFromEnv: comm is NULL");
  *comm = NULL;
  int rank = 0, size = 0;
  RCOLL_CHECK(env_rank_size(&rank, &size));
  rcoll_settings_t s;
  RCOLL_CHECK(rcoll_settings_load(&s));
  char text[RCOLL_SETTING_STR_MAX + 16];
  RCOLL_CHECK(env_root_addr(&s, text, sizeof text));
  rcoll_bootstrap_id_t bid = {.magic = RCOLL_BOOTSTRAP_ID_MAGIC, .secret = env_secret(text)};
  RCOLL_CHECK(rcoll_sockaddr_parse(text, -1, &bid.root));
  rcollUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0)
    RCOLL_CHECK(rcoll_bootstrap_root_start(&s, &bid.root, bid.secret, &id));
  else
    memcpy(id.internal, &bid, sizeof bid);
  RCOLL_INFO(RCOLL_SUB_INIT | RCOLL_SUB_ENV, "rank %d of %d from the environment, root %s", rank,
             size, text);
  return rcollCommInitRankConfig(comm, size, id, rank, config);
}
