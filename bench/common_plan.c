/* What the library runs the benchmark on, for the header and the JSON: the
 * transport to each class of peer (on rank 0's node, on other nodes) and the
 * algorithm and chunk of each size, from rcoll's own answers
 * (rcollCommPeerTransport, rcollCommAlgorithm), so that a result names what
 * produced it. Only global rank 0 asks, about its own peers. */
#include <stdio.h>
#include <string.h>

#include "common_impl.h"

static void add_peer(bench_plan_t *p, const char *cls, const char *transport) {
  for (int i = 0; i < p->nclasses; i++)
    if (strcmp(p->classes[i].cls, cls) == 0 && strcmp(p->classes[i].transport, transport) == 0) {
      p->classes[i].peers++;
      return;
    }
  if (p->nclasses == BENCH_MAX_CLASSES)
    return;
  bench_peer_class_t *c = &p->classes[p->nclasses++];
  snprintf(c->cls, sizeof(c->cls), "%s", cls);
  snprintf(c->transport, sizeof(c->transport), "%s", transport);
  c->peers = 1;
}

/* The node is the library's (its host id, which RCOLL_HOSTID can set), not
 * the host name: the class says which transport rcoll chose for whom. */
void bench_plan_transports(bench_plan_t *p, rcollComm_t world_comm, int rank, int nranks) {
  char transport[128];
  int same = 1;
  p->nclasses = 0;
  for (int peer = 0; peer < nranks; peer++) {
    if (peer == rank)
      continue;
    if (rcollCommPeerTransport(world_comm, peer, &same, transport, sizeof(transport)) != rcollSuccess)
      snprintf(transport, sizeof(transport), "unknown");
    add_peer(p, same ? "node-local" : "remote", transport);
  }
}

/* nccl-tests' collective names ("all_reduce") as rcoll's ("allreduce"). */
static void lib_coll_name(const char *bench_name, char *out, size_t len) {
  size_t n = 0;
  for (const char *s = bench_name; *s && n + 1 < len; s++)
    if (*s != '_' || strcmp(bench_name, "reduce_scatter") == 0)
      out[n++] = *s;
  out[n] = '\0';
}

int bench_plan_algorithm(rcollComm_t comm, const char *coll, size_t bytes, char *algo,
                         size_t len, size_t *chunk) {
  char name[64];
  lib_coll_name(coll, name, sizeof(name));
  /* send/recv is not a collective: no tuner choice to ask for (asking would
   * log the library's refusal on every row). Collectives the tuner does not
   * plan have no answer either. */
  if (strcmp(name, "sendrecv") == 0 ||
      rcollCommAlgorithm(comm, name, bytes, algo, len, chunk) != rcollSuccess) {
    algo[0] = '\0';
    *chunk = 0;
    return -1;
  }
  return 0;
}

void bench_plan_print(const bench_plan_t *p) {
  for (int i = 0; i < p->nclasses; i++)
    printf("# Transport to %-10s peers : %s (%d peer%s of rank 0)\n", p->classes[i].cls,
           p->classes[i].transport, p->classes[i].peers, p->classes[i].peers == 1 ? "" : "s");
  if (p->nclasses == 0)
    printf("# Transport                     : none (one rank)\n");
}

/* One line per run of sizes with the same algorithm and chunk. */
void bench_plan_print_algorithms(rcollComm_t comm, const bench_coll_t *coll,
                                 const bench_opts_t *o) {
  char algo[64], prev[64] = "";
  size_t chunk, prev_chunk = 0, first = 0, last = 0;
  int any = 0;
  for (size_t size = o->min_bytes; size <= o->max_bytes;) {
    if (bench_plan_algorithm(comm, coll->name, size, algo, sizeof(algo), &chunk) != 0)
      return;
    if (any && (strcmp(algo, prev) != 0 || chunk != prev_chunk)) {
      printf("# Algorithm %12zu - %12zu B : %s, chunk %zu B\n", first, last, prev, prev_chunk);
      first = size;
    }
    if (!any)
      first = size;
    any = 1;
    snprintf(prev, sizeof(prev), "%s", algo);
    prev_chunk = chunk;
    last = size;
    size_t next = bench_next_size(o, size);
    if (next <= size)
      break;
    size = next;
  }
  if (any)
    printf("# Algorithm %12zu - %12zu B : %s, chunk %zu B\n", first, last, prev, prev_chunk);
}
