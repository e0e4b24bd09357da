/* The settings parser: RCOLL_* values as an operator (or a launcher's
 * environment) gives them, then the readers that parse the text further:
 * numbers with K/M/G, word choices, RCOLL_ALGO's list, RCOLL_TUNE_ALPHA /
 * _BW / _REDUCE_BW's name=number pairs, interface lists, the debug level,
 * subsystems and file pattern, RCOLL_COMM_ID's address and RCOLL_IB_HCA.
 *
 * Input: lines; a line's first byte picks a setting (by index in
 * rcoll_settings_describe's listing; the high bit picks its NCCL_ name where
 * it has one), the rest of the line is the value. Only names of settings are
 * ever set, in buffers this file owns (putenv), and all are unset after each
 * run, so nothing accumulates and nothing else of the environment changes. */
#include <math.h>
#include <netdb.h>

#include "algo.h"
#include "config.h"
#include "error.h"
#include "fuzz_common.h"
#include "log.h"
#include "sockutil.h"
#include "tuner.h"
#if RCOLL_HAVE_IBVERBS
#include "../../transports/ib/ib.h"
#include "../../transports/ib/ib_select.h"
#endif

#define FUZZ_MAX_VARS 16
#define FUZZ_VALUE_MAX 400 /* past RCOLL_SETTING_STR_MAX, to reach "too long" */

static char env_buf[FUZZ_MAX_VARS][FUZZ_VALUE_MAX + 64];
static char env_name[FUZZ_MAX_VARS][64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_quiet();
  rcoll_log_init(); /* reads RCOLL_DEBUG once, before the runs change it */
  rcoll_settings_warn_unknown();
  return 0;
}

/* Sets the variables the input names; returns how many. */
static int set_vars(fuzz_in_t *in) {
  int n = 0, count = rcoll_settings_count();
  while (in->left > 0 && n < FUZZ_MAX_VARS) {
    uint8_t pick = fuzz_u8(in);
    rcoll_setting_info_t info;
    rcoll_settings_describe(pick % 128 % count, &info);
    const uint8_t *nl = memchr(in->p, '\n', in->left);
    size_t len = nl ? (size_t)(nl - in->p) : in->left;
    char value[FUZZ_VALUE_MAX + 1];
    size_t keep = len < FUZZ_VALUE_MAX ? len : FUZZ_VALUE_MAX;
    memcpy(value, in->p, keep);
    value[keep] = '\0';
    in->p += len + (nl != NULL);
    in->left -= len + (nl != NULL);
    if ((pick & 128) && info.nccl != NULL)
      snprintf(env_name[n], sizeof env_name[n], "%s", info.nccl);
    else
      snprintf(env_name[n], sizeof env_name[n], "RCOLL_%s", info.name);
    snprintf(env_buf[n], sizeof env_buf[n], "%s=%s", env_name[n], value);
    putenv(env_buf[n]);
    n++;
  }
  return n;
}

static void check_link(const rcoll_tune_link_t *l, const char *which) {
  FUZZ_ASSERT(isfinite(l->alpha_us) && l->alpha_us > 0, "%s alpha %g", which, l->alpha_us);
  FUZZ_ASSERT(isfinite(l->gbps) && l->gbps > 0, "%s bandwidth %g", which, l->gbps);
}

/* What the readers beyond the loader make of the loaded text. */
static void parse_further(const rcoll_settings_t *s) {
  unsigned allowed = 0;
  (void)rcoll_algo_parse(s->algo, &allowed); /* none allowed is legal: the fallbacks run */
  const char *const net_of[2] = {"shm", "socket"};
  rcoll_tune_link_t links[2] = {rcoll_tune_default_link("shm"), rcoll_tune_default_link("socket")};
  rcoll_tune_params_t prm;
  if (rcoll_tune_params_from_settings(s, net_of, links, (size_t)s->chunk_size, &prm) == rcollSuccess) {
    check_link(&prm.intra, "intra");
    check_link(&prm.inter, "inter");
    FUZZ_ASSERT(isfinite(prm.reduce_gbps) && prm.reduce_gbps > 0, "reduce %g", prm.reduce_gbps);
  }
  (void)rcoll_ifname_match(s->socket_ifname, "eth0");
  (void)rcoll_ifname_match(s->socket_ifname, "lo");
  (void)rcoll_log_parse_level(s->debug);
  (void)rcoll_log_parse_subsys(s->debug_subsys);
  char path[512];
  if (rcoll_log_expand_path(s->debug_file, "host", 4242, path, sizeof path) == 0)
    FUZZ_ASSERT(memchr(path, '\0', sizeof path) != NULL, "expanded path not terminated");
  rcoll_sockaddr_t a;
  if (s->comm_id[0] != '\0' &&
      rcoll_sockaddr_parse_flags(s->comm_id, -1, AI_NUMERICHOST, &a) == rcollSuccess)
    FUZZ_ASSERT(rcoll_sockaddr_len(&a) != 0, "RCOLL_COMM_ID=%s: family %d", s->comm_id, a.sa.sa_family);
#if RCOLL_HAVE_IBVERBS
  ib_hca_spec_t spec;
  if (ib_hca_parse(ib_settings(s)->ib_hca, &spec) == rcollSuccess)
    (void)ib_hca_match(&spec, "mlx5_0", 1);
#endif
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in_t in = {data, size};
  int n = set_vars(&in);
  rcoll_settings_t *s = malloc(sizeof *s);
  FUZZ_ASSERT(s != NULL, "out of memory");
  int rc = rcoll_settings_load(s);
  if (rc == rcollSuccess) {
    FUZZ_ASSERT(s->timeout >= 1 && s->chunk_size >= 4096 && s->nslots >= 2 && s->nslots <= 16,
                "a loaded value out of its range");
    parse_further(s);
  } else {
    FUZZ_ASSERT(rc == rcollInvalidArgument, "load failed with %d", rc);
    FUZZ_ASSERT(strstr(rcoll_error_text(), "RCOLL_") || strstr(rcoll_error_text(), "NCCL_"),
                "the error names no variable: %s", rcoll_error_text());
  }
  free(s);
  for (int i = 0; i < n; i++)
    unsetenv(env_name[i]);
  return 0;
}
