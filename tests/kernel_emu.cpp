// The CUDA kernels of lib/cuda/kernels.cu compiled for the CPU and run
// there, one thread per block, the blocks in turn (tests/check_kernel_emu.sh).
// nvcc builds them on every machine with a toolkit, but only a GPU runs
// them; this runs their indexing on the CPU where CI runs: grid-stride
// loops, the 16-byte vector paths and their scalar tails, aligned and not,
// in and out of place, for every type and op of the reduce kernels, the
// direct all-reduce (lib/cuda/direct_kernel.h) with its device-side macros
// (__ldcg of uint4, volatile flags, __syncthreads_or) between ranks that are
// CPU threads, and the bounce kernel (lib/cuda/bounce_kernel.h) against a
// CPU thread that plays its proxy. The arithmetic itself is reduce_math.h, pinned by the host
// tests; expected values here come from its scalar functions.
//
// What it cannot show: anything about warps, memory ordering on a GPU, or
// speed. A small shim stands in for the CUDA built-ins.
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#define __CUDACC__ 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__ static
#define RCOLL_KERNEL_EMU 1

struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct emu_dim {
  unsigned x, y, z;
};
static thread_local emu_dim blockIdx, threadIdx, blockDim, gridDim;
template <class T> static inline T __ldcg(const T *p) {
  T v;
  memcpy(&v, (const void *)p, sizeof v);
  return v;
}
template <class T> static inline T __ldcv(const T *p) { return __ldcg(p); }
// A block's threads are CPU threads that meet at __syncthreads: a barrier
// that also ORs what each brings (__syncthreads_or). Once all n have come,
// none can come again before every one has read the result.
struct emu_block {
  std::mutex mu;
  std::condition_variable cv;
  unsigned n, arrived = 0, gen = 0;
  int acc = 0, result = 0;
  int sync(int x) {
    std::unique_lock<std::mutex> l(mu);
    unsigned g = gen;
    acc |= x;
    if (++arrived == n) {
      result = acc;
      acc = 0;
      arrived = 0;
      gen++;
      cv.notify_all();
      return result;
    }
    cv.wait(l, [&] { return gen != g; });
    return result;
  }
};
static thread_local emu_block *emu_this_block;
static inline void __syncthreads() { emu_this_block->sync(0); }
static inline int __syncthreads_or(int x) { return emu_this_block->sync(x); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __nanosleep(unsigned) { sched_yield(); }
static inline unsigned long long rcoll_globaltimer_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}
// kernels.cu's is an ld.volatile.global in PTX.
static inline uint64_t rcoll_dk_flag_load(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

#include "cuda/kernels.cu"

// One "launch": the blocks of the grid in turn, each as `threads` CPU
// threads at once, so that every thread's share of a loop is its own, as on
// a GPU (where the direct all-reduce runs 512 a block).
template <class F, class... A> static void launch(unsigned grid, unsigned threads, F kernel, A... args) {
  for (unsigned b = 0; b < grid; b++) {
    emu_block blk;
    blk.n = threads;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; t++)
      ts.emplace_back([&, t] {
        gridDim = {grid, 1, 1};
        blockDim = {threads, 1, 1};
        blockIdx = {b, 0, 0};
        threadIdx = {t, 0, 0};
        emu_this_block = &blk;
        kernel(args...);
      });
    for (auto &t : ts)
      t.join();
  }
}

static int failures;

// Random bytes 0x01..0x3f: every type's values are then finite and small
// (no NaN, whose sign x86 may take from either operand, so that bits could
// differ where the compiler swapped them; no overflow in products).
static void fill_random(unsigned char *p, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = (unsigned char)(1 + (seed >> 56) % 0x3f);
  }
}

// Every count, alignment and placement of one reduce kernel against the
// scalar function it applies.
template <class T>
static void check_reduce(const char *name, void (*kernel)(T *, const T *, const T *, size_t),
                         T (*ref)(T, T)) {
  static const size_t counts[] = {1, 2, 15, 16, 17, 31, 1000, 4099};
  for (size_t count : counts)
    for (int shift = 0; shift < 2; shift++)  // 0: 16-byte aligned; 1: one element past
      for (int inplace = 0; inplace < 2; inplace++) {
        std::vector<uint4> abuf(count / 2 + 4), bbuf(count / 2 + 4), dbuf(count / 2 + 4);
        T *a = (T *)abuf.data() + shift, *b = (T *)bbuf.data() + shift, *d = (T *)dbuf.data() + shift;
        fill_random((unsigned char *)a, count * sizeof(T), count * 7 + shift);
        fill_random((unsigned char *)b, count * sizeof(T), count * 11 + shift);
        std::vector<T> want(count);
        for (size_t i = 0; i < count; i++)
          want[i] = ref(a[i], b[i]);
        T *dst = inplace ? a : d;
        launch(3, 4, kernel, dst, (const T *)a, (const T *)b, count);
        if (memcmp(dst, want.data(), count * sizeof(T)) != 0) {
          size_t k = 0;
          while (memcmp(&dst[k], &want[k], sizeof(T)) == 0)
            k++;
          fprintf(stderr, "FAIL %s: count %zu, %s, %s: element %zu is %#llx, not %#llx\n", name, count,
                  shift ? "unaligned" : "aligned", inplace ? "in place" : "out of place", k,
                  (unsigned long long)dst[k], (unsigned long long)want[k]);
          failures++;
        }
      }
}

// Threads per block of the direct all-reduce here (the GPU runs 512).
#define EMU_DIRECT_THREADS 32

// The direct all-reduce between nranks CPU threads: sum, `count` elements,
// several rounds of nb blocks, twice in a row (the second reuses regions),
// then once in place (reading the peers' buffers, one round).
template <class T>
static void check_direct(const char *name, void (*kernel)(rcoll_direct_args_t), T (*sum)(T, T),
                         int nranks, size_t count) {
  const size_t region = 4096, nb = 3, V = 16 / sizeof(T);
  size_t cap = region / sizeof(T), rounds = (count + nb * cap - 1) / (nb * cap);
  size_t chunk = (count + rounds * nb - 1) / (rounds * nb);
  chunk = (chunk + V - 1) / V * V;
  std::vector<std::vector<uint4>> boxes(nranks), in(nranks), out(nranks);
  rcoll_direct_args_t args[RCOLL_DIRECT_MAX_RANKS];
  uint32_t failed = 0;
  uint64_t sigs[2] = {0, 0};
  for (int r = 0; r < nranks; r++) {
    boxes[r].assign((RCOLL_DIRECT_HDR_BYTES + RCOLL_DIRECT_REGIONS * region) / 16, uint4{0, 0, 0, 0});
    in[r].resize(count * sizeof(T) / 16 + 1);
    out[r].resize(count * sizeof(T) / 16 + 1);
    fill_random((unsigned char *)in[r].data(), count * sizeof(T), 100 + r);
  }
  for (int r = 0; r < nranks; r++) {
    args[r] = rcoll_direct_args_t{};
    args[r].in = in[r].data();
    args[r].out = out[r].data();
    args[r].count = count;
    args[r].chunk = chunk;
    args[r].region_bytes = region;
    args[r].timeout_ns = 10000000000ull;
    args[r].failed = &failed;
    args[r].sigs = sigs;
    args[r].sig = RCOLL_DIRECT_SIG(0, 0, count, 0, 0);
    args[r].rounds = (uint32_t)rounds;
    args[r].nblocks = (uint32_t)nb;
    args[r].nranks = (uint32_t)nranks;
    args[r].rank = (uint32_t)r;
    args[r].vec = 1;
    for (int q = 0; q < nranks; q++)
      args[r].box[q] = (char *)boxes[q].data();
  }
  for (int call = 0; call < 3; call++) {
    std::vector<std::thread> ranks;
    for (int r = 0; r < nranks; r++) {
      args[r].base = call * rounds;
      for (size_t b = 0; b < nb; b++)
        args[r].last[b] = call * rounds;
      if (call == 2) {
        args[r].inplace = 1;
        args[r].rounds = 1;
        args[r].chunk = ((count + nb - 1) / nb + V - 1) / V * V;
        for (int q = 0; q < nranks; q++) {
          args[r].ins[q] = (const char *)in[q].data();
          args[r].outs[q] = (char *)out[q].data();
        }
        memset(out[r].data(), 0, out[r].size() * sizeof(uint4));
      }
      ranks.emplace_back([&, r] { launch((unsigned)nb, EMU_DIRECT_THREADS, kernel, args[r]); });
    }
    for (auto &t : ranks)
      t.join();
  }
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < count; i++) {
      T want = ((const T *)in[0].data())[i];
      for (int q = 1; q < nranks; q++)
        want = sum(want, ((const T *)in[q].data())[i]);
      T got = ((const T *)out[r].data())[i];
      if (memcmp(&got, &want, sizeof(T)) != 0 || failed != 0) {
        fprintf(stderr, "FAIL direct %s: %d ranks, count %zu: rank %d element %zu (failed word %u)\n",
                name, nranks, count, r, i, failed);
        failures++;
        return;
      }
    }
}

// Every in-place collective but the all-reduce between nranks CPU threads,
// `count` elements per rank (reductions: sums; the others copy bytes
// through the u8 sum kernel of one source), rank 1 the root, the buffers
// pointed at as direct.c points them: every input at our segment for a
// reduce-scatter or scatter, every output at our place for an all-gather,
// gather or all-to-all, whose inputs are our own segments.
template <class T>
static void check_direct_colls(const char *name, void (*kernel)(rcoll_direct_args_t),
                               void (*copy)(rcoll_direct_args_t), T (*sum)(T, T), int nranks,
                               size_t count, int pull) {
  const size_t nb = 3, V = 16 / sizeof(T), n = (size_t)nranks, es = sizeof(T);
  // Pulling, a block's region holds a segment per rank of its stretch of
  // each rank's part: a third of it, rounded up to vectors.
  const size_t region = ((count * es + nb - 1) / nb + 16) / 16 * 16 * n;
  std::vector<std::vector<uint4>> boxes(nranks), in(nranks), out(nranks);
  uint32_t failed = 0;
  uint64_t sigs[2] = {0, 0};
  for (int r = 0; r < nranks; r++) {
    boxes[r].assign((RCOLL_DIRECT_HDR_BYTES + (pull ? nb * region : 0)) / 16, uint4{0, 0, 0, 0});
    in[r].resize(n * count * es / 16 + 1);
    out[r].resize(n * count * es / 16 + 1);
    fill_random((unsigned char *)in[r].data(), n * count * es, 200 + r);
  }
  const uint32_t root = 1;
  for (int coll = RCOLL_DIRECT_REDUCE_SCATTER; coll <= RCOLL_DIRECT_ALLTOALL; coll++) {
    const int reduces = coll == RCOLL_DIRECT_REDUCE_SCATTER || coll == RCOLL_DIRECT_REDUCE;
    const int in_at_me = coll == RCOLL_DIRECT_REDUCE_SCATTER || coll == RCOLL_DIRECT_SCATTER;
    const int out_at_me = coll == RCOLL_DIRECT_ALLGATHER || coll == RCOLL_DIRECT_GATHER ||
                          coll == RCOLL_DIRECT_ALLTOALL;
    size_t kcount = reduces ? count : count * es, kv = reduces ? V : 16;
    rcoll_direct_args_t args[RCOLL_DIRECT_MAX_RANKS];
    std::vector<std::thread> ranks;
    for (int r = 0; r < nranks; r++)  // no result of the last collective may pass for this one's
      memset(out[r].data(), 0, out[r].size() * sizeof(uint4));
    for (int r = 0; r < nranks; r++) {
      rcoll_direct_args_t &a = args[r];
      a = rcoll_direct_args_t{};
      a.count = kcount;
      a.chunk = ((kcount + nb - 1) / nb + kv - 1) / kv * kv;
      a.base = (uint64_t)coll;  // one round per call, on the same flags
      a.timeout_ns = 10000000000ull;
      a.failed = &failed;
      a.sigs = sigs;
      a.sig = RCOLL_DIRECT_SIG(coll, 0, count, 0, 0);
      a.rounds = 1;
      a.nblocks = (uint32_t)nb;
      a.nranks = (uint32_t)nranks;
      a.rank = (uint32_t)r;
      a.vec = count * es % 16 == 0;  // the segments stay 16-byte aligned
      a.inplace = !pull;
      a.pull = pull;
      a.coll = (uint32_t)coll;
      a.root = root;
      a.in = in[r].data();
      a.out = out[r].data();
      a.region_bytes = region;
      // Pulled, the last call's round; in place, none: the library counts
      // only rounds through the regions (in place says no DONE).
      for (size_t b = 0; b < nb; b++)
        a.last[b] = coll == RCOLL_DIRECT_REDUCE_SCATTER || !pull ? 0 : (uint64_t)coll;
      for (int q = 0; q < nranks; q++) {
        a.box[q] = (char *)boxes[q].data();
        a.ins[q] = (const char *)in[coll == RCOLL_DIRECT_ALLTOALL ? r : q].data() +
                   (in_at_me ? r : coll == RCOLL_DIRECT_ALLTOALL ? q : 0) * count * es;
        a.outs[q] = (char *)out[q].data() + (out_at_me ? r * count * es : 0);
      }
      ranks.emplace_back(
          [&, r] { launch((unsigned)nb, EMU_DIRECT_THREADS, reduces ? kernel : copy, args[r]); });
    }
    for (auto &t : ranks)
      t.join();
    static const char *const what[] = {"",       "reduce-scatter", "all-gather", "broadcast",
                                       "reduce", "gather",         "scatter",    "all-to-all"};
    const int whole = out_at_me;  // outputs of n parts
    for (int r = 0; r < nranks; r++) {
      if ((coll == RCOLL_DIRECT_REDUCE || coll == RCOLL_DIRECT_GATHER) && r != (int)root)
        continue;  // the others' outputs are not written
      for (size_t i = 0; i < (whole ? n * count : count); i++) {
        size_t q = i / count, j = i % count;  // rank q's element j
        // Which rank's input, and where in it, element i of our output comes from.
        size_t src = coll == RCOLL_DIRECT_BROADCAST || coll == RCOLL_DIRECT_SCATTER ? root : whole ? q : 0;
        size_t at = in_at_me ? r * count + i : coll == RCOLL_DIRECT_ALLTOALL ? r * count + j : whole ? j : i;
        T want = ((const T *)in[src].data())[at];
        for (int p = 1; p < nranks && reduces; p++)
          want = sum(want, ((const T *)in[p].data())[at]);
        T got = ((const T *)out[r].data())[i];
        if (memcmp(&got, &want, sizeof(T)) != 0 || failed != 0) {
          fprintf(stderr, "FAIL direct %s %s%s: %d ranks, count %zu: rank %d element %zu (failed word %u)\n",
                  what[coll], name, pull ? " pulled" : "", nranks, count, r, i, failed);
          failures++;
          return;
        }
      }
    }
  }
}

// The bounce kernel with a CPU thread as its proxy: the input must be in
// the slot when the kernel says so, the result copied back only after the
// flag (the proxy changes the slot just before it), nothing copied where a
// pointer is NULL; a flag that never comes sets timed_out and copies
// nothing back.
static void check_bounce(size_t in_bytes, size_t out_bytes, int shift, int flag_comes) {
  std::vector<uint4> user_in(in_bytes / 16 + 2), user_out(out_bytes / 16 + 2), slot(8192), slot_out(8192);
  unsigned char *in = (unsigned char *)user_in.data() + shift, *out = (unsigned char *)user_out.data() + shift;
  fill_random(in, in_bytes, in_bytes + 3);
  memset(user_out.data(), 0xee, user_out.size() * 16);
  uint32_t ready = 6, flag = 6, timed_out = 0;
  rcoll_bounce_kargs_t a = {};
  a.in = in_bytes ? (const char *)in : NULL;
  a.in_host = (char *)slot.data();
  a.in_bytes = in_bytes;
  a.out_host = (const char *)slot_out.data();
  a.out = out_bytes ? (char *)out : NULL;
  a.out_bytes = out_bytes;
  a.ready = &ready;
  a.flag = &flag;
  a.timed_out = &timed_out;
  a.timeout_ns = flag_comes ? 10000000000ull : 20000000ull;
  a.seq = 7;
  int seen_in = 1;
  std::thread proxy([&] {
    while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) != 7)
      sched_yield();
    seen_in = memcmp(slot.data(), in, in_bytes) == 0;
    for (size_t i = 0; i < out_bytes; i++) // the result is written after the kernel said "ready"
      ((unsigned char *)slot_out.data())[i] = (unsigned char)(i * 7 + 1);
    if (flag_comes)
      __atomic_store_n(&flag, 7, __ATOMIC_RELEASE);
  });
  launch(1, 4, rcoll_k_bounce, a);
  proxy.join();
  int right = seen_in;
  for (size_t i = 0; i < out_bytes; i++)
    right &= out[i] == (flag_comes ? (unsigned char)(i * 7 + 1) : 0xee);
  right &= timed_out == (uint32_t)!flag_comes;
  if (!right) {
    fprintf(stderr, "FAIL bounce: %zu bytes in, %zu out, shift %d, flag %s: input %s, timed_out %u\n",
            in_bytes, out_bytes, shift, flag_comes ? "comes" : "never comes", seen_in ? "seen" : "NOT seen",
            timed_out);
    failures++;
  }
}

#define CHECK_REDUCE(op, sfx, T) check_reduce<T>(#op "_" #sfx, rcoll_k_##op##_##sfx, rcoll_##op##_##sfx);

int main() {
  RCOLL_DIRECT_ALL(CHECK_REDUCE)
  check_direct<float>("sum_f32", rcoll_k_direct_sum_f32, rcoll_sum_f32, 2, 2);  // 8 B
  check_direct<uint8_t>("sum_e5m2", rcoll_k_direct_sum_e5m2, rcoll_sum_e5m2, 2, 1031);
  check_direct<float>("sum_f32", rcoll_k_direct_sum_f32, rcoll_sum_f32, 2, 5000);
  check_direct<float>("sum_f32", rcoll_k_direct_sum_f32, rcoll_sum_f32, 3, 7777);
  check_direct<uint16_t>("sum_bf16", rcoll_k_direct_sum_bf16, rcoll_sum_bf16, 3, 9001);
  check_direct<uint8_t>("sum_e5m2", rcoll_k_direct_sum_e5m2, rcoll_sum_e5m2, 2, 20000);
  for (int pull = 0; pull < 2; pull++) {
    check_direct_colls<float>("sum_f32", rcoll_k_direct_sum_f32, rcoll_k_direct_sum_u8, rcoll_sum_f32, 2,
                              4096, pull);
    check_direct_colls<float>("sum_f32", rcoll_k_direct_sum_f32, rcoll_k_direct_sum_u8, rcoll_sum_f32, 3,
                              5001, pull);
    check_direct_colls<uint16_t>("sum_bf16", rcoll_k_direct_sum_bf16, rcoll_k_direct_sum_u8, rcoll_sum_bf16,
                                 4, 777, pull);
  }
  for (int shift = 0; shift < 2; shift++)
    for (size_t bytes : {(size_t)0, (size_t)8, (size_t)1031, (size_t)65536}) {
      check_bounce(bytes, bytes, shift, 1);
      check_bounce(bytes, 0, shift, 1); // a root's send only, or a NULL output
      check_bounce(0, bytes, shift, 1);
    }
  check_bounce(8, 8, 0, 0);
  if (failures) {
    printf("kernel_emu: %d FAILED\n", failures);
    return 1;
  }
  printf("kernel_emu: every reduce kernel (12 types x 4 ops, 8 counts, aligned and not, in and out of "
         "place), the direct all-reduce (2-3 ranks, f32, bf16, e5m2; regions and in place), every other "
         "collective in place and through the regions (2-4 ranks, f32, bf16) and the bounce "
         "kernel (0 B to 64 KiB, aligned and not, a flag that never comes) right on the CPU\n");
  return 0;
}
