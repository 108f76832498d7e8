// fusejit/wgrad_swap_ab.cuh — conv2d_weight_grad in tf32 on the swap-AB
// wgmma mainloop (gemm_wgmma.cuh + wgmma_swap_ab.cuh), x read in place.
//
// dW[co][(kh, kw, ci)] = sum over the output pixels p of grad[co][p] *
// x[ci][p shifted by the tap]: output rows m = co (wgmma's N, Tile::BM),
// columns n = (kh, kw, ci) (wgmma's M, 64 per consumer warpgroup: one tap,
// 64 channels), K = the pixels, k-tile kt = 32 consecutive pixels of one
// output row (n, oh, ow0 = 32 * owb; the last of a row ragged).
// - wgmma's B is grad's box {32 ow, 1 oh, BM channels, 1 n}: K-major rows of
//   128 bytes, 128-byte swizzle (grad in place, or a copy whose rows are
//   padded with zeros to 16 bytes; zeros past OW).
// - wgmma's A comes from registers: tf32 wgmma reads only K-major operands
//   from shared memory, and a tap's shifted pixel cannot be TMA's innermost
//   coordinate (it must be a multiple of 16 bytes). So the producer loads,
//   per consumer, x's box {36 w, 1 h, 64 ci, 1 n} (no swizzle: rows of 144
//   bytes) at the tap's shift rounded down to 4 pixels, and each thread
//   reads its elements at the remaining shift (0..3) into registers,
//   zeroing pixels past OW (so no Inf or NaN of x there meets a zero of grad:
//   0 * Inf). TMA zero-fills the padding and pixels outside x.
// - A tile of 192 columns (Tile::kBRows == 64) is one kernel row's three taps
//   over 64 channels: its consumers share one box of x, each reading it at its
//   own residual shift: rows of 36 pixels where the shifts reach at most 4
//   past the box's start, 44 up to 12 (padded convs; the planner's
//   wgrad_swap_shared_box_bytes).
// The fragment is WgmmaSwapFragment: the epilogue sees C[co][(kh, kw, ci)].
#pragma once

#include "fusejit/conv_simt.cuh"
#include "fusejit/gemm_wgmma.cuh"

namespace fj {

// A pixel shift rounded down to a multiple of 4 (16 bytes of fp32): TMA's innermost coordinate.
__device__ __forceinline__ int wgrad_aligned4(int v) { return v >= 0 ? v & ~3 : -((3 - v) & ~3); }
// A consumer thread's first output column within its 64 (WgmmaSwapFragment's numbering; warp of its warpgroup,
// lane): its row of x's box.
__device__ __forceinline__ int swap_ab_thread_col(int warp, int lane) {
  return 32 * (warp / 2) + 8 * (warp % 2) + swap_ab_lane_col(lane / 4);
}

template <class Tile, class S>
struct WgradSwapOperands {
  static constexpr bool kProducesA = false;
  static constexpr bool kRegisterX = true;  // wgmma_swap_ab.cuh: register_loader feeds wgmma's A
  static constexpr int kRowBytes = Tile::kBRowBytes, kPixels = kRowBytes / 4;
  static_assert(Tile::kSwapAB && Tile::kKind == MmaKind::TF32 && Tile::BK == 32 && Tile::BN % 64 == 0,
                "tf32 swap-AB tiles of whole 64-column boxes");
  static_assert(kPixels >= Tile::BK + 4, "x's rows: a k-tile's pixels and those a shift may reach past them");
  static_assert(S::kSH == 1 && S::kSW == 1 && S::kGroups == 1 && S::kCin % 64 == 0,
                "stride 1, one group, whole 64-channel boxes");
  static constexpr bool kSharedX = Tile::kBRows == 64 && Tile::BN > 64;  // the consumers' taps: one row of x
  static_assert(!kSharedX || (Tile::BN == 64 * S::kKW && S::kCin == 64), "a shared box: one kernel row's taps");
  using RowTile = WgradRowTile<S, 32>;
  static constexpr int kColumns = S::kKH * S::kKW * S::kCin;  // GEMM N
  static constexpr int kBoxBytes = 64 * kRowBytes;             // one consumer's x box
  GemmMaps maps;  // a: grad {OW, OH, Cout, N}; b: x {W, H, Cin, N}
  __device__ __forceinline__ int k_tiles() const { return RowTile::kCount; }
  __device__ __forceinline__ void load(const StageTiles& st, unsigned long long* bar, int kt, TileCoord c) const {
    const RowTile t(kt);
    sm90::tma_load_4d(st.a, maps.a, bar, t.ow0, t.oh, c.m * Tile::BM, t.n);
#pragma unroll
    for (int j = 0; j < Tile::kBRows / 64; ++j) {  // shared: the first tap's box (the others' shifts lie in it)
      const typename RowTile::Columns b = t.columns(c.n * Tile::BN + 64 * j);
      sm90::tma_load_4d(static_cast<char*>(st.b) + j * kBoxBytes, maps.b, bar, t.ow0 + wgrad_aligned4(b.shift), b.ih, b.ci,
                        b.image);
    }
  }
  // A consumer thread's loader: its two output columns (adjacent channels of the consumer's tap: rows `row` and
  // row + 1 of the box, as WgmmaSwapFragment numbers them), k rows 8s + kq and 8s + kq + 4 of each k8 step.
  struct XRegisters {
    int box;    // the thread's first row in the stage's B tile, in bytes, past the tap's residual shift
    int kq;
    template <int kSteps>
    __device__ __forceinline__ void operator()(unsigned (&a)[kSteps][4], const char* stage_b, int kt) const {
      const int valid = S::kOW - RowTile(kt).ow0;  // pixels of this k-tile inside the row (>= 32: all)
      const char* p = stage_b + box;
#pragma unroll
      for (int s = 0; s < kSteps; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int k = 8 * s + kq + 4 * h;
          float v0 = *reinterpret_cast<const float*>(p + 4 * k);
          float v1 = *reinterpret_cast<const float*>(p + kRowBytes + 4 * k);
          if (k >= valid) v0 = v1 = 0.f;
          a[s][2 * h] = __float_as_uint(v0);
          a[s][2 * h + 1] = __float_as_uint(v1);
        }
    }
  };
  __device__ __forceinline__ XRegisters register_loader(TileCoord c, int consumer) const {
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int v = RowTile::shift_of(c.n * Tile::BN + 64 * consumer);
    const int base = wgrad_aligned4(kSharedX ? RowTile::shift_of(c.n * Tile::BN) : v);  // where its box starts
    const int row = 32 * (warp / 2) + 8 * (warp % 2) + swap_ab_lane_col(lane / 4);  // = swap_ab_thread_col(warp, lane)
    return XRegisters{(kSharedX ? 0 : consumer * kBoxBytes) + row * kRowBytes + 4 * (v - base), lane % 4};
  }
};

// The 192-column swap-AB dW with grad's rows flattened: where grad's rows are not a TMA stride (OW * 4 not a
// multiple of 16) but an image's channel plane is (OH * OW a multiple of 4), a k-tile is 32 consecutive pixels of
// one image's plane, p0 = 32 * i: grad's box {32 p, 1, BM co, 1 n} over the view {OH * OW, 1, Cout, N}, in place
// (no padded copy). Its pixels lie in output row oh from column ow0 (`run` of them) and, past the row's end, in
// row oh + 1 from column 0: x's box A (row oh's input row, from ow0 + the first tap's shift rounded down to 4) and,
// only for a k-tile that crosses a row, box B (the next input row, from the first tap's shift rounded down); the
// stage holds room for both, and a k-tile without B completes B's bytes on the barrier itself. Each thread reads its
// pixel k from A at k + (its tap's shift from A's start) or from B at k - run + (its shift from B's start), zero past
// the plane (44-pixel rows: a pixel lies at most 34 + 2 * DW past A's start).
template <class Tile, class S>
struct WgradFlatSwapOperands {
  static constexpr bool kProducesA = false;
  static constexpr bool kRegisterX = true;
  static constexpr int kRowBytes = Tile::kBRowBytes, kBoxBytes = 64 * kRowBytes;
  static constexpr int kPlane = S::kOH * S::kOW, kPerImage = (kPlane + 31) / 32;
  static_assert(Tile::kSwapAB && Tile::kKind == MmaKind::TF32 && Tile::BN == 64 * S::kKW && S::kKW == 3 &&
                    S::kCin == 64 && Tile::kBRows == 128,
                "one kernel row's three taps over 64 channels, room for two boxes of x");
  static_assert(S::kSH == 1 && S::kSW == 1 && S::kGroups == 1 && kPlane % 4 == 0, "stride 1, planes of 16 bytes");
  static_assert(kRowBytes / 4 >= 35 + 2 * S::kDW, "x's rows: a k-tile's 32 pixels and the shifts past them");
  struct Tile32 {  // k-tile kt: image n, first pixel p0 at (oh, ow0), `run` pixels in row oh
    int n, p0, oh, ow0, run;
    __device__ __forceinline__ explicit Tile32(int kt)
        : n(kt / kPerImage), p0((kt % kPerImage) * 32), oh(p0 / S::kOW), ow0(p0 % S::kOW), run(min(32, S::kOW - ow0)) {}
  };
  GemmMaps maps;  // a: grad {OH * OW, 1, Cout, N}; b: x {W, H, Cin, N}
  __device__ __forceinline__ int k_tiles() const { return S::kBatch * kPerImage; }
  static constexpr int kFirstShift = -S::kPW;  // the block's first tap: kw = 0
  __device__ __forceinline__ void load(const StageTiles& st, unsigned long long* bar, int kt, TileCoord c) const {
    const Tile32 t(kt);
    sm90::tma_load_4d(st.a, maps.a, bar, t.p0, 0, c.m * Tile::BM, t.n);
    const int ih = t.oh + c.n * S::kDH - S::kPH;  // column tile c.n: kernel row kh = c.n
    sm90::tma_load_4d(st.b, maps.b, bar, wgrad_aligned4(t.ow0 + kFirstShift), ih, 0, t.n);
    if (t.run < 32)
      sm90::tma_load_4d(static_cast<char*>(st.b) + kBoxBytes, maps.b, bar, wgrad_aligned4(kFirstShift), ih + 1, 0, t.n);
    else
      sm90::mbar_complete_tx(bar, kBoxBytes);  // no box B: its bytes count as arrived
  }
  struct XRegisters {
    int row;    // the thread's first row in a box, in bytes
    int shift;  // its tap's pixel shift
    int kq;
    template <int kSteps>
    __device__ __forceinline__ void operator()(unsigned (&a)[kSteps][4], const char* stage_b, int kt) const {
      const Tile32 t(kt);
      const int past = kPlane - t.p0;  // pixels of this k-tile inside the plane
      const char* pa = stage_b + row + 4 * (t.ow0 + shift - wgrad_aligned4(t.ow0 + kFirstShift));
      const char* pb = stage_b + kBoxBytes + row + 4 * (shift - wgrad_aligned4(kFirstShift) - t.run);
#pragma unroll
      for (int s = 0; s < kSteps; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int k = 8 * s + kq + 4 * h;
          const char* p = (k < t.run ? pa : pb) + 4 * k;
          float v0 = *reinterpret_cast<const float*>(p);
          float v1 = *reinterpret_cast<const float*>(p + kRowBytes);
          if (k >= past) v0 = v1 = 0.f;
          a[s][2 * h] = __float_as_uint(v0);
          a[s][2 * h + 1] = __float_as_uint(v1);
        }
    }
  };
  __device__ __forceinline__ XRegisters register_loader(TileCoord c, int consumer) const {
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    return XRegisters{swap_ab_thread_col(warp, lane) * kRowBytes, consumer * S::kDW + kFirstShift, lane % 4};
  }
};

}  // namespace fj
