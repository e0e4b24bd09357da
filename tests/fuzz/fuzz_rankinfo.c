/* What a communicator's init allgathers over the bootstrap ring after the
 * root's table: every rank's info (host id, transports open, listen
 * handles), then every rank's tuner parameters. Both come from peers; a
 * corrupt or foreign one must be refused or made harmless before the
 * topology, the transport choice and the tuner's model are built from it.
 *
 * Input: nranks - 1 in the first byte (1..8 ranks), then nranks infos, then
 * nranks tuner parameter sets (zero-padded when the input runs out). This
 * rank is rank 0. */
#include <math.h>

#include "algo.h"
#include "comm.h"
#include "error.h"
#include "fuzz_common.h"
#include "net.h"
#include "topo.h"
#include "tuner.h"

#define FUZZ_MAX_RANKS 8

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_quiet();
  return 0;
}

static void check_topo(const rcoll_topo_t *t, int nranks) {
  FUZZ_ASSERT(t->nnodes >= 1 && t->nnodes <= nranks, "%d nodes of %d ranks", t->nnodes, nranks);
  for (int r = 0; r < nranks; r++)
    FUZZ_ASSERT(t->node_of[r] >= 0 && t->node_of[r] < t->nnodes, "rank %d on node %d", r, t->node_of[r]);
}

/* The model from the agreed parameters must give every call a usable plan. */
static void use_tuner(const rcoll_topo_t *topo, const rcoll_tune_params_t *prm) {
  rcoll_tuner_t *t = malloc(sizeof *t);
  FUZZ_ASSERT(t != NULL, "out of memory");
  if (rcoll_tuner_setup(t, topo, prm) == rcollSuccess) {
    static const size_t sizes[] = {8, 65536, (size_t)1 << 26};
    for (int coll = 0; coll < RCOLL_COLL_NKINDS; coll++)
      for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        rcoll_tune_choice_t ch = rcoll_tune_choose(t, coll, sizes[i]);
        if (ch.algo >= 0)
          FUZZ_ASSERT(ch.chunk >= 64 && ch.chunk % 64 == 0, "coll %d, %zu bytes: chunk %zu", coll, sizes[i],
                      ch.chunk);
      }
  }
  free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in_t in = {data, size};
  int nranks = 1 + fuzz_u8(&in) % FUZZ_MAX_RANKS;
  rcoll_rank_info_t *infos = malloc(sizeof *infos * (size_t)nranks);
  rcoll_tune_params_t *prm = malloc(sizeof *prm * (size_t)nranks);
  FUZZ_ASSERT(infos != NULL && prm != NULL, "out of memory");
  fuzz_take(&in, infos, sizeof *infos * (size_t)nranks);
  fuzz_take(&in, prm, sizeof *prm * (size_t)nranks);

  rcoll_comm_infos_check(infos, nranks);
  rcoll_topo_t topo;
  if (rcoll_topo_build(&topo, infos[0].hostid, sizeof *infos, nranks, 0) == rcollSuccess) {
    check_topo(&topo, nranks);
    for (int a = 0; a < nranks; a++)
      for (int b = 0; b < nranks; b++) {
        int t = rcoll_net_best(infos[a].nets & infos[b].nets, topo.node_of[a] == topo.node_of[b]);
        FUZZ_ASSERT(t >= -1 && t < rcoll_net_count(), "transport %d", t);
      }
    if (rcoll_tune_params_check(prm, nranks) == rcollSuccess) {
      rcoll_tune_params_t agreed;
      rcoll_tune_params_agree(prm, nranks, &agreed);
      use_tuner(&topo, &agreed);
    } else {
      FUZZ_ASSERT(strstr(rcoll_error_text(), "rank") != NULL, "error names no rank: %s", rcoll_error_text());
    }
    rcoll_topo_free(&topo);
  }
  free(infos);
  free(prm);
  return 0;
}
