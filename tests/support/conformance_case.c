/* One conformance case seen from one rank (conformance_case.h). */
#include "conformance_case.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance_ref.h"

const char *const coll_names[NCOLLS] = {
    "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "sendrecv",
    "alltoall_sendrecv", "alltoall", "gather", "scatter", "bcast"};

int coll_has_root(int coll) {
  return coll == BROADCAST || coll == REDUCE || coll == GATHER || coll == SCATTER || coll == BCAST;
}
int coll_has_op(int coll) {
  return coll == ALLREDUCE || coll == REDUCE_SCATTER || coll == REDUCE;
}
int coll_has_inplace(int coll) { return coll != SENDRECV && coll != A2A_SENDRECV; }
int coll_only_inplace(int coll) { return coll == BCAST; }
ccase_t ccase_random(uint64_t seed, int k, int ncases, int n, const size_t *counts, size_t ncounts) {
  ccase_t c = {0};
  uint64_t h = ref_hash(seed * 7919 + (uint64_t)k * 131);
  c.coll = (int)(h % NCOLLS);
  h /= NCOLLS;
  c.type = (rcollDataType_t)(h % rcollNumTypes);
  h /= rcollNumTypes;
  c.op = coll_has_op(c.coll) ? (rcollRedOp_t)(h % rcollNumOps) : rcollSum;
  h /= rcollNumOps;
  c.root = coll_has_root(c.coll) ? (int)(h % (uint64_t)n) : 0;
  h /= (uint64_t)n;
  c.inplace = coll_only_inplace(c.coll) || (coll_has_inplace(c.coll) && h % 2);
  h /= 2;
  c.count = counts[h % ncounts];
  /* Apart from n, so that ranks of communicators of other sizes agree. */
  c.grouped = k + 1 < ncases && ref_hash(seed * 7919 + (uint64_t)k * 131 + 2) % 6 == 0;
  c.seed = ref_hash(seed * 7919 + (uint64_t)k * 131 + 1);
  return c;
}

/* Only the root's buffer is read (send) or written (receive). */
static int send_root_only(int coll) { return coll == BROADCAST || coll == BCAST || coll == SCATTER; }
static int recv_root_only(int coll) { return coll == REDUCE || coll == GATHER; }

#define GUARD_BYTES 64
#define GUARD_BYTE 0xa5
#define JUNK_BYTE 0xee

/* GUARD_BYTES of GUARD_BYTE before and after `bytes` of JUNK_BYTE. */
int ccase_pool_buffers;
void *(*ccase_alloc)(size_t bytes);
void (*ccase_free)(void *p);

/* Whether p lies in a readable and writable mapping of this process: host
 * memory, where a device pointer sits in address space the CUDA driver
 * reserved without access (the public API has no other way to ask). */
static int host_rw(const void *p) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512], perms[8];
  unsigned long lo, hi;
  int rw = 0;
  while (f != NULL && !rw && fgets(line, sizeof line, f) != NULL)
    rw = sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && (unsigned long)p >= lo &&
         (unsigned long)p < hi && perms[0] == 'r' && perms[1] == 'w';
  if (f != NULL)
    fclose(f);
  return rw;
}

/* Host memory from rcollMemAlloc, or NULL where it gives none. */
static unsigned char *pool_alloc(size_t bytes) {
  void *p = NULL;
  if (rcollMemAlloc(&p, bytes) != rcollSuccess || p == NULL)
    return NULL;
  if (host_rw(p))
    return p;
  rcollMemFree(p);
  return NULL;
}

static void *region_alloc(region_t *g, size_t bytes) {
  g->bytes = bytes;
  g->hooked = ccase_alloc != NULL;
  if (g->hooked && (g->mem = ccase_alloc(bytes + 2 * GUARD_BYTES)) == NULL)
    return NULL;
  if (!g->hooked)
    g->mem = ccase_pool_buffers ? pool_alloc(bytes + 2 * GUARD_BYTES) : NULL;
  g->pooled = !g->hooked && g->mem != NULL;
  if (g->mem == NULL && (g->mem = malloc(bytes + 2 * GUARD_BYTES)) == NULL)
    return NULL;
  memset(g->mem, GUARD_BYTE, GUARD_BYTES);
  memset(g->mem + GUARD_BYTES, JUNK_BYTE, bytes);
  memset(g->mem + GUARD_BYTES + bytes, GUARD_BYTE, GUARD_BYTES);
  return g->mem + GUARD_BYTES;
}

/* Offset of the first changed guard byte (negative: before the data), or 0. */
static long region_guard_damage(const region_t *g) {
  if (g->mem == NULL)
    return 0;
  for (size_t i = 0; i < GUARD_BYTES; i++) {
    if (g->mem[i] != GUARD_BYTE)
      return -(long)(GUARD_BYTES - i);
    if (g->mem[GUARD_BYTES + g->bytes + i] != GUARD_BYTE)
      return (long)i + 1;
  }
  return 0;
}

static void region_free(region_t *g) {
  if (g->hooked)
    ccase_free(g->mem);
  else if (g->pooled)
    rcollMemFree(g->mem);
  else
    free(g->mem);
}

void rank_bufs_free(rank_bufs_t *b) {
  region_free(&b->a);
  region_free(&b->b);
  memset(b, 0, sizeof *b);
}

/* Elements of send data and of the receive window for this rank. */
static size_t case_send_elems(const ccase_t *c, int n) {
  int whole = c->coll == REDUCE_SCATTER || c->coll == A2A_SENDRECV || c->coll == ALLTOALL ||
              c->coll == SCATTER;
  return whole ? (size_t)n * c->count : c->count;
}
static size_t case_recv_elems(const ccase_t *c, int n) {
  int whole = c->coll == ALLGATHER || c->coll == A2A_SENDRECV || c->coll == ALLTOALL ||
              c->coll == GATHER;
  return whole ? (size_t)n * c->count : c->count;
}

static void fill_inputs(void *buf, const ccase_t *c, int rank, size_t elems) {
  for (size_t j = 0; j < elems; j++)
    ref_store(buf, c->type, j, ref_input(c->type, c->op, c->seed, rank, j));
}

int case_prepare(const ccase_t *c, int rank, int n, rank_bufs_t *b) {
  size_t tsz = ref_type_size(c->type), s = case_send_elems(c, n), r = case_recv_elems(c, n);
  int is_root = rank == c->root;
  memset(b, 0, sizeof *b);
  if (c->inplace) {
    size_t elems = s > r ? s : r;
    char *base = region_alloc(&b->a, elems * tsz);
    if (base == NULL)
      return -1;
    b->send = b->recv = base;
    if (c->coll == ALLGATHER || c->coll == GATHER)
      b->send = base + (size_t)rank * c->count * tsz;
    if (c->coll == REDUCE_SCATTER || c->coll == SCATTER)
      b->recv = base + (size_t)rank * c->count * tsz;
    if (!send_root_only(c->coll) || is_root)
      fill_inputs(b->send, c, rank, s);
    return 0;
  }
  int send_used = !send_root_only(c->coll) || is_root;
  int recv_used = !recv_root_only(c->coll) || is_root;
  /* Ranks that NCCL says ignore a buffer pass NULL, to prove it is ignored. */
  if (send_used && (b->send = region_alloc(&b->a, s * tsz)) == NULL)
    return -1;
  if (recv_used && (b->recv = region_alloc(&b->b, r * tsz)) == NULL)
    return -1;
  if (send_used)
    fill_inputs(b->send, c, rank, s);
  return 0;
}

static rcollResult_t case_p2p(const ccase_t *c, int rank, int n, rank_bufs_t *b, rcollComm_t comm,
                             rcollStream_t s) {
  size_t tsz = ref_type_size(c->type);
  rcollResult_t r = rcollGroupStart();
  if (c->coll == SENDRECV) { /* the ring: send right, receive from the left */
    if (r == rcollSuccess)
      r = rcollSend(b->send, c->count, c->type, (rank + 1) % n, comm, s);
    if (r == rcollSuccess)
      r = rcollRecv(b->recv, c->count, c->type, (rank + n - 1) % n, comm, s);
  }
  for (int p = 0; c->coll == A2A_SENDRECV && p < n && r == rcollSuccess; p++) {
    r = rcollSend((char *)b->send + (size_t)p * c->count * tsz, c->count, c->type, p, comm, s);
    if (r == rcollSuccess)
      r = rcollRecv((char *)b->recv + (size_t)p * c->count * tsz, c->count, c->type, p, comm, s);
  }
  rcollResult_t e = rcollGroupEnd();
  return r != rcollSuccess ? r : e;
}

rcollResult_t case_call(const ccase_t *c, int rank, int n, rank_bufs_t *b, rcollComm_t comm) {
  return case_call_on(c, rank, n, b, comm, NULL);
}

rcollResult_t case_call_on(const ccase_t *c, int rank, int n, rank_bufs_t *b, rcollComm_t comm,
                           rcollStream_t s) {
  switch (c->coll) {
  case ALLREDUCE: return rcollAllReduce(b->send, b->recv, c->count, c->type, c->op, comm, s);
  case ALLGATHER: return rcollAllGather(b->send, b->recv, c->count, c->type, comm, s);
  case REDUCE_SCATTER:
    return rcollReduceScatter(b->send, b->recv, c->count, c->type, c->op, comm, s);
  case BROADCAST: return rcollBroadcast(b->send, b->recv, c->count, c->type, c->root, comm, s);
  case REDUCE: return rcollReduce(b->send, b->recv, c->count, c->type, c->op, c->root, comm, s);
  case ALLTOALL: return rcollAlltoAll(b->send, b->recv, c->count, c->type, comm, s);
  case GATHER: return rcollGather(b->send, b->recv, c->count, c->type, c->root, comm, s);
  case SCATTER: return rcollScatter(b->send, b->recv, c->count, c->type, c->root, comm, s);
  case BCAST: return rcollBcast(b->recv, c->count, c->type, c->root, comm, s);
  default: return case_p2p(c, rank, n, b, comm, s);
  }
}

/* Expected raw value of element i of this rank's receive window. */
static uint64_t case_expect(const ccase_t *c, int rank, int n, size_t i) {
  size_t q = c->count ? i / c->count : 0, k = c->count ? i % c->count : 0;
  switch (c->coll) {
  case ALLREDUCE: case REDUCE: return ref_reduce(c->type, c->op, n, c->seed, i);
  case ALLGATHER: case GATHER: return ref_input(c->type, c->op, c->seed, (int)q, k);
  case SCATTER: return ref_input(c->type, c->op, c->seed, c->root, (size_t)rank * c->count + i);
  case REDUCE_SCATTER: return ref_reduce(c->type, c->op, n, c->seed, (size_t)rank * c->count + i);
  case BROADCAST: case BCAST: return ref_input(c->type, c->op, c->seed, c->root, i);
  case SENDRECV: return ref_input(c->type, c->op, c->seed, (rank + n - 1) % n, i);
  default: return ref_input(c->type, c->op, c->seed, (int)q, (size_t)rank * c->count + k);
  }
}

/* Whether got is right for element i of the receive window: reduced
 * elements through ref_accepts (fp8 sums may round), the others bit for bit. */
static int case_accepts(const ccase_t *c, int rank, int n, size_t i, uint64_t got, uint64_t want) {
  switch (c->coll) {
  case ALLREDUCE: case REDUCE: return ref_accepts(c->type, c->op, n, c->seed, i, got, want);
  case REDUCE_SCATTER: return ref_accepts(c->type, c->op, n, c->seed, (size_t)rank * c->count + i, got, want);
  default: return got == want;
  }
}

/* Compares buf[0..elems) with want(i); returns the number of bad elements and
 * describes the first. */
static size_t check_window(const ccase_t *c, int rank, int n, const void *buf, size_t elems,
                           int is_send, case_fault_t *f) {
  size_t bad = 0, first = 0;
  uint64_t got0 = 0, want0 = 0;
  for (size_t i = 0; i < elems; i++) {
    uint64_t want = is_send ? ref_input(c->type, c->op, c->seed, rank, i) : case_expect(c, rank, n, i);
    uint64_t got = ref_load(buf, c->type, i);
    int ok = got == want || (!is_send && case_accepts(c, rank, n, i, got, want));
    if (!ok && bad++ == 0) {
      first = i;
      got0 = got;
      want0 = want;
    }
  }
  if (bad)
    snprintf(f->what, sizeof f->what, "%s index %zu got 0x%llx expected 0x%llx (%zu of %zu bad)",
             is_send ? "sendbuff changed:" : "first bad", first, (unsigned long long)got0,
             (unsigned long long)want0, bad, elems);
  return bad;
}

int case_check(const ccase_t *c, int rank, int n, const rank_bufs_t *b, case_fault_t *f) {
  int check_recv = !recv_root_only(c->coll) || rank == c->root;
  if (check_recv && check_window(c, rank, n, b->recv, case_recv_elems(c, n), 0, f))
    return -1;
  /* Out of place, the send buffer is const: it must come back unchanged. */
  if (!c->inplace && b->send != NULL &&
      check_window(c, rank, n, b->send, case_send_elems(c, n), 1, f))
    return -1;
  const region_t *regions[2] = {&b->a, &b->b};
  for (int i = 0; i < 2; i++) {
    long off = region_guard_damage(regions[i]);
    if (off != 0) {
      snprintf(f->what, sizeof f->what, "guard byte %ld %s the %s buffer was overwritten",
               off < 0 ? -off : off, off < 0 ? "before" : "after",
               c->inplace ? "in-place" : i == 0 ? "send" : "receive");
      return -1;
    }
  }
  return 0;
}
