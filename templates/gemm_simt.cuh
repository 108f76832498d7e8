// fusejit/gemm_simt.cuh — a tiled SIMT GEMM mainloop (fp32 FFMA accumulation)
// shared by linear, matmul and the implicit-GEMM conv.
//
// Problem: C[m][n] = sum_k A[m][k] * B[k][n] for one output tile of BM x BN.
// Operands are read through LOADERS (so the conv's im2col gather, transposed
// weights and f16/bf16 conversion are the loader's business) and every element
// outside the problem (m >= M, n >= N, k >= K) reads as 0, so any M/N/K works.
//
// Loader interface (A shown; B is the same with `col(n)` in place of `row(m)`):
//   static constexpr bool kKContiguous;    // memory order hint: true when k is
//                                          // the fastest-moving index in memory
//   struct Row { ... };                     // per-row state, computed once
//   __device__ Row row(int m) const;        // m: GEMM row, tile offset applied
//   __device__ float load(const Row&, int k) const;  // 0 outside the problem
//
// Result: an accumulator FRAGMENT per thread (SimtFragment below). Every
// fragment type fusejit uses (this one, and the tensor-core ones of later
// mainloops) has the same interface, which the epilogues rely on:
//   static constexpr int kRows, kCols;      // elements per thread: kRows x kCols
//   float acc[kRows][kCols];                // fp32 accumulators
//   int row(int i) const, col(int j) const; // tile-local row/col of acc[i][j]
//   static constexpr int kRowUnroll;        // rows per unrolled step (divides kRows)
//   float pick(int g, int q, int j) const;  // acc[g*kRowUnroll + q][j], g run-time
//   void set(int g, int q, int j, float v); //   (q, j compile-time once unrolled)
//   static constexpr int kRowSharers;       // threads holding parts of one row
//   int row_sharer() const;                 // this thread's index among them
//   static constexpr int kTileRows, kTileCols;  // the tile all fragments cover
//   static constexpr int kThreads;          // threads holding fragments
//   int thread() const;                     // this thread's index among them
//   static void sync();                     // barrier among exactly those threads
// and, for the staged epilogues (tile_pointwise_staged, tile_pool1d_staged),
//   template <int kC0, int kChunk> void stage_cols(float* smem, int ld) const;
//                                           // acc of columns [kC0, kC0+kChunk) to
//                                           // smem[row * ld + col - kC0]
// Rows x cols is a cartesian product per thread (true for SIMT tiles and for
// the mma.sync / wgmma accumulator layouts alike).
#pragma once

#include "fusejit/fj_common.cuh"
#include "fusejit/split_k.cuh"

namespace fj {

// Tile shape. kThreads = (BM/TM) * (BN/TN). kWarpAlongM: consecutive threads
// take consecutive row groups (good when C is stored with m contiguous, as a
// conv's NCHW output is); otherwise consecutive column groups (row-major C).
template <int BM_, int BN_, int BK_, int TM_, int TN_, bool kWarpAlongM_>
struct SimtTile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, TM = TM_, TN = TN_;
  static constexpr int kThreadsM = BM / TM, kThreadsN = BN / TN;
  static constexpr int kThreads = kThreadsM * kThreadsN;
  static constexpr int VM = TM < 4 ? TM : 4;  // rows a thread owns contiguously
  static constexpr int VN = TN < 4 ? TN : 4;
  static constexpr bool kWarpAlongM = kWarpAlongM_;
  // Double-buffered A (BK x BM) and B (BK x BN) tiles, in floats. Rows are
  // padded by 4 floats: a warp storing 8 consecutive k of 4 rows (k-contiguous
  // operands) then hits 32 different banks; 16-byte reads stay aligned.
  static constexpr int kPad = 4;
  static constexpr int kLdA = BM + kPad, kLdB = BN + kPad;
  static constexpr int kSmemFloats = 2 * BK * (kLdA + kLdB);
  static_assert(BM % TM == 0 && BN % TN == 0, "tile must split evenly into threads");
  static_assert(TM % VM == 0 && TN % VN == 0, "TM/TN must be multiples of 4 (or below 4)");
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, at most 1024 threads");
};

// Thread (tm, tn) owns rows tm*VM + [0,VM) + g*(kThreadsM*VM) for g < TM/VM,
// and columns likewise: runs of 4 spread over the tile, so shared-memory reads
// are 16-byte vectors and a warp's stores cover contiguous runs.
template <class Tile>
struct SimtFragment {
  static constexpr int kRows = Tile::TM, kCols = Tile::TN;
  static constexpr int kRowSharers = Tile::kThreadsN;
  static constexpr int kRowUnroll = Tile::VM;
  static constexpr int kThreads = Tile::kThreads;
  static constexpr int kTileRows = Tile::BM, kTileCols = Tile::BN;
  float acc[kRows][kCols];
  int tm, tn;

  __device__ __forceinline__ explicit SimtFragment(int thread) {
    tm = Tile::kWarpAlongM ? thread % Tile::kThreadsM : thread / Tile::kThreadsN;
    tn = Tile::kWarpAlongM ? thread / Tile::kThreadsM : thread % Tile::kThreadsN;
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = 0; j < kCols; ++j) acc[i][j] = 0.f;
  }
  __device__ __forceinline__ int row(int i) const {
    return tm * Tile::VM + i % Tile::VM + (i / Tile::VM) * (Tile::kThreadsM * Tile::VM);
  }
  __device__ __forceinline__ int col(int j) const {
    return tn * Tile::VN + j % Tile::VN + (j / Tile::VN) * (Tile::kThreadsN * Tile::VN);
  }
  __device__ __forceinline__ int row_sharer() const { return tn; }
  // acc of columns [kC0, kC0 + kChunk) to smem[row * ld + col - kC0] (staged epilogues).
  template <int kC0, int kChunk>
  __device__ __forceinline__ void stage_cols(float* smem, int ld) const {
    stage_acc_cols<kC0, kChunk>(*this, smem, ld);
  }
  __device__ __forceinline__ int thread() const { return threadIdx.x; }
  static __device__ __forceinline__ void sync() { __syncthreads(); }
  // acc[g*kRowUnroll + q][j] for a run-time g (fj_common.cuh)
  __device__ __forceinline__ float pick(int g, int q, int j) const { return pick_row_group<kRowUnroll>(acc, g, q, j); }
  __device__ __forceinline__ void set(int g, int q, int j, float v) { set_row_group<kRowUnroll>(acc, g, q, j, v); }
};

namespace detail {
// Reads `kCount` consecutive floats of a shared-memory row into r (vectorized
// when 4 and aligned: the tile widths are multiples of 4).
template <int kCount>
__device__ __forceinline__ void read_run(const float* s, float* r) {
  if constexpr (kCount == 4) {
    float4 v = *reinterpret_cast<const float4*>(s);
    r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
  } else {
#pragma unroll
    for (int q = 0; q < kCount; ++q) r[q] = s[q];
  }
}

// Which (index within tile along M or N, k) a thread loads for slot l.
template <int kTileMN, int BK, bool kKContiguous>
__device__ __forceinline__ void load_slot(int e, int& mn, int& k) {
  if constexpr (kKContiguous) {
    k = e % BK;
    mn = e / BK;
  } else {
    mn = e % kTileMN;
    k = e / kTileMN;
  }
}
}  // namespace detail

// Runs the mainloop for the tile whose first row is m0 and first column n0
// over k in [k_begin, k_end) (split-K: a range of whole BK tiles; the loaders
// read 0 past the problem's K). `smem` holds Tile::kSmemFloats floats
// (16-byte aligned). On return every thread has passed a __syncthreads()
// after its last read of smem, so the epilogue may reuse it.
template <class Tile, class ALoader, class BLoader>
__device__ __forceinline__ void simt_mainloop(const ALoader& a, const BLoader& b, int m0, int n0, int k_begin,
                                              int k_end, SimtFragment<Tile>& frag, float* smem) {
  constexpr int BM = Tile::BM, BN = Tile::BN, BK = Tile::BK, T = Tile::kThreads;
  constexpr int kLoadsA = (BM * BK + T - 1) / T;
  constexpr int kLoadsB = (BN * BK + T - 1) / T;
  constexpr int LA = Tile::kLdA, LB = Tile::kLdB;
  float* As = smem;                 // [2][BK][LA]
  float* Bs = smem + 2 * BK * LA;   // [2][BK][LB]
  const int t = threadIdx.x;

  typename ALoader::Row arow[kLoadsA];
  typename BLoader::Row bcol[kLoadsB];
  int am[kLoadsA], ak[kLoadsA], bn[kLoadsB], bk[kLoadsB];
  float ra[kLoadsA], rb[kLoadsB];
#pragma unroll
  for (int l = 0; l < kLoadsA; ++l) {
    int e = t + l * T;
    if (e >= BM * BK) e = 0;  // surplus slot: loads a valid element, never stored
    detail::load_slot<BM, BK, ALoader::kKContiguous>(e, am[l], ak[l]);
    arow[l] = a.row(m0 + am[l]);
  }
#pragma unroll
  for (int l = 0; l < kLoadsB; ++l) {
    int e = t + l * T;
    if (e >= BN * BK) e = 0;
    detail::load_slot<BN, BK, BLoader::kKContiguous>(e, bn[l], bk[l]);
    bcol[l] = b.col(n0 + bn[l]);
  }
  auto fetch = [&](int k0) {
#pragma unroll
    for (int l = 0; l < kLoadsA; ++l) ra[l] = a.load(arow[l], k0 + ak[l]);
#pragma unroll
    for (int l = 0; l < kLoadsB; ++l) rb[l] = b.load(bcol[l], k0 + bk[l]);
  };
  auto stash = [&](int stage) {
#pragma unroll
    for (int l = 0; l < kLoadsA; ++l)
      if ((BM * BK) % T == 0 || t + l * T < BM * BK) As[(stage * BK + ak[l]) * LA + am[l]] = ra[l];
#pragma unroll
    for (int l = 0; l < kLoadsB; ++l)
      if ((BN * BK) % T == 0 || t + l * T < BN * BK) Bs[(stage * BK + bk[l]) * LB + bn[l]] = rb[l];
  };

  const int k_tiles = (k_end - k_begin + BK - 1) / BK;
  if (k_tiles <= 0) return;
  fetch(k_begin);
  stash(0);
  __syncthreads();
#pragma unroll 1
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int stage = kt & 1;
    if (kt + 1 < k_tiles) fetch(k_begin + (kt + 1) * BK);  // global loads overlap the math below
    const float* as = As + stage * BK * LA;
    const float* bs = Bs + stage * BK * LB;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float av[Tile::TM], bv[Tile::TN];
#pragma unroll
      for (int g = 0; g < Tile::TM / Tile::VM; ++g)
        detail::read_run<Tile::VM>(as + kk * LA + frag.row(g * Tile::VM), av + g * Tile::VM);
#pragma unroll
      for (int g = 0; g < Tile::TN / Tile::VN; ++g)
        detail::read_run<Tile::VN>(bs + kk * LB + frag.col(g * Tile::VN), bv + g * Tile::VN);
#pragma unroll
      for (int i = 0; i < Tile::TM; ++i)
#pragma unroll
        for (int j = 0; j < Tile::TN; ++j) frag.acc[i][j] = fmaf(av[i], bv[j], frag.acc[i][j]);
    }
    if (kt + 1 < k_tiles) stash(stage ^ 1);
    __syncthreads();
  }
}

// The whole K: k in [0, K).
template <class Tile, class ALoader, class BLoader>
__device__ __forceinline__ void simt_mainloop(const ALoader& a, const BLoader& b, int m0, int n0, int K,
                                              SimtFragment<Tile>& frag, float* smem) {
  simt_mainloop<Tile>(a, b, m0, n0, 0, K, frag, smem);
}

// ---- loaders for dense GEMM operands -------------------------------------------

// A[m][k] = p[m * LDA + k], rows m < M, k < K (linear's x, matmul's A).
template <class T, int M, int K, long long LDA>
struct RowMajorA {
  using Elem = T;
  static constexpr int kM = M, kK = K;
  static constexpr long long kLd = LDA;
  static constexpr bool kKContiguous = true;
  const T* __restrict__ p;
  struct Row {
    const T* ptr;
    bool ok;
  };
  __device__ __forceinline__ Row row(int m) const {
    return {p + (long long)(m < M ? m : 0) * LDA, m < M};
  }
  __device__ __forceinline__ float load(const Row& r, int k) const {
    return (r.ok && k < K) ? load_as_float(r.ptr, k) : 0.f;
  }
};

// B[k][n] = p[n * LDB + k] (linear's weight, stored [N][K]).
template <class T, int N, int K, long long LDB>
struct NKMajorB {
  using Elem = T;
  static constexpr int kN = N, kK = K;
  static constexpr long long kLd = LDB;
  static constexpr bool kKContiguous = true;
  const T* __restrict__ p;
  struct Row {
    const T* ptr;
    bool ok;
  };
  __device__ __forceinline__ Row col(int n) const {
    return {p + (long long)(n < N ? n : 0) * LDB, n < N};
  }
  __device__ __forceinline__ float load(const Row& c, int k) const {
    return (c.ok && k < K) ? load_as_float(c.ptr, k) : 0.f;
  }
};

// B[k][n] = p[k * LDB + n] (matmul's B, stored [K][N]).
template <class T, int N, int K, long long LDB>
struct KNMajorB {
  using Elem = T;
  static constexpr int kN = N, kK = K;
  static constexpr long long kLd = LDB;
  static constexpr bool kKContiguous = false;
  const T* __restrict__ p;
  struct Row {
    const T* ptr;
    bool ok;
  };
  __device__ __forceinline__ Row col(int n) const { return {p + (n < N ? n : 0), n < N}; }
  __device__ __forceinline__ float load(const Row& c, int k) const {
    return (c.ok && k < K) ? load_as_float(c.ptr, (long long)k * LDB) : 0.f;
  }
};

}  // namespace fj
