/* The direct all-reduce's device side (lib/cuda/direct.c says when it runs):
 * what one block of the kernel does, written once for two compilers. nvcc
 * builds it into the kernels of kernels.cu (one block per CUDA block, its
 * threads sharing the loops); the host fake of the CUDA table
 * (tests/support/cuda_fake_direct.c) runs the same function with one
 * "thread" per block, so the unit tests run the protocol the GPU runs.
 *
 * The protocol. Every rank owns a box in its device memory, mapped by every
 * other rank of the node through CUDA IPC: a header of flags, then one
 * region per block. A call is cut into rounds; in each round block b of
 * every rank handles the same stretch of the vector, split into one slice
 * per rank, in three phases:
 *   A. wait until every peer is done with our region's last use, copy our
 *      input stretch into the region, say READY;
 *   B. wait for every peer's READY, reduce our slice over all regions in
 *      rank order (so every rank ends with the same bits), write it to our
 *      region and to the output, say REDUCED;
 *   C. wait for every peer's REDUCED, copy their slices from their regions
 *      to the output, say DONE.
 * A flag is written by its owner into every peer's box and polled in the
 * waiter's own box: remote stores, local polling. The writer's data stores
 * come first, then the block's barrier, then a system fence, then the flag;
 * the waiter reads the flag, fences, and reads the data past the L1 cache
 * (another SM, or another GPU, wrote it).
 *
 *
 * In place (the call is large, and every rank could hand the others its
 * buffers through CUDA IPC: direct_meet.c), there are no regions and one
 * round: block b of every rank reads the peers' inputs and writes the
 * peers' outputs where the users put them, mapped for this call.
 *   A. wait until every peer is done with block b's last round through the
 *      regions (below), say READY (our input is readable and our output
 *      writable: the stream has reached us), wait for every READY;
 *   B. reduce our slice over every rank's input, in rank order, and write
 *      it into every rank's output; say REDUCED, and wait for every
 *      REDUCED: then every peer is done reading our input and writing our
 *      output, and the user may have the buffers back when the kernel ends.
 * Slice j of every buffer is touched by the reducer of slice j alone, which
 * reads an element of every input before it writes it anywhere: an input
 * that is its rank's output too is safe. Each rank moves 2 vectors (reads
 * the inputs' slices, S in all, writes every output's, S in all) where the
 * regions move 4.
 * The other collectives but send and receive run in place only, with the
 * same two phases; in B each rank does its part as the enum below says.
 * Each element is again written by one rank, after it read it: NCCL's
 * in-place forms (our output inside our input at our segment, our input
 * inside our output at our place, the root's input as its output) are safe
 * too, but for the all-to-all's (a peer would overwrite the segment we
 * still have to send), which goes through the regions.
 *
 * Through the regions, the collectives but the all-reduce pull (pull = 1):
 * each rank writes its own output only, in two phases a round:
 *   A. wait until every peer is done with our region's last use, copy what
 *      the peers need of our input stretch into the region (our segment q
 *      of the stretch at q chunks in, when each peer needs another: a
 *      reduce-scatter's, scatter's or all-to-all's), say READY;
 *   B. wait for every READY, build our output's stretch from our input and
 *      the peers' regions (reduce or copy), say DONE.
 * Only sources copy in (a broadcast's or scatter's root; not a reduce's
 * or gather's root, whom nobody reads), and only the ranks with an output
 * build it (a reduce's or gather's root). A rank writes its output after
 * its own input went into its region, and reads its own part from its
 * input where it writes it, element by element: every in-place form is
 * safe, the all-to-all's too.
 *
 * A flag holds the latest round's value and call, so a rank overwrites it
 * only once every peer has seen it (a waiter that finds a later call's
 * signature beside a flag reports a mismatch). Each phase's wait makes sure
 * of that for the flags said before it, but for one case: a pulling rank
 * says DONE, and may end its kernel, without waiting for anyone's DONE, so
 * a peer may not have seen its READY yet. The next call through the regions
 * waits for every DONE before its READY anyway; an in-place call did not,
 * and its READY overwrote the pull's while a peer still waited for it
 * (a gather's root, say, for a rank that had nothing more to do): hence
 * the wait at the start of A in place.
 *
 * Sends and receives (p2p = 1): a rank's point-to-point calls of one call
 * or group are one kernel, ops[] below. Each box also holds two flags per
 * peer and block in its header, and past the collectives' regions a region
 * per destination and block: SENT (the peer's data is in its region for us) and
 * TAKEN (the peer has read ours). A message is cut into rounds of
 * P2P_BLOCKS stretches of a region's eighth; in round k block b of the
 * sender waits until the receiver TOOK round k - 1 of their pair, copies
 * its stretch into its region for the receiver and says SENT = k (the
 * pair's own count, so ranks outside the pair play no part); the
 * receiver's block b waits for SENT = k, copies the stretch out of the
 * sender's region and says TAKEN = k. Messages between two ranks follow
 * each other on the pair's count in the order made. A block goes round its
 * ops and moves whichever may move, so a send and a receive with one peer
 * never wait for each other, in whatever order the two ranks made them.
 * SENT carries the message's bytes: a receive of another size reports a
 * mismatch.
 *
 * Blocks never wait for other blocks of their own rank, only for the block
 * with the same index on the other ranks, so blocks may run in any order
 * (and the host fake runs them one after the other). Every wait gives up
 * after timeout_ns, saying whom it waited for in *failed. */
#ifndef RCOLL_CUDA_DIRECT_KERNEL_H
#define RCOLL_CUDA_DIRECT_KERNEL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "reduce_math.h"

#define RCOLL_DIRECT_MAX_RANKS 8
/* Blocks per rank: at most MAX_BLOCKS (the flags' lines), and through the
 * regions at most REGIONS (a box holds that many); RCOLL_CUDA_DIRECT_BLOCKS
 * and the GPU's multiprocessors bound both (direct.c). */
#define RCOLL_DIRECT_MAX_BLOCKS 128
#define RCOLL_DIRECT_REGIONS 32
#define RCOLL_DIRECT_THREADS 512
#define RCOLL_DIRECT_FLAG_WORDS 16 /* one flag per 128-byte line */
#define RCOLL_DIRECT_COLL_FLAG_BYTES ((size_t)3 * RCOLL_DIRECT_MAX_RANKS * RCOLL_DIRECT_MAX_BLOCKS * 128)

enum { RCOLL_DIRECT_READY = 0, RCOLL_DIRECT_REDUCED = 1, RCOLL_DIRECT_DONE = 2 };
/* Point-to-point: the flags (after MISMATCH in the codes of *failed). */
enum { RCOLL_DIRECT_SENT = 4, RCOLL_DIRECT_TAKEN = 5 };
#define RCOLL_DIRECT_P2P_OPS 16    /* sends and receives per kernel */
#define RCOLL_DIRECT_P2P_BLOCKS 8  /* every point-to-point kernel's blocks, and a region's parts */
/* Past the regions: the flags, then a region per destination and block. */
#define RCOLL_DIRECT_P2P_FLAG_BYTES ((size_t)2 * RCOLL_DIRECT_MAX_RANKS * RCOLL_DIRECT_P2P_BLOCKS * 128)
#define RCOLL_DIRECT_P2P_SIG(bytes) (((uint64_t)(bytes) << 20) | ((uint64_t)1 << 19))
/* A box's header: the collectives' flags, then the point-to-point ones. */
#define RCOLL_DIRECT_HDR_BYTES (RCOLL_DIRECT_COLL_FLAG_BYTES + RCOLL_DIRECT_P2P_FLAG_BYTES)

/* What an in-place call computes (the regions are the all-reduce's only).
 * The all-reduce splits each block's stretch among the ranks, and each rank
 * reduces its slice over every input into every output; so do a reduce,
 * into the root's output only, and a broadcast, from the root's input only.
 * The others' ranks each do their whole part. A reduce-scatter's rank
 * reduces its segment over every input (the host points each input at our
 * segment) into its own output; an all-gather's rank copies its input into
 * every output (the host points each output at our place in it), a
 * gather's into the root's; a scatter's rank copies its segment of the
 * root's input into its output; an all-to-all's copies its input's segment
 * q into rank q's output at our place, for every q (the host points
 * ins[q] at our segment q and outs[q] at our place). */
enum {
  RCOLL_DIRECT_ALLREDUCE = 0,
  RCOLL_DIRECT_REDUCE_SCATTER = 1,
  RCOLL_DIRECT_ALLGATHER = 2,
  RCOLL_DIRECT_BROADCAST = 3,
  RCOLL_DIRECT_REDUCE = 4,
  RCOLL_DIRECT_GATHER = 5,
  RCOLL_DIRECT_SCATTER = 6,
  RCOLL_DIRECT_ALLTOALL = 7,
};

/* A send or receive of a point-to-point kernel. */
typedef struct rcoll_direct_op {
  char *buf;     /* a send's input, a receive's output */
  uint64_t bytes;
  uint64_t base; /* the pair's rounds in this direction before this message */
  uint32_t peer, send;
} rcoll_direct_op_t;

/* The kernel's one parameter, passed by value. */
typedef struct rcoll_direct_args {
  void *out;
  const void *in;
  uint64_t count;      /* elements of the call */
  uint64_t chunk;      /* elements one block handles per round */
  uint64_t region_bytes; /* block b's region in a box starts b regions past the header: fixed,
                          * as calls of other sizes (chunks) reuse the regions */
  uint64_t base;       /* sequence number of the round before this call's first */
  uint64_t timeout_ns; /* for each wait */
  uint32_t *failed;    /* mapped host word: 0, or what a wait gave up on (below) */
  uint64_t *sigs;      /* mapped host words: on a mismatch the peer's call, then ours (RCOLL_DIRECT_SIG) */
  uint64_t sig;        /* this call, RCOLL_DIRECT_SIG: every flag carries it */
  uint32_t rounds, nblocks, nranks, rank, avg;
  uint32_t vec; /* in and out are 16-byte aligned (chunk is whole vectors): 16-byte loads */
  uint32_t inplace; /* read the peers' buffers below, not their regions (one round) */
  uint32_t pull;    /* through the regions, a collective but the all-reduce (below) */
  uint32_t coll;    /* in place or pull: RCOLL_DIRECT_ALLREDUCE, ... */
  uint32_t root;    /* of a broadcast, reduce, gather or scatter */
  char *box[RCOLL_DIRECT_MAX_RANKS]; /* every rank's box, ours at [rank] */
  const char *ins[RCOLL_DIRECT_MAX_RANKS]; /* in place: every rank's input and output, */
  char *outs[RCOLL_DIRECT_MAX_RANKS];      /* as mapped here (ours at [rank]) */
  /* The round at which block b last used its region (0: never), from the
   * calls before this one, which may have used fewer blocks. */
  uint64_t last[RCOLL_DIRECT_MAX_BLOCKS];
  /* Sends and receives (p2p = 1; the fields above but the boxes, the
   * regions' size and the words for failures are not used). */
  uint32_t p2p, nops;
  rcoll_direct_op_t ops[RCOLL_DIRECT_P2P_OPS];
} rcoll_direct_args_t;

/* *failed after a wait gave up: 1 + peer + 256 x phase (READY, REDUCED, DONE),
 * or RCOLL_DIRECT_MISMATCH when the peer's flag came from another call. */
#define RCOLL_DIRECT_FAILED(peer, kind) (1u + (uint32_t)(peer) + 256u * (uint32_t)(kind))
#define RCOLL_DIRECT_MISMATCH 3
/* What a call is, as the flags carry it: ranks that make different calls
 * stop at their first flag with the peer named, as fingerprints do on the
 * proxy path, instead of reading each other's data wrongly. */
#define RCOLL_DIRECT_SIG(coll, root, count, type, op)                                           \
  (((uint64_t)(count) << 20) | ((uint64_t)(root) << 15) | ((uint64_t)(coll) << 12) |            \
   ((uint64_t)(type) << 4) | (uint64_t)(op))

#if defined(__CUDACC__)
#define RCOLL_DK_FN static __device__ __forceinline__
#define RCOLL_DK_SYNC() __syncthreads()
#define RCOLL_DK_SYNC_OR(x) __syncthreads_or(x)
#define RCOLL_DK_FENCE() __threadfence_system()
#define RCOLL_DK_FLAG_LOAD(p) rcoll_dk_flag_load((const uint64_t *)(p)) /* kernels.cu */
#define RCOLL_DK_FLAG_STORE(p, v) (*(volatile uint64_t *)(p) = (v))
#define RCOLL_DK_PAUSE() __nanosleep(100)
#define RCOLL_DK_LOAD(p) rcoll_dk_load(p) /* kernels.cu: past L1 */
#define RCOLL_DK_VEC_T uint4
#define RCOLL_DK_LOAD16(p) __ldcg((const uint4 *)(const void *)(p))
#define RCOLL_DK_STORE16(p, v) (*(uint4 *)(void *)(p) = (v))
#define RCOLL_DK_NOW_NS() rcoll_globaltimer_ns()
#else
#include <sched.h>
#include <time.h>
#define RCOLL_DK_FN static inline
#define RCOLL_DK_SYNC() ((void)0)
#define RCOLL_DK_SYNC_OR(x) (x)
#define RCOLL_DK_FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define RCOLL_DK_FLAG_LOAD(p) __atomic_load_n((const uint64_t *)(p), __ATOMIC_ACQUIRE)
#define RCOLL_DK_FLAG_STORE(p, v) __atomic_store_n((uint64_t *)(p), (v), __ATOMIC_RELEASE)
#define RCOLL_DK_PAUSE() sched_yield()
#define RCOLL_DK_LOAD(p) (*(p))
typedef struct rcoll_dk_vec {
  unsigned char b[16];
} rcoll_dk_vec_t;
#define RCOLL_DK_VEC_T rcoll_dk_vec_t
static inline rcoll_dk_vec_t rcoll_dk_load16(const void *p) {
  rcoll_dk_vec_t v;
  memcpy(&v, p, 16);
  return v;
}
#define RCOLL_DK_LOAD16(p) rcoll_dk_load16(p)
#define RCOLL_DK_STORE16(p, v) memcpy((p), &(v), 16)
static inline uint64_t rcoll_dk_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#define RCOLL_DK_NOW_NS() rcoll_dk_now_ns()
#endif

/* Flag `kind` that rank `from` set for block b, in the box `box`. */
RCOLL_DK_FN uint64_t *rcoll_direct_flag(char *box, int kind, uint32_t from, uint32_t b) {
  size_t line = ((size_t)kind * RCOLL_DIRECT_MAX_RANKS + from) * RCOLL_DIRECT_MAX_BLOCKS + b;
  return (uint64_t *)(void *)box + line * RCOLL_DIRECT_FLAG_WORDS;
}

/* Every thread of the block returns 1 when the wait gave up: on the timeout,
 * on a peer's READY or REDUCED from another call, or when another block of ours did
 * (then *failed is already set; it is read every 256 polls, as it lives in
 * host memory). */
RCOLL_DK_FN int rcoll_direct_wait(const rcoll_direct_args_t *a, int kind, uint32_t b,
                                  uint64_t value, uint32_t tid) {
  int bad = 0;
  if (tid == 0) {
    uint64_t t0 = RCOLL_DK_NOW_NS();
    uint32_t polls = 0;
    for (uint32_t q = 0; q < a->nranks && !bad; q++) {
      const uint64_t *f = rcoll_direct_flag(a->box[a->rank], kind, q, b);
      while (q != a->rank && RCOLL_DK_FLAG_LOAD(f) < value && !bad) {
        if (RCOLL_DK_NOW_NS() - t0 > a->timeout_ns) {
          *(volatile uint32_t *)a->failed = RCOLL_DIRECT_FAILED(q, kind);
          bad = 1;
        } else if (++polls % 256 == 0 && *(volatile uint32_t *)a->failed != 0) {
          bad = 1;
        }
        RCOLL_DK_PAUSE();
      }
      RCOLL_DK_FENCE();
      /* DONE is waited for from an earlier round, maybe of another call. */
      uint64_t sig = q == a->rank || bad || kind == RCOLL_DIRECT_DONE ? a->sig : RCOLL_DK_FLAG_LOAD(f + 1);
      if (sig != a->sig) {
        ((volatile uint64_t *)a->sigs)[0] = sig;
        ((volatile uint64_t *)a->sigs)[1] = a->sig;
        *(volatile uint32_t *)a->failed = RCOLL_DIRECT_FAILED(q, RCOLL_DIRECT_MISMATCH);
        bad = 1;
      }
    }
  }
  return RCOLL_DK_SYNC_OR(bad);
}

/* After the whole block's stores: flag `kind` = value, with this call's
 * signature beside it, in every peer's box. */
RCOLL_DK_FN void rcoll_direct_say(const rcoll_direct_args_t *a, int kind, uint32_t b,
                                  uint64_t value, uint32_t tid) {
  RCOLL_DK_SYNC();
  if (tid == 0) {
    for (uint32_t q = 0; q < a->nranks; q++)
      if (q != a->rank)
        RCOLL_DK_FLAG_STORE(rcoll_direct_flag(a->box[q], kind, a->rank, b) + 1, a->sig);
    RCOLL_DK_FENCE();
    for (uint32_t q = 0; q < a->nranks; q++)
      if (q != a->rank)
        RCOLL_DK_FLAG_STORE(rcoll_direct_flag(a->box[q], kind, a->rank, b), value);
  }
}

/* Slices are whole 16-byte vectors (but the last): slice q of a stretch of
 * len elements is [q*w, (q+1)*w) cut at len, w = ceil(len / nranks)
 * rounded up to vec_elems. */
RCOLL_DK_FN uint64_t rcoll_direct_slice(uint64_t len, uint32_t q, uint32_t nranks, uint64_t vec_elems) {
  uint64_t w = (len + nranks - 1) / nranks;
  w = (w + vec_elems - 1) / vec_elems * vec_elems;
  return q * w < len ? q * w : len;
}

/* The block copies bytes: 16 at a time when vec (both ends 16-byte
 * aligned), four such loads in flight per thread (on a GPU one block per SM
 * with one load each would reach a fraction of the memory's bandwidth), then
 * the rest one by one. */
RCOLL_DK_FN void rcoll_direct_copy(char *dst, const char *src, uint64_t bytes, int vec, uint32_t tid,
                                   uint32_t nt) {
  uint64_t done = 0;
  if (vec) {
    const uint64_t step = (uint64_t)nt * 16;
    done = bytes / 16 * 16;
    uint64_t i = (uint64_t)tid * 16;
    for (; i + 3 * step < done; i += 4 * step) {
      RCOLL_DK_VEC_T w0 = RCOLL_DK_LOAD16(src + i), w1 = RCOLL_DK_LOAD16(src + i + step);
      RCOLL_DK_VEC_T w2 = RCOLL_DK_LOAD16(src + i + 2 * step), w3 = RCOLL_DK_LOAD16(src + i + 3 * step);
      RCOLL_DK_STORE16(dst + i, w0);
      RCOLL_DK_STORE16(dst + i + step, w1);
      RCOLL_DK_STORE16(dst + i + 2 * step, w2);
      RCOLL_DK_STORE16(dst + i + 3 * step, w3);
    }
    for (; i < done; i += step) {
      RCOLL_DK_VEC_T w = RCOLL_DK_LOAD16(src + i);
      RCOLL_DK_STORE16(dst + i, w);
    }
  }
  for (uint64_t i = done + tid; i < bytes; i += nt)
    dst[i] = RCOLL_DK_LOAD(src + i);
}

/* Pulling, whether each peer needs its own segment of a source's stretch
 * (a reduce-scatter, scatter or all-to-all): the region then holds one
 * per rank, a chunk apart. */
RCOLL_DK_FN int rcoll_direct_segments(const rcoll_direct_args_t *a) {
  return a->pull && (a->coll == RCOLL_DIRECT_REDUCE_SCATTER || a->coll == RCOLL_DIRECT_SCATTER ||
                     a->coll == RCOLL_DIRECT_ALLTOALL);
}

/* Where element i of rank q's part of this stretch is read: q's input in
 * place; else our input for us, q's region in its box for the others (at
 * our segment, when there are segments). */
RCOLL_DK_FN const char *rcoll_direct_at(const rcoll_direct_args_t *a, uint32_t q, size_t region,
                                        uint64_t at, uint64_t i, size_t es) {
  if (a->inplace)
    return a->ins[q] + (at + i) * es;
  const uint64_t seg = rcoll_direct_segments(a) ? a->rank : 0;
  return q == a->rank ? (const char *)a->in + (seg * a->count + at + i) * es
                      : a->box[q] + region + (seg * a->chunk + i) * es;
}

/* The ranks whose inputs a reduce reads, [*q0, *q1), and whose outputs it
 * writes, [*d0, *d1): all of them but for the one source of an in-place
 * all-gather or gather (ours) or broadcast or scatter (the root's), and the
 * one output of a reduce-scatter or scatter (ours) or reduce or gather (the
 * root's). */
RCOLL_DK_FN void rcoll_direct_ends(const rcoll_direct_args_t *a, uint32_t *q0, uint32_t *q1,
                                   uint32_t *d0, uint32_t *d1) {
  const uint32_t c = a->inplace || a->pull ? a->coll : (uint32_t)RCOLL_DIRECT_ALLREDUCE;
  const int src_me = c == RCOLL_DIRECT_ALLGATHER || c == RCOLL_DIRECT_GATHER;
  const int src_root = c == RCOLL_DIRECT_BROADCAST || c == RCOLL_DIRECT_SCATTER;
  const int dst_me = c == RCOLL_DIRECT_REDUCE_SCATTER || c == RCOLL_DIRECT_SCATTER;
  const int dst_root = c == RCOLL_DIRECT_REDUCE || c == RCOLL_DIRECT_GATHER;
  const uint32_t src = src_me ? a->rank : a->root, dst = dst_me ? a->rank : a->root;
  *q0 = src_me || src_root ? src : 0;
  *q1 = src_me || src_root ? src + 1 : a->nranks;
  *d0 = dst_me || dst_root ? dst : 0;
  *d1 = dst_me || dst_root ? dst + 1 : a->nranks;
}

/* In place, whether the ranks share each block's stretch, one slice each
 * (else each rank does the whole stretch of its own part). */
RCOLL_DK_FN int rcoll_direct_split(const rcoll_direct_args_t *a) {
  return a->coll == RCOLL_DIRECT_ALLREDUCE || a->coll == RCOLL_DIRECT_BROADCAST ||
         a->coll == RCOLL_DIRECT_REDUCE;
}

/* Block b's one round in place: where its stretch starts and ends. */
RCOLL_DK_FN uint64_t rcoll_direct_inplace_len(const rcoll_direct_args_t *a, uint32_t b) {
  const uint64_t at = (uint64_t)b * a->chunk;
  return at >= a->count ? 0 : a->count - at < a->chunk ? a->count - at : a->chunk;
}

/* Pulling, phase A: what the peers need of our input stretch [at, at +
 * len) into our region (es: the element's bytes). */
RCOLL_DK_FN void rcoll_direct_pull_in(const rcoll_direct_args_t *a, size_t region, uint64_t at, uint64_t len,
                                      size_t es, uint32_t tid, uint32_t nt) {
  const uint32_t c = a->coll, me = a->rank, root = a->root;
  const int root_sends = c == RCOLL_DIRECT_BROADCAST || c == RCOLL_DIRECT_SCATTER;
  const int root_reads = c == RCOLL_DIRECT_REDUCE || c == RCOLL_DIRECT_GATHER;
  if ((root_sends && me != root) || (root_reads && me == root))
    return;
  const int segs = rcoll_direct_segments(a);
  char *mine = a->box[me] + region;
  for (uint32_t q = 0; q < (segs ? a->nranks : 1); q++)
    if (!segs || q != me) /* our own segment stays in our input */
      rcoll_direct_copy(mine + q * a->chunk * es, (const char *)a->in + (q * (segs ? a->count : 0) + at) * es,
                        len * es, a->vec, tid, nt);
}

/* Pulling, phase B of a copy: our output's stretch from rank q's part, for
 * every q that has one for us (a broadcast's and scatter's root only), at
 * our place q (an all-gather's, gather's, all-to-all's) or alone. */
RCOLL_DK_FN void rcoll_direct_pull_out(const rcoll_direct_args_t *a, size_t region, uint64_t at, uint64_t len,
                                       size_t es, uint32_t tid, uint32_t nt) {
  const uint32_t c = a->coll, me = a->rank, root = a->root;
  if (c == RCOLL_DIRECT_GATHER && me != root)
    return;
  const int one = c == RCOLL_DIRECT_BROADCAST || c == RCOLL_DIRECT_SCATTER;
  const int places = c == RCOLL_DIRECT_ALLGATHER || c == RCOLL_DIRECT_GATHER || c == RCOLL_DIRECT_ALLTOALL;
  for (uint32_t q = one ? root : 0; q < (one ? root + 1 : a->nranks); q++) {
    const char *src = rcoll_direct_at(a, q, region, at, 0, es);
    char *dst = (char *)a->out + ((places ? q * a->count : 0) + at) * es;
    if (dst != src) /* in place, our own part is where it goes */
      rcoll_direct_copy(dst, src, len * es, a->vec, tid, nt);
  }
}

/* Sends and receives (p2p = 1): their own file, as they share only the
 * box, the macros and the copy above with the collectives. */
#include "cuda/direct_p2p_kernel.h"

/* rcoll_direct_<op>_<sfx>(args, block, thread, threads): one block's part of
 * the whole call; returns 1 when a wait gave up. Our own slice is read from
 * our input, never copied into the box: only the slices the peers reduce
 * are. The reduce takes 16 bytes of every rank at a time when vec. */
#define RCOLL_DIRECT_BODY(op, sfx, T)                                                           \
  RCOLL_DK_FN T rcoll_direct_src_##op##_##sfx(const rcoll_direct_args_t *a, uint32_t q,        \
                                              size_t region, uint64_t at, uint64_t i) {         \
    return RCOLL_DK_LOAD((const T *)(const void *)rcoll_direct_at(a, q, region, at, i, sizeof(T))); \
  }                                                                                             \
  RCOLL_DK_FN void rcoll_direct_reduce_##op##_##sfx(const rcoll_direct_args_t *a, size_t region, \
                                                    uint64_t at, uint64_t lo, uint64_t hi,      \
                                                    uint32_t tid, uint32_t nt) {                \
    enum { V = 16 / sizeof(T) };                                                                \
    T *mine = (T *)(void *)(a->box[a->rank] + region), *out = (T *)a->out + at;                 \
    uint64_t vend = a->vec ? lo + (hi - lo) / V * V : lo;                                       \
    uint32_t q0, q1, d0, d1;                                                                    \
    rcoll_direct_ends(a, &q0, &q1, &d0, &d1);                                                   \
    /* Two vectors per thread per pass, for two loads in flight per source. */               \
    const uint64_t step = (uint64_t)nt * V;                                                     \
    /* A union, not memcpy: nvcc keeps it in registers. */                                    \
    union dvec { RCOLL_DK_VEC_T w; T e[V]; };                                                   \
    for (uint64_t i = lo + (uint64_t)tid * V; i < vend; i += 2 * step) {                        \
      const int m = i + step < vend ? 2 : 1;                                                    \
      union dvec acc[2], v[2];                                                                  \
      acc[0].w = RCOLL_DK_LOAD16(rcoll_direct_at(a, q0, region, at, i, sizeof(T)));             \
      acc[1].w = m == 2 ? RCOLL_DK_LOAD16(rcoll_direct_at(a, q0, region, at, i + step, sizeof(T))) : acc[0].w; \
      for (uint32_t q = q0 + 1; q < q1; q++) {                                                  \
        v[0].w = RCOLL_DK_LOAD16(rcoll_direct_at(a, q, region, at, i, sizeof(T)));              \
        v[1].w = m == 2 ? RCOLL_DK_LOAD16(rcoll_direct_at(a, q, region, at, i + step, sizeof(T))) : v[0].w; \
        for (int u = 0; u < 2; u++)                                                             \
          for (int j = 0; j < V; j++)                                                           \
            acc[u].e[j] = rcoll_##op##_##sfx(acc[u].e[j], v[u].e[j]);                           \
      }                                                                                         \
      for (int u = 0; u < m; u++) {                                                             \
        for (int j = 0; j < V && a->avg; j++)                                                   \
          acc[u].e[j] = rcoll_avg_##sfx(acc[u].e[j], (int)a->nranks);                           \
        if (a->inplace) {                                                                       \
          for (uint32_t q = d0; q < d1; q++)                                                    \
            RCOLL_DK_STORE16((T *)(void *)a->outs[q] + at + i + u * step, acc[u].w);            \
        } else {                                                                                \
          if (!a->pull)                                                                         \
            RCOLL_DK_STORE16(mine + i + u * step, acc[u].w);                                    \
          RCOLL_DK_STORE16(out + i + u * step, acc[u].w);                                       \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
    for (uint64_t i = vend + tid; i < hi; i += nt) {                                            \
      T acc = rcoll_direct_src_##op##_##sfx(a, q0, region, at, i);                              \
      for (uint32_t q = q0 + 1; q < q1; q++)                                                    \
        acc = rcoll_##op##_##sfx(acc, rcoll_direct_src_##op##_##sfx(a, q, region, at, i));     \
      if (a->avg)                                                                               \
        acc = rcoll_avg_##sfx(acc, (int)a->nranks);                                             \
      if (a->inplace) {                                                                         \
        for (uint32_t q = d0; q < d1; q++)                                                      \
          ((T *)(void *)a->outs[q])[at + i] = acc;                                              \
      } else {                                                                                  \
        if (!a->pull)                                                                           \
          mine[i] = acc;                                                                        \
        out[i] = acc;                                                                           \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  RCOLL_DK_FN int rcoll_direct_pull_##op##_##sfx(const rcoll_direct_args_t *a, uint32_t b,     \
                                                 uint32_t tid, uint32_t nt) {                   \
    const uint32_t c = a->coll;                                                                 \
    const int reduces = c == RCOLL_DIRECT_REDUCE_SCATTER || c == RCOLL_DIRECT_REDUCE;           \
    for (uint32_t k = 0; k < a->rounds; k++) {                                                  \
      const uint64_t g = a->base + k + 1;                                                       \
      const uint64_t at = ((uint64_t)k * a->nblocks + b) * a->chunk;                            \
      const uint64_t len = at >= a->count ? 0 : a->count - at < a->chunk ? a->count - at : a->chunk; \
      const size_t region = RCOLL_DIRECT_HDR_BYTES + (size_t)b * a->region_bytes;              \
      if (rcoll_direct_wait(a, RCOLL_DIRECT_DONE, b, k == 0 ? a->last[b] : g - 1, tid))         \
        return 1;                                                                               \
      rcoll_direct_pull_in(a, region, at, len, sizeof(T), tid, nt);                             \
      rcoll_direct_say(a, RCOLL_DIRECT_READY, b, g, tid);                                       \
      if (rcoll_direct_wait(a, RCOLL_DIRECT_READY, b, g, tid))                                  \
        return 1;                                                                               \
      if (!reduces)                                                                             \
        rcoll_direct_pull_out(a, region, at, len, sizeof(T), tid, nt);                          \
      else if (c == RCOLL_DIRECT_REDUCE_SCATTER || a->rank == a->root)                          \
        rcoll_direct_reduce_##op##_##sfx(a, region, at, 0, len, tid, nt);                       \
      rcoll_direct_say(a, RCOLL_DIRECT_DONE, b, g, tid);                                        \
    }                                                                                           \
    return 0;                                                                                   \
  }                                                                                             \
  RCOLL_DK_FN int rcoll_direct_##op##_##sfx(const rcoll_direct_args_t *a, uint32_t b,          \
                                            uint32_t tid, uint32_t nt) {                        \
    const uint32_t n = a->nranks, me = a->rank;                                                 \
    const uint64_t V = 16 / sizeof(T);                                                          \
    if (a->p2p)                                                                                 \
      return rcoll_direct_p2p(a, b, tid, nt);                                                   \
    if (a->pull)                                                                                \
      return rcoll_direct_pull_##op##_##sfx(a, b, tid, nt);                                     \
    if (a->inplace) {                                                                           \
      const uint64_t g = a->base + 1, len = rcoll_direct_inplace_len(a, b);                     \
      if (rcoll_direct_wait(a, RCOLL_DIRECT_DONE, b, a->last[b], tid))                          \
        return 1;                                                                               \
      rcoll_direct_say(a, RCOLL_DIRECT_READY, b, g, tid);                                       \
      if (rcoll_direct_wait(a, RCOLL_DIRECT_READY, b, g, tid))                                  \
        return 1;                                                                               \
      const uint64_t at = (uint64_t)b * a->chunk;                                               \
      const int split = rcoll_direct_split(a);                                                  \
      if (a->coll == RCOLL_DIRECT_ALLTOALL) { /* segment q to rank q, as the host points them */ \
        for (uint32_t q = 0; q < n; q++)                                                        \
          rcoll_direct_copy(a->outs[q] + at * sizeof(T), a->ins[q] + at * sizeof(T),           \
                            len * sizeof(T), a->vec, tid, nt);                                  \
      } else {                                                                                  \
        rcoll_direct_reduce_##op##_##sfx(a, 0, at, split ? rcoll_direct_slice(len, me, n, V) : 0, \
                                         split ? rcoll_direct_slice(len, me + 1, n, V) : len, tid, nt); \
      }                                                                                         \
      rcoll_direct_say(a, RCOLL_DIRECT_REDUCED, b, g, tid);                                     \
      return rcoll_direct_wait(a, RCOLL_DIRECT_REDUCED, b, g, tid);                             \
    }                                                                                           \
    for (uint32_t k = 0; k < a->rounds; k++) {                                                  \
      const uint64_t g = a->base + k + 1;                                                       \
      const uint64_t at = ((uint64_t)k * a->nblocks + b) * a->chunk;                            \
      const uint64_t len = at >= a->count ? 0 : a->count - at < a->chunk ? a->count - at : a->chunk; \
      const size_t region = RCOLL_DIRECT_HDR_BYTES + (size_t)b * a->region_bytes;              \
      const uint64_t lo = rcoll_direct_slice(len, me, n, V), hi = rcoll_direct_slice(len, me + 1, n, V); \
      char *mine = a->box[me] + region;                                                         \
      const char *in = (const char *)((const T *)a->in + at);                                   \
      if (rcoll_direct_wait(a, RCOLL_DIRECT_DONE, b, k == 0 ? a->last[b] : g - 1, tid))         \
        return 1;                                                                               \
      rcoll_direct_copy(mine, in, lo * sizeof(T), a->vec, tid, nt);                             \
      rcoll_direct_copy(mine + hi * sizeof(T), in + hi * sizeof(T), (len - hi) * sizeof(T), a->vec, tid, nt); \
      rcoll_direct_say(a, RCOLL_DIRECT_READY, b, g, tid);                                       \
      if (rcoll_direct_wait(a, RCOLL_DIRECT_READY, b, g, tid))                                  \
        return 1;                                                                               \
      rcoll_direct_reduce_##op##_##sfx(a, region, at, lo, hi, tid, nt);                         \
      rcoll_direct_say(a, RCOLL_DIRECT_REDUCED, b, g, tid);                                     \
      if (rcoll_direct_wait(a, RCOLL_DIRECT_REDUCED, b, g, tid))                                \
        return 1;                                                                               \
      for (uint32_t q = 0; q < n; q++) {                                                        \
        uint64_t qlo = rcoll_direct_slice(len, q, n, V), qhi = rcoll_direct_slice(len, q + 1, n, V); \
        if (q != me)                                                                            \
          rcoll_direct_copy((char *)((T *)a->out + at + qlo),                                   \
                            a->box[q] + region + qlo * sizeof(T), (qhi - qlo) * sizeof(T),      \
                            a->vec, tid, nt);                                                   \
      }                                                                                         \
      rcoll_direct_say(a, RCOLL_DIRECT_DONE, b, g, tid);                                        \
    }                                                                                           \
    return 0;                                                                                   \
  }

/* The element types in rcollDataType_t order, and the ops (avg is sum, then
 * the divide in the same pass). */
#define RCOLL_DIRECT_TYPES(X, op)                                                               \
  X(op, i8, int8_t) X(op, u8, uint8_t) X(op, i32, int32_t) X(op, u32, uint32_t)                 \
  X(op, i64, int64_t) X(op, u64, uint64_t) X(op, f16, uint16_t) X(op, f32, float)               \
  X(op, f64, double) X(op, bf16, uint16_t) X(op, e4m3, uint8_t) X(op, e5m2, uint8_t)
#define RCOLL_DIRECT_ALL(X)                                                                     \
  RCOLL_DIRECT_TYPES(X, sum) RCOLL_DIRECT_TYPES(X, prod) RCOLL_DIRECT_TYPES(X, max)             \
  RCOLL_DIRECT_TYPES(X, min)

#endif
