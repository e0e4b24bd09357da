/* An MPI program that uses rcoll for its collectives: MPI launches the
 * processes and carries the one message rcoll needs to start (the unique
 * id), as NCCL programs do; the data then moves through rcoll. MPI's own
 * all-reduce computes the same sum, for the check.
 *
 *   make && mpiexec -n 4 examples/bin/mpi_allreduce
 *
 * Built by the MPI compiler wrapper (make uses the mpicc configure found,
 * and skips this example without one); rcoll itself does not need MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "rcoll.h"

#define COUNT (1 << 16)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* Rank 0 makes the id (it also starts listening for the others), and
   * MPI hands it to everyone. A failure is broadcast too, so that no rank
   * goes on to wait for a root that is not there. */
  rcollUniqueId id;
  int ok = 1;
  if (rank == 0 && rcollGetUniqueId(&id) != rcollSuccess) {
    fprintf(stderr, "rank 0: rcollGetUniqueId: %s\n", rcollGetLastError(NULL));
    ok = 0;
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok)
    MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);

  rcollComm_t comm;
  rcollResult_t r = rcollCommInitRank(&comm, size, id, rank);
  if (r != rcollSuccess) {
    fprintf(stderr, "rank %d: rcollCommInitRank: %s\n", rank, rcollGetLastError(NULL));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  /* Integers, so that the two sums must agree to the bit whatever order
   * each library adds them in. */
  int *mine = malloc(COUNT * sizeof *mine), *by_rcoll = malloc(COUNT * sizeof *by_rcoll),
      *by_mpi = malloc(COUNT * sizeof *by_mpi);
  if (mine == NULL || by_rcoll == NULL || by_mpi == NULL)
    MPI_Abort(MPI_COMM_WORLD, 1);
  for (int i = 0; i < COUNT; i++)
    mine[i] = (rank + 1) * (i % 1000);
  r = rcollAllReduce(mine, by_rcoll, COUNT, rcollInt32, rcollSum, comm, NULL);
  MPI_Allreduce(mine, by_mpi, COUNT, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  long wrong = 0;
  for (int i = 0; i < COUNT; i++)
    wrong += by_rcoll[i] != by_mpi[i];
  if (r != rcollSuccess)
    fprintf(stderr, "rank %d: rcollAllReduce: %s\n", rank, rcollGetLastError(comm));

  /* One verdict for the whole job. */
  long failures = r != rcollSuccess || wrong, total = 0;
  MPI_Reduce(&failures, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("%d MPI ranks: rcoll's all-reduce of %d ints %s MPI_Allreduce's on %s\n", size, COUNT,
           total ? "DIFFERS FROM" : "matches", total ? "some ranks" : "every rank");
  rcollCommDestroy(comm);
  free(mine);
  free(by_rcoll);
  free(by_mpi);
  MPI_Finalize();
  return failures ? 1 : 0;
}
