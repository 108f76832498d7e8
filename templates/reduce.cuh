// fusejit/reduce.cuh — reductions, softmax and norms for the fallback kernels (and
// the ops the fused row reduction of epilogue.cuh shares).
//
// A "row" is the set of elements one output reduces: G consecutive threads
// (G a power of two <= 32, or G == kBlock: the whole block) share a row and
// combine their partials with shuffles (and shared memory for a block), in a
// fixed order, so results are deterministic. The generated code supplies
//   base(o)        -> per-row state (usually the row's first input offset)
//   load(b, r)     -> element r of the row, as float
//   store(o, v)    -> writes the result of row o (applies any fused consumers)
#pragma once

#include "fusejit/fj_common.cuh"

namespace fj {

struct SumOp {
  static constexpr bool kLogSumExp = false;
  static __device__ __forceinline__ float identity() { return 0.f; }
  static __device__ __forceinline__ float combine(float a, float b) { return a + b; }
};
struct MaxOp {
  static constexpr bool kLogSumExp = false;
  static __device__ __forceinline__ float identity() { return neg_inf(); }
  static __device__ __forceinline__ float combine(float a, float b) { return max_nan(a, b); }
};
struct MinOp {
  static constexpr bool kLogSumExp = false;
  static __device__ __forceinline__ float identity() { return inf(); }
  static __device__ __forceinline__ float combine(float a, float b) { return min_nan(a, b); }
};
// log(sum(exp(x))) = m + log(sum(exp(x - m))), m = max (an infinite or NaN m is the result).
struct LogSumExpOp {
  static constexpr bool kLogSumExp = true;
};

__device__ __forceinline__ bool is_finite(float v) { return v - v == 0.f; }

// Combines v over a group of G threads; every thread of the block must call
// it. All threads of the group get the same result. smem: kBlock/32 floats.
template <int G, int kBlock, class Combine>
__device__ __forceinline__ float group_combine(float v, const Combine& combine, float* smem) {
  static_assert(G <= 32 ? (32 % G == 0) : (G == kBlock && kBlock % 32 == 0), "bad group size");
  constexpr int kLanes = G < 32 ? G : 32;
#pragma unroll
  for (int off = kLanes / 2; off > 0; off /= 2) v = combine(v, __shfl_xor_sync(0xffffffffu, v, off));
  if constexpr (G > 32) {
    const int warp = threadIdx.x / 32;
    __syncthreads();  // smem may still be read by a previous call
    if (threadIdx.x % 32 == 0) smem[warp] = v;
    __syncthreads();
    v = smem[0];
    for (int w = 1; w < kBlock / 32; ++w) v = combine(v, smem[w]);
  }
  return v;
}

// Row index of this thread's group, and its lane in the group.
template <int G, int kBlock>
__device__ __forceinline__ long long group_row() {
  return (long long)blockIdx.x * (kBlock / G) + threadIdx.x / G;
}

template <int G, int kBlock, class Op, class BaseF, class LoadF, class StoreF>
__device__ __forceinline__ void reduce_rows(long long rows, int len, const BaseF& base, const LoadF& load,
                                            const StoreF& store) {
  __shared__ float smem[kBlock / 32];
  const long long o = group_row<G, kBlock>();
  const int lane = threadIdx.x % G;
  const bool active = o < rows;
  const auto b = base(active ? o : 0);
  float result;
  if constexpr (Op::kLogSumExp) {
    float m = neg_inf();
    for (int r = lane; r < len; r += G) m = max_nan(m, load(b, r));
    m = group_combine<G, kBlock>(m, [](float x, float y) { return max_nan(x, y); }, smem);
    float s = 0.f;
    if (is_finite(m))
      for (int r = lane; r < len; r += G) s += expf(load(b, r) - m);
    s = group_combine<G, kBlock>(s, [](float x, float y) { return x + y; }, smem);
    result = is_finite(m) ? m + logf(s) : m;
  } else {
    float a = Op::identity();
    for (int r = lane; r < len; r += G) a = Op::combine(a, load(b, r));
    result = group_combine<G, kBlock>(a, [](float x, float y) { return Op::combine(x, y); }, smem);
  }
  if (active && lane == 0) store(o, result);
}

// Several reductions of the same rows in one pass (Ops: SumOp, MaxOp, MinOp;
// a mean is a sum the caller divides): load(b, r, v) writes element r's value
// of each reduction to v[0 .. sizeof...(Ops)) (and may store values computed
// on the way: each element is loaded once, by an active group); store(o, v)
// gets the results. Deterministic as reduce_rows.
template <int G, int kBlock, class... Ops, class BaseF, class LoadF, class StoreF>
__device__ __forceinline__ void reduce_rows_multi(long long rows, int len, const BaseF& base, const LoadF& load,
                                                  const StoreF& store) {
  constexpr int kN = sizeof...(Ops);
  static_assert(kN > 0 && (!Ops::kLogSumExp && ...), "sum, max, min");
  __shared__ float smem[kBlock / 32];
  const long long o = group_row<G, kBlock>();
  const int lane = threadIdx.x % G;
  const bool active = o < rows;
  const auto b = base(active ? o : 0);
  float a[kN];
  {
    int i = 0;
    ((a[i++] = Ops::identity()), ...);
  }
  if (active)
    for (int r = lane; r < len; r += G) {
      float v[kN];
      load(b, r, v);
      int i = 0;
      ((a[i] = Ops::combine(a[i], v[i]), ++i), ...);
    }
  {
    int i = 0;
    ((a[i] = group_combine<G, kBlock>(a[i], [](float x, float y) { return Ops::combine(x, y); }, smem), ++i), ...);
  }
  if (active && lane == 0) store(o, a);
}

// Reductions whose consecutive outputs are consecutive input elements (the
// input's innermost dims are kept: a bias gradient sum(dz, dims=[0]) sums
// columns). Outputs come in runs of `inner` (the kept dims after the last
// reduced one); each block takes 32 consecutive outputs of a run, lane tx
// one output, so every load of a warp reads 32 consecutive elements; the
// block's kGroups warps each fold every kGroups-th reduced element, then warp
// 0 combines the warps' partials in order (deterministic) and stores.
// Sum, max and min (logsumexp takes reduce_rows). base / load / store as for
// reduce_rows; blockDim.x == 32 * kGroups; grid: runs * ceil(inner / 32).
template <int kGroups, class Op, class BaseF, class LoadF, class StoreF>
__device__ __forceinline__ void reduce_columns(long long inner, int len, const BaseF& base, const LoadF& load,
                                               const StoreF& store) {
  static_assert(!Op::kLogSumExp, "logsumexp: reduce_rows");
  __shared__ float part[kGroups][33];
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  const long long chunks = (inner + 31) / 32;
  const long long col = blockIdx.x % chunks * 32 + tx;
  const long long o = blockIdx.x / chunks * inner + col;
  const bool active = col < inner;
  const auto b = base(active ? o : 0);
  float a = Op::identity();
  if (active)
    for (int r = ty; r < len; r += kGroups) a = Op::combine(a, load(b, r));
  part[ty][tx] = a;
  __syncthreads();
  if (ty == 0 && active) {
    float v = part[0][tx];
    for (int g = 1; g < kGroups; ++g) v = Op::combine(v, part[g][tx]);
    store(o, v);
  }
}

// softmax / log_softmax along a row: max, sum of exp(x - max), then write.
// store(o, b, r, v) writes element r of row o. kPer > 0 (at least len / G,
// rounded up): each thread keeps its kPer elements in registers, so the row
// is read once and each exponential computed once; 0: three passes over
// memory, for rows too long to hold.
template <int G, int kBlock, bool kLog, int kPer = 0, class BaseF, class LoadF, class StoreF>
__device__ __forceinline__ void softmax_rows(long long rows, int len, const BaseF& base, const LoadF& load,
                                             const StoreF& store) {
  __shared__ float smem[kBlock / 32];
  const long long o = group_row<G, kBlock>();
  const int lane = threadIdx.x % G;
  const bool active = o < rows;
  const auto b = base(active ? o : 0);
  const auto max2 = [](float x, float y) { return max_nan(x, y); };
  const auto add = [](float x, float y) { return x + y; };
  if constexpr (kPer > 0) {
    // element lane + i * G of the row (i < kPer): the whole-G steps need no check
    const auto inside = [&](int i) { return (i + 1) * G <= len || lane + i * G < len; };
    float v[kPer];
    float m = neg_inf();
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      v[i] = inside(i) ? load(b, lane + i * G) : neg_inf();
      m = max_nan(m, v[i]);
    }
    m = group_combine<G, kBlock>(m, max2, smem);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      v[i] -= m;  // (an element outside the row: -inf - m, never stored)
      const float e = expf(v[i]);
      if (inside(i)) s += e;
      if constexpr (!kLog) v[i] = e;
    }
    s = group_combine<G, kBlock>(s, add, smem);
    if (!active) return;
    const float log_s = logf(s), inv_s = 1.f / s;  // once a row (no division an element)
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      if (inside(i)) store(o, b, lane + i * G, kLog ? v[i] - log_s : v[i] * inv_s);
  } else {
    float m = neg_inf();
    for (int r = lane; r < len; r += G) m = max_nan(m, load(b, r));
    m = group_combine<G, kBlock>(m, max2, smem);
    float s = 0.f;
    for (int r = lane; r < len; r += G) s += expf(load(b, r) - m);
    s = group_combine<G, kBlock>(s, add, smem);
    if (!active) return;
    const float log_s = logf(s), inv_s = 1.f / s;  // once a row (no division an element)
    for (int r = lane; r < len; r += G) {
      const float x = load(b, r);
      store(o, b, r, kLog ? (x - m) - log_s : expf(x - m) * inv_s);
    }
  }
}

// group / instance / layer norm over a row: the mean, then the biased
// variance as the mean of squared deviations (two passes in fp32); then
// then(o, b, lane, active, mean, rstd, at), called by every thread of the
// row's group. at(r) is element r of the row: with kCached, from a copy the
// first pass leaves in dynamic shared memory (kBlock / G rows of len floats:
// x read once), else load(b, r).
template <int G, int kBlock, bool kCached, class BaseF, class LoadF, class ThenF>
__device__ __forceinline__ void norm_row_stats(long long rows, int len, float eps, const BaseF& base,
                                               const LoadF& load, const ThenF& then) {
  __shared__ float smem[kBlock / 32];
  const long long o = group_row<G, kBlock>();
  const int lane = threadIdx.x % G;
  const bool active = o < rows;
  const auto b = base(active ? o : 0);
  float* cache = nullptr;
  if constexpr (kCached) {
    extern __shared__ float fj_norm_row_cache[];
    cache = fj_norm_row_cache + (size_t)(threadIdx.x / G) * len;
  }
  const auto at = [&](int r) -> float {
    if constexpr (kCached) return cache[r];
    else return load(b, r);
  };
  const auto add = [](float x, float y) { return x + y; };
  float s = 0.f;
  for (int r = lane; r < len; r += G) {
    const float v = load(b, r);
    if constexpr (kCached) cache[r] = v;
    s += v;
  }
  const float mean = group_combine<G, kBlock>(s, add, smem) / (float)len;  // G == kBlock: a block barrier
  if constexpr (kCached && G <= 32) __syncwarp();  // the group's copies visible to its lanes
  float m2 = 0.f;
  for (int r = lane; r < len; r += G) {
    const float d = at(r) - mean;
    m2 += d * d;
  }
  const float rstd = 1.f / sqrtf(group_combine<G, kBlock>(m2, add, smem) / (float)len + eps);
  then(o, b, lane, active, mean, rstd, at);
}

// The norm, then finish(o, b, q, mean, rstd, at) for q = lane, lane + G, ...
// < out_len: the row's elements (out_len = len) or its pooled outputs (a pool
// the norm kernel does, each window normalizing what it reads).
template <int G, int kBlock, bool kCached, class BaseF, class LoadF, class FinishF>
__device__ __forceinline__ void norm_rows(long long rows, int len, int out_len, float eps, const BaseF& base,
                                          const LoadF& load, const FinishF& finish) {
  norm_row_stats<G, kBlock, kCached>(rows, len, eps, base, load,
                                     [&](long long o, auto b, int lane, bool active, float mean, float rstd,
                                         const auto& at) {
                                       if (!active) return;
                                       for (int q = lane; q < out_len; q += G) finish(o, b, q, mean, rstd, at);
                                     });
}

// norm_rows (out_len = len) with the row held in registers, kPer elements a
// lane (rows of at most kPer * G): the same sums in the same order as
// norm_row_stats, no shared-memory copy; at(q) in finish reads the held value.
template <int G, int kBlock, int kPer, class BaseF, class LoadF, class FinishF>
__device__ __forceinline__ void norm_rows_held(long long rows, int len, float eps, const BaseF& base,
                                               const LoadF& load, const FinishF& finish) {
  __shared__ float smem[kBlock / 32];
  const long long o = group_row<G, kBlock>();
  const int lane = threadIdx.x % G;
  const bool active = o < rows;
  const auto b = base(active ? o : 0);
  const auto add = [](float x, float y) { return x + y; };
  float held[kPer];
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    held[i] = lane + i * G < len ? load(b, lane + i * G) : 0.f;
    s += held[i];
  }
  const float mean = group_combine<G, kBlock>(s, add, smem) / (float)len;
  float m2 = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const float d = held[i] - mean;
    if (lane + i * G < len) m2 += d * d;
  }
  const float rstd = 1.f / sqrtf(group_combine<G, kBlock>(m2, add, smem) / (float)len + eps);
  if (!active) return;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    if (lane + i * G < len) finish(o, b, lane + i * G, mean, rstd, [&](int) { return held[i]; });
}

// The norm, then a reduction (Op) the norm kernel does: the row's `outs` runs
// of len / outs consecutive elements, each reduced by the whole group in turn
// (value(o, b, r, mean, rstd, at): element r's value), store(o, k, result) for
// run k (one lane). Deterministic: a fixed order, as reduce_rows.
template <int G, int kBlock, bool kCached, class Op, class BaseF, class LoadF, class ValueF, class StoreF>
__device__ __forceinline__ void norm_rows_reduce(long long rows, int len, int outs, float eps, const BaseF& base,
                                                 const LoadF& load, const ValueF& value, const StoreF& store) {
  __shared__ float run_smem[kBlock / 32];
  const int run = len / outs;
  norm_row_stats<G, kBlock, kCached>(rows, len, eps, base, load,
                                     [&](long long o, auto b, int lane, bool active, float mean, float rstd,
                                         const auto& at) {
                                       for (int k = 0; k < outs; ++k) {
                                         float acc = Op::identity();
                                         for (int r = k * run + lane; r < (k + 1) * run; r += G)
                                           acc = Op::combine(acc, value(o, b, r, mean, rstd, at));
                                         acc = group_combine<G, kBlock>(
                                             acc, [](float x, float y) { return Op::combine(x, y); }, run_smem);
                                         if (active && lane == 0) store(o, k, acc);
                                       }
                                     });
}

// Whether this block is the last of the grid to get here: every thread of
// every block calls it once, after the block's results are stored. The
// others' stores are then visible to the last block (read them with __ldcg);
// it sets *counter (zero before the launch) back to 0 for the next launch.
__device__ __forceinline__ bool last_block_of_grid(int* counter) {
  __shared__ int arrived;
  __threadfence();  // this block's stores are visible before it is counted
  __syncthreads();
  if (threadIdx.x == 0) arrived = atomicAdd(counter, 1);
  __syncthreads();
  if (arrived != (int)gridDim.x - 1) return false;
  if (threadIdx.x == 0) *counter = 0;
  __threadfence();  // the other blocks' stores, counted before ours, are visible
  return true;
}

}  // namespace fj
