// tests/template_instantiations.h — for templates_test.cpp: one small .cu
// body per templates/*.cuh (file name -> code compiled after including it)
// that instantiates what the header declares.
#pragma once

#include <map>
#include <string>

#include "tests/template_instantiations_conv.h"

namespace fusejit::testing {

// One instantiation per template: the template is included first, so it must
// be self-contained; the rest of the file uses what it declares.
inline const std::map<std::string, std::string>& core_template_instantiations() {
  static const std::map<std::string, std::string> m = {
      {"fj_common.cuh", R"(
extern "C" __global__ void k(const float* x, float* y) {
  float v = fj::load_as_float(x, threadIdx.x);
  v = fj::max_nan(v, fj::min_nan(v, fj::inf())) + fj::neg_inf() * 0.f + (fj::is_nan(v) ? fj::quiet_nan() : 0.f);
  fj::store_from_float(y, threadIdx.x, v + fj::ceil_div(7, 2));
})"},
      {"fj_half.cuh", R"(
extern "C" __global__ void k(const __half* a, const __nv_bfloat16* b, __half* c, __nv_bfloat16* d) {
  const float v = fj::load_as_float(a, threadIdx.x) + fj::load_as_float(b, threadIdx.x);
  fj::store_from_float(c, threadIdx.x, v);
  fj::store_from_float(d, threadIdx.x, v);
})"},
      {"fj_ops.cuh", R"(
extern "C" __global__ void k(const float* x, float* y) {
  using namespace fj::op;
  const float a = x[threadIdx.x], b = x[threadIdx.x + 1];
  y[threadIdx.x] = relu(a) + leaky_relu(a, 0.1f) + gelu_erf(a) + gelu_tanh(a) + sigmoid(a) + tanh_(a) + silu(a) +
                   mish(a) + softplus(a, 1.f, 20.f) + hardswish(a) + hardsigmoid(a) + hardtanh(a, -1.f, 1.f) +
                   elu(a, 1.f) + exp_(a) + log_(a) + abs_(a) + neg(a) + sqrt_(a) + rsqrt_(a) + square(a) +
                   clamp(a, -fj::inf(), 1.f) + add(a, b) + sub(a, b) + mul(a, b) + div(a, b) + minimum(a, b) +
                   maximum(a, b) + pow_(a, b);
})"},
      {"gemm_simt.cuh", R"(
using Tile = fj::SimtTile<64, 32, 8, 4, 4, false>;
extern "C" __global__ void __launch_bounds__(Tile::kThreads) k(const float* a, const float* w, const float* b, float* c) {
  __shared__ __align__(16) float smem[Tile::kSmemFloats];
  fj::SimtFragment<Tile> f1(threadIdx.x), f2(threadIdx.x);
  fj::simt_mainloop<Tile>(fj::RowMajorA<float, 100, 37, 37>{a}, fj::NKMajorB<float, 45, 37, 37>{w}, 64, 32, 37, f1, smem);
  fj::simt_mainloop<Tile>(fj::RowMajorA<float, 100, 37, 37>{a}, fj::KNMajorB<float, 45, 37, 45>{b}, 64, 32, 37, f2, smem);
  for (int i = 0; i < f1.kRows; ++i)
    for (int j = 0; j < f1.kCols; ++j) c[f1.row(i) * 32 + f1.col(j)] = f1.acc[i][j] + f2.pick(i / f2.kRowUnroll, i % f2.kRowUnroll, j) * f1.row_sharer();
})"},
      {"split_k.cuh", R"(
#include "fusejit/gemm_simt.cuh"
using Tile = fj::SimtTile<32, 32, 32, 4, 4, false>;
extern "C" __global__ void __launch_bounds__(Tile::kThreads) k(const float* a, const float* w, float* partials,
                                                               int* counters, float* c) {
  __shared__ __align__(16) float smem[Tile::kSmemFloats];
  fj::SimtFragment<Tile> f(threadIdx.x);
  const int split = blockIdx.z;  // three K ranges of 64 (the last one ragged: K = 150)
  fj::simt_mainloop<Tile>(fj::RowMajorA<float, 40, 150, 150>{a}, fj::NKMajorB<float, 45, 150, 150>{w}, 0, 0,
                          split * 64, min(150, (split + 1) * 64), f, smem);
  if (!fj::split_k_gather<3>(f, partials, counters, blockIdx.x, split, reinterpret_cast<char*>(smem))) return;
  for (int i = 0; i < f.kRows; ++i)
    for (int j = 0; j < f.kCols; ++j) c[f.row(i) * 32 + f.col(j)] = f.acc[i][j];
})"},
      {"cp_async.cuh", R"(
extern "C" __global__ void k(const float* x, float* y) {
  __shared__ __align__(16) float s[8];
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(s));
  if (threadIdx.x == 0) fj::cp_async16(dst, x, 16), fj::cp_async4(dst + 16, x + 4, 4);
  fj::cp_async_commit();
  fj::cp_async_wait<0>();
  __syncthreads();
  y[threadIdx.x] = s[threadIdx.x % 5];
})"},
      {"gemm_gemv.cuh", R"(
#include "fusejit/split_k.cuh"
using Rows = fj::GemvTile<3, 128, 16, 3, 1, 3, true>;    // 3 rows, one k group, W [N, K]
using Groups = fj::GemvTile<20, 64, 64, 5, 2, 4, false>; // 4 k groups, B [K, N]
extern "C" __global__ void __launch_bounds__(128) k(const float* a, const float* w, const float* b, float* partials,
                                                    int* counters, float* c) {
  extern __shared__ __align__(16) float smem[];
  fj::GemvFragment<Rows> f1(threadIdx.x);
  fj::GemvFragment<Groups> f2(threadIdx.x);
  fj::simt_mainloop<Rows>(fj::RowMajorA<float, 3, 1000, 1000>{a}, fj::NKMajorB<float, 70, 1000, 1000>{w}, 0, 0,
                          blockIdx.z * 512, min(1000, (int)(blockIdx.z + 1) * 512), f1, smem);
  fj::simt_mainloop<Groups>(fj::RowMajorA<float, 17, 300, 300>{a}, fj::KNMajorB<float, 52, 300, 52>{b}, 0, 0, 300,
                            f2, smem);
  if (!fj::split_k_gather<2>(f1, partials, counters, 0, blockIdx.z, reinterpret_cast<char*>(smem))) return;
  f2.set(0, 1, 0, f2.pick(0, 1, 0) + 1.f);
  for (int i = 0; i < f1.kRows; ++i)
    for (int j = 0; j < f1.kCols; ++j) c[f1.row(i) * 128 + f1.col(j)] = f1.acc[i][j];
  for (int i = 0; i < f2.kRows; ++i)
    for (int j = 0; j < f2.kCols; ++j) c[f2.row(i) * 64 + f2.col(j)] += f2.acc[i][j] * f2.row_sharer();
})"},
      {"gemm_mma.cuh", R"(
#include "fusejit/fj_half.cuh"
using Tile = fj::MmaTile<64, 64, 32, 32, 32, 3>;
template <class Kind, class A, class B>
__device__ void run(const A& a, const B& b, int m0, int K, float* c, char* smem) {
  fj::MmaFragment<Tile> f;
  fj::mma_mainloop<Tile, Kind>(a, b, m0, 0, K, f, smem);
  f.set(0, 1, 0, f.pick(0, 1, 0) + 1.f);
  for (int i = 0; i < f.kRows; ++i)
    for (int j = 0; j < f.kCols; ++j)
      c[(m0 + f.row(i)) * 64 + f.col(j)] += f.acc[i][j] + f.pick(i / f.kRowUnroll, i % f.kRowUnroll, j) * f.row_sharer();
  f.sync();
}
using bf16 = __nv_bfloat16;
extern "C" __global__ void __launch_bounds__(Tile::kThreads) k(const bf16* x, const __half* h, const float* s, float* c) {
  extern __shared__ __align__(128) char smem[];
  using namespace fj;
  // ragged (element-wise / 4-byte copies) and aligned (16-byte cp.async), both B layouts, every kind
  run<mma::BF16>(MmaRowMajorA<bf16, 100, 37, 37>{x}, MmaNKMajorB<bf16, 45, 37, 37>{x}, 64, 37, c, smem);
  run<mma::BF16>(MmaRowMajorA<bf16, 128, 64, 64>{x}, MmaKNMajorB<bf16, 64, 64, 64>{x}, 0, 64, c, smem);
  run<mma::F16>(MmaRowMajorA<__half, 100, 38, 38>{h}, MmaKNMajorB<__half, 45, 38, 45>{h}, 64, 38, c, smem);
  run<mma::F16>(MmaRowMajorA<__half, 128, 64, 64>{h}, MmaNKMajorB<__half, 64, 64, 64>{h}, 0, 64, c, smem);
  run<mma::TF32>(MmaRowMajorA<float, 100, 37, 37>{s}, MmaNKMajorB<float, 45, 37, 37>{s}, 64, 37, c, smem);
  run<mma::TF32>(MmaRowMajorA<float, 128, 64, 64>{s}, MmaKNMajorB<float, 64, 64, 64>{s}, 0, 64, c, smem);
  run<mma::F32x3>(MmaRowMajorA<float, 100, 37, 37>{s}, MmaKNMajorB<float, 45, 37, 45>{s}, 64, 37, c, smem);
  run<mma::F32x3>(MmaRowMajorA<float, 128, 64, 64>{s}, MmaNKMajorB<float, 64, 64, 64>{s}, 0, 64, c, smem);
  c[0] += Tile::smem_bytes(mma::F32x3::kElemBytes, true) + MmaFragment<Tile>::kThreads;
})"},
      {"conv_simt.cuh", R"(
#include "fusejit/gemm_simt.cuh"
struct S {
  static constexpr int kBatch = 2, kCin = 4, kH = 13, kW = 11, kCout = 6, kKH = 3, kKW = 3, kSH = 1, kSW = 2,
                       kPH = 1, kPW = 0, kDH = 2, kDW = 1, kGroups = 2, kOH = 11, kOW = 5;
};
using Tile = fj::SimtTile<32, 8, 8, 2, 1, true>;
template <class Pixels>
__device__ void run(const float* x, const float* w, float* y, float* smem) {
  fj::SimtFragment<Tile> f(threadIdx.x);
  const fj::ConvA<float, S, Pixels> a{x, Pixels{}, 2};
  fj::simt_mainloop<Tile>(a, fj::NKMajorB<float, 3, a.K, a.K>{w}, 0, 0, a.K, f, smem);
  const fj::Pixel p = Pixels{}.pixel(f.row(0));
  if (p.ok) y[(p.n * 6 + f.col(0)) * 55 + p.oh * 5 + p.ow] = f.acc[0][0];
}
extern "C" __global__ void k(const float* x, const float* w, float* y) {
  __shared__ __align__(16) float smem[Tile::kSmemFloats];
  run<fj::DensePixels<S>>(x, w, y, smem);
  run<fj::PoolTiledPixels<S, 32, 2, 2, 2>>(x, w, y, smem);
  const auto win = fj::PoolTiledPixels<S, 32, 2, 2, 2>::window(32, 1);
  y[0] += win.ok ? win.n + win.ph + win.pw + fj::PoolTiledPixels<S, 32, 2, 2, 2>::row(1, 3) : 0;
})"},
      {"conv_mma.cuh", R"(
#include "fusejit/fj_half.cuh"
struct S {
  static constexpr int kBatch = 2, kCin = 4, kH = 13, kW = 11, kCout = 6, kKH = 3, kKW = 3, kSH = 1, kSW = 2,
                       kPH = 1, kPW = 0, kDH = 2, kDW = 1, kGroups = 2, kOH = 11, kOW = 5;
};
using Tile = fj::MmaTile<64, 16, 32, 32, 16, 2>;  // 2 warps: rows 32 at a time
using Tile16 = fj::MmaTile<128, 64, 64, 64, 16, 3>;  // 8 warps, 16-bit: two threads per row
template <class Kind, class T, class Tl, class Pixels>
__device__ void run(const T* x, const T* w, float* y, char* smem) {
  fj::MmaFragment<Tl> f;
  const fj::MmaConvA<T, S, Pixels> a{{x, Pixels{}, 2}};
  fj::mma_mainloop<Tl, Kind>(a, fj::MmaNKMajorB<T, 3, a.K, a.K>{w}, 0, 0, a.K, f, smem);
  const fj::Pixel p = Pixels{}.pixel(f.row(0));
  if (p.ok) y[(p.n * 6 + f.col(0)) * 55 + p.oh * 5 + p.ow] = f.acc[0][0];
}
extern "C" __global__ void k(const float* x, const float* w, const __nv_bfloat16* xb, const __nv_bfloat16* wb,
                             float* y) {
  extern __shared__ __align__(128) char smem[];
  run<fj::mma::TF32, float, Tile, fj::DensePixels<S>>(x, w, y, smem);
  run<fj::mma::F32x3, float, Tile, fj::PoolTiledPixels<S, 64, 2, 2, 2>>(x, w, y, smem);
  run<fj::mma::BF16, __nv_bfloat16, Tile16, fj::DensePixels<S>>(xb, wb, y, smem);
})"},
      {"conv_wgrad.cuh", R"(
#include "fusejit/fj_half.cuh"
#include "fusejit/gemm_simt.cuh"
struct S {  // conv_simt.cuh's shape: M = 3, N = 18, K = 110 per group; padded, strided, dilated
  static constexpr int kBatch = 2, kCin = 4, kH = 13, kW = 11, kCout = 6, kKH = 3, kKW = 3, kSH = 1, kSW = 2,
                       kPH = 1, kPW = 0, kDH = 2, kDW = 1, kGroups = 2, kOH = 11, kOW = 5;
};
using D = fj::WgradDims<S>;
using Tile = fj::MmaTile<64, 16, 32, 32, 16, 2>;
using Tile16 = fj::MmaTile<128, 64, 64, 64, 16, 3>;
using STile = fj::SimtTile<32, 8, 8, 2, 1, true>;
template <class Kind, class T, class Tl>
__device__ void run(const T* x, const T* g, float* dw, char* smem) {
  fj::MmaFragment<Tl> f;
  fj::mma_mainloop<Tl, Kind>(fj::MmaWgradGrad<T, S>{g}, fj::MmaWgradCols<T, S>{x}, 0, 0, 0, D::K, f, smem);
  dw[threadIdx.x] += f.acc[0][0];
}
extern "C" __global__ void k(const float* x, const float* g, const __nv_bfloat16* xb, const __nv_bfloat16* gb,
                             float* dw) {
  extern __shared__ __align__(128) char smem[];
  run<fj::mma::TF32, float, Tile>(x, g, dw, smem);
  run<fj::mma::F32x3, float, Tile>(x, g, dw, smem);
  run<fj::mma::BF16, __nv_bfloat16, Tile16>(xb, gb, dw, smem);
  fj::SimtFragment<STile> s(threadIdx.x);
  fj::simt_mainloop<STile>(fj::WgradGrad<float, S>{g}, fj::WgradCols<float, S>{x}, 0, 0, D::K, s,
                           reinterpret_cast<float*>(smem));
  if (s.row(0) < D::M && s.col(0) < D::N) dw[s.row(0) * D::N + s.col(0)] = s.acc[0][0];
})"},
      {"epilogue.cuh", R"(
#include "fusejit/conv_simt.cuh"
#include "fusejit/gemm_simt.cuh"
using Tile = fj::SimtTile<64, 64, 8, 4, 4, true>;
struct S {
  static constexpr int kBatch = 2, kCin = 3, kH = 17, kW = 17, kCout = 64, kKH = 3, kKW = 3, kSH = 1, kSW = 1,
                       kPH = 0, kPW = 0, kDH = 1, kDW = 1, kGroups = 1, kOH = 15, kOW = 15;
};
using Pixels = fj::PoolTiledPixels<S, 64, 3, 3, 5>;
extern "C" __global__ void k(const float* a, const float* w, float* c, float* r) {
  __shared__ __align__(16) float smem[(Tile::kThreadsN + 2) * 64 + Tile::kSmemFloats];
  fj::SimtFragment<Tile> f(threadIdx.x);
  fj::simt_mainloop<Tile>(fj::RowMajorA<float, 70, 9, 9>{a}, fj::NKMajorB<float, 40, 9, 9>{w}, 0, 0, 9, f, smem);
  fj::tile_pointwise(f, 0, 0, 70, 40, [&](float v, int m, int n) { c[m * 40 + n] = v; });
  fj::tile_row_reduce<fj::SumOp, 64, Tile::kThreads>(f, 0, 70, 40, smem, [](float v, int, int) { return v; },
                                                     [&](float v, int m) { r[m] = v; });
  fj::tile_row_reduce<fj::LogSumExpOp, 64, Tile::kThreads>(f, 0, 70, 40, smem, [](float v, int, int) { return v; },
                                                           [&](float v, int m) { r[m] += v; });
  fj::tile_pool<Pixels, 9, 5, true, 64, 64, Tile::kThreads, 16>(
      f, 0, 0, 40, smem, [](float v, int m, int) { return Pixels{}.pixel(m).ok ? v : 0.f; },
      [&](float v, int m0, int w, int n) { if (Pixels::window(m0, w).ok) c[n + w] = v; });
})"},
      {"wgmma_fragment.cuh", R"(
// The fragment of a 128x64 cooperative tile and a 128-row ping-pong one: coordinates, pick / set, staging, sync.
struct Coop {
  static constexpr int BM = 128, BN = 64, kMHalves = 1, kTileThreads = 256;
  static constexpr bool kPingPong = false;
};
struct PingPong {
  static constexpr int BM = 128, BN = 64, kMHalves = 2, kTileThreads = 128;
  static constexpr bool kPingPong = true;
};
template <class Tile>
__device__ void run(float* out, float* smem) {
  fj::WgmmaFragment<Tile> f;
  f.set(0, 1, 3, 2.f);
  f.template stage_cols<0, 64>(smem, 72);
  fj::WgmmaFragment<Tile>::sync();
  out[f.row(1) * 64 + f.col(3)] = f.pick(0, 1, 3) + f.half(0)[1][3] + smem[f.thread()];
}
extern "C" __global__ void k(float* out) {
  __shared__ float smem[128 * 72];
  run<Coop>(out, smem);
  run<PingPong>(out, smem);
})"},
      {"epilogue_pool1d.cuh", R"(
#include "fusejit/gemm_simt.cuh"
// Two pools of one value on column tiles 61 apart (overlap 3), 16-column chunks.
using Tile = fj::SimtTile<64, 64, 8, 4, 4, true>;
struct MaxWin {
  static constexpr int kW = 200, kKW = 4, kSW = 2, kPW = 1, kDW = 1, kWOut = 100;
};
struct AvgWin {
  static constexpr int kW = 200, kKW = 3, kSW = 2, kPW = 1, kDW = 1, kWOut = 100;
};
extern "C" __global__ void k(const float* a, const float* w, float* c, float* d) {
  __shared__ __align__(16) float smem[Tile::kSmemFloats > fj::pool1d_halo_floats(64, 16, 3) ? Tile::kSmemFloats
                                                                                     : fj::pool1d_halo_floats(64, 16, 3)];
  fj::SimtFragment<Tile> f(threadIdx.x);
  const int n0 = blockIdx.y * 61;
  fj::simt_mainloop<Tile>(fj::RowMajorA<float, 70, 9, 9>{a}, fj::NKMajorB<float, 200, 9, 9>{w}, 0, n0, 9, f, smem);
  fj::tile_pool1d_halo<61, 16, 3>(
      f, 0, n0, 70, 200, smem, [](float v, int, int) { return v * 2.f; },
      fj::pool1d_output<MaxWin, true, false>([&](float v, int m, int j) { c[m * 100 + j] = v; }),
      fj::pool1d_output<AvgWin, false, false>([&](float v, int m, int j) { d[m * 100 + j] = v; }));
})"},
      {"reduce.cuh", R"(
template <int G, class Op>
__device__ void red(const float* x, float* y) {
  fj::reduce_rows<G, 256, Op>(
      100, 37, [](long long o) { return o * 37; }, [&](long long b, int r) { return x[b + r]; },
      [&](long long o, float v) { y[o] = v; });
}
extern "C" __global__ void k(const float* x, float* y) {
  red<1, fj::SumOp>(x, y);
  red<8, fj::MaxOp>(x, y);
  red<32, fj::MinOp>(x, y);
  red<256, fj::LogSumExpOp>(x, y);
  fj::reduce_columns<16, fj::SumOp>(
      40, 37, [](long long o) { return o / 40 * 40 * 37 + o % 40; }, [&](long long b, int r) { return x[b + r * 40]; },
      [&](long long o, float v) { y[o] = v; });
  fj::softmax_rows<16, 256, true>(
      100, 37, [](long long o) { return o * 37; }, [&](long long b, int r) { return x[b + r]; },
      [&](long long, long long b, int r, float v) { y[b + r] = v; });
})"},
      {"wgmma_ops.cuh", R"(
template <int N>
using Acc = float[2][N / 4];
extern "C" __global__ void k(float* c, unsigned long long a, unsigned long long b) {
  using namespace fj::sm90;
  Acc<64> x{};
  Acc<128> y{};
  Acc<256> z{};
  mma_bf16_m64n64<0>(x, a, b), mma_bf16_m64n128<1>(y, a, b), mma_bf16_m64n256<0>(z, a, b, 0);
  mma_f16_m64n64<1>(x, a, b), mma_f16_m64n128<0>(y, a, b), mma_f16_m64n256<1>(z, a, b);
  mma_tf32_m64n64(x, a, b), mma_tf32_m64n128(y, a, b, 0), mma_tf32_m64n256(z, a, b);
  c[threadIdx.x] = x[0][threadIdx.x % 16] + y[1][threadIdx.x % 32] + z[0][threadIdx.x % 64];
})"},
      {"gemm_wgmma.cuh", R"(
#include "fusejit/epilogue.cuh"
// Every kind and both consumer counts, split-K from tile 4 in 3 ranges; the
// epilogue stores the fragment directly or staged through shared memory.
template <class Tile>
__device__ void run(const fj::TmaDescriptor* a, const fj::TmaDescriptor* b, float* c, char* smem) {
  const fj::TileOrder order{3, 5, 2};
  char* ring = fj::align_smem_1024(smem);
  float* staging = reinterpret_cast<float*>(ring + Tile::kRingBytes);
  const fj::SplitK split{4, 3, c + 4096, reinterpret_cast<int*>(c + 2048)};
  fj::wgmma_gemm<Tile>(fj::GemmMaps{a, b, a, b}, 100, order, split, ring, [&](auto& f, int m0, int n0, int) {
    for (int i = 0; i < f.kRows; ++i)
      for (int j = 0; j < f.kCols; ++j) c[(m0 + f.row(i)) * 1000 + n0 + f.col(j)] = f.pick(0, i, j) + f.thread();
    f.sync();
    constexpr int kChunk = Tile::BN == 64 ? 16 : Tile::BN % 32 ? 24 : 32;  // (168 wide: 24)
    fj::tile_pointwise_staged<kChunk>(f, m0, n0, 300, 500, staging,
                                      [&](float v, int m, int n) { c[m * 1000 + n] += v; });
    if constexpr (Tile::kSwapAB)  // swap-AB tiles: also stored from registers
      fj::tile_pointwise(f, m0, n0, 300, 500, [&](float v, int m, int n) { c[m * 1000 + n] -= v; });
  });
}
#define KERNEL(name, ...)                                                                                        \
  extern "C" __global__ void __launch_bounds__(__VA_ARGS__::kThreads, 1)                                        \
      name(const __grid_constant__ fj::TmaDescriptor a, const __grid_constant__ fj::TmaDescriptor b, float* c) { \
    extern __shared__ __align__(1024) char smem[];                                                              \
    run<__VA_ARGS__>(&a, &b, c, smem);                                                                         \
  }
KERNEL(k_bf16, fj::WgmmaTile<128, 256, 4, fj::MmaKind::BF16>)
KERNEL(k_f16, fj::WgmmaTile<64, 64, 8, fj::MmaKind::F16>)
KERNEL(k_bf16_168, fj::WgmmaTile<128, 168, 4, fj::MmaKind::BF16>)
KERNEL(k_tf32, fj::WgmmaTile<128, 128, 3, fj::MmaKind::TF32>)
KERNEL(k_f32x3, fj::WgmmaTile<128, 128, 3, fj::MmaKind::F32x3>)
KERNEL(k_f32x3_64, fj::WgmmaTile<64, 64, 2, fj::MmaKind::F32x3>)
KERNEL(k_tf32_swap, fj::WgmmaTile<256, 128, 4, fj::MmaKind::TF32, false, false, 1, true>)
KERNEL(k_tf32_swap_64, fj::WgmmaTile<176, 64, 4, fj::MmaKind::TF32, false, false, 1, true>)
KERNEL(k_f32x3_swap, fj::WgmmaTile<128, 128, 3, fj::MmaKind::F32x3, false, false, 1, true>)
)"},
      {"epilogue_norm.cuh", R"(
#include "fusejit/gemm_wgmma.cuh"
// Groups of 64 columns (a 256-wide cooperative tile: 4 a row) and of 32 (a 64-row ping-pong tile 128 wide), N 384.
template <class Tile, int kSeg>
__device__ void run(const fj::TmaDescriptor* a, const fj::TmaDescriptor* b, float* c, char* smem) {
  char* ring = fj::align_smem_1024(smem);
  float* staging = reinterpret_cast<float*>(ring + Tile::kRingBytes);
  fj::wgmma_gemm<Tile>(fj::GemmMaps{a, b}, 100, fj::TileOrder{3, 2, 2}, fj::SplitK{}, ring, [&](auto& f, int m0, int n0, int) {
    fj::tile_segment_norm<kSeg, 32>(f, m0, n0, 300, 384, 1e-5f, staging, [&](float v, int, int n) { return v + n; },
                                    [&](float v, int m, int n) { c[m * 384 + n] = v; });
  });
}
using Wide = fj::WgmmaTile<128, 256, 4, fj::MmaKind::BF16>;
using PingPong = fj::WgmmaTile<64, 128, 6, fj::MmaKind::BF16, false, true>;
extern "C" __global__ void __launch_bounds__(Wide::kThreads, 1)
    k(const __grid_constant__ fj::TmaDescriptor a, const __grid_constant__ fj::TmaDescriptor b, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<Wide, 64>(&a, &b, c, smem);
}
extern "C" __global__ void __launch_bounds__(PingPong::kThreads, 1)
    k2(const __grid_constant__ fj::TmaDescriptor a, const __grid_constant__ fj::TmaDescriptor b, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<PingPong, 32>(&a, &b, c, smem);
})"},
      {"epilogue_staged.cuh", R"(
#include "fusejit/gemm_wgmma.cuh"
// One element and two adjacent columns a call, on a 168-wide tile (chunks of 56, which do not divide the 256
// consumer threads: stepped) and a 64-row ping-pong one.
template <class Tile>
__device__ void run(const fj::TmaDescriptor* a, const fj::TmaDescriptor* b, float* c, char* smem) {
  char* ring = fj::align_smem_1024(smem);
  float* staging = reinterpret_cast<float*>(ring + Tile::kRingBytes);
  fj::wgmma_gemm<Tile>(fj::GemmMaps{a, b}, 100, fj::TileOrder{3, 5, 2}, fj::SplitK{}, ring, [&](auto& f, int m0, int n0, int) {
    fj::tile_pointwise_staged<56>(f, m0, n0, 300, 500, staging, [&](float v, int m, int n) { c[m * 1000 + n] += v; });
    fj::tile_pointwise_staged_pairs<56>(
        f, m0, n0, 300, 500, staging, fj::aligned_to<8>(c),
        [&](float u, float v, int m, int n) { fj::store_pair_from_float(c, m * 1000 + n, u, v); },
        [&](float v, int m, int n) { c[m * 1000 + n] = v; });
  });
}
using Wide = fj::WgmmaTile<128, 168, 4, fj::MmaKind::BF16>;
using PingPong = fj::WgmmaTile<64, 168, 6, fj::MmaKind::BF16, false, true>;
extern "C" __global__ void __launch_bounds__(Wide::kThreads, 1)
    k(const __grid_constant__ fj::TmaDescriptor a, const __grid_constant__ fj::TmaDescriptor b, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<Wide>(&a, &b, c, smem);
}
extern "C" __global__ void __launch_bounds__(PingPong::kThreads, 1)
    k_pp(const __grid_constant__ fj::TmaDescriptor a, const __grid_constant__ fj::TmaDescriptor b, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<PingPong>(&a, &b, c, smem);
}
)"},
      {"wgmma_sm90.cuh", R"(
// The primitives, each issued once: mbarriers, a TMA load and store, a fence,
// the descriptors and one wgmma of each kind.
extern "C" __global__ void k(const __grid_constant__ fj::TmaDescriptor map, float* out) {
  __shared__ __align__(1024) char tile[8192];
  __shared__ __align__(8) unsigned long long bar;
  if (threadIdx.x == 0) {
    fj::sm90::mbar_init(&bar, 1);
    fj::sm90::mbar_expect_tx(&bar, 4096);
    fj::sm90::tma_load_2d(tile, &map, &bar, 0, 0);
  }
  fj::sm90::mbar_wait(&bar, 0);
  float acc[2][32] = {};
  const unsigned long long a = fj::sm90::sw128_desc(tile), b = fj::sm90::sw128_desc_n_major(tile, 4096);
  fj::sm90::wgmma_fence();
  fj::sm90::mma<fj::MmaKind::BF16, 128, 1>(acc, a, b);
  fj::sm90::mma<fj::MmaKind::TF32, 128>(acc, a, b, 0);
  fj::sm90::wgmma_commit();
  fj::sm90::wgmma_wait<0>();
  if (threadIdx.x == 0) fj::sm90::tma_store_2d(&map, tile, 0, 0);
  out[threadIdx.x] = acc[1][threadIdx.x % 32] + fj::sm90::cluster_rank();
})"},
      {"wgmma_swap_ab.cuh", R"(
// The register operand's loads from a swizzled box, one wgmma of each width,
// and the fragment's output coordinates.
template <int BM>
__device__ void one(const char* box, unsigned long long b, float* out) {
  unsigned a[4][4];
  fj::swap_ab_load_a(a, box, 8 * (threadIdx.x / 32 % 2) + fj::swap_ab_lane_col(threadIdx.x % 32 / 4), threadIdx.x % 4);
  float acc[BM / 4][2] = {};
  fj::sm90::mma_tf32_rs<BM>(acc, a[threadIdx.x % 4], b);
  out[threadIdx.x] = acc[threadIdx.x % (BM / 4)][1];
}
struct Tile {
  static constexpr int BM = 128, BN = 64, kConsumerThreads = 128;
};
extern "C" __global__ void k(float* out, unsigned long long b) {
  __shared__ __align__(1024) char box[4096];
  one<64>(box, b, out);
  one<128>(box, b, out);
  one<176>(box, b, out);
  one<192>(box, b, out);
  one<256>(box, b, out);
  fj::WgmmaSwapFragment<Tile> f;
  out[f.row(3) * 64 + f.col(1)] = f.pick(0, 3, 1);
})"},
      {"wgmma_schedule.cuh", R"(
// Split-K's units and gather over a stand-in fragment of 128 threads.
struct Frag {
  static constexpr int kRows = 2, kCols = 8, kThreads = 128;
  float acc[kRows][kCols];
  __device__ int thread() const { return threadIdx.x % 128; }
  static __device__ void sync() { asm volatile("bar.sync 1, 128;" ::: "memory"); }
};
extern "C" __global__ void k(float* partials, int* counters, float* out) {
  __shared__ int arrived;
  const fj::WgmmaWork work{fj::TileOrder{3, 5, 2}, fj::SplitK{6, 4, partials, counters}, 13};
  for (int u = blockIdx.x; u < work.count(); u += gridDim.x) {
    const fj::WorkUnit w = work.unit(u);
    Frag f{};
    f.acc[0][0] = w.kt1 - w.kt0;
    if (w.range >= 0 && !fj::split_k_gather(f, work.split, w, &arrived)) continue;
    const fj::TileCoord c = work.order.at(w.tile);
    out[(c.m * 5 + c.n) * 128 + f.thread()] = f.acc[0][0] + f.acc[1][7];
  }
})"},
      {"wgmma_tma_store.cuh", R"(
// One output by pairs and one by elements, from ping-pong and cooperative fragments.
template <class Tile, class T>
__device__ void run(const fj::TmaDescriptor* o, T* slots, float* bias, char* smem) {
  char* ring = fj::align_smem_1024(smem);
  fj::wgmma_gemm<Tile>(fj::GemmMaps{o, o}, 100, fj::TileOrder{3, 5, 2}, fj::SplitK{}, ring,
                       [&](auto& f, int m0, int n0, int) {
    auto store = [&](int slot, int c0) { fj::sm90::tma_store_2d(o, slots + slot * 4096, n0 + c0, m0); };
    fj::tile_pointwise_tma_pairs<sizeof(T)>(f, m0, n0, 300, 500, slots, 4096,
                                            [&](float v, int, int n) { return v + bias[n]; }, store);
    fj::tile_pointwise_tma<sizeof(T)>(f, m0, n0, 300, 500, [&](float v, int, int, int slot, int at) {
      slots[slot * 4096 + at] = T(v);
    }, store);
  });
  fj::tma_store_drain();
}
extern "C" __global__ void __launch_bounds__(384, 1) k(const __grid_constant__ fj::TmaDescriptor o, float* bias) {
  extern __shared__ __align__(1024) char smem[];
  __shared__ __align__(128) float slots[2 * 4096];
  run<fj::WgmmaTile<128, 128, 3, fj::MmaKind::BF16, false, true>>(&o, slots, bias, smem);
  run<fj::WgmmaTile<128, 256, 3, fj::MmaKind::TF32>>(&o, slots, bias, smem);
})"},
      {"cluster_sm90.cuh", R"(
// Each block of a cluster of 2 reads its peer's shared float after the cluster barrier.
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(float* out) {
  __shared__ float x[32];
  x[threadIdx.x % 32] = threadIdx.x + blockIdx.x;
  fj::sm90::cluster_sync();
  out[blockIdx.x * blockDim.x + threadIdx.x] = fj::sm90::ld_shared_cluster(&x[threadIdx.x % 32], fj::sm90::cluster_rank() ^ 1u);
  fj::sm90::cluster_sync();
})"},
      {"conv_spatial_cluster.cuh", R"(
#include "fusejit/reduce.cuh"
// Per-channel folds of a cluster of 8 blocks combined by block 0: a sum and a max.
template <class Op>
__device__ void run(float* out, float x) {
  float* fold = fj::begin_column_fold<Op, 16>();
  __syncthreads();
  for (int c = threadIdx.x; c < 16; c += blockDim.x) fold[c] = Op::combine(fold[c], x * c);
  fj::finish_column_fold<Op, 16, 8>(fold, 0, 12, [&](float v, int n) { out[n] = v; });
}
extern "C" __global__ void __cluster_dims__(8, 1, 1) k(float* out, float x) {
  run<fj::SumOp>(out, x);
  run<fj::MaxOp>(out + 16, x);
})"},
      {"wgmma_row_cluster.cuh", R"(
#include "fusejit/reduce.cuh"
// Rows reduced across clusters of 4 column tiles (sum, then max as a mean-less op), broadcast back; and the
// one-tile form (tile_row_broadcast, epilogue.cuh) on a cluster-free tile.
template <class Tile, class Op>
__device__ void run(const fj::TmaDescriptor* a, const fj::TmaDescriptor* b, float* c, char* smem) {
  char* ring = fj::align_smem_1024(smem);
  float* epi = reinterpret_cast<float*>(ring + Tile::kRingBytes);
  int round = 0;
  fj::wgmma_gemm<Tile>(fj::GemmMaps{a, b, a, b}, 100, fj::TileOrder{3, 4, 2}, fj::SplitK{}, ring,
                       [&](auto& f, int m0, int n0, int) {
    fj::tile_row_broadcast_cluster<Op, true, 32, Tile::BM, Tile::kConsumerThreads, Tile::kClusterN>(
        f, m0, n0, 300, 500, epi, round, [&](float v, int, int) { return v; },
        [&](float v, int m, bool store) {
          if (store) c[m] = v;
          return v * 0.5f;
        },
        [&](float v, float r, int m, int n) { c[m * 1000 + n] = v - r; });
  });
}
template <class Tile>
__device__ void run_tile(const fj::TmaDescriptor* a, const fj::TmaDescriptor* b, float* c, char* smem) {
  char* ring = fj::align_smem_1024(smem);
  float* epi = reinterpret_cast<float*>(ring + Tile::kRingBytes);
  fj::wgmma_gemm<Tile>(fj::GemmMaps{a, b}, 100, fj::TileOrder{3, 1, 2}, fj::SplitK{}, ring,
                       [&](auto& f, int m0, int, int) {
    fj::tile_row_broadcast<fj::MaxOp, false, 32, Tile::BM, Tile::kConsumerThreads>(
        f, m0, 300, 100, epi, [&](float v, int, int) { return v; },
        [&](float v, int m, bool) {
          c[m] = v;
          return v;
        },
        [&](float v, float r, int m, int n) { c[m * 1000 + n] = v - r; });
  });
}
using Cluster = fj::WgmmaTile<128, 128, 3, fj::MmaKind::BF16, false, false, 1, false, 128, 0, 4>;
using Cluster3 = fj::WgmmaTile<64, 64, 3, fj::MmaKind::F32x3, false, false, 1, false, 128, 0, 8>;
extern "C" __global__ void __launch_bounds__(Cluster::kThreads, 1) __cluster_dims__(4, 1, 1)
    k(const __grid_constant__ fj::TmaDescriptor a, const __grid_constant__ fj::TmaDescriptor b, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<Cluster, fj::SumOp>(&a, &b, c, smem);
}
extern "C" __global__ void __launch_bounds__(Cluster3::kThreads, 1) __cluster_dims__(8, 1, 1)
    k3(const __grid_constant__ fj::TmaDescriptor a, const __grid_constant__ fj::TmaDescriptor b, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run<Cluster3, fj::MinOp>(&a, &b, c, smem);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    k1(const __grid_constant__ fj::TmaDescriptor a, const __grid_constant__ fj::TmaDescriptor b, float* c) {
  extern __shared__ __align__(1024) char smem[];
  run_tile<fj::WgmmaTile<64, 128, 3, fj::MmaKind::TF32>>(&a, &b, c, smem);
})"},
      {"operand_staging.cuh", R"(
extern "C" __global__ void k(const float4* x, float4* lo, long long n, const float* b, float* bt) {
  fj::tf32_residuals(x, lo, n, blockIdx.x, gridDim.x);
  fj::transpose_batched<true>(b, bt, bt + 4096, 1, 37, 45, blockIdx.x, gridDim.x);
  fj::transpose_batched<false>(b, bt, nullptr, 3, 37, 45, blockIdx.x, gridDim.x);
  fj::transpose_batched<false>(reinterpret_cast<const unsigned short*>(b), reinterpret_cast<unsigned short*>(bt),
                               nullptr, 2, 64, 49, blockIdx.x, gridDim.x);
})"},
      {"gather.cuh", R"(
struct S {
  static constexpr int kH = 9, kW = 10, kOH = 4, kOW = 5, kKH = 3, kKW = 2, kSH = 2, kSW = 2, kPH = 1, kPW = 0,
                       kDH = 1, kDW = 1;
};
extern "C" __global__ void k(const float* x, const float* g, float* y) {
  auto at = [&](int h, int w) { return x[h * 10 + w]; };
  auto grad = [&](int h, int w) { return g[h * 5 + w]; };
  y[0] = fj::max_pool2d_backward_at<S>(3, 4, at, grad) + fj::avg_pool2d_backward_at<S, true>(3, 4, grad) +
         fj::im2col_at<S>(5, 7, [&](long long n, long long c, int h, int w) { return x[(n + c) * 90 + h * 10 + w]; });
})"},
      {"pool.cuh", R"(
struct P2 {
  static constexpr int kH = 9, kW = 10, kKH = 3, kKW = 2, kSH = 2, kSW = 2, kPH = 1, kPW = 1, kDH = 2, kDW = 1;
};
struct P1 {
  static constexpr int kW = 10, kKW = 3, kSW = 2, kPW = 1, kDW = 1;
};
extern "C" __global__ void k(const float* x, float* y) {
  auto at = [&](int h, int w) { return x[h * 10 + w]; };
  y[0] = fj::pool2d_window<P2, true, false>(1, 2, at) + fj::pool2d_window<P2, false, true>(1, 2, at) +
         fj::pool2d_window<P2, false, false>(0, 0, at) +
         fj::pool1d_window<P1, true, false>(3, [&](int w) { return x[w]; }) +
         fj::pool1d_window<P1, false, false>(3, [&](int w) { return x[w]; });
})"},
  };
  return m;
}

// Every template's instantiation: these and the conv templates'.
inline const std::map<std::string, std::string>& template_instantiations() {
  static const std::map<std::string, std::string> m = [] {
    std::map<std::string, std::string> all = conv_template_instantiations();
    all.insert(core_template_instantiations().begin(), core_template_instantiations().end());
    return all;
  }();
  return m;
}

}  // namespace fusejit::testing
