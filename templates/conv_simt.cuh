// fusejit/conv_simt.cuh — conv2d (NCHW) as an implicit GEMM on the SIMT
// mainloop of gemm_simt.cuh. Per group g:
//   M = output pixels (n, oh, ow)   N = Cout / groups   K = (Cin / groups) * KH * KW
//   A[m][k] = x[n][g*CinG + ci][oh*SH - PH + kh*DH][ow*SW - PW + kw*DW]  (0 in the padding)
//   B[k][n] = w[g*CoutG + n][ci][kh][kw]     with k = (ci*KH + kh)*KW + kw
// Which output pixel a GEMM row m stands for is a PIXEL MAP, so the epilogue
// can ask for a pool-window-major order (PoolTiledPixels) instead of the plain
// row-major one (DensePixels).
//
// Shape concept (generated as a struct of named constants):
//   kBatch kCin kH kW kCout kKH kKW kSH kSW kPH kPW kDH kDW kGroups kOH kOW
#pragma once

#include "fusejit/fj_common.cuh"

namespace fj {

struct Pixel {
  int n, oh, ow;
  bool ok;  // false: the row computes nothing (past the end, or outside any pool window)
};

// m -> (n, oh, ow) in NCHW order; rows past N*OH*OW are not ok.
template <class S>
struct DensePixels {
  static constexpr int kRows = S::kBatch * S::kOH * S::kOW;  // GEMM M
  __device__ __forceinline__ Pixel pixel(int m) const {
    Pixel p;
    p.ok = m < kRows;
    if (!p.ok) m = 0;
    p.n = m / (S::kOH * S::kOW);
    const int r = m % (S::kOH * S::kOW);
    p.oh = r / S::kOW;
    p.ow = r % S::kOW;
    return p;
  }
};

// Pixels tiled per image: an image's OH*OW pixels fill kTilesPerImage tiles
// of BM rows (the last one ragged, its extra rows not ok), so a tile never
// mixes images (reductions over the pixels: per-tile partials per channel).
template <class S, int BM>
struct ImagePixels {
  static constexpr int kPixels = S::kOH * S::kOW;
  static constexpr int kTilesPerImage = (kPixels + BM - 1) / BM;
  static constexpr int kRows = S::kBatch * kTilesPerImage * BM;  // GEMM M
  __device__ __forceinline__ Pixel pixel(int m) const {
    Pixel p;
    p.n = m / (kTilesPerImage * BM);
    int r = m % (kTilesPerImage * BM);
    p.ok = p.n < S::kBatch && r < kPixels;
    if (!p.ok) p.n = 0, r = 0;
    p.oh = r / S::kOW;
    p.ow = r % S::kOW;
    return p;
  }
};

// Pool-window-major pixels for a pool with kernel = stride = (QH, QW), no
// padding, floor mode. A tile of BM rows covers QH output rows by P windows
// side by side (P*QW output columns) of one pooled row of one image:
//   tile = (n, ph, pw_block)      row r = wy * (P*QW) + (pw_in_block*QW + wx)
// so each window's QH*QW pixels lie in one tile, consecutive rows are
// consecutive ow (coalesced), and pixels outside every window are never
// computed. Rows r >= QH*P*QW, and windows past PW, are not ok.
template <class S, int BM, int QH, int QW, int P>
struct PoolTiledPixels {
  static constexpr int kPH = S::kOH / QH, kPW = S::kOW / QW;  // pooled extent
  static constexpr int kBlocksW = (kPW + P - 1) / P;         // window blocks per pooled row
  static constexpr int kTiles = S::kBatch * kPH * kBlocksW;
  static constexpr int kRows = kTiles * BM;                  // GEMM M (padded per tile)
  static constexpr int kSpan = P * QW;                       // output columns per tile
  static_assert(QH * P * QW <= BM, "windows must fit in a tile");

  struct Window {
    int n, ph, pw;
    bool ok;
  };
  // Window w (0 <= w < P) of the tile whose first row is m0.
  __device__ __forceinline__ static Window window(int m0, int w) {
    const int tile = m0 / BM;
    Window win;
    win.n = tile / (kPH * kBlocksW);
    const int rem = tile % (kPH * kBlocksW);
    win.ph = rem / kBlocksW;
    win.pw = (rem % kBlocksW) * P + w;
    win.ok = win.pw < kPW;
    return win;
  }
  // Tile row of the q-th element (row-major in the window) of window w.
  __device__ __forceinline__ static int row(int w, int q) {
    return (q / QW) * kSpan + w * QW + q % QW;
  }
  __device__ __forceinline__ Pixel pixel(int m) const {
    const int r = m % BM;
    const int wy = r / kSpan, ox = r % kSpan;
    Window win = window(m - r, ox / QW);
    Pixel p;
    p.ok = wy < QH && win.ok;
    p.n = win.n;
    p.oh = win.ph * QH + wy;
    p.ow = win.pw * QW + ox % QW;
    return p;
  }
};

// Rows of output tiles as patches of BH x BW pixels (BH * BW = BM), tiles in
// (n, patch row, patch column) order: a tile never mixes images.
template <class S, int BM, int BH, int BW>
struct PatchPixels {
  static_assert(BH * BW == BM, "a patch fills the tile");
  using Shape = S;
  static constexpr int kBH = BH, kBW = BW;
  static constexpr int kTilesH = (S::kOH + BH - 1) / BH, kTilesW = (S::kOW + BW - 1) / BW;
  static constexpr int kTilesPerImage = kTilesH * kTilesW;
  static constexpr int kTiles = S::kBatch * kTilesPerImage;
  static constexpr int kRows = kTiles * BM;  // GEMM M (patches padded)
  struct Origin {
    int n, oh, ow;  // the image and the patch's first output pixel
  };
  __device__ __forceinline__ static Origin origin(int tile) {
    const int rem = tile % kTilesPerImage;
    return {tile / kTilesPerImage, (rem / kTilesW) * BH, (rem % kTilesW) * BW};
  }
  __device__ __forceinline__ Pixel pixel(int m) const {
    const int r = m % BM;
    const Origin o = origin(m / BM);
    Pixel p;
    p.n = o.n;
    p.oh = o.oh + r / BW;
    p.ow = o.ow + r % BW;
    p.ok = o.n < S::kBatch && p.oh < S::kOH && p.ow < S::kOW;
    if (!p.ok) p.n = p.oh = p.ow = 0;
    return p;
  }
};

// Patches that hold whole pool windows (kernel = stride = (QH, QW), no
// padding, floor mode; QH divides BH, QW divides BW): the tile_pool
// interface of PoolTiledPixels. Window w of a tile: (w / kWinW, w % kWinW)
// in the patch's grid of windows.
template <class S, int BM, int BH, int BW, int QH, int QW>
struct PatchPoolPixels : PatchPixels<S, BM, BH, BW> {
  using Base = PatchPixels<S, BM, BH, BW>;
  static_assert(BH % QH == 0 && BW % QW == 0, "whole windows in a patch");
  static constexpr int kWinW = BW / QW, kWindows = (BH / QH) * kWinW;
  static constexpr int kPH = S::kOH / QH, kPW = S::kOW / QW;  // pooled extent
  struct Window {
    int n, ph, pw;
    bool ok;
  };
  __device__ __forceinline__ static Window window(int m0, int w) {
    const typename Base::Origin o = Base::origin(m0 / BM);
    Window win;
    win.n = o.n;
    win.ph = o.oh / QH + w / kWinW;
    win.pw = o.ow / QW + w % kWinW;
    win.ok = o.n < S::kBatch && win.ph < kPH && win.pw < kPW;
    return win;
  }
  // Tile row of the q-th element (row-major in the window) of window w.
  __device__ __forceinline__ static int row(int w, int q) {
    return ((w / kWinW) * QH + q / QW) * BW + (w % kWinW) * QW + q % QW;
  }
};

// Kernel taps by GEMM k = (ci*KH + kh)*KW + kw. The generated code can
// supply a table in constant memory (Taps::at(k) -> {ci*H*W + kh*DH*W +
// kw*DW, (kh*DH << 16) | kw*DW}), read as a warp-uniform broadcast because a
// warp's 32 A loads share k; NoTaps computes the same with divisions.
template <class S>
struct NoTaps {
  static __device__ __forceinline__ int2 at(int k) {
    const int ci = k / (S::kKH * S::kKW);
    const int rs = k % (S::kKH * S::kKW);
    const int dh = (rs / S::kKW) * S::kDH, dw = (rs % S::kKW) * S::kDW;
    return make_int2(ci * (S::kH * S::kW) + dh * S::kW + dw, (dh << 16) | dw);
  }
};

// A operand: the im2col gather of input x (NCHW) for group channel base c0.
// Without padding every tap of a valid pixel lies inside the image, so the
// bounds checks compile away.
template <class T, class S, class Pixels, class Taps = NoTaps<S>>
struct ConvA {
  static constexpr bool kKContiguous = false;  // consecutive m: consecutive ow
  static constexpr int kCinG = S::kCin / S::kGroups;
  static constexpr int K = kCinG * S::kKH * S::kKW;
  static constexpr bool kPadded = S::kPH > 0 || S::kPW > 0;
  const T* __restrict__ x;
  Pixels pixels;
  int c0;  // first input channel of the group
  struct Row {
    long long base;  // offset of (n, c0, ih0, iw0); may lie before the image when padded
    int ih0, iw0;
    bool ok;
  };
  __device__ __forceinline__ Row row(int m) const {
    const Pixel p = pixels.pixel(m);
    Row r;
    r.ok = p.ok;
    r.ih0 = p.oh * S::kSH - S::kPH;
    r.iw0 = p.ow * S::kSW - S::kPW;
    r.base = ((long long)p.n * S::kCin + c0) * (S::kH * S::kW) + r.ih0 * S::kW + r.iw0;
    return r;
  }
  __device__ __forceinline__ float load(const Row& r, int k) const {
    if (!r.ok || k >= K) return 0.f;
    const int2 tap = Taps::at(k);
    if constexpr (kPadded) {
      const int ih = r.ih0 + (tap.y >> 16), iw = r.iw0 + (tap.y & 0xffff);
      if ((unsigned)ih >= (unsigned)S::kH || (unsigned)iw >= (unsigned)S::kW) return 0.f;
    }
    return load_as_float(x, r.base + tap.x);
  }
};

// A dW's k-tiles over the output pixels (conv_wgmma.cuh, wgrad_swap_ab.cuh): kt is kPixels consecutive pixels of
// one output row, rows image-major; the last of a row ragged.
template <class S, int kPixels>
struct WgradRowTile {
  static constexpr int kPerRow = (S::kOW + kPixels - 1) / kPixels;
  static constexpr int kCount = S::kBatch * S::kOH * kPerRow;
  int ow0, oh, n;
  __device__ __forceinline__ explicit WgradRowTile(int kt)
      : ow0((kt % kPerRow) * kPixels), oh((kt / kPerRow) % S::kOH), n(kt / (kPerRow * S::kOH)) {}
  // What a box of B reads for the 64 GEMM columns from `col` (one tap (kh, kw), channels from ci): x's row ih,
  // pixels shifted by `shift` from this tile's, image `image` (past the batch where the columns are past N).
  struct Columns {
    int kw, shift, ih, ci, image;
  };
  static __device__ __forceinline__ int shift_of(int col) { return (col / S::kCin % S::kKW) * S::kDW - S::kPW; }
  __device__ __forceinline__ Columns columns(int col) const {
    const int tap = col / S::kCin;
    return {tap % S::kKW, shift_of(col), oh + (tap / S::kKW) * S::kDH - S::kPH, col % S::kCin,
            col < S::kKH * S::kKW * S::kCin ? n : S::kBatch};
  }
};

}  // namespace fj
