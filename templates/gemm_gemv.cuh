// fusejit/gemm_gemv.cuh — the FFMA mainloop of fp32 GEMMs with few rows (M <= 32:
// x [M, K] times W, GEMV-like), sm_80+. The weight is read once, at memory speed.
//
// Threads: kColThreads = BN / TN across the columns (column j of thread c:
// c + j * kColThreads, so a warp's stores of a row are contiguous) times
// kKGroups = BM / TM groups that take interleaved 4-k steps of each k-tile.
// Per k-tile, cp.async copies A's BM x BK tile and B's into a kStages ring:
// NK-major B (linear's W [N, K]) as BN rows of BK + 4 floats, so the 8 threads
// of a 16-byte shared-read phase hit 8 different bank groups; KN-major B
// (matmul's [K, N]) as [BK][BN]. A thread reads 4 consecutive k of each of its
// TN columns (one 16-byte load, NK) and of every row of A (a broadcast 16-byte
// load): 4 x BM x TN FFMAs per BM + TN shared loads, every row in registers.
// After the loop the groups add their sums through shared memory in group
// order (deterministic), each keeping TM rows: rows g + i * kKGroups.
//
// Operands: fp32 through the dense loaders of gemm_simt.cuh (RowMajorA,
// NKMajorB, KNMajorB), rows 16-byte aligned (K % 4 == 0; KN-major B: N % 4 == 0;
// base addresses 16-byte aligned, which the launch checks). Split-K: K ranges
// of whole BK tiles (split_k.cuh gathers them). GemvFragment implements the
// fragment interface of gemm_simt.cuh; simt_mainloop below is the overload
// for it, so the emitted call is the SIMT tile's.
#pragma once

#include "fusejit/cp_async.cuh"
#include "fusejit/gemm_simt.cuh"

namespace fj {

template <int BM_, int BN_, int BK_, int TM_, int TN_, int kStages_, bool kBKContiguous_>
struct GemvTile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, TM = TM_, TN = TN_, kStages = kStages_;
  static constexpr bool kBKContiguous = kBKContiguous_;  // B's layout: NK-major (true) or KN-major
  static constexpr int kColThreads = BN / TN, kKGroups = BM / TM, kThreads = kColThreads * kKGroups;
  static constexpr int kRowUnroll = TM % 4 == 0 ? 4 : TM % 2 == 0 ? 2 : 1;
  static constexpr int kLdB = kBKContiguous ? BK + 4 : BN;  // floats between B's shared rows
  static constexpr int kAFloats = BM * BK;
  static constexpr int kBFloats = kBKContiguous ? BN * kLdB : BK * BN;
  static constexpr int kStageFloats = kAFloats + kBFloats;
  static constexpr int kSmemFloats = kStages * kStageFloats;
  static_assert(BM >= 1 && BM <= 32 && BM % TM == 0, "1 to 32 rows, split evenly over the k groups");
  static_assert(kThreads % 32 == 0 && BN % TN == 0 && kColThreads % 32 == 0, "whole warps across the columns");
  static_assert(BK % (8 * kKGroups) == 0, "k-tiles of 16-byte chunks, whole 4-k steps a group, BK / 4 even");
  static_assert((BN * BK / 4) % kThreads == 0, "B's chunks split evenly over the threads");
  static_assert(kStages >= 2, "a ring of at least two k-tiles");
  static_assert(kKGroups == 1 || kSmemFloats >= kKGroups * BM * BN, "the ring holds the groups' sums");
};

template <class Tile>
struct GemvFragment {
  static constexpr int kRows = Tile::TM, kCols = Tile::TN;
  static constexpr int kRowSharers = Tile::kColThreads;
  static constexpr int kRowUnroll = Tile::kRowUnroll;
  static constexpr int kThreads = Tile::kThreads;
  static constexpr int kTileRows = Tile::BM, kTileCols = Tile::BN;
  float acc[kRows][kCols];
  int c, g;  // column thread, k group

  __device__ __forceinline__ explicit GemvFragment(int thread)
      : c(thread % Tile::kColThreads), g(thread / Tile::kColThreads) {
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = 0; j < kCols; ++j) acc[i][j] = 0.f;
  }
  __device__ __forceinline__ int row(int i) const { return g + i * Tile::kKGroups; }
  __device__ __forceinline__ int col(int j) const { return c + j * Tile::kColThreads; }
  __device__ __forceinline__ int row_sharer() const { return c; }
  __device__ __forceinline__ int thread() const { return threadIdx.x; }
  static __device__ __forceinline__ void sync() { __syncthreads(); }
  template <int kC0, int kChunk>
  __device__ __forceinline__ void stage_cols(float* smem, int ld) const {
    stage_acc_cols<kC0, kChunk>(*this, smem, ld);
  }
  __device__ __forceinline__ float pick(int g, int q, int j) const { return pick_row_group<kRowUnroll>(acc, g, q, j); }
  __device__ __forceinline__ void set(int g, int q, int j, float v) { set_row_group<kRowUnroll>(acc, g, q, j, v); }
};

namespace detail {
template <class T>
struct IsFloat {
  static constexpr bool value = false;
};
template <>
struct IsFloat<float> {
  static constexpr bool value = true;
};
}  // namespace detail

// The tile at (m0, n0) over k in [k_begin, k_end) (k_begin a multiple of BK,
// k_end of 4). `smem`: Tile::kSmemFloats floats, 16-byte aligned. On return
// every thread has passed a __syncthreads() after its last read of smem.
template <class Tile, class ALoader, class BLoader>
__device__ __forceinline__ void simt_mainloop(const ALoader& a, const BLoader& b, int m0, int n0, int k_begin,
                                              int k_end, GemvFragment<Tile>& frag, float* smem) {
  static_assert(detail::IsFloat<typename ALoader::Elem>::value && detail::IsFloat<typename BLoader::Elem>::value,
                "the GEMV loop copies fp32 operands");
  static_assert(BLoader::kKContiguous == Tile::kBKContiguous, "B's layout is the tile's");
  static_assert(ALoader::kK % 4 == 0 && (BLoader::kKContiguous || BLoader::kN % 4 == 0),
                "16-byte aligned operand rows");
  constexpr int BM = Tile::BM, BN = Tile::BN, BK = Tile::BK, T = Tile::kThreads, S = Tile::kStages;
  constexpr int kAChunks = BM * BK / 4, kBChunks = BN * BK / 4;
  const int t = threadIdx.x;
  const unsigned ring = static_cast<unsigned>(__cvta_generic_to_shared(smem));

  // Starts the copy of the k-tile at k0 into ring slot `slot`; zeros outside the problem and past k_end.
  auto load = [&](int slot, int k0) {
    const unsigned s = ring + slot * Tile::kStageFloats * 4;
#pragma unroll
    for (int l = 0; l < (kAChunks + T - 1) / T; ++l) {
      const int e = t + l * T;
      if (kAChunks % T == 0 || e < kAChunks) {
        const int r = e / (BK / 4), c = e % (BK / 4), m = m0 + r, k = k0 + 4 * c;
        const bool ok = m < ALoader::kM && k < k_end;
        cp_async16(s + (r * BK + 4 * c) * 4, a.p + (ok ? m * ALoader::kLd + k : 0), ok ? 16 : 0);
      }
    }
    const unsigned sb = s + Tile::kAFloats * 4;
#pragma unroll
    for (int l = 0; l < kBChunks / T; ++l) {
      const int e = t + l * T;
      if constexpr (Tile::kBKContiguous) {
        const int r = e / (BK / 4), c = e % (BK / 4), n = n0 + r, k = k0 + 4 * c;
        const bool ok = n < BLoader::kN && k < k_end;
        cp_async16(sb + (r * Tile::kLdB + 4 * c) * 4, b.p + (ok ? n * BLoader::kLd + k : 0), ok ? 16 : 0);
      } else {
        const int r = e / (BN / 4), c = e % (BN / 4), n = n0 + 4 * c, k = k0 + r;
        const bool ok = n < BLoader::kN && k < k_end;
        cp_async16(sb + (r * BN + 4 * c) * 4, b.p + (ok ? k * BLoader::kLd + n : 0), ok ? 16 : 0);
      }
    }
  };

  constexpr int G = Tile::kKGroups;
  float acc[BM][Tile::TN];  // every row of this thread's columns, over its group's k
#pragma unroll
  for (int i = 0; i < BM; ++i)
#pragma unroll
    for (int j = 0; j < Tile::TN; ++j) acc[i][j] = 0.f;
  const int k_tiles = (k_end - k_begin + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < k_tiles) load(s, k_begin + s * BK);
    cp_async_commit();
  }
#pragma unroll 1
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<S - 2>();
    __syncthreads();  // tile kt is in for every thread; slot (kt - 1) % S is read by all: refill it
    if (kt + S - 1 < k_tiles) load((kt + S - 1) % S, k_begin + (kt + S - 1) * BK);
    cp_async_commit();
    const float* as = smem + (kt % S) * Tile::kStageFloats;
    const float* bs = as + Tile::kAFloats;
#pragma unroll
    for (int step = 0; step < BK / (4 * G); ++step) {
      const int kk = (step * G + frag.g) * 4;
      float4 w[Tile::TN];
#pragma unroll
      for (int j = 0; j < Tile::TN; ++j) {
        if constexpr (Tile::kBKContiguous) {
          w[j] = *reinterpret_cast<const float4*>(bs + frag.col(j) * Tile::kLdB + kk);
        } else {
          const float* b_k = bs + kk * BN + frag.col(j);
          w[j] = make_float4(b_k[0], b_k[BN], b_k[2 * BN], b_k[3 * BN]);
        }
      }
#pragma unroll
      for (int i = 0; i < BM; ++i) {
        const float4 x = *reinterpret_cast<const float4*>(as + i * BK + kk);  // the same for the warp
#pragma unroll
        for (int j = 0; j < Tile::TN; ++j) {
          acc[i][j] = fmaf(x.x, w[j].x, acc[i][j]);
          acc[i][j] = fmaf(x.y, w[j].y, acc[i][j]);
          acc[i][j] = fmaf(x.z, w[j].z, acc[i][j]);
          acc[i][j] = fmaf(x.w, w[j].w, acc[i][j]);
        }
      }
    }
  }
  cp_async_wait<0>();  // (empty groups)
  __syncthreads();
  if constexpr (G == 1) {
#pragma unroll
    for (int i = 0; i < BM; ++i)
#pragma unroll
      for (int j = 0; j < Tile::TN; ++j) frag.acc[i][j] = acc[i][j];
  } else {  // each group's sums to the ring, then TM rows a thread summed in group order
#pragma unroll
    for (int i = 0; i < BM; ++i)
#pragma unroll
      for (int j = 0; j < Tile::TN; ++j) smem[(frag.g * BM + i) * BN + frag.col(j)] = acc[i][j];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < Tile::TM; ++i)
#pragma unroll
      for (int j = 0; j < Tile::TN; ++j) {
        float v = 0.f;
#pragma unroll
        for (int h = 0; h < G; ++h) v += smem[(h * BM + frag.row(i)) * BN + frag.col(j)];
        frag.acc[i][j] = v;
      }
    __syncthreads();
  }
}

// The whole K: k in [0, K).
template <class Tile, class ALoader, class BLoader>
__device__ __forceinline__ void simt_mainloop(const ALoader& a, const BLoader& b, int m0, int n0, int K,
                                              GemvFragment<Tile>& frag, float* smem) {
  simt_mainloop<Tile>(a, b, m0, n0, 0, K, frag, smem);
}

}  // namespace fj
