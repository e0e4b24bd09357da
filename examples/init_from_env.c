/* rcollCommInitFromEnv: one process per rank, started by a launcher that
 * says in the environment who is who, as torchrun does. No unique id is
 * passed around by hand: rank 0 listens where the environment says, and the
 * others find it there.
 *
 *   torchrun --standalone --nproc_per_node=4 --no_python examples/bin/init_from_env
 *
 * or by hand, as torchrun would set it (one line per rank; rcoll's root
 * listens on MASTER_PORT + 1, as torchrun's own store takes MASTER_PORT):
 *
 *   RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 examples/bin/init_from_env &
 *   RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 examples/bin/init_from_env
 *
 * RCOLL_COMM_ID=host:port names the root's address directly instead of
 * MASTER_ADDR/MASTER_PORT (under mpiexec: mpiexec -n 4 env
 * RCOLL_COMM_ID=127.0.0.1:29555 examples/bin/init_from_env, with the rank
 * from the MPI launcher's own variables). */
#include <stdio.h>
#include <stdlib.h>

#include "rcoll.h"

/* Which launcher variable named this rank, for the printout: the library
 * reads the same ones, in this order. */
static const char *launcher_rank(void) {
  static const char *const names[] = {"RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
  static char text[64];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (getenv(names[i]) != NULL) {
      snprintf(text, sizeof text, "%s=%s", names[i], getenv(names[i]));
      return text;
    }
  return "no launcher variable";
}

static int fail(const char *what, rcollResult_t r, rcollComm_t comm) {
  fprintf(stderr, "init_from_env: %s: %s: %s\n", what, rcollGetErrorString(r),
          rcollGetLastError(comm));
  return 1;
}

int main(void) {
  rcollComm_t comm;
  rcollResult_t r = rcollCommInitFromEnv(&comm, NULL);
  if (r != rcollSuccess)
    return fail("rcollCommInitFromEnv", r, NULL);
  int rank, size;
  rcollCommUserRank(comm, &rank);
  rcollCommCount(comm, &size);

  /* Every rank contributes its rank; all-gather gives each rank the whole
   * list, which must read 0, 1, ..., size - 1 if the launcher's ranks and
   * the communicator's agree. */
  int *all = malloc((size_t)size * sizeof *all);
  if (all == NULL)
    return fail("malloc", rcollSystemError, NULL);
  r = rcollAllGather(&rank, all, 1, rcollInt32, comm, NULL);
  if (r != rcollSuccess)
    return fail("rcollAllGather", r, comm);
  int bad = 0;
  for (int i = 0; i < size; i++)
    bad |= all[i] != i;

  /* And a sum: 1 + 2 + ... + size. */
  int one = rank + 1, sum = 0;
  r = rcollAllReduce(&one, &sum, 1, rcollInt32, rcollSum, comm, NULL);
  if (r != rcollSuccess)
    return fail("rcollAllReduce", r, comm);
  bad |= sum != size * (size + 1) / 2;

  printf("rank %d of %d (%s): ranks gathered %s, sum %d %s\n", rank, size, launcher_rank(),
         bad ? "WRONG" : "in order", sum, sum == size * (size + 1) / 2 ? "correct" : "WRONG");
  free(all);
  rcollCommDestroy(comm);
  return bad;
}
