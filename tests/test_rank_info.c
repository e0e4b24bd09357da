/* The rank infos a communicator allgathers at init (lib/comm_net.c): what
 * peers sent is made safe before the topology is built from it. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "topo.h"

/* Seen while writing tests/fuzz/fuzz_rankinfo.c: host ids without a terminator had
 * rcoll_topo_build's strcmp read past the end of the table (ASan: heap
 * buffer overflow). Every byte here is 'A', as a corrupt peer's could be. */
Test(rank_info, host_ids_without_terminator_are_cut) {
  int nranks = 3;
  rcoll_rank_info_t *infos = malloc(sizeof *infos * (size_t)nranks);
  cr_assert_not_null(infos);
  memset(infos, 'A', sizeof *infos * (size_t)nranks);
  rcoll_comm_infos_check(infos, nranks);
  for (int r = 0; r < nranks; r++)
    cr_assert_eq(strnlen(infos[r].hostid, RCOLL_HOSTID_MAX), (size_t)RCOLL_HOSTID_MAX - 1, "rank %d", r);
  rcoll_topo_t topo;
  cr_assert_eq(rcoll_topo_build(&topo, infos[0].hostid, sizeof *infos, nranks, 1), 0);
  cr_assert_eq(topo.nnodes, 1, "equal ids, one node");
  cr_assert_eq(topo.local_rank, 1);
  rcoll_topo_free(&topo);
  free(infos);
}

/* A real id is shorter than the field: the check leaves it as it is. */
Test(rank_info, real_host_ids_are_unchanged) {
  rcoll_rank_info_t infos[2];
  memset(infos, 0, sizeof infos);
  strcpy(infos[0].hostid, "node1/netns:4026531840");
  strcpy(infos[1].hostid, "node2/netns:4026531840");
  rcoll_comm_infos_check(infos, 2);
  cr_assert_str_eq(infos[0].hostid, "node1/netns:4026531840");
  cr_assert_str_eq(infos[1].hostid, "node2/netns:4026531840");
  rcoll_topo_t topo;
  cr_assert_eq(rcoll_topo_build(&topo, infos[0].hostid, sizeof infos[0], 2, 0), 0);
  cr_assert_eq(topo.nnodes, 2);
  rcoll_topo_free(&topo);
}
