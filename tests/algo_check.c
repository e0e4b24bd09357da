/* Every algorithm through the real library on real processes placed on
 * several "nodes" (each rank sets RCOLL_HOSTID before joining, so ranks of
 * one node share memory and nodes talk over sockets), and deterministic mode
 * checked bit for bit (driven by tests/check_algos.sh).
 *
 *   algo_check -p 4 -N 2        4 processes on 2 nodes, in blocks
 *   algo_check -p 6 -N 3 -r     round robin: rank r on node r % 3
 *   -u                          uneven: the last node gets the remainder
 *
 * For each RCOLL_ALGO (every algorithm of the table: ring, tree, hier, ...
 * and the tuner's own choice) every rank all-reduces, reduces, broadcasts and
 * reduce-scatters vectors of small integers held in floats (sums are exact,
 * so any algorithm must give the expected bits), and moves them by
 * all-to-all, gather and scatter. Then, with
 * RCOLL_DETERMINISTIC=1 and several chunk sizes and RCOLL_ALGO lists, vectors
 * of floats of mixed magnitudes must reduce to exactly ((x0 + x1) + x2) + ...
 * as computed here, whatever was asked for. As a check that this comparison
 * can fail, the ring's result (other order) must differ somewhere for n >= 3.
 * In every configuration, sums, maxima and minima of such floats and of
 * zeros of both signs must give every rank rank 0's bits.
 * Prints failures and "algo_check: N passed, M failed"; exits 1 on failure. */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "algo.h"
#include "rcoll.h"

#define MAX_RANKS 16

typedef struct config {
  const char *algo;  /* RCOLL_ALGO */
  const char *chunk; /* RCOLL_CHUNK_SIZE, or NULL */
  int deterministic;
} config_t;

/* After one config per algorithm of the table (make_configs): */
static const config_t more_configs[] = {
    {"", NULL, 0},            {"", "4096", 0},          {"", NULL, 1},
    {"ring,tree", "8192", 1}, {"hier", "65536", 1},     {"rabenseifner", "4096", 1},
};
#define MAX_CONFIGS 64
static config_t configs[MAX_CONFIGS];
static int nconfigs;

/* RCOLL_ALGO forced to each algorithm family of the table (lib/algo.h),
 * but those that are the only way to do a call (point to point). */
static void make_configs(void) {
  for (int f = 0; f < rcoll_algo_family_count() && nconfigs < MAX_CONFIGS; f++) {
    int only = 1;
    for (int i = 0; rcoll_algorithms[i] != NULL; i++)
      if (rcoll_algorithm_family(rcoll_algorithms[i]) == f)
        only &= (rcoll_algorithms[i]->flags & RCOLL_ALGO_ONLY) != 0;
    if (!only)
      configs[nconfigs++] = (config_t){rcoll_algo_name(f), NULL, 0};
  }
  for (size_t k = 0; k < sizeof more_configs / sizeof more_configs[0] && nconfigs < MAX_CONFIGS; k++)
    configs[nconfigs++] = more_configs[k];
}

static int nranks, nnodes, round_robin, uneven;
static int passed, failed;

static int node_of(int r) {
  if (round_robin)
    return r % nnodes;
  int per = uneven ? nranks / nnodes : (nranks + nnodes - 1) / nnodes;
  return r / per < nnodes ? r / per : nnodes - 1;
}

static void verdict(int ok, const config_t *c, int rank, const char *what) {
  if (ok) {
    passed++;
    return;
  }
  failed++;
  printf("FAIL rank %d of %d (%d nodes%s): RCOLL_ALGO=%s chunk %s%s: %s\n", rank, nranks, nnodes,
         round_robin ? " round robin" : "", c->algo, c->chunk ? c->chunk : "default",
         c->deterministic ? " deterministic" : "", what);
}

static float exact_input(int r, size_t i) { return (float)(r + 1 + (int)(i % 7)); }

/* Floats of mixed magnitudes and signs: addition order shows in the bits. */
static float mixed_input(int r, size_t i) {
  uint32_t h = (uint32_t)(r * 2654435761u) ^ (uint32_t)(i * 40503u + 17u);
  h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
  return (float)ldexp((double)(h & 0xffffff) / 0x1000000 - 0.5, (int)(h >> 27) - 8);
}

static float rank_order(float (*in)(int, size_t), size_t i) {
  float acc = in(0, i);
  for (int r = 1; r < nranks; r++)
    acc = acc + in(r, i);
  return acc;
}

/* Elements of got[0..count) that differ bit for bit from the rank-order sum
 * of inputs base + i. */
static size_t mismatches(const float *got, size_t count, size_t base, float (*in)(int, size_t)) {
  size_t bad = 0;
  for (size_t i = 0; i < count; i++) {
    float want = rank_order(in, base + i);
    bad += memcmp(&got[i], &want, sizeof want) != 0;
  }
  return bad;
}

/* Elements of got[0..count) whose bits differ from in(q, base + i). */
static size_t moved_wrong(const float *got, size_t count, int q, size_t base, float (*in)(int, size_t)) {
  size_t bad = 0;
  for (size_t i = 0; i < count; i++) {
    float want = in(q, base + i);
    bad += memcmp(&got[i], &want, sizeof want) != 0;
  }
  return bad;
}

/* All-to-all, gather and scatter (root 1 mod n) of `count` elements per
 * rank: they move inputs, so every algorithm must deliver their very bits. */
static size_t run_moves(rcollComm_t comm, int r, size_t count, float (*in)(int, size_t)) {
  size_t n = (size_t)nranks, bad = 0;
  int root = 1 % nranks;
  float *send = malloc(count * n * sizeof *send), *recv = malloc(count * n * sizeof *recv);
  for (size_t i = 0; i < count * n; i++)
    send[i] = in(r, i);
  if (rcollAlltoAll(send, recv, count, rcollFloat32, comm, NULL) != rcollSuccess)
    bad += count + 1;
  for (int q = 0; q < nranks; q++)
    bad += moved_wrong(recv + (size_t)q * count, count, q, (size_t)r * count, in);
  memset(recv, 0, count * n * sizeof *recv);
  if (rcollGather(send, recv, count, rcollFloat32, root, comm, NULL) != rcollSuccess)
    bad += count + 1;
  for (int q = 0; q < nranks && r == root; q++)
    bad += moved_wrong(recv + (size_t)q * count, count, q, 0, in);
  if (rcollScatter(send, recv, count, rcollFloat32, root, comm, NULL) != rcollSuccess)
    bad += count + 1;
  bad += moved_wrong(recv, count, root, (size_t)r * count, in);
  free(send);
  free(recv);
  return bad;
}

/* All-reduce, reduce (roots 0 and n-1), broadcast and reduce-scatter of
 * `count` elements of in(); returns mismatches against the rank-order sum
 * (for exact inputs any order gives the same bits). */
static size_t run_calls(rcollComm_t comm, int r, size_t count, float (*in)(int, size_t)) {
  size_t n = (size_t)nranks, bad = 0;
  float *send = malloc(count * n * sizeof *send), *recv = malloc(count * n * sizeof *recv);
  for (size_t i = 0; i < count * n; i++)
    send[i] = in(r, i);
  if (rcollAllReduce(send, recv, count, rcollFloat32, rcollSum, comm, NULL) != rcollSuccess)
    bad += count + 1;
  bad += mismatches(recv, count, 0, in);
  for (int root = 0; root < nranks; root += nranks > 1 ? nranks - 1 : 1) {
    memset(recv, 0, count * sizeof *recv);
    if (rcollReduce(send, recv, count, rcollFloat32, rcollSum, root, comm, NULL) != rcollSuccess)
      bad += count + 1;
    bad += r == root ? mismatches(recv, count, 0, in) : 0;
  }
  if (rcollReduceScatter(send, recv, count, rcollFloat32, rcollSum, comm, NULL) != rcollSuccess)
    bad += count + 1;
  bad += mismatches(recv, count, (size_t)r * count, in);
  /* Broadcast the last rank's all-reduced result: the same bits again. */
  if (rcollAllReduce(send, recv, count, rcollFloat32, rcollSum, comm, NULL) != rcollSuccess)
    bad += count + 1;
  if (r != nranks - 1)
    memset(recv, 0, count * sizeof *recv);
  if (rcollBroadcast(recv, recv, count, rcollFloat32, nranks - 1, comm, NULL) != rcollSuccess)
    bad += count + 1;
  bad += mismatches(recv, count, 0, in);
  free(send);
  free(recv);
  return bad + run_moves(comm, r, count, in);
}

/* Zeros of both signs among floats that round: whoever reduces them, in
 * whatever order, every rank must end with the same bits. */
static float zeros_input(int r, size_t i) {
  float m = mixed_input(r, i);
  return i % 3 == 0 ? (m < 0 ? -0.0f : 0.0f) : m;
}

/* Sum, max and min all-reduces of zeros_input, in place for odd counts;
 * returns the elements that differ bit for bit from rank 0's result (which
 * a broadcast brings, moving bits as they are). */
static size_t differ_from_rank0(rcollComm_t comm, int r, size_t count) {
  static const rcollRedOp_t ops[] = {rcollSum, rcollMax, rcollMin};
  float *send = malloc(count * sizeof *send), *recv = malloc(count * sizeof *recv);
  float *mine = malloc(count * sizeof *mine);
  size_t bad = 0;
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
    for (size_t i = 0; i < count; i++)
      send[i] = recv[i] = zeros_input(r, i);
    int ok = rcollAllReduce(count % 2 ? recv : send, recv, count, rcollFloat32, ops[k], comm, NULL) ==
             rcollSuccess;
    memcpy(mine, recv, count * sizeof *mine);
    ok &= rcollBroadcast(recv, recv, count, rcollFloat32, 0, comm, NULL) == rcollSuccess;
    bad += ok ? 0 : count + 1;
    for (size_t i = 0; i < count; i++)
      bad += memcmp(&mine[i], &recv[i], sizeof *recv) != 0;
  }
  free(send);
  free(recv);
  free(mine);
  return bad;
}

static void run_config(rcollComm_t comm, int r, const config_t *c) {
  const size_t counts[] = {1, 7, 1000, 100003};
  char what[128];
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
    size_t bad = run_calls(comm, r, counts[k], exact_input);
    snprintf(what, sizeof what, "%zu exact sums: %zu wrong", counts[k], bad);
    verdict(bad == 0, c, r, what);
    bad = run_calls(comm, r, counts[k], mixed_input);
    if (c->deterministic) {
      snprintf(what, sizeof what, "%zu floats: %zu differ from the rank-order sum", counts[k], bad);
      verdict(bad == 0, c, r, what);
    } else if (!strcmp(c->algo, "ring") && nranks >= 3 && counts[k] == 100003) {
      verdict(bad > 0, c, r, "the ring's sums all equal the rank-order sums: the check is toothless");
    }
    bad = differ_from_rank0(comm, r, counts[k]);
    snprintf(what, sizeof what, "%zu floats and zeros (sum, max, min): %zu differ from rank 0's result",
             counts[k], bad);
    verdict(bad == 0, c, r, what);
  }
}

static int rank_main(int r, int pipefd[2]) {
  char text[32];
  snprintf(text, sizeof text, "node%d", node_of(r));
  setenv("RCOLL_HOSTID", text, 1);
  for (int k = 0; k < nconfigs; k++) {
    const config_t *c = &configs[k];
    setenv("RCOLL_ALGO", c->algo, 1);
    setenv("RCOLL_DETERMINISTIC", c->deterministic ? "1" : "0", 1);
    if (c->chunk)
      setenv("RCOLL_CHUNK_SIZE", c->chunk, 1);
    else
      unsetenv("RCOLL_CHUNK_SIZE");
    rcollUniqueId id;
    if (r == 0) {
      if (rcollGetUniqueId(&id) != rcollSuccess)
        return 1;
      for (int i = 1; i < nranks; i++)
        if (write(pipefd[1], &id, sizeof id) != (ssize_t)sizeof id)
          return 1;
    } else if (read(pipefd[0], &id, sizeof id) != (ssize_t)sizeof id) {
      return 1;
    }
    rcollComm_t comm;
    if (rcollCommInitRank(&comm, nranks, id, r) != rcollSuccess) {
      verdict(0, c, r, rcollGetLastError(NULL));
      return 1;
    }
    run_config(comm, r, c);
    rcollCommDestroy(comm);
  }
  printf("algo_check: rank %d: %d passed, %d failed\n", r, passed, failed);
  return failed > 0;
}

int main(int argc, char **argv) {
  int opt;
  nranks = 4, nnodes = 2;
  while ((opt = getopt(argc, argv, "p:N:ru")) != -1) {
    switch (opt) {
    case 'p': nranks = atoi(optarg); break;
    case 'N': nnodes = atoi(optarg); break;
    case 'r': round_robin = 1; break;
    case 'u': uneven = 1; break;
    default: fprintf(stderr, "usage: algo_check -p ranks -N nodes [-r] [-u]\n"); return 2;
    }
  }
  if (nranks < 1 || nranks > MAX_RANKS || nnodes < 1 || nnodes > nranks)
    return 2;
  make_configs();
  int pipefd[2];
  if (pipe(pipefd) != 0)
    return 1;
  fflush(stdout);
  pid_t pids[MAX_RANKS];
  for (int r = 0; r < nranks; r++)
    if ((pids[r] = fork()) == 0)
      {
        int rc = rank_main(r, pipefd);
        fflush(stdout);
        _exit(rc);
      }
  int bad = 0;
  for (int r = 0; r < nranks; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    bad += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  printf("algo_check: %d ranks on %d nodes%s%s: %s\n", nranks, nnodes, round_robin ? " round robin" : "",
         uneven ? " uneven" : "", bad ? "FAILED" : "OK");
  return bad != 0;
}
