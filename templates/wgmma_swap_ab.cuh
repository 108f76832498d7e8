// fusejit/wgmma_swap_ab.cuh — the swap-AB form of the wgmma mainloop
// (gemm_wgmma.cuh, WgmmaTile<..., kSwapAB = true>): C = A B with an fp32
// B [K][N] stored N-major, which tf32 wgmma cannot read from shared memory
// (it takes K-major operands only). The mainloop computes C^T = B^T A^T
// instead: B^T is wgmma's A operand, loaded from B's shared-memory k-tile
// into registers (any layout works there), and A [M][K], K-major, is wgmma's
// B operand as stored. No transposed copy of B. 3xTF32 loads B's residual
// (split as stored) into registers the same way.
//
// Tile::BM output rows (m) are the wgmma's N (64..256), Tile::BN output
// columns (n) its M: 64 per consumer warpgroup. B's k-tile arrives as BN / 32
// TMA boxes of 32 n x 32 k (128-byte rows, 128-byte swizzle), 4 KiB each.
// Warp w of consumer c takes 16 output columns of box 2c + w/2: offsets
// 8(w%2) + col(lane/4) + {0, 1}, where col(r) = {0, 2, 16, 18, 4, 6, 20,
// 22}[r]. Each thread's two columns are adjacent, so one 8-byte shared load
// fills its A registers for a k row; lanes 0-15 (and 16-31) then read 32
// distinct banks under the swizzle (the 16-byte chunk index XOR the row).
#pragma once

#include "fusejit/wgmma_sm90.cuh"

namespace fj {

// The stage ring (gemm_wgmma.cuh's wgmma_mainloop): stage s holds A's tile
// at a + s * kBytesA, B's at b + s * kBytesB (F32x3: the residuals' at a_lo,
// b_lo likewise).
struct StageRing {
  char* a;
  char* b;
  char* a_lo;
  char* b_lo;
};

namespace sm90 {
// acc[BM/4][2] += A(64 x 8, registers) * B(8 x BM), transposed accumulators.
template <int BM>
__device__ __forceinline__ void mma_tf32_rs(float (&acc)[BM / 4][2], const unsigned (&a)[4], unsigned long long b,
                                            int scale_d = 1) {
  if constexpr (BM == 64) mma_tf32_rs_m64n64(acc, a, b, scale_d);
  if constexpr (BM == 128) mma_tf32_rs_m64n128(acc, a, b, scale_d);
  if constexpr (BM == 176) mma_tf32_rs_m64n176(acc, a, b, scale_d);
  if constexpr (BM == 192) mma_tf32_rs_m64n192(acc, a, b, scale_d);
  if constexpr (BM == 256) mma_tf32_rs_m64n256(acc, a, b, scale_d);
}
}  // namespace sm90

// The output column (within a 16-column warp slice, before the +1 of its
// pair) of the lanes 4r .. 4r + 3.
__device__ __forceinline__ int swap_ab_lane_col(int r) { return 2 * (r % 2) + 16 * ((r / 2) % 2) + 4 * (r / 4); }

// A compile-time register buffer index (the k-tile loop alternates two).
template <int V>
struct SwapBuf {
  static constexpr int value = V;
};

// The A registers of kSteps k8 steps: for step s, rows k = 8s + kq and
// 8s + kq + 4 of the box (kq = lane % 4), columns col_off and col_off + 1.
template <int kSteps>
__device__ __forceinline__ void swap_ab_load_a(unsigned (&a)[kSteps][4], const char* box, int col_off, int kq) {
  const int chunk = col_off >> 2, within = (col_off & 3) << 2;
#pragma unroll
  for (int s = 0; s < kSteps; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 8 * s + kq + 4 * h;  // r % 8 == kq + 4h: the swizzle's row phase
      const uint2 v = *reinterpret_cast<const uint2*>(box + r * 128 + ((chunk ^ (kq + 4 * h)) << 4) + within);
      a[s][2 * h] = v.x;
      a[s][2 * h + 1] = v.y;
    }
}

// The accumulator fragment of a swap-AB tile, in output coordinates: thread
// t (of the consumers) holds output rows 8i + 2(t%4) + {0, 1} (the wgmma's
// columns) of two adjacent output columns. The fragment interface of
// gemm_simt.cuh, for elementwise epilogues (tile_pointwise, unrolled whole;
// tile_pointwise_staged, whose chunks only the threads holding them write;
// split-K): a row's elements are spread over every warp, so there are no
// row sharers (the planner fuses no reduction into such a tile).
template <class Tile>
struct WgmmaSwapFragment {
  static constexpr int kRows = Tile::BM / 4, kCols = 2;
  static constexpr int kRowUnroll = kRows;  // one row group: the epilogue is unrolled whole
  static constexpr int kThreads = Tile::kConsumerThreads;
  static constexpr int kTileRows = Tile::BM, kTileCols = Tile::BN;
  float acc[kRows][kCols];
  float tile_sum[kRows][kCols];  // F32x3 only: one k-tile's sum in the tensor core (as WgmmaFragment's)
  int t;
  int first_col;

  __device__ __forceinline__ WgmmaSwapFragment() : t((threadIdx.x - 128) % kThreads) {
    const int warp = (t / 32) % 4;
    first_col = 64 * (t / 128) + 32 * (warp / 2) + 8 * (warp % 2) + swap_ab_lane_col((t % 32) / 4);
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = 0; j < kCols; ++j) acc[i][j] = tile_sum[i][j] = 0.f;
  }
  __device__ __forceinline__ int row(int i) const { return 8 * (i / 2) + 2 * (t % 4) + (i % 2); }
  __device__ __forceinline__ int col(int j) const { return first_col + j; }
  __device__ __forceinline__ int thread() const { return t; }
  __device__ __forceinline__ int consumer() const { return 0; }
  static __device__ __forceinline__ void sync() { asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory"); }
  __device__ __forceinline__ float pick(int, int q, int j) const { return acc[q][j]; }
  __device__ __forceinline__ void set(int, int q, int j, float v) { acc[q][j] = v; }
  // Columns [kC0, kC0 + kChunk) to smem[row * ld + col - kC0]: this thread's
  // pair, where it lies in the chunk (ld even: 8-byte stores).
  template <int kC0, int kChunk>
  __device__ __forceinline__ void stage_cols(float* smem, int ld) const {
    const int c = first_col - kC0;
    if (c < 0 || c >= kChunk) return;
#pragma unroll
    for (int i = 0; i < kRows; ++i) *reinterpret_cast<float2*>(smem + row(i) * ld + c) = make_float2(acc[i][0], acc[i][1]);
  }
};

// The default register loader of swap_ab_k_tiles: this warp's 16 output
// columns of B's N-major k-tile (stage_b: the stage's B tile).
template <class Tile>
struct SwapLoadsB {
  int box, col_off, kq;
  __device__ __forceinline__ explicit SwapLoadsB(int consumer) {
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    box = (2 * consumer + warp / 2) * Tile::kBColumnBytes;
    col_off = 8 * (warp % 2) + swap_ab_lane_col(lane / 4);
    kq = lane % 4;
  }
  template <int kSteps>
  __device__ __forceinline__ void operator()(unsigned (&a)[kSteps][4], const char* stage_b, int /*kt*/) const {
    swap_ab_load_a(a, stage_b + box, col_off, kq);
  }
};

// Operands that load wgmma's A registers themselves (register_loader(tile, consumer)): the swap-AB dW.
template <class O, class = void>
struct SwapLoadsX {
  static constexpr bool value = false;
};
template <class O>
struct SwapLoadsX<O, decltype(void(O::kRegisterX))> {
  static constexpr bool value = O::kRegisterX;
};

// One unit of work's k-tiles [kt0, kt1) on a tf32 swap-AB tile (`it`: the
// block's k-tiles consumed so far, advanced; release(s) frees stage s).
// wgmma's A: this warp's 16 output columns, loaded into registers by
// load_a(regs, stage's B tile, kt) (two buffers: a k-tile's wgmmas read one
// while the next k-tile loads the other); wgmma's B: A's K-major tile, all BM
// rows.
template <class Tile, class Frag, class Release, class LoadA>
__device__ __forceinline__ void swap_ab_k_tiles(Frag& frag, const StageRing& ring, unsigned long long* full, int kt0,
                                                int kt1, int& it, const Release& release, const LoadA& load_a) {
  constexpr int S = Tile::kStages, kSteps = Tile::BK / Tile::kStepK, kStep16 = 32 >> 4;  // a k8 step: 32 bytes
  unsigned a_regs[2][kSteps][4];
  auto k_tile = [&](auto buf, int kt) {
    constexpr int b = decltype(buf)::value;
    const int s = it % S;
    sm90::mbar_wait(&full[s], (it / S) & 1);
    load_a(a_regs[b], ring.b + s * Tile::kBytesB, kt);
    const unsigned long long b_desc = sm90::sw128_desc(ring.a + s * Tile::kBytesA);
    sm90::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kSteps; ++k) sm90::mma_tf32_rs<Tile::BM>(frag.acc, a_regs[b][k], b_desc + k * kStep16);
    sm90::wgmma_commit();
    sm90::wgmma_wait<1>();  // the previous k-tile's wgmmas are done: its registers and stage are free
    if (kt > kt0) release((it - 1) % S);
  };
#pragma unroll 1
  for (int kt = kt0; kt < kt1; ++kt, ++it) {
    if ((kt - kt0) & 1)
      k_tile(SwapBuf<1>{}, kt);
    else
      k_tile(SwapBuf<0>{}, kt);
  }
  sm90::wgmma_wait<0>();
  release((it - 1) % S);
}

// The same for 3xTF32: B's hi and lo k-tiles into registers, A's hi and lo
// as wgmma's B operand; the cross terms first (lo*hi + hi*lo, then hi*hi)
// into the k-tile's sum, added to acc in fp32 once its wgmmas are done (as
// gemm_wgmma.cuh's 3xTF32 k-tiles; each warp then frees the stage).
template <class Tile, class Frag>
__device__ __forceinline__ void swap_ab_k_tiles_3xtf32(Frag& frag, const StageRing& ring, unsigned long long* full,
                                                       unsigned long long* empty, int kt0, int kt1, int& it,
                                                       int consumer) {
  constexpr int S = Tile::kStages, kSteps = Tile::BK / Tile::kStepK, kStep16 = 32 >> 4;
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int box = (2 * consumer + warp / 2) * Tile::kBColumnBytes, col_off = 8 * (warp % 2) + swap_ab_lane_col(lane / 4);
  unsigned hi[kSteps][4], lo[kSteps][4];
#pragma unroll 1
  for (int kt = kt0; kt < kt1; ++kt, ++it) {
    const int s = it % S;
    sm90::mbar_wait(&full[s], (it / S) & 1);
    swap_ab_load_a(hi, ring.b + s * Tile::kBytesB + box, col_off, lane % 4);
    swap_ab_load_a(lo, ring.b_lo + s * Tile::kBytesB + box, col_off, lane % 4);
    const unsigned long long a_hi = sm90::sw128_desc(ring.a + s * Tile::kBytesA);
    const unsigned long long a_lo = sm90::sw128_desc(ring.a_lo + s * Tile::kBytesA);
    sm90::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      sm90::mma_tf32_rs<Tile::BM>(frag.tile_sum, lo[k], a_hi + k * kStep16, k > 0);  // k-tile sum starts fresh
      sm90::mma_tf32_rs<Tile::BM>(frag.tile_sum, hi[k], a_lo + k * kStep16);
    }
#pragma unroll
    for (int k = 0; k < kSteps; ++k) sm90::mma_tf32_rs<Tile::BM>(frag.tile_sum, hi[k], a_hi + k * kStep16);
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    if (threadIdx.x % 32 == 0) sm90::mbar_arrive(&empty[s]);
#pragma unroll
    for (int i = 0; i < Frag::kRows; ++i)
#pragma unroll
      for (int j = 0; j < Frag::kCols; ++j) frag.acc[i][j] += frag.tile_sum[i][j];  // fp32, nearest
  }
}

}  // namespace fj
