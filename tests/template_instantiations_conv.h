// tests/template_instantiations_conv.h — the conv templates' entries of
// template_instantiations.h (conv_patch.cuh and the wgmma conv mainloops and
// epilogues): file name -> code compiled after including it.
#pragma once

#include <map>
#include <string>

namespace fusejit::testing {

inline const std::map<std::string, std::string>& conv_template_instantiations() {
  static const std::map<std::string, std::string> m = {
      {"conv_patch.cuh", R"(
#include "fusejit/fj_half.cuh"
// Strided, dilated, padded, two groups of 5 input channels (16-bit: one chunk, fp32: two).
struct S {
  static constexpr int kBatch = 2, kCin = 10, kH = 13, kW = 21, kCout = 12, kKH = 3, kKW = 3, kSH = 2, kSW = 1,
                       kPH = 1, kPW = 2, kDH = 1, kDW = 2, kGroups = 2, kOH = 7, kOW = 21;
};
using Tile = fj::MmaTile<64, 16, 32, 32, 16, 2>;
template <class Kind, class T, class Pixels>
__device__ void run(const T* x, const T* w, float* y, char* smem) {
  const fj::ConvPatchMma<Tile, Kind, T, S, 4, 16> conv{x, w, 1, 0, smem};
  for (int tile = blockIdx.x; tile < Pixels::kTiles; tile += gridDim.x) {
    fj::MmaFragment<Tile> f;
    conv.template accumulate<Pixels>(tile, f);
    const fj::Pixel p = Pixels{}.pixel(tile * Tile::BM + f.row(0));
    if (p.ok) y[(p.n * 12 + 6 + f.col(0)) * 147 + p.oh * 21 + p.ow] = f.acc[0][0];
  }
}
extern "C" __global__ void k(const float* x, const float* w, const __nv_bfloat16* xb, const __nv_bfloat16* wb,
                             float* y) {
  extern __shared__ __align__(128) char smem[];
  run<fj::mma::TF32, float, fj::PatchPixels<S, 64, 4, 16>>(x, w, y, smem);
  run<fj::mma::F32x3, float, fj::PatchPoolPixels<S, 64, 4, 16, 2, 2>>(x, w, y, smem);
  run<fj::mma::BF16, __nv_bfloat16, fj::PatchPixels<S, 64, 4, 16>>(xb, wb, y, smem);
})"},
      {"conv_wgmma.cuh", R"(
#include "fusejit/epilogue.cuh"
// Padded, dilated 3x3 over patches of 2 x 64 pixels; pools of 2x2 windows in 4 x 32 patches.
struct S {
  static constexpr int kBatch = 2, kCin = 64, kH = 13, kW = 70, kCout = 96, kKH = 3, kKW = 3, kSH = 1, kSW = 1,
                       kPH = 2, kPW = 2, kDH = 2, kDW = 2, kGroups = 1, kOH = 13, kOW = 70;
};
template <class Tile, class Pixels>
__device__ void run(const fj::TmaDescriptor* a, const fj::TmaDescriptor* b, float* c, char* smem) {
  const fj::TileOrder order{Pixels::kTiles, 1, 4};
  char* ring = fj::align_smem_1024(smem);
  float* staging = reinterpret_cast<float*>(ring + Tile::kRingBytes);
  fj::wgmma_mainloop<Tile>(fj::ConvOperands<Tile, S, Pixels>{fj::GemmMaps{a, b, a, b}}, order, fj::SplitK{}, ring,
                           [&](auto& f, int m0, int n0, int) {
                             fj::tile_pointwise_staged<32, true>(f, m0, n0, Pixels::kRows, S::kCout, staging,
                                                                 [&](float v, int m, int n) {
                                                                   const fj::Pixel px = Pixels{}.pixel(m);
                                                                   if (px.ok) c[m * 96 + n] = v;
                                                                 });
                           });
}
extern "C" __global__ void __launch_bounds__(384, 1) k_bf16(const __grid_constant__ fj::TmaDescriptor a,
                                                            const __grid_constant__ fj::TmaDescriptor b, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<fj::WgmmaTile<128, 128, 4, fj::MmaKind::BF16>, fj::PatchPixels<S, 128, 2, 64>>(&a, &b, c, smem);
}
extern "C" __global__ void __launch_bounds__(384, 1) k_f32x3(const __grid_constant__ fj::TmaDescriptor a,
                                                             const __grid_constant__ fj::TmaDescriptor b, float* c) {
  extern __shared__ __align__(1024) char smem[];
  using Pool = fj::PatchPoolPixels<S, 128, 4, 32, 2, 2>;
  run<fj::WgmmaTile<128, 64, 3, fj::MmaKind::F32x3>, Pool>(&a, &b, c, smem);
  const Pool::Window w = Pool::window(128, 3);
  c[Pool::row(3, 2)] = w.ok ? w.ph + w.pw : 0;
})"},
      {"wgrad_swap_ab.cuh", R"(
#include "fusejit/epilogue.cuh"
// A tf32 dW, padded and dilated 3x3 (shifts -2, 0, 2: aligned down to -4 and 0), on a 128x128 swap-AB tile.
struct S {
  static constexpr int kBatch = 2, kCin = 64, kH = 9, kW = 68, kCout = 96, kKH = 3, kKW = 3, kSH = 1, kSW = 1,
                       kPH = 2, kPW = 2, kDH = 2, kDW = 2, kGroups = 1, kOH = 9, kOW = 68;
};
using Tile = fj::WgmmaTile<128, 128, 4, fj::MmaKind::TF32, false, false, 1, true, 144>;
extern "C" __global__ void __launch_bounds__(384, 1) k(const __grid_constant__ fj::TmaDescriptor grad,
                                                       const __grid_constant__ fj::TmaDescriptor x, float* dw) {
  extern __shared__ __align__(1024) char smem[];
  char* ring = fj::align_smem_1024(smem);
  using Ops = fj::WgradSwapOperands<Tile, S>;
  fj::wgmma_mainloop<Tile>(Ops{fj::GemmMaps{&grad, &x}}, fj::TileOrder{1, 5, 8}, fj::SplitK{}, ring,
                           [&](auto& f, int m0, int n0, int) {
                             fj::tile_pointwise(f, m0, n0, S::kCout, Ops::kColumns,
                                                [&](float v, int m, int n) { dw[m * Ops::kColumns + n] = v; });
                           });
})"},
      {"conv_wgmma_halo.cuh", R"(
#include "fusejit/epilogue.cuh"
#include "fusejit/fj_half.cuh"
// The filter resident, one halo box per patch: padded, dilated 3x3 over 2 x 64 patches (two consumers, one
// halo buffer, tf32: two channel blocks) and over 8 x 8 patches (one consumer, two buffers, bf16); halos written
// from NCHW x by the producer's threads (W 72: whole 16-byte rows; padding 2 shifts the patch in the halo row).
template <int W>
struct S {
  static constexpr int kBatch = 2, kCin = 64, kH = 13, kW = W, kCout = 96, kKH = 3, kKW = 3, kSH = 1, kSW = 1,
                       kPH = 2, kPW = 2, kDH = 2, kDW = 2, kGroups = 1, kOH = 13, kOW = W;
};
template <class Tile, class T, int W, int BH, int BW, int kBuffers, bool kNchw, int kBStages = 0>
__device__ void run(const fj::TmaDescriptor* a, const fj::TmaDescriptor* b, const T* x, float* c, char* smem) {
  using Pixels = fj::PatchPixels<S<W>, Tile::BM, BH, BW>;
  using Halo = fj::ConvHalo<Tile, S<W>, Pixels, BH, BW, kBuffers, kNchw, kBStages>;
  const fj::TileOrder order{Pixels::kTiles, (96 + Tile::BN - 1) / Tile::BN, 1};
  char* ring = fj::align_smem_1024(smem);
  float* staging = reinterpret_cast<float*>(ring + Halo::kRingBytes);
  fj::conv_halo_mainloop<Tile, Halo, T>(fj::GemmMaps{a, b}, order, ring, x, [&](auto& f, int m0, int n0, int) {
    fj::tile_pointwise_staged<32, true>(f, m0, n0, Pixels::kRows, 96, staging, [&](float v, int m, int n) {
      const fj::Pixel px = Pixels{}.pixel(m);
      if (px.ok) c[m * 96 + n] = v;
    });
  });
}
extern "C" __global__ void __launch_bounds__(384, 1) k_tf32(const __grid_constant__ fj::TmaDescriptor a,
                                                            const __grid_constant__ fj::TmaDescriptor b, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<fj::WgmmaTile<128, 64, 2, fj::MmaKind::TF32>, float, 70, 2, 64, 1, false>(&a, &b, nullptr, c, smem);
}
extern "C" __global__ void __launch_bounds__(256, 1) k_bf16(const __grid_constant__ fj::TmaDescriptor a,
                                                            const __grid_constant__ fj::TmaDescriptor b, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<fj::WgmmaTile<64, 64, 2, fj::MmaKind::BF16>, __nv_bfloat16, 70, 8, 8, 2, false>(&a, &b, nullptr, c, smem);
}
extern "C" __global__ void __launch_bounds__(384, 1) k_tf32_nchw(const __grid_constant__ fj::TmaDescriptor b,
                                                                 const float* x, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<fj::WgmmaTile<128, 64, 2, fj::MmaKind::TF32>, float, 72, 2, 64, 1, true>(nullptr, &b, x, c, smem);
}
extern "C" __global__ void __launch_bounds__(256, 1) k_bf16_nchw(const __grid_constant__ fj::TmaDescriptor b,
                                                                 const __nv_bfloat16* x, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<fj::WgmmaTile<64, 64, 2, fj::MmaKind::BF16>, __nv_bfloat16, 72, 8, 8, 2, true>(nullptr, &b, x, c, smem);
}
// The filter streamed through a 3-stage ring (conv_halo=2), from NHWC boxes (bf16) and from NCHW x (tf32).
extern "C" __global__ void __launch_bounds__(256, 1) k_bf16_stream(const __grid_constant__ fj::TmaDescriptor a,
                                                                   const __grid_constant__ fj::TmaDescriptor b, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<fj::WgmmaTile<64, 64, 2, fj::MmaKind::BF16>, __nv_bfloat16, 70, 8, 8, 2, false, 3>(&a, &b, nullptr, c, smem);
}
extern "C" __global__ void __launch_bounds__(384, 1) k_tf32_nchw_stream(const __grid_constant__ fj::TmaDescriptor b,
                                                                        const float* x, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<fj::WgmmaTile<128, 64, 2, fj::MmaKind::TF32>, float, 72, 2, 64, 2, true, 3>(nullptr, &b, x, c, smem);
}
// Ping-pong consumers on alternate patches: 64-row tiles (resident filter, TMA halos) and 128-row tiles (two
// wgmmas a k step; NCHW halos, the filter streamed).
extern "C" __global__ void __launch_bounds__(384, 1) k_bf16_pingpong(const __grid_constant__ fj::TmaDescriptor a,
                                                                     const __grid_constant__ fj::TmaDescriptor b, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<fj::WgmmaTile<64, 64, 2, fj::MmaKind::BF16, false, true>, __nv_bfloat16, 70, 8, 8, 2, false>(&a, &b, nullptr, c,
                                                                                                  smem);
}
extern "C" __global__ void __launch_bounds__(384, 1) k_f16_pingpong_nchw(const __grid_constant__ fj::TmaDescriptor b,
                                                                         const __half* x, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<fj::WgmmaTile<128, 64, 2, fj::MmaKind::F16, false, true>, __half, 72, 2, 64, 2, true, 3>(nullptr, &b, x, c, smem);
}
)"},
      {"conv_wgmma_store.cuh", R"(
#include "fusejit/fj_half.cuh"
// A tile's NCHW output from the accumulators: bf16 (stmatrix; OW 70: 4-byte runs) in 1 x 128 patches and two
// 64-channel chunks; f32 on ping-pong 64-row tiles of 8 x 8 patches, 32-channel chunks, Cout 96 of 128 columns.
struct S {
  static constexpr int kBatch = 2, kCin = 64, kH = 13, kW = 70, kCout = 96, kKH = 3, kKW = 3, kSH = 1, kSW = 1,
                       kPH = 1, kPW = 1, kDH = 1, kDW = 1, kGroups = 1, kOH = 13, kOW = 70;
};
template <class Tile, int BH, int BW, int kChunk, class T>
__device__ void run(T* out, const float* bias, char* smem, int m0, int n0) {
  using Pixels = fj::PatchPixels<S, Tile::BM, BH, BW>;
  fj::WgmmaFragment<Tile> frag;
  fj::tile_nchw_store<Pixels, kChunk>(frag, m0, n0, S::kCout, 0, out, smem,
                                      [&](float acc, int m, int n) { return acc + bias[n] + m; });
}
extern "C" __global__ void __launch_bounds__(384, 1) k_bf16(__nv_bfloat16* out, const float* bias, int m0, int n0) {
  extern __shared__ __align__(1024) char smem[];
  run<fj::WgmmaTile<128, 128, 4, fj::MmaKind::BF16>, 1, 128, 64>(out, bias, smem, m0, n0);
}
extern "C" __global__ void __launch_bounds__(384, 1) k_f32(float* out, const float* bias, int m0, int n0) {
  extern __shared__ __align__(1024) char smem[];
  run<fj::WgmmaTile<64, 128, 8, fj::MmaKind::TF32, false, true>, 8, 8, 32>(out, bias, smem, m0, n0);
}
)"},
  };
  return m;
}

}  // namespace fusejit::testing
