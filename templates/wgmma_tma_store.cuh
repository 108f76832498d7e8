// fusejit/wgmma_tma_store.cuh — wgmma epilogue outputs by TMA bulk stores
// (KernelPlan::tma_stores), straight from the accumulators of
// gemm_wgmma.cuh's WgmmaFragment.
#pragma once

#include "fusejit/gemm_wgmma.cuh"

namespace fj {

// TMA-stored epilogue outputs (KernelPlan::tma_stores), straight from the
// accumulators: the tile's columns go out in chunks of 128 bytes of the
// output element (kChunkCols; or 112 / 96 bytes unswizzled, see slot_at),
// each through one of kSlots shared-memory slots per output (BM rows of 128
// bytes, in TMA's 128-byte swizzle: a warp's writes of one fragment column
// hit 32 different banks). Per chunk: the slot's
// previous TMA store has read it (wait_group.read), f(acc, m, n, slot, at)
// for the chunk's elements inside [0,M) x [0,N) (`at`: the element's index
// in the slot), fence + barrier, then one thread calls store(slot, c0) (a
// TMA store per output) and commits. The stores drain while the next chunk
// and the next tile's mainloop run; tma_store_drain before the block exits.
template <int kElemBytes>
__device__ __forceinline__ int swizzled_at(int r, int c) {
  constexpr int kPer16 = 16 / kElemBytes;  // elements per 16-byte unit, the swizzle's grain
  return r * (128 / kElemBytes) + (((c / kPer16) ^ (r % 8)) * kPer16) + c % kPer16;
}
// Element (r, c) of a slot holding chunks of kChunkCols columns: 128-byte
// chunks swizzled; narrower ones (tiles 168 wide: 112 or 96 bytes) in plain
// rows, whose pitch already spreads a warp's 8 rows over the banks.
template <int kElemBytes, int kChunkCols>
__device__ __forceinline__ int slot_at(int r, int c) {
  if constexpr (kChunkCols * kElemBytes == 128)
    return swizzled_at<kElemBytes>(r, c);
  else
    return r * kChunkCols + c;
}
// The chunk protocol both epilogues share: for each chunk c of kChunkCols
// columns inside N, the next slot of a ring of min(kSlots, chunks per tile)
// (counted over every tile: a ragged tile may store fewer chunks) free once
// the stores newer than its last one number at most the ring's other slots,
// body(c, slot) writes the slot, then one TMA store per output (store(slot,
// c0)) in one bulk group. Unrolled, so body sees c as a compile-time constant.
template <int kChunkCols, int kSlots, class Frag, class Body, class Store>
__device__ __forceinline__ void tma_store_chunks(Frag& frag, int n0, int N, const Body& body, const Store& store) {
  constexpr int kChunks = Frag::kTileCols / kChunkCols;
  constexpr int kRing = kSlots < kChunks ? kSlots : kChunks;
  static_assert(Frag::kTileCols % kChunkCols == 0, "whole chunks per tile");
  static_assert(kSlots >= 1 && kSlots <= 8, "1 to 8 slots");
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    if (n0 + c * kChunkCols >= N) break;  // the same for every thread
    const int slot = frag.stored_chunks++ % kRing;
    if (frag.thread() == 0) asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kRing - 1) : "memory");
    Frag::sync();
    body(c, slot);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // this thread's writes -> the TMA engine
    Frag::sync();
    if (frag.thread() == 0) {
      store(slot, c * kChunkCols);
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
  }
}
template <int kElemBytes, int kSlots = 2, int kChunkCols = 128 / kElemBytes, class Frag, class F, class Store>
__device__ __forceinline__ void tile_pointwise_tma(Frag& frag, int m0, int n0, int M, int N, const F& f,
                                                   const Store& store) {
  static_assert(kChunkCols % 8 == 0 && kChunkCols * kElemBytes <= 128 && (kChunkCols * kElemBytes) % 16 == 0,
                "chunks of whole 8-column fragment groups, 16-byte multiples up to 128 bytes");
  constexpr int kJ = kChunkCols / 4;  // fragment columns j per chunk (j pairs span 8 tile columns)
  constexpr int U = Frag::kRowUnroll;
  const bool full = m0 + Frag::kTileRows <= M && n0 + Frag::kTileCols <= N;
  tma_store_chunks<kChunkCols, kSlots>(frag, n0, N, [&](int c, int slot) {
#pragma unroll 1
    for (int g = 0; g < Frag::kRows / U; ++g)
#pragma unroll
      for (int q = 0; q < U; ++q) {
        const int r = frag.row(g * U + q);
        if (!full && m0 + r >= M) continue;
#pragma unroll
        for (int jj = 0; jj < kJ; ++jj) {
          const int j = c * kJ + jj, n = frag.col(j);
          if (full || n0 + n < N) f(frag.pick(g, q, j), m0 + r, n0 + n, slot, slot_at<kElemBytes, kChunkCols>(r, n - c * kChunkCols));
        }
      }
  }, store);
}
// tile_pointwise_tma for one output whose value(acc, m, n) the epilogue
// computes: each thread's two adjacent columns go to the slot in one store.
// Per row group, the chunk's values are computed first and stored after, so
// that value's loads (bias, residuals) issue back to back (and repeat for
// the group's rows only where they differ) instead of each waiting behind
// the previous store.
template <int kElemBytes, int kSlots = 2, int kChunkCols = 128 / kElemBytes, class Frag, class T, class F,
          class Store>
__device__ __forceinline__ void tile_pointwise_tma_pairs(Frag& frag, int m0, int n0, int M, int N, T* slots,
                                                         int slot_elems, const F& value, const Store& store) {
  static_assert(kChunkCols % 8 == 0 && kChunkCols * kElemBytes <= 128 && (kChunkCols * kElemBytes) % 16 == 0,
                "chunks of whole 8-column fragment groups, 16-byte multiples up to 128 bytes");
  constexpr int kJ = kChunkCols / 4;
  constexpr int U = Frag::kRowUnroll;
  static_assert(sizeof(T) == kElemBytes, "chunks of T");
  const bool full = m0 + Frag::kTileRows <= M && n0 + Frag::kTileCols <= N;
  tma_store_chunks<kChunkCols, kSlots>(frag, n0, N, [&](int c, int slot) {
    T* const out = slots + slot * slot_elems;
#pragma unroll 1
    for (int g = 0; g < Frag::kRows / U; ++g) {
      float v[U][kJ];  // the group's values in this chunk (fragment columns c * kJ + jj)
#pragma unroll
      for (int q = 0; q < U; ++q) {
        const int m = m0 + frag.row(g * U + q);
#pragma unroll
        for (int jj = 0; jj < kJ; ++jj) {
          const int j = c * kJ + jj, n = n0 + frag.col(j);
          v[q][jj] = full || (m < M && n < N) ? value(frag.pick(g, q, j), m, n) : 0.f;  // outside: clipped by TMA
        }
      }
#pragma unroll
      for (int q = 0; q < U; ++q) {
        const int r = frag.row(g * U + q);
        if (!full && m0 + r >= M) continue;
#pragma unroll
        for (int jj = 0; jj < kJ; jj += 2) {  // columns n, n + 1 of fragment columns j, j + 1
          const int n = frag.col(c * kJ + jj);
          if (full || n0 + n < N)
            store_pair_from_float(out, slot_at<kElemBytes, kChunkCols>(r, n - c * kChunkCols), v[q][jj], v[q][jj + 1]);
        }
      }
    }
  }, store);
}
// Every thread's stores complete (a no-op where it issued none) before the block exits.
__device__ __forceinline__ void tma_store_drain() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

}  // namespace fj
