// fusejit/epilogue_staged.cuh — elementwise epilogues staged through shared
// memory a chunk of columns at a time, so that a warp's loads and stores run
// along rows (or, for NCHW outputs, along pixels) instead of following the
// accumulator fragment's layout: tile_pointwise_staged, one element a call,
// and tile_pointwise_staged_pairs, two adjacent columns a call. Part of
// epilogue.cuh (which includes it); generic over the fragment interface.
#pragma once

#include "fusejit/fj_common.cuh"

namespace fj {

// Element e = thread + k * kThreads (k = 0, 1, ...) of a grid kWidth wide, as
// row r and column c, stepped from one k to the next instead of divided out
// at each (kWidth need not divide the threads: 56 columns of a 168-wide tile).
template <int kThreads, int kWidth>
struct GridStep {
  int r, c;
  __device__ __forceinline__ explicit GridStep(int thread) : r(thread / kWidth), c(thread % kWidth) {}
  __device__ __forceinline__ void next() {
    r += kThreads / kWidth;
    c += kThreads % kWidth;
    if (kThreads % kWidth != 0 && c >= kWidth) {
      c -= kWidth;
      ++r;
    }
  }
};

// Chunk `chunk` (run-time) of the fragment to smem through Frag::stage_cols,
// whose column range must be a compile-time constant.
template <int kChunk, int I, int kChunks, class Frag>
__device__ __forceinline__ void stage_chunk(const Frag& frag, float* smem, int ld, int chunk) {
  if constexpr (I < kChunks) {
    if (chunk == I)
      frag.template stage_cols<I * kChunk, kChunk>(smem, ld);
    else
      stage_chunk<kChunk, I + 1, kChunks>(frag, smem, ld, chunk);
  }
}

// The fragment through shared memory kChunk columns at a time (LD floats a
// row): body(c0) runs for each chunk between two barriers, the chunk staged.
template <int kChunk, class Frag, class BodyF>
__device__ __forceinline__ void for_each_staged_chunk(const Frag& frag, float* smem, int ld, const BodyF& body) {
  constexpr int kChunks = Frag::kTileCols / kChunk;
  static_assert(Frag::kTileCols % kChunk == 0, "chunks must split the tile");
#pragma unroll 1
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    stage_chunk<kChunk, 0, kChunks>(frag, smem, ld, chunk);
    Frag::sync();
    body(chunk * kChunk);
    Frag::sync();
  }
}

// The elementwise epilogue through shared memory, kChunk columns at a time:
// the fragment goes to smem (Frag::stage_cols), then consecutive threads call
// f for consecutive columns of a row, so a warp's loads and stores touch
// contiguous memory. For fragments whose threads hold few adjacent columns
// (wgmma: 2 of every 8, so a warp's store spans 8 rows). kRowsFirst: for
// outputs whose rows are contiguous instead (conv2d's NCHW: rows are pixels),
// consecutive threads take consecutive rows of a column. Interior chunks run
// unguarded. smem: kTileRows * (kChunk + 8) floats.
template <int kChunk, bool kRowsFirst = false, class Frag, class F>
__device__ __forceinline__ void tile_pointwise_staged(const Frag& frag, int m0, int n0, int M, int N, float* smem,
                                                      const F& f) {
  constexpr int BM = Frag::kTileRows;
  // rows first: LD = kChunk + 2 spreads a warp's column reads over 16 banks
  constexpr int LD = kRowsFirst ? kChunk + 2 : kChunk + 8;
  constexpr int kIters = BM * kChunk / Frag::kThreads;  // elements per thread per chunk
  static_assert(BM * kChunk % Frag::kThreads == 0, "threads must split a chunk");
  const int rows = min(BM, M - m0);
  for_each_staged_chunk<kChunk>(frag, smem, LD, [&](int c0) {
    const int cols = min(kChunk, N - n0 - c0);
    if constexpr (kRowsFirst && Frag::kThreads % BM == 0) {
      // Each thread keeps one row (f's per-row work, e.g. a pixel's
      // coordinates, is loop-invariant) and takes every kColStep-th column.
      constexpr int kColStep = Frag::kThreads / BM;
      const int r = frag.thread() % BM, m = m0 + r;
      if (r >= rows) return;
      if (cols == kChunk) {
#pragma unroll 4
        for (int c = frag.thread() / BM; c < kChunk; c += kColStep) f(smem[r * LD + c], m, n0 + c0 + c);
      } else {
#pragma unroll 1
        for (int c = frag.thread() / BM; c < cols; c += kColStep) f(smem[r * LD + c], m, n0 + c0 + c);
      }
      return;
    }
    auto at = [&](int k, int& r, int& c) {
      const int e = frag.thread() + k * Frag::kThreads;
      r = kRowsFirst ? e % BM : e / kChunk;
      c = kRowsFirst ? e / BM : e % kChunk;
    };
    if (rows == BM && cols == kChunk) {
      if constexpr (!kRowsFirst) {
        // (r, c) stepped, not divided out at each element (signed divisions
        // cost ~10 integer instructions an element in the unrolled loop)
        GridStep<Frag::kThreads, kChunk> e(frag.thread());
#pragma unroll 4
        for (int k = 0; k < kIters; ++k, e.next()) f(smem[e.r * LD + e.c], m0 + e.r, n0 + c0 + e.c);
      } else {
#pragma unroll 4
        for (int k = 0; k < kIters; ++k) {
          int r, c;
          at(k, r, c);
          f(smem[r * LD + c], m0 + r, n0 + c0 + c);
        }
      }
    } else {
#pragma unroll 1
      for (int k = 0; k < kIters; ++k) {
        int r, c;
        at(k, r, c);
        if (r < rows && c < cols) f(smem[r * LD + c], m0 + r, n0 + c0 + c);
      }
    }
  });
}

// tile_pointwise_staged (columns first) with two adjacent columns a call:
// f2(v_n, v_n1, m, n) at even n for whole chunks where `pairs` holds (the
// caller's check that every output takes a store of two elements there), so
// a warp's stores are one 4- or 8-byte store a lane; f(v, m, n) one element
// at a time otherwise (ragged chunks, misaligned outputs). smem as
// tile_pointwise_staged.
template <int kChunk, class Frag, class F2, class F>
__device__ __forceinline__ void tile_pointwise_staged_pairs(const Frag& frag, int m0, int n0, int M, int N,
                                                            float* smem, bool pairs, const F2& f2, const F& f) {
  constexpr int BM = Frag::kTileRows, LD = kChunk + 8, kPairs = kChunk / 2;
  constexpr int kIters = BM * kPairs / Frag::kThreads;  // pairs per thread per chunk
  static_assert(kChunk % 2 == 0 && BM * kPairs % Frag::kThreads == 0, "threads must split a chunk's pairs");
  const int rows = min(BM, M - m0);
  for_each_staged_chunk<kChunk>(frag, smem, LD, [&](int c0) {
    const int cols = min(kChunk, N - n0 - c0);
    if (pairs && rows == BM && cols == kChunk) {
      GridStep<Frag::kThreads, kPairs> e(frag.thread());  // row e.r, pair e.c
#pragma unroll 4
      for (int k = 0; k < kIters; ++k, e.next()) {
        const float2 v = *reinterpret_cast<const float2*>(smem + e.r * LD + 2 * e.c);
        f2(v.x, v.y, m0 + e.r, n0 + c0 + 2 * e.c);
      }
    } else {
#pragma unroll 1
      for (int e = frag.thread(); e < BM * kChunk; e += Frag::kThreads) {
        const int r = e / kChunk, c = e % kChunk;
        if (r < rows && c < cols) f(smem[r * LD + c], m0 + r, n0 + c0 + c);
      }
    }
  });
}

}  // namespace fj
