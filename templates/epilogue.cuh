// fusejit/epilogue.cuh — tile epilogues: what a mainloop's accumulator
// fragment (see gemm_simt.cuh for the fragment interface) turns into.
// The generated code supplies small functors; the per-node math lives in
// generated device functions that those functors call.
//
//   tile_pointwise   value(acc, m, n) per element  (elementwise DAG + stores)
//   tile_pointwise_pairs  the same, two adjacent columns a call
//   tile_pool        value(acc, m, n) -> window max/avg -> store(v, m0, w, n)
//   tile_pool1d_staged  value(acc, m, n) -> max/avg of K columns -> store(v, m, w)
//   tile_col_partials   value(acc, m, n) -> reduce over the tile's rows -> store(v, n)
//   tile_row_reduce  value(acc, m, n) -> reduce over all n -> store(v, m)
//   tile_row_partials  the same over one column tile of a wider N: partials
//                      that combine_partials() finishes in a second kernel
//   tile_row_broadcast  reduce over all n -> row(v, m), then apply(acc, v, m, n)
//   tile_pointwise_staged[_pairs]  as tile_pointwise, through shared memory
//                      a chunk of columns at a time (epilogue_staged.cuh)
//
// Row groups of the fragment run in a rolled loop (rows within a group and
// columns unrolled), so each functor is inlined kRowUnroll * kCols times
// rather than kRows * kCols times.
//
// m and n are GEMM coordinates (tile offset applied). Functors must not touch
// shared memory; every thread that holds a fragment (Frag::kThreads of them,
// frag.thread() in [0, kThreads), synchronized by Frag::sync()) must call the
// epilogue: the whole block for SIMT tiles, the consumer warpgroups of a
// warp-specialized mainloop.
#pragma once

#include "fusejit/epilogue_staged.cuh"
#include "fusejit/fj_common.cuh"
#include "fusejit/reduce.cuh"

namespace fj {

// Elementwise epilogue: f(acc, m, n) for every element inside [0,M) x [0,N).
// A tile inside the problem takes a loop without bounds checks: nothing then
// keeps the compiler from issuing the functor's loads (bias, residual, ...)
// ahead of earlier stores, so their latencies overlap instead of adding up.
template <class Frag, class F>
__device__ __forceinline__ void tile_pointwise(const Frag& frag, int m0, int n0, int M, int N, const F& f) {
  // Row groups in a rolled loop: the functor is inlined kRowUnroll * kCols
  // times per path, not kRows * kCols (much less code to compile).
  constexpr int U = Frag::kRowUnroll;
  if (m0 + Frag::kTileRows <= M && n0 + Frag::kTileCols <= N) {
#pragma unroll 1
    for (int g = 0; g < Frag::kRows / U; ++g)
#pragma unroll
      for (int q = 0; q < U; ++q)
#pragma unroll
        for (int j = 0; j < Frag::kCols; ++j) f(frag.pick(g, q, j), m0 + frag.row(g * U + q), n0 + frag.col(j));
    return;
  }
#pragma unroll 1
  for (int g = 0; g < Frag::kRows / U; ++g) {
#pragma unroll
    for (int q = 0; q < U; ++q) {
      const int m = m0 + frag.row(g * U + q);
      if (m >= M) continue;
#pragma unroll
      for (int j = 0; j < Frag::kCols; ++j) {
        const int n = n0 + frag.col(j);
        if (n < N) f(frag.pick(g, q, j), m, n);
      }
    }
  }
}

// tile_pointwise with two adjacent columns a call: f2(v_n, v_n1, m, n) at
// columns j and j + 1 of the fragment (j even: adjacent in every fragment)
// where the tile lies inside the problem and `pairs` holds (the caller's check
// that each output takes one store of two elements there); f one element at a
// time otherwise.
template <class Frag, class F2, class F>
__device__ __forceinline__ void tile_pointwise_pairs(const Frag& frag, int m0, int n0, int M, int N, bool pairs,
                                                     const F2& f2, const F& f) {
  static_assert(Frag::kCols % 2 == 0, "whole column pairs");
  constexpr int U = Frag::kRowUnroll;
  if (!pairs || m0 + Frag::kTileRows > M || n0 + Frag::kTileCols > N) return tile_pointwise(frag, m0, n0, M, N, f);
#pragma unroll 1
  for (int g = 0; g < Frag::kRows / U; ++g)
#pragma unroll
    for (int q = 0; q < U; ++q)
#pragma unroll
      for (int j = 0; j < Frag::kCols; j += 2)
        f2(frag.pick(g, q, j), frag.pick(g, q, j + 1), m0 + frag.row(g * U + q), n0 + frag.col(j));
}

// Pool fused into the epilogue. `Windows` describes where pool windows lie in
// the tile (e.g. PoolTiledPixels): row(w, q) is the tile row of element q of
// window w (0 <= w < P). value(acc, m, n) is applied to every element in
// registers first (all threads busy; it must return quietly, without loads,
// for rows its pixel map marks as not ok); the values are then staged through
// shared memory kChunk columns at a time ((BM+1)*kChunk floats) and each
// (window, column) is reduced by one thread, calling store(v, m0, w, n) for
// n < N (it must skip windows that are not ok). kWithMin (max pools): the
// window's NaN-propagating min too, store(v, v_min, m0, w, n). kRawWindows:
// value is the identity (the windows reduce the accumulators as they are), no
// pass over the fragment.
template <class Windows, int kQArea, int P, bool kMax, int BM, int BN, int kThreads, int kChunk,
          bool kWithMin = false, bool kRawWindows = false, class Frag, class ValueF, class StoreF>
__device__ __forceinline__ void tile_pool(Frag& frag, int m0, int n0, int N, float* smem, const ValueF& value,
                                          const StoreF& store) {
  constexpr int kStride = BM + 1;
  static_assert(BN % kChunk == 0, "chunks must split the tile");
  constexpr int U = Frag::kRowUnroll;
#pragma unroll 1
  for (int g = 0; g < (kRawWindows ? 0 : Frag::kRows / U); ++g) {
#pragma unroll
    for (int q = 0; q < U; ++q) {
      const int r = frag.row(g * U + q);
#pragma unroll
      for (int j = 0; j < Frag::kCols; ++j) {
        const int n = n0 + frag.col(j);
        frag.set(g, q, j, n < N ? value(frag.pick(g, q, j), m0 + r, n) : 0.f);
      }
    }
  }
#pragma unroll 1
  for (int c0 = 0; c0 < BN; c0 += kChunk) {
#pragma unroll
    for (int i = 0; i < Frag::kRows; ++i) {
#pragma unroll
      for (int j = 0; j < Frag::kCols; ++j) {
        const int c = frag.col(j) - c0;
        if (c >= 0 && c < kChunk) smem[c * kStride + frag.row(i)] = frag.acc[i][j];
      }
    }
    Frag::sync();
    for (int o = frag.thread(); o < P * kChunk; o += kThreads) {
      const int w = o % P, c = o / P;
      const int n = n0 + c0 + c;
      if (n >= N) continue;
      float v = kMax ? neg_inf() : 0.f, v_min = -neg_inf();
      for (int q = 0; q < kQArea; ++q) {
        const float x = smem[c * kStride + Windows::row(w, q)];
        v = kMax ? max_nan(v, x) : v + x;
        if constexpr (kWithMin) v_min = min_nan(v_min, x);
      }
      if (!kMax) v = v / (float)kQArea;
      if constexpr (kWithMin)
        store(v, v_min, m0, w, n);
      else
        store(v, m0, w, n);
    }
    Frag::sync();
  }
}

// 1-D pool along N fused into the epilogue: windows of K columns (K divides
// kChunk). The fragment is staged kChunk columns at a time (as in
// tile_pointwise_staged); each (row, window) is then reduced by one thread
// from value(acc, m, n) of its K elements (max NaN-propagating, or the mean),
// and store(v, m, w) runs for whole windows inside [0, M) x [0, N) (w: the
// pooled column; floor mode drops a partial last window). smem: kTileRows *
// (kChunk + 8) floats.
template <int kChunk, int K, bool kMax, class Frag, class ValueF, class StoreF>
__device__ __forceinline__ void tile_pool1d_staged(const Frag& frag, int m0, int n0, int M, int N, float* smem,
                                                   const ValueF& value, const StoreF& store) {
  constexpr int BM = Frag::kTileRows, LD = kChunk + 8, W = kChunk / K;
  static_assert(kChunk % K == 0, "whole windows in every chunk");
  const int rows = min(BM, M - m0);
  for_each_staged_chunk<kChunk>(frag, smem, LD, [&](int c0) {
    const int windows = min(W, (N - n0 - c0) / K);  // whole windows inside [0, N)
#pragma unroll 1
    for (int e = frag.thread(); e < BM * W; e += Frag::kThreads) {
      const int r = e / W, w = e % W;
      if (r >= rows || w >= windows) continue;
      const int m = m0 + r, n = n0 + c0 + w * K;
      float v = kMax ? neg_inf() : 0.f;
#pragma unroll
      for (int q = 0; q < K; ++q) {
        const float x = value(smem[r * LD + w * K + q], m, n + q);
        v = kMax ? max_nan(v, x) : v + x;
      }
      store(kMax ? v : v / (float)K, m, n / K);
    }
  });
}

// Column partials: for each tile column n0 + c < N, the reduction (Op) of
// value(acc, m, n) over the tile's rows m with row_ok(m), through shared
// memory kChunk columns at a time: S = kThreads / kChunk threads split a
// column's rows, then one thread folds their S partials in order
// (deterministic) and calls store(v, n). smem: kTileRows * (kChunk + 8) +
// kThreads floats.
template <class Op, int kChunk, class Frag, class OkF, class ValueF, class StoreF>
__device__ __forceinline__ void tile_col_partials(Frag& frag, int m0, int n0, int N, float* smem, const OkF& row_ok,
                                                  const ValueF& value, const StoreF& store) {
  constexpr int BM = Frag::kTileRows, LD = kChunk + 8;
  constexpr int S = Frag::kThreads / kChunk > 0 ? Frag::kThreads / kChunk : 1;
  constexpr int U = Frag::kRowUnroll;
#pragma unroll 1
  for (int g = 0; g < Frag::kRows / U; ++g) {
#pragma unroll
    for (int q = 0; q < U; ++q) {
      const int m = m0 + frag.row(g * U + q);
      const bool ok = row_ok(m);
#pragma unroll
      for (int j = 0; j < Frag::kCols; ++j) {
        const int n = n0 + frag.col(j);
        frag.set(g, q, j, ok && n < N ? value(frag.pick(g, q, j), m, n) : Op::identity());
      }
    }
  }
  float* parts = smem + BM * LD;  // [S][kChunk]
  for_each_staged_chunk<kChunk>(frag, smem, LD, [&](int c0) {
    for (int e = frag.thread(); e < S * kChunk; e += Frag::kThreads) {
      const int c = e % kChunk, s = e / kChunk;
      float part = Op::identity();
      for (int r = s; r < BM; r += S) part = Op::combine(part, smem[r * LD + c]);
      parts[s * kChunk + c] = part;
    }
    Frag::sync();
    for (int c = frag.thread(); c < kChunk; c += Frag::kThreads) {
      float v = parts[c];
      for (int s = 1; s < S; ++s) v = Op::combine(v, parts[s * kChunk + c]);
      if (n0 + c0 + c < N) store(v, n0 + c0 + c);
    }
  });
}

// Combines value(acc, m, n) over the tile's columns (n0 + col < N) for every
// tile row r, into smem: total[r] = smem[S*BM + r] and, for logsumexp,
// row_max[r] = smem[(S+1)*BM + r] with total[r] = sum(exp(v - row_max[r]))
// (S = Frag::kRowSharers). Per-thread partials are combined per row in a
// fixed order: deterministic. value must be pure (logsumexp calls it twice).
// Needs (S + 2) * BM floats of smem; ends with Frag::sync().
template <class Op, int BM, int kThreads, class Frag, class ValueF>
__device__ __forceinline__ void tile_row_combine(const Frag& frag, int m0, int n0, int M, int N, float* smem,
                                                 const ValueF& value) {
  constexpr int S = Frag::kRowSharers;
  float* part = smem;             // [S][BM]: one partial per (sharer, row)
  float* total = smem + S * BM;   // [BM]
  float* row_max = total + BM;    // [BM] (logsumexp)
  constexpr int U = Frag::kRowUnroll;
  // Every column of the tile inside N (checked once a tile): the folds below
  // run unguarded, without a branch an element that would serialize them.
  const bool full = n0 + Frag::kTileCols <= N;
  // This thread's fold of its row (g, q) (global row m): term(value) of each
  // of its columns into kAcc independent partials (no chain through one
  // register), then those in order. Ragged tiles skip columns past N.
  auto fold = [&](int g, int q, int m, float identity, const auto& term, const auto& combine) {
    // (short rows, e.g. mma.sync's 8 columns a thread, keep one: registers are tight there; 4 partials and the
    // unguarded copy spilled a tf32 mma.sync matmul + gelu + row sum, CodegenGemmMma)
    constexpr int kAcc = Frag::kCols >= 32 && Frag::kCols % 4 == 0 ? 4 : 1;
    float a[kAcc];
#pragma unroll
    for (int k = 0; k < kAcc; ++k) a[k] = identity;
    if (kAcc > 1 && full) {  // (short rows: the guarded loop alone, as its code was before)
#pragma unroll
      for (int j = 0; j < Frag::kCols; ++j)
        a[j % kAcc] = combine(a[j % kAcc], term(value(frag.pick(g, q, j), m, n0 + frag.col(j))));
    } else {
#pragma unroll
      for (int j = 0; j < Frag::kCols; ++j)
        if (n0 + frag.col(j) < N) a[j % kAcc] = combine(a[j % kAcc], term(value(frag.pick(g, q, j), m, n0 + frag.col(j))));
    }
#pragma unroll
    for (int k = 1; k < kAcc; ++k) a[0] = combine(a[0], a[k]);
    return a[0];
  };
  // partial(g, q, m): this thread's partial of its row g*U + q (global row m < M).
  auto reduce_rows = [&](const auto& partial, const auto& combine, float identity) {
#pragma unroll 1
    for (int g = 0; g < Frag::kRows / U; ++g) {
#pragma unroll
      for (int q = 0; q < U; ++q) {
        const int r = frag.row(g * U + q);
        part[frag.row_sharer() * BM + r] = m0 + r < M ? partial(g, q, m0 + r) : identity;
      }
    }
    Frag::sync();
    for (int r = frag.thread(); r < BM; r += kThreads) {
      float a = identity;
      for (int s = 0; s < S; ++s) a = combine(a, part[s * BM + r]);
      total[r] = a;
    }
    Frag::sync();
  };
  const auto same = [](float v) { return v; };
  if constexpr (Op::kLogSumExp) {
    const auto max2 = [](float a, float b) { return max_nan(a, b); };
    reduce_rows([&](int g, int q, int m) { return fold(g, q, m, neg_inf(), same, max2); }, max2, neg_inf());
    for (int r = frag.thread(); r < BM; r += kThreads) row_max[r] = total[r];
    Frag::sync();
    reduce_rows(
        [&](int g, int q, int m) {
          const float mx = row_max[m - m0];
          if (!is_finite(mx)) return 0.f;
          return fold(g, q, m, 0.f, [&](float v) { return exp_nonpositive(v - mx); },
                      [](float a, float b) { return a + b; });
        },
        [](float a, float b) { return a + b; }, 0.f);
  } else {
    const auto combine = [](float a, float b) { return Op::combine(a, b); };
    reduce_rows([&](int g, int q, int m) { return fold(g, q, m, Op::identity(), same, combine); }, combine,
                Op::identity());
  }
}

// Reduction of each tile row over all N columns, fused into the epilogue (the
// tile must span N: one column tile, n0 == 0). Op is a reduce.cuh op (SumOp,
// MaxOp, MinOp, LogSumExpOp); store(v, m) is called once per row m < M with
// the combined value (the caller divides for a mean). See tile_row_combine.
template <class Op, int BM, int kThreads, class Frag, class ValueF, class StoreF>
__device__ __forceinline__ void tile_row_reduce(const Frag& frag, int m0, int M, int N, float* smem,
                                                const ValueF& value, const StoreF& store) {
  tile_row_combine<Op, BM, kThreads>(frag, m0, 0, M, N, smem, value);
  const float* total = smem + Frag::kRowSharers * BM;
  const float* row_max = total + BM;
  for (int r = frag.thread(); r < BM; r += kThreads) {
    if (m0 + r >= M) continue;
    if constexpr (Op::kLogSumExp)
      store(is_finite(row_max[r]) ? row_max[r] + logf(total[r]) : row_max[r], m0 + r);
    else
      store(total[r], m0 + r);
  }
  Frag::sync();
}

// A row reduction over all N columns (one column tile, n0 == 0) broadcast
// back over the tile (`h - max(h)`, `h * rsqrt(mean(h^2))`): row(v, m, true)
// runs once per row m < M with the finished value (kMean: the sum over N),
// stores the row-shaped outputs and returns the row's value for the broadcast
// (the row ops done once a row, e.g. rsqrt(mean + eps)); then apply(acc, r, m,
// n) at every element of the tile, staged kChunk columns at a time
// (tile_pointwise_staged), r that value: the anchor's output never leaves the
// block. smem: (S + 2) * BM floats, then the staging's.
template <class Op, bool kMean, int kChunk, int BM, int kThreads, class Frag, class ValueF, class RowF, class ApplyF>
__device__ __forceinline__ void tile_row_broadcast(const Frag& frag, int m0, int M, int N, float* smem,
                                                   const ValueF& value, const RowF& row, const ApplyF& apply) {
  static_assert(!Op::kLogSumExp, "tile_row_broadcast: sum, max, min (a mean: kMean)");
  tile_row_combine<Op, BM, kThreads>(frag, m0, 0, M, N, smem, value);
  float* total = smem + Frag::kRowSharers * BM;
  for (int r = frag.thread(); r < BM; r += kThreads) {
    if (m0 + r >= M) continue;
    total[r] = row(kMean ? total[r] / (float)N : total[r], m0 + r, true);
  }
  Frag::sync();
  tile_pointwise_staged<kChunk>(frag, m0, 0, M, N, total + 2 * BM,
                                [&](float acc, int m, int n) { apply(acc, total[m - m0], m, n); });
}

// A row reduction over an N wider than the tile: this tile's partial of each
// row, store(partial, row_max, m) for rows m < M (row_max only meaningful for
// logsumexp: partial = sum(exp(v - row_max)) there). combine_partials() below
// finishes the row.
template <class Op, int BM, int kThreads, class Frag, class ValueF, class StoreF>
__device__ __forceinline__ void tile_row_partials(const Frag& frag, int m0, int n0, int M, int N, float* smem,
                                                  const ValueF& value, const StoreF& store) {
  tile_row_combine<Op, BM, kThreads>(frag, m0, n0, M, N, smem, value);
  const float* total = smem + Frag::kRowSharers * BM;
  const float* row_max = total + BM;
  for (int r = frag.thread(); r < BM; r += kThreads)
    if (m0 + r < M) store(total[r], Op::kLogSumExp ? row_max[r] : 0.f, m0 + r);
  Frag::sync();
}

// Softmax (kLog: log_softmax) of value(acc, m, n) along the tile's rows.
// Whole (kPartial false; the tile spans N, n0 == 0): store(v, m, n) gets the
// result. kPartial (N wider than the tile): store_part(sum, row_max, m) gets
// the tile's partial log-sum-exp of each row (as tile_row_partials), and
// store(v, m, n) gets exp(value - row_max) (log: value - row_max), which a
// finish kernel scales by the row's exp(row_max - logsumexp); a tile row of
// -inf only stores 0 (log: -inf). The stores go through shared memory kChunk
// columns at a time (tile_pointwise_staged: a warp's stores contiguous), or
// straight from the fragment with kChunk 0. smem: (S + 2) * BM floats as
// tile_row_combine, then kTileRows * (kChunk + 8) for the staging. value pure.
template <bool kLog, bool kPartial, int kChunk, int BM, int kThreads, class Frag, class ValueF, class PartF,
          class StoreF>
__device__ __forceinline__ void tile_row_softmax(const Frag& frag, int m0, int n0, int M, int N, float* smem,
                                                 const ValueF& value, const PartF& store_part, const StoreF& store) {
  tile_row_combine<LogSumExpOp, BM, kThreads>(frag, m0, n0, M, N, smem, value);
  const float* total = smem + Frag::kRowSharers * BM;
  const float* row_max = total + BM;
  if constexpr (kPartial)
    for (int r = frag.thread(); r < BM; r += kThreads)
      if (m0 + r < M) store_part(total[r], row_max[r], m0 + r);
  const auto f = [&](float acc, int m, int n) {
    const float v = value(acc, m, n), mx = row_max[m - m0];
    if constexpr (kPartial) {
      if (mx == neg_inf()) store(kLog ? neg_inf() : 0.f, m, n);
      else store(kLog ? v - mx : exp_nonpositive(v - mx), m, n);  // scaled by the finish: ~2 ulps suffice
    } else {
      // (the row's sum of exponentials is in [1, N], or NaN: a refined reciprocal, no division branch)
      store(kLog ? (v - mx) - logf(total[m - m0]) : expf(v - mx) * recip_refined(total[m - m0]), m, n);
    }
  };
  if constexpr (kChunk > 0)
    tile_pointwise_staged<kChunk>(frag, m0, n0, M, N, smem + (Frag::kRowSharers + 2) * BM, f);
  else
    tile_pointwise(frag, m0, n0, M, N, f);
  Frag::sync();
}

// The log-sum-exp merge of tiles t = first, first + step, ... < count, in
// that order: max_of_tiles is their maximum, sum_exp_of_tiles (for a finite
// mx) the sum of partial(t) * exp(row_max(t) - mx); -inf tiles add nothing.
template <class MaxF>
__device__ __forceinline__ float max_of_tiles(int first, int step, int count, const MaxF& row_max) {
  float mx = neg_inf();
  for (int t = first; t < count; t += step) mx = max_nan(mx, row_max(t));
  return mx;
}
template <class PartialF, class MaxF>
__device__ __forceinline__ float sum_exp_of_tiles(int first, int step, int count, const PartialF& partial,
                                                  const MaxF& row_max, float mx) {
  float s = 0.f;
  for (int t = first; t < count; t += step) {
    const float m_t = row_max(t);
    if (m_t != neg_inf()) s += partial(t) * expf(m_t - mx);
  }
  return s;
}

// Combines kTiles per-tile partials of one row, in tile order: partial(t)
// and (logsumexp) row_max(t) read tile t's values.
template <class Op, int kTiles, class PartialF, class MaxF>
__device__ __forceinline__ float combine_partials(const PartialF& partial, const MaxF& row_max) {
  if constexpr (Op::kLogSumExp) {
    const float mx = max_of_tiles(0, 1, kTiles, row_max);
    if (!is_finite(mx)) return mx;
    return mx + logf(sum_exp_of_tiles(0, 1, kTiles, partial, row_max, mx));
  } else {
    float a = Op::identity();
    for (int t = 0; t < kTiles; ++t) a = Op::combine(a, partial(t));
    return a;
  }
}

// combine_partials with a block's kThreads threads on one row: thread i
// folds tiles i, i + kThreads, ... in order, then the block combines the
// threads' values in a fixed order (group_combine). Every thread calls it and
// gets the row's value. smem: kThreads / 32 floats.
template <class Op, int kTiles, int kThreads, class PartialF, class MaxF>
__device__ __forceinline__ float combine_partials_spread(const PartialF& partial, const MaxF& row_max, float* smem) {
  if constexpr (Op::kLogSumExp) {
    float mx = max_of_tiles(threadIdx.x, kThreads, kTiles, row_max);
    mx = group_combine<kThreads, kThreads>(mx, [](float a, float b) { return max_nan(a, b); }, smem);
    if (!is_finite(mx)) return mx;  // the same in every thread
    float s = sum_exp_of_tiles(threadIdx.x, kThreads, kTiles, partial, row_max, mx);
    s = group_combine<kThreads, kThreads>(s, [](float a, float b) { return a + b; }, smem);
    return mx + logf(s);
  } else {
    float a = Op::identity();
    for (int t = threadIdx.x; t < kTiles; t += kThreads) a = Op::combine(a, partial(t));
    return group_combine<kThreads, kThreads>(a, [](float x, float y) { return Op::combine(x, y); }, smem);
  }
}

// Finishes one row of a softmax fused in parts (tile_row_softmax<kLog,
// true>), the whole block on the row: its log-sum-exp L from the tiles'
// partials (the threads fold tiles t = thread, thread + kThreads, ...,
// combined in a fixed order), then element n of column tile t = n / kTileN
// becomes stage(n) * exp(row_max(t) - L) (log: stage(n) + row_max(t) - L) and
// goes to store(n, v); NaN everywhere if L is not finite (as PyTorch's).
// kPer > 0 (at least len / kThreads, rounded up): each thread loads its kPer
// elements first, so that their loads overlap the partials'; 0: one at a
// time after. partial(t), row_max(t): tile t's values for this row. smem:
// kThreads / 32 floats.
template <bool kLog, int kTiles, int kTileN, int kThreads, int kPer = 0, class PartialF, class MaxF, class StageF,
          class StoreF>
__device__ __forceinline__ void softmax_finish_row(int len, const PartialF& partial, const MaxF& row_max,
                                                   const StageF& stage, const StoreF& store, float* smem) {
  const auto inside = [&](int i) { return (i + 1) * kThreads <= len || (int)threadIdx.x + i * kThreads < len; };
  float held[kPer > 0 ? kPer : 1];
  if constexpr (kPer > 0) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) held[i] = inside(i) ? stage((int)threadIdx.x + i * kThreads) : 0.f;
  }
  const float l = combine_partials_spread<LogSumExpOp, kTiles, kThreads>(partial, row_max, smem);
  const float lse = is_finite(l) ? l : __int_as_float(0x7fffffff);
  // Each tile's shift (kLog) or scale, in shared memory when the row has few tiles.
  constexpr bool kCached = kTiles <= 1024;
  __shared__ float cached[kCached ? kTiles : 1];
  const auto factor = [&](int t) {
    const float shift = row_max(t) - lse;  // a tile row of -inf: stage 0 (log: -inf) stays so
    return kLog ? shift : expf(shift);
  };
  if constexpr (kCached) {
    __syncthreads();  // the previous row's factors are read
    for (int t = threadIdx.x; t < kTiles; t += kThreads) cached[t] = factor(t);
    __syncthreads();
  }
  if constexpr (kPer > 0) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int n = (int)threadIdx.x + i * kThreads;
      if (!inside(i)) continue;
      const float f = kCached ? cached[n / kTileN] : factor(n / kTileN);
      store(n, kLog ? held[i] + f : held[i] * f);
    }
  } else {
    for (int n = threadIdx.x; n < len; n += kThreads) {
      const float f = kCached ? cached[n / kTileN] : factor(n / kTileN), e = stage(n);
      store(n, kLog ? e + f : e * f);
    }
  }
}

// combine_partials over a block: 32 rows at a time, lane = row, warp w of
// kWarps folds tiles w, w + kWarps, ... in order, then the warps' results are
// merged in warp order (deterministic). Every thread of the block calls it
// (row_ok: this lane's row exists); lanes of warp 0 get their row's value.
// smem: 2 * kWarps * 32 floats.
template <class Op, int kTiles, int kWarps, class PartialF, class MaxF>
__device__ __forceinline__ float combine_partials_block(bool row_ok, const PartialF& partial, const MaxF& row_max,
                                                        float* smem) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float* part = smem;                  // [kWarps][32]
  float* part_max = smem + kWarps * 32;  // [kWarps][32] (logsumexp)
  __syncthreads();  // smem may still be read by a previous call
  if constexpr (Op::kLogSumExp) {
    float mx = neg_inf(), s = 0.f;
    if (row_ok) {
      mx = max_of_tiles(warp, kWarps, kTiles, row_max);
      if (is_finite(mx)) s = sum_exp_of_tiles(warp, kWarps, kTiles, partial, row_max, mx);
    }
    part[warp * 32 + lane] = s;
    part_max[warp * 32 + lane] = mx;
    __syncthreads();
    if (warp != 0) return 0.f;
    const auto warp_sum = [&](int w) { return part[w * 32 + lane]; };
    const auto warp_max = [&](int w) { return part_max[w * 32 + lane]; };
    mx = max_of_tiles(0, 1, kWarps, warp_max);
    if (!is_finite(mx)) return mx;
    return mx + logf(sum_exp_of_tiles(0, 1, kWarps, warp_sum, warp_max, mx));
  } else {
    float a = Op::identity();
    if (row_ok)
      for (int t = warp; t < kTiles; t += kWarps) a = Op::combine(a, partial(t));
    part[warp * 32 + lane] = a;
    __syncthreads();
    if (warp != 0) return 0.f;
    a = Op::identity();
    for (int w = 0; w < kWarps; ++w) a = Op::combine(a, part[w * 32 + lane]);
    return a;
  }
}

}  // namespace fj
