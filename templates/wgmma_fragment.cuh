// fusejit/wgmma_fragment.cuh — the accumulator fragment of a wgmma tile's
// consumers (gemm_wgmma.cuh; the swap-AB form is wgmma_swap_ab.cuh's): which
// rows and columns each consumer thread holds, and the fragment interface of
// gemm_simt.cuh (row / col, pick / set, stage_cols, sync) over them.
#pragma once

#include "fusejit/fj_common.cuh"

namespace fj {

// Consumer thread t (0 <= t < kThreads) of warp w (of its warpgroup c)
// holds rows 64c + 16w + lane/4 + {0, 8} (ping-pong: 64h + 16w + lane/4 +
// {0, 8} of its own tile, h < BM / 64) and columns 8i + 2(lane%4) + {0, 1}.
// Rows 2h and 2h + 1 of acc are the accumulators of wgmma half h.
template <class Tile>
struct WgmmaFragment {
  static constexpr int kRows = 2 * Tile::kMHalves, kCols = Tile::BN / 4;
  static constexpr int kRowUnroll = 2;
  static constexpr int kRowSharers = 4;
  static constexpr int kThreads = Tile::kTileThreads;
  static constexpr int kTileRows = Tile::BM, kTileCols = Tile::BN;
  static constexpr int kConsumerTiles = Tile::kPingPong ? 2 : 1;  // tiles in flight in a block's epilogues
  float acc[kRows][kCols];
  // F32x3 only: one k-tile's sum in the tensor core, added to acc in fp32.
  // (A member, so that it lives before the warp roles split: declared inside
  // the consumer branch, ptxas spilled it.)
  float tile_sum[kRows][kCols];
  int t;
  int stored_chunks = 0;  // TMA-stored chunks so far, every tile (wgmma_tma_store.cuh's slot ring)

  __device__ __forceinline__ WgmmaFragment() : t((threadIdx.x - 128) % kThreads) {
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = 0; j < kCols; ++j) acc[i][j] = tile_sum[i][j] = 0.f;
  }
  __device__ __forceinline__ int row(int i) const { return (i / 2) * 64 + (t / 32) * 16 + (t % 32) / 4 + 8 * (i % 2); }
  __device__ __forceinline__ int col(int j) const { return (j / 2) * 8 + 2 * (t % 4) + (j % 2); }
  __device__ __forceinline__ int row_sharer() const { return t % 4; }
  __device__ __forceinline__ int thread() const { return t; }
  // The consumer whose tile this is (ping-pong: 0 or 1; cooperative: 0).
  __device__ __forceinline__ int consumer() const { return Tile::kPingPong ? (threadIdx.x - 128) / 128 : 0; }
  // A barrier among the tile's threads (named barrier 1; ping-pong: 1 or 3 by
  // consumer).
  static __device__ __forceinline__ void sync() {
    if constexpr (Tile::kPingPong)
      asm volatile("bar.sync %0, %1;" ::"r"(threadIdx.x < 256 ? 1 : 3), "n"(kThreads) : "memory");
    else
      asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory");
  }
  // The accumulators of columns [kC0, kC0 + kChunk) to smem[row * ld + col - kC0],
  // as float2 (each thread's column pairs are adjacent; conflict-free for ld % 32 == 8 or 24).
  template <int kC0, int kChunk>
  __device__ __forceinline__ void stage_cols(float* smem, int ld) const {
    static_assert(kC0 % 8 == 0 && kChunk % 8 == 0 && kC0 + kChunk <= kTileCols, "8-column groups of the tile");
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = kC0 / 4; j < (kC0 + kChunk) / 4; j += 2)
        *reinterpret_cast<float2*>(smem + row(i) * ld + col(j) - kC0) = make_float2(acc[i][j], acc[i][j + 1]);
  }
  // Row group g: one wgmma half (g is 0 unless ping-pong tiles have 128
  // rows). Selects, not acc[g * 2 + q]: epilogues run g in a rolled loop,
  // and a dynamic index would move acc to local memory.
  __device__ __forceinline__ float pick(int g, int q, int j) const {
    float v = acc[q][j];
#pragma unroll
    for (int h = 1; h < Tile::kMHalves; ++h) v = g == h ? acc[h * kRowUnroll + q][j] : v;
    return v;
  }
  __device__ __forceinline__ void set(int g, int q, int j, float v) {
#pragma unroll
    for (int h = 0; h < Tile::kMHalves; ++h) acc[h * kRowUnroll + q][j] = g == h ? v : acc[h * kRowUnroll + q][j];
  }
  // The accumulators of wgmma half h, as sm90::mma takes them.
  __device__ __forceinline__ float (&half(int h))[2][kCols] {
    return *reinterpret_cast<float(*)[2][kCols]>(&acc[2 * h][0]);
  }
};


}  // namespace fj
