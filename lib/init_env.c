/* rcollCommInitFromEnv: rank, size and rendezvous from what launchers other
 * than MPI set. The root address is RCOLL_COMM_ID (NCCL_COMM_ID) when set;
 * otherwise torchrun's MASTER_ADDR with MASTER_PORT + 1, because torchrun's
 * own store already listens on MASTER_PORT. Rank 0 hosts the root there.
 * Without an id to pass around, the secret is derived from what every rank of
 * the job shares: the address, the job id of torchrun or Slurm when set, and
 * the secret from RCOLL_COMM_SECRET or the file RCOLL_COMM_SECRET_FILE names.
 * Without that last, anyone who knows the address can compute the secret and
 * join or disturb the job, so init warns (once per process). */
#include <errno.h>
#include <stdatomic.h>
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

/* A secret file may be long (a key), but not without bound. */
#define ENV_SECRET_FILE_MAX 65536

/* FNV-1a of len bytes, continued from h; a terminating zero separates parts. */
static uint64_t env_hash(uint64_t h, const char *p, size_t len) {
  for (size_t i = 0; i < len; i++)
    h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
  return h * 0x100000001b3ull; /* the zero byte: h ^ 0 is h */
}

static uint64_t env_hash_str(uint64_t h, const char *text) {
  return env_hash(h, text ? text : "", text ? strlen(text) : 0);
}

/* Whitespace that editors and `echo` leave at the end of a file. */
static int env_trailing_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Reads the secret file into a fresh buffer, trailing whitespace dropped, so
 * that `echo key > file` and RCOLL_COMM_SECRET=key give the same secret. */
static rcollResult_t env_secret_file(const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return rcoll_error(rcollInvalidArgument, "RCOLL_COMM_SECRET_FILE=%s: cannot open: %s", path,
                       strerror(errno));
  char *buf = malloc(ENV_SECRET_FILE_MAX + 1);
  size_t n = buf ? fread(buf, 1, ENV_SECRET_FILE_MAX + 1, f) : 0;
  int bad = buf == NULL || ferror(f);
  fclose(f);
  /* A file over the limit must stay over it, trailing spaces or not. */
  while (n > 0 && n <= ENV_SECRET_FILE_MAX && env_trailing_space(buf[n - 1]))
    n--;
  const char *why = bad ? "cannot read it" : n == 0 ? "the file is empty"
                    : n > ENV_SECRET_FILE_MAX ? "larger than 64 KiB" : NULL;
  if (why != NULL) {
    free(buf);
    return rcoll_error(rcollInvalidArgument, "RCOLL_COMM_SECRET_FILE=%s: %s", path, why);
  }
  *out = buf;
  *len = n;
  return rcollSuccess;
}

/* Mixes the job's secret into h; *have says whether there was one. */
static rcollResult_t env_secret_mix(const rcoll_settings_t *s, uint64_t *h, int *have) {
  *have = 0;
  if (s->comm_secret[0] != '\0' && s->comm_secret_file[0] != '\0')
    return rcoll_error(rcollInvalidUsage, "rcollCommInitFromEnv: set RCOLL_COMM_SECRET or "
                       "RCOLL_COMM_SECRET_FILE, not both");
  if (s->comm_secret_file[0] != '\0') {
    char *buf = NULL;
    size_t len = 0;
    RCOLL_CHECK(env_secret_file(s->comm_secret_file, &buf, &len));
    *h = env_hash(*h, buf, len);
    memset(buf, 0, len);
    free(buf);
    *have = 1;
  } else {
    *h = env_hash_str(*h, s->comm_secret); /* the empty string when none */
    *have = s->comm_secret[0] != '\0';
  }
  return rcollSuccess;
}

/* The secret every rank of the job computes alike: a hash of what they share,
 * in the order earlier releases hashed it, so that their ranks still agree. */
static rcollResult_t env_secret(const rcoll_settings_t *s, const char *addr, uint64_t *out) {
  static atomic_flag warned = ATOMIC_FLAG_INIT;
  uint64_t h = env_hash_str(0xcbf29ce484222325ull, addr);
  int have = 0;
  RCOLL_CHECK(env_secret_mix(s, &h, &have));
  h = env_hash_str(h, getenv("TORCHELASTIC_RUN_ID"));
  h = env_hash_str(h, getenv("SLURM_JOB_ID"));
  if (!have && !atomic_flag_test_and_set(&warned))
    RCOLL_WARN("rcollCommInitFromEnv: neither RCOLL_COMM_SECRET nor RCOLL_COMM_SECRET_FILE is set, "
               "so the job's secret derives from the root address %s alone: anyone who can reach "
               "it can join or disturb this job. Set one of them alike on every rank", addr);
  *out = h | 1;
  return rcollSuccess;
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
  rcoll_bootstrap_id_t bid = {.magic = RCOLL_BOOTSTRAP_ID_MAGIC};
  RCOLL_CHECK(env_secret(&s, text, &bid.secret));
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
