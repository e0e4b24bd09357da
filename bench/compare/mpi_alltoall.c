/* Reference benchmark: MPI_Alltoall (float32) timed the way
 * bench/alltoall_perf times rcollAlltoAll, so that compare_alltoall.sh can
 * set the two side by side.
 *
 *   mpicc.openmpi -O2 -o mpi_alltoall mpi_alltoall.c
 *   mpiexec.openmpi -n 2 ./mpi_alltoall -n 100 -w 10 8 1M 16M
 *
 * A size is what nccl-tests' alltoall_perf calls size: the bytes of one
 * rank's send buffer, n blocks of size / n bytes, one per rank. Each size runs
 * -w warm-up calls, then -n timed calls between barriers; the time is the
 * mean over ranks of each rank's time per call. algbw = size / time, busbw =
 * algbw * (n-1)/n (GB/s, 1e9), as nccl-tests. With -c 1 (the default) the
 * blocks are checked after the timed calls. One row per size (count: elements
 * per block, as bench/alltoall_perf prints it):
 *   bytes count time_us algbw busbw #wrong */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

/* "64", "1K", "4M", "1G" (binary multiples); 0 if malformed. */
static size_t parse_size(const char *t) {
  char *end;
  unsigned long long v = strtoull(t, &end, 10);
  size_t unit = 1;
  switch (*end) {
  case 'K': case 'k': unit = 1 << 10; end++; break;
  case 'M': case 'm': unit = 1 << 20; end++; break;
  case 'G': case 'g': unit = 1 << 30; end++; break;
  default: break;
  }
  if (*end == 'B' || *end == 'b')
    end++;
  return end == t || *end != '\0' ? 0 : (size_t)v * unit;
}

/* The value rank `from` sends to rank `to` at index i of its block. */
static float value(int from, int to, size_t i) { return (float)((from * 131 + to * 17 + (int)(i % 1000)) % 4096); }

static long run_size(size_t bytes, int iters, int warmup, int check, int rank, int n) {
  size_t count = bytes / sizeof(float) / (size_t)n;
  if (count == 0)
    count = 1;
  float *s = malloc(count * (size_t)n * sizeof(float)), *r = malloc(count * (size_t)n * sizeof(float));
  if (s == NULL || r == NULL) {
    fprintf(stderr, "mpi_alltoall: out of memory for %zu bytes\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int to = 0; to < n; to++)
    for (size_t i = 0; i < count; i++)
      s[(size_t)to * count + i] = value(rank, to, i);
  for (int k = 0; k < warmup; k++)
    MPI_Alltoall(s, (int)count, MPI_FLOAT, r, (int)count, MPI_FLOAT, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int k = 0; k < iters; k++)
    MPI_Alltoall(s, (int)count, MPI_FLOAT, r, (int)count, MPI_FLOAT, MPI_COMM_WORLD);
  double mine = (MPI_Wtime() - t0) / iters * 1e6, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  long wrong = 0, total = 0;
  if (check)
    for (int from = 0; from < n; from++)
      for (size_t i = 0; i < count; i++)
        wrong += r[(size_t)from * count + i] != value(from, rank, i);
  MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  size_t sent = count * (size_t)n * sizeof(float);
  double t = sum / n, algbw = (double)sent / (t * 1e3);
  if (rank == 0)
    printf("%12zu %12zu %10.2f %8.3f %8.3f %6s\n", sent, count, t, algbw,
           algbw * (n - 1) / n, check ? (total ? "FAIL" : "0") : "N/A");
  if (rank == 0 && total)
    printf("# %ld wrong elements at %zu bytes\n", total, sent);
  free(s);
  free(r);
  return total;
}

int main(int argc, char **argv) {
  int iters = 20, warmup = 5, check = 1, rank, n, a = 1;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (; a + 1 < argc && argv[a][0] == '-'; a += 2) {
    int v = atoi(argv[a + 1]);
    if (!strcmp(argv[a], "-n") && v > 0) iters = v;
    else if (!strcmp(argv[a], "-w") && v >= 0) warmup = v;
    else if (!strcmp(argv[a], "-c")) check = v != 0;
    else {
      if (rank == 0)
        fprintf(stderr, "usage: mpi_alltoall [-n iters] [-w warmup] [-c 0|1] SIZE...\n");
      MPI_Finalize();
      return 2;
    }
  }
  if (rank == 0)
    printf("# MPI_Alltoall float32, %d ranks, %d iters, %d warm-up\n#  bytes count time_us algbw busbw #wrong\n",
           n, iters, warmup);
  long wrong = 0;
  for (; a < argc; a++) {
    size_t bytes = parse_size(argv[a]);
    if (bytes == 0) {
      if (rank == 0)
        fprintf(stderr, "mpi_alltoall: bad size '%s'\n", argv[a]);
      MPI_Finalize();
      return 2;
    }
    wrong += run_size(bytes, iters, warmup, check, rank, n);
  }
  MPI_Finalize();
  return wrong != 0;
}
