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

namespace fj {

// Operand loading policy of wgmma_mainloop for conv2d (stride 1, groups 1,
// Cin a multiple of BK): k-tile kt = tap * kCBlocks + cb.
template <class Tile, class S, class Patch>
struct ConvOperands {
  static_assert(S::kSH == 1 && S::kSW == 1 && S::kGroups == 1, "TMA patches: stride 1, one group");
  static_assert(S::kCin % Tile::BK == 0, "whole 128-byte channel blocks");
  static constexpr int kCBlocks = S::kCin / Tile::BK;
  GemmMaps maps;  // a: x NHWC (4-D), b: w [Cout][KH*KW*Cin]; F32x3: their residuals alike
  __device__ __forceinline__ int k_tiles() const { return S::kKH * S::kKW * kCBlocks; }
  __device__ __forceinline__ void load(const StageTiles& st, unsigned long long* bar, int kt, TileCoord c) const {
    const int tap = kt / kCBlocks, c0 = (kt % kCBlocks) * Tile::BK;
    const typename Patch::Origin o = Patch::origin(c.m);
    const int iw = o.ow + (tap % S::kKW) * S::kDW - S::kPW, ih = o.oh + (tap / S::kKW) * S::kDH - S::kPH;
    sm90::tma_load_4d(st.a, maps.a, bar, c0, iw, ih, o.n);
    sm90::tma_load_2d(st.b, maps.b, bar, kt * Tile::BK, c.n * Tile::BN);
    if constexpr (Tile::kKind == MmaKind::F32x3) {
      sm90::tma_load_4d(st.a_lo, maps.a_lo, bar, c0, iw, ih, o.n);
      sm90::tma_load_2d(st.b_lo, maps.b_lo, bar, kt * Tile::BK, c.n * Tile::BN);
    }
  }
};

}  // namespace fj
