// fusejit/epilogue_pool1d.cuh — 1-D pools along N whose windows cross tile
// edges (overlapping, padded, ceil-mode or not dividing the staging chunks),
// fused into a GEMM epilogue. Column tiles overlap: tile t starts at column
// t * kNStep and is kNStep + kHalo (or more) columns wide, so every window that
// starts in [t * kNStep, (t + 1) * kNStep) lies inside it; the tile owns those
// windows (tile 0 also the ones starting in the left padding). The kHalo
// columns a tile shares with the next are computed by both.
//
//   tile_pool1d_halo  value(acc, m, n) -> each pool's owned windows -> store(v, m, w)
//
// Window semantics are pool.cuh's (PyTorch's: max skips the padding and
// propagates NaN; avg divides by the padded or the in-bounds count).
#pragma once

#include "fusejit/epilogue_staged.cuh"
#include "fusejit/pool.cuh"

namespace fj {

// Shared memory (floats) of tile_pool1d_halo<kNStep, kChunk, kHalo> for tiles of kTileRows rows.
__host__ __device__ constexpr int pool1d_halo_floats(int tile_rows, int chunk, int halo) {
  return tile_rows * ((halo + 7) / 8 * 8 + chunk + 8);
}

// One pool of the epilogue: S the window shape (pool.cuh's 1-D members kW,
// kKW, kSW, kPW, kDW, and kWOut the pooled width); store(v, m, w).
template <class S, bool kMax, bool kCountIncludePad, class StoreF>
struct Pool1dOutput {
  StoreF store;
};

template <class S, bool kMax, bool kCountIncludePad, class StoreF>
__device__ __forceinline__ Pool1dOutput<S, kMax, kCountIncludePad, StoreF> pool1d_output(const StoreF& store) {
  return {store};
}

// Windows j of `pool` this tile owns (start j * kSW - kPW in [n0, n0 +
// kNStep), or below n0 = 0) whose last column lies in [n0 + c0, n0 + c0 +
// kChunk): reduced by the fragment's threads, one (row, window) each, from
// at(r, iw), the staged value of tile row r at input column iw.
template <int kNStep, int kChunk, class Frag, class S, bool kMax, bool kCip, class StoreF, class AtF>
__device__ __forceinline__ void pool1d_chunk_windows(const Frag& frag, const Pool1dOutput<S, kMax, kCip, StoreF>& pool,
                                                     int m0, int rows, int n0, int c0, const AtF& at) {
  constexpr int kSpan = (S::kKW - 1) * S::kDW;  // a window's last column, from its first
  const int lo = max(n0 + c0 - kSpan, n0 == 0 ? -S::kPW : n0);  // window starts: [lo, hi)
  const int hi = min(n0 + kNStep, n0 + c0 + kChunk - kSpan);
  if (lo >= hi) return;
  auto first_at_or_after = [](int start) { return start <= -S::kPW ? 0 : (start + S::kPW + S::kSW - 1) / S::kSW; };
  const int j0 = first_at_or_after(lo), j1 = min(first_at_or_after(hi), S::kWOut);
  const int windows = j1 - j0;
  if (windows <= 0) return;
#pragma unroll 1
  for (int e = frag.thread(); e < rows * windows; e += Frag::kThreads) {
    const int r = e / windows, j = j0 + e % windows;
    const float v = pool1d_window<S, kMax, kCip>(j, [&](int iw) { return at(r, iw); });
    pool.store(v, m0 + r, j);
  }
}

// The epilogue: value(acc, m, n) in the fragment (inside [0, M) x [0, N)),
// then kChunk columns at a time to shared memory at column kPad of a row,
// behind the kHalo columns that ended the chunk before (kPad: kHalo rounded
// up to 8, so the fragments' float2 staging stays aligned; LD = kPad + kChunk
// + 8 floats a row), and each pool's windows that end in the chunk. smem:
// kTileRows * LD floats (pool1d_halo_floats).
template <int kNStep, int kChunk, int kHalo, class Frag, class ValueF, class... Pools>
__device__ __forceinline__ void tile_pool1d_halo(Frag& frag, int m0, int n0, int M, int N, float* smem,
                                                 const ValueF& value, const Pools&... pools) {
  constexpr int BM = Frag::kTileRows, kPad = (kHalo + 7) / 8 * 8, LD = kPad + kChunk + 8, U = Frag::kRowUnroll;
  static_assert(kNStep + kHalo <= Frag::kTileCols, "a tile holds the windows it owns");
  static_assert(kHalo <= kChunk, "the halo comes from one chunk");
#pragma unroll 1
  for (int g = 0; g < Frag::kRows / U; ++g) {
#pragma unroll
    for (int q = 0; q < U; ++q) {
      const int m = m0 + frag.row(g * U + q);
#pragma unroll
      for (int j = 0; j < Frag::kCols; ++j) {
        const int n = n0 + frag.col(j);
        if (m < M && n < N) frag.set(g, q, j, value(frag.pick(g, q, j), m, n));
      }
    }
  }
  const int rows = min(BM, M - m0);
  constexpr int kChunks = Frag::kTileCols / kChunk;
  static_assert(Frag::kTileCols % kChunk == 0, "chunks must split the tile");
#pragma unroll 1
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    const int c0 = chunk * kChunk;
    if (kHalo > 0 && chunk > 0) {  // the previous chunk's last kHalo columns go in front
      for (int e = frag.thread(); e < BM * kHalo; e += Frag::kThreads) {
        const int r = e / kHalo, h = e % kHalo;
        smem[r * LD + kPad - kHalo + h] = smem[r * LD + kPad + kChunk - kHalo + h];
      }
      Frag::sync();
    }
    stage_chunk<kChunk, 0, kChunks>(frag, smem + kPad, LD, chunk);
    Frag::sync();
    auto chunk_at = [&](int r, int iw) { return smem[r * LD + kPad + (iw - n0 - c0)]; };
    (pool1d_chunk_windows<kNStep, kChunk>(frag, pools, m0, rows, n0, c0, chunk_at), ...);
    Frag::sync();
  }
}

}  // namespace fj
