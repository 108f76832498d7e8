// fusejit/conv_wgmma.cuh — conv2d (stride 1, groups 1) as an implicit GEMM on
// the sm_90a wgmma mainloop of gemm_wgmma.cuh, fed by TMA.
//
// The operand staging kernel (operand_staging.cuh) first writes x in NHWC
// and w as [Cout][KH][KW][Cin] (K-major B with k = (kh*KW + kw)*Cin + ci).
// An output tile of BM rows is a PATCH of BH x BW output pixels of one image
// (row r = (oh - oh0) * BW + (ow - ow0)). For stride 1 the A tile of k-tile
// (tap (kh, kw), channel block cb) is then one 4-D TMA box of the NHWC input:
// BK channels x BW columns x BH rows at (cb*BK, ow0 + kw*DW - PW, oh0 + kh*DH
// - PH, n); TMA zero-fills what lies outside the image (the padding, negative
// coordinates included), and writes the box as BM rows of 128 bytes with the
// 128-byte swizzle: the same shared-memory tile as a GEMM's A, so the
// consumers' wgmmas are the GEMM's. B's k-tile is a 2-D box as in the GEMM.
//
// Shape concept (generated struct of named constants, as conv_simt.cuh's):
//   kBatch kCin kH kW kCout kKH kKW kSH kSW kPH kPW kDH kDW kGroups kOH kOW
#pragma once

#include "fusejit/conv_simt.cuh"
#include "fusejit/gemm_wgmma.cuh"
#include "fusejit/operand_staging.cuh"

namespace fj {

// Operand loading policy of wgmma_mainloop for conv2d (stride 1, groups 1,
// Cin a multiple of BK): k-tile kt = tap * kCBlocks + cb.
template <class Tile, class S, class Patch>
struct ConvOperands {
  static constexpr bool kProducesA = false;
  static_assert(S::kSH == 1 && S::kSW == 1 && S::kGroups == 1, "TMA patches: stride 1, one group");
  static_assert(S::kCin % Tile::BK == 0, "whole 128-byte channel blocks");
  static constexpr int kCBlocks = S::kCin / Tile::BK;
  GemmMaps maps;  // a: x NHWC (4-D), b: w [Cout][KH*KW*Cin]; F32x3: their residuals alike
  __device__ __forceinline__ int k_tiles() const { return S::kKH * S::kKW * kCBlocks; }
  // Clusters (kClusterM = 2): block `rank` loads its own A and rows [rank * BN / 2, ...) of B's k-tile,
  // multicast to both blocks (a patch past the last one, an odd count's partner, is an image past the batch:
  // TMA zero-fills it).
  __device__ __forceinline__ void load(const StageTiles& st, unsigned long long* bar, int kt, TileCoord c,
                                       unsigned rank = 0) const {
    const int tap = kt / kCBlocks, c0 = (kt % kCBlocks) * Tile::BK;
    const typename Patch::Origin o = Patch::origin(c.m);
    const int iw = o.ow + (tap % S::kKW) * S::kDW - S::kPW, ih = o.oh + (tap / S::kKW) * S::kDH - S::kPH;
    sm90::tma_load_4d(st.a, maps.a, bar, c0, iw, ih, o.n);
    if constexpr (Tile::kClusterM > 1) {
      static_assert(Tile::kKind != MmaKind::F32x3 && !Tile::kBNMajor && Tile::kClusterBoxRows * 2 == Tile::BN,
                    "clusters: not 3xTF32, K-major filter rows, halves of B");
      constexpr unsigned short kAll = (1u << Tile::kClusterM) - 1;
      constexpr int kRows = Tile::BN / Tile::kClusterM;
      sm90::tma_load_2d_multicast(static_cast<char*>(st.b) + rank * kRows * 128, maps.b, bar, kt * Tile::BK,
                                  c.n * Tile::BN + rank * kRows, kAll);
      return;
    }
    sm90::tma_load_2d(st.b, maps.b, bar, kt * Tile::BK, c.n * Tile::BN);
    if constexpr (Tile::kKind == MmaKind::F32x3) {
      sm90::tma_load_4d(st.a_lo, maps.a_lo, bar, c0, iw, ih, o.n);
      sm90::tma_load_2d(st.b_lo, maps.b_lo, bar, kt * Tile::BK, c.n * Tile::BN);
    }
  }
};

// Operand policy of wgmma_mainloop for conv2d_weight_grad (stride 1, one
// group, 16-bit, Cin a multiple of 64): dW[co][(kh, kw, ci)] = sum over the
// output pixels of grad[co][pixel] * x[pixel shifted by the tap][ci], a GEMM
// with M = Cout, N = KH*KW*Cin (columns tap-major, as the NHWC gather's) and
// K = the output pixels. k-tile kt is 64 consecutive pixels of one output row
// (n, oh, ow0 = 64 * owb; the last of a row ragged): A is grad's 4-D box
// {64 ow, 1 oh, BM channels, 1 n}, K-major rows of 128 bytes (grad in place,
// or a copy whose rows are padded with zeros to a multiple of 16 bytes; zeros
// past OW); B is, per 64-column box j, x in NHWC (the staging kernel's) at
// (ci0, ow0 + kw*DW - PW, oh + kh*DH - PH, n): 64 pixels x 64 channels,
// N-major, through kernel column kw's view of x (x_cols[kw]), whose W extent
// ends where that column's last valid output pixel reads: past OW the box is
// zeros too, so an Inf or NaN of x there meets no 0 * Inf. TMA zero-fills the
// padding (as the NHWC gather's zero copies); a box past N reads an image
// past the batch. (x cannot be read in place as K-major B: a tap's shifted
// pixel is TMA's innermost coordinate there, which must be a multiple of 16
// bytes; other offsets are an illegal instruction.)
template <class Tile, class S>
struct WgradOperands {
  static constexpr bool kProducesA = false;
  static_assert(Tile::kBNMajor && Tile::BK == 64 && Tile::BN % 64 == 0 && Tile::kClusterM == 1 && !Tile::kSwapAB,
                "16-bit, B N-major in 64-column boxes, no clusters");
  static_assert(S::kSH == 1 && S::kSW == 1 && S::kGroups == 1 && S::kCin % 64 == 0,
                "stride 1, one group, whole 64-channel boxes");
  using RowTile = WgradRowTile<S, 64>;
  GemmMaps maps;  // a: grad {OW, OH, Cout, N}; b: x_cols[0] (prefetched with a)
  const TmaDescriptor* x_cols[S::kKW];  // x in NHWC {C, W, H, N}, W cut for kernel column kw
  __device__ __forceinline__ int k_tiles() const { return RowTile::kCount; }
  __device__ __forceinline__ const TmaDescriptor* column_map(int kw) const {  // selects (no indexed local array)
    const TmaDescriptor* m = x_cols[0];
#pragma unroll
    for (int i = 1; i < S::kKW; ++i)
      if (kw == i) m = x_cols[i];
    return m;
  }
  __device__ __forceinline__ void load(const StageTiles& st, unsigned long long* bar, int kt, TileCoord c) const {
    const RowTile t(kt);
    sm90::tma_load_4d(st.a, maps.a, bar, t.ow0, t.oh, c.m * Tile::BM, t.n);
#pragma unroll
    for (int j = 0; j < Tile::BN / 64; ++j) {
      const typename RowTile::Columns b = t.columns(c.n * Tile::BN + 64 * j);
      sm90::tma_load_4d(static_cast<char*>(st.b) + j * Tile::kBColumnBytes, column_map(b.kw), bar, b.ci,
                        t.ow0 + b.shift, b.ih, b.image);
    }
  }
};

// Operand policy of wgmma_mainloop for conv2d reading NCHW x itself (no
// NHWC staging pass; conv_nchw=1): the producer warpgroup's 128 threads
// write each A tile — row r of the tile (pixel r of the patch) holds the
// k-tile's BK channels at that pixel shifted by the tap, 16-byte chunk j at
// j ^ (r % 8) (the 128-byte swizzle TMA would write) — and thread 0 loads B
// by TMA. Each thread takes 8 / kThreadsPerRow chunks of one row: its loads
// (one predicated 2- or 4-byte load per channel; a warp reads 32
// consecutive pixels of a channel) are issued for k-tile it + L right after
// k-tile it is stored (L = kLookahead, 1 or 2: register sets in flight), so
// they land while the thread waits for the stages.
// 3xTF32: the thread also writes each value's TF32 residual to the a_lo tile
// (tf32_residual, as the staging kernel's; 0 outside the image, as TMA's
// zero fill). Stride 1, one group.
template <class Tile, class S, class Patch, class T, int kLookahead_ = 1>
struct ConvNchwOperands {
  static_assert(S::kSH == 1 && S::kSW == 1 && S::kGroups == 1, "patches: stride 1, one group");
  static_assert(S::kCin % Tile::BK == 0, "whole 128-byte channel blocks");
  static_assert(Tile::kClusterM == 1 && !Tile::kSwapAB, "NCHW producer: no clusters, no swap-AB");
  static_assert(sizeof(T) * Tile::BK == 128, "a k-tile row: 128 bytes");
  static constexpr bool kProducesA = true;
  static constexpr int kLookahead = kLookahead_;  // k-tiles of A loads in flight a thread (1 or 2)
  static constexpr int kCBlocks = S::kCin / Tile::BK;
  static constexpr int kThreadsPerRow = 128 / Tile::BM;  // 1 (BM 128) or 2 (BM 64)
  static constexpr int kChunks = 8 / kThreadsPerRow;     // 16-byte chunks a thread writes
  static constexpr int kPerChunk = 16 / sizeof(T), kChannels = kChunks * kPerChunk;
  static constexpr int kWords = kChannels * sizeof(T) / 4;
  // Registers after setmaxnreg: the producer's loads in flight; the consumers keep 200 (56 + 2 x 224 before).
  static constexpr int kProducerRegs = kLookahead == 2 ? 136 : 104;
  static constexpr int kConsumerRegs = Tile::kConsumers == 1 ? 232 : (504 - kProducerRegs) / 2 / 8 * 8;
  static_assert(Tile::BM == 64 || Tile::BM == 128, "64 or 128 rows");
  GemmMaps maps;  // b: w [Cout][KH*KW*Cin], 3xTF32 b_lo: its residual (a, a_lo: none)
  const T* __restrict__ x;

  struct Pending {
    unsigned w[kWords];  // the thread's channels at its pixel, packed
    int row;             // the tile row it writes
    int chunk0;          // its first chunk
    bool in;             // the pixel lies inside the image (3xTF32: residuals of 0 there)
  };
  __device__ __forceinline__ int k_tiles() const { return S::kKH * S::kKW * kCBlocks; }
  __device__ __forceinline__ void load_b(void* b, void* b_lo, unsigned long long* bar, int kt, TileCoord c) const {
    sm90::tma_load_2d(b, maps.b, bar, kt * Tile::BK, c.n * Tile::BN);
    if constexpr (Tile::kKind == MmaKind::F32x3) sm90::tma_load_2d(b_lo, maps.b_lo, bar, kt * Tile::BK, c.n * Tile::BN);
  }
  // The thread's values of k-tile kt of tile c into p (zeros outside the image).
  __device__ __forceinline__ void load_a(Pending& p, int kt, TileCoord c) const {
    const int t = threadIdx.x % 128;  // producer warpgroup 0
    p.row = t % Tile::BM;
    p.chunk0 = (t / Tile::BM) * kChunks;
    const int tap = kt / kCBlocks, c0 = (kt % kCBlocks) * Tile::BK + p.chunk0 * kPerChunk;
    const typename Patch::Origin o = Patch::origin(c.m);
    const int ih = o.oh + p.row / Patch::kBW + (tap / S::kKW) * S::kDH - S::kPH;
    const int iw = o.ow + p.row % Patch::kBW + (tap % S::kKW) * S::kDW - S::kPW;
    const bool in = o.n < S::kBatch && (unsigned)ih < (unsigned)S::kH && (unsigned)iw < (unsigned)S::kW;
    p.in = in;
    const T* src = x + ((long long)o.n * S::kCin + c0) * (S::kH * S::kW) + (in ? ih * S::kW + iw : 0);
    if constexpr (sizeof(T) == 4) {
#pragma unroll
      for (int e = 0; e < kChannels; ++e)
        p.w[e] = in ? __ldg(reinterpret_cast<const unsigned*>(src) + (long long)e * (S::kH * S::kW)) : 0u;
    } else {
      unsigned short h[kChannels];
#pragma unroll
      for (int e = 0; e < kChannels; ++e)
        h[e] = in ? __ldg(reinterpret_cast<const unsigned short*>(src) + (long long)e * (S::kH * S::kW))
                  : (unsigned short)0;
#pragma unroll
      for (int i = 0; i < kWords; ++i) p.w[i] = h[2 * i] | (unsigned(h[2 * i + 1]) << 16);
    }
  }
  // p's chunks into the A tile at a (the stage's), swizzled; 3xTF32: their residuals into a_lo alike.
  __device__ __forceinline__ void store_a(const Pending& p, char* a, char* a_lo) const {
    const unsigned at = p.row * 128;
    const unsigned row = static_cast<unsigned>(__cvta_generic_to_shared(a)) + at;
#pragma unroll
    for (int q = 0; q < kChunks; ++q) {
      const unsigned off = ((p.chunk0 + q) ^ (p.row % 8)) * 16;
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(row + off), "r"(p.w[4 * q]),
                   "r"(p.w[4 * q + 1]), "r"(p.w[4 * q + 2]), "r"(p.w[4 * q + 3])
                   : "memory");
      if constexpr (Tile::kKind == MmaKind::F32x3) {
        unsigned lo[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) lo[i] = p.in ? __float_as_uint(tf32_residual(__uint_as_float(p.w[4 * q + i]))) : 0u;
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(static_cast<unsigned>(
                                                                      __cvta_generic_to_shared(a_lo)) + at + off),
                     "r"(lo[0]), "r"(lo[1]), "r"(lo[2]), "r"(lo[3])
                     : "memory");
      }
    }
  }
};

}  // namespace fj
