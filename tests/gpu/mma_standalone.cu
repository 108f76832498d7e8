// Standalone GPU check and benchmark of templates/gemm_mma.cuh (the mma.sync
// mainloop): not part of the CMake build. Build and run from the repository
// root (templates are included as "fusejit/<name>.cuh"):
//
//   mkdir -p /tmp/fj_inc && ln -sfn "$PWD/templates" /tmp/fj_inc/fusejit
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I/tmp/fj_inc \
//        tests/gpu/mma_standalone.cu -o /tmp/mma_standalone && /tmp/mma_standalone
//
// (-arch=sm_80 for an A100.) For every precision kind and both B layouts it
// runs a few shapes (ragged extents, element-wise / 4-byte / 16-byte copy
// paths, padded leading dimensions), stores the fragment with
// fj::tile_pointwise into a NaN-poisoned output, and compares with a CPU fp64
// GEMM of the same (device-representable) inputs; for single-column-tile
// shapes it also checks fj::tile_row_reduce row sums (the fragment's
// row_sharer). Input padding is NaN: reading it shows up as NaN. Then it times
// 4096^3 GEMMs with cudaEvents. Exit status 0 when every check passes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <type_traits>
#include <vector>

#include "fusejit/gemm_mma.cuh"
#include "fusejit/fj_half.cuh"
#include "fusejit/epilogue.cuh"

#define CHECK_CUDA(x)                                                                        \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

using fj::mma::BF16;
using fj::mma::F16;
using fj::mma::F32x3;
using fj::mma::TF32;

// Per kind: element type in global memory, name, tolerance on rel L2 error.
template <class Kind> struct KindInfo;
template <> struct KindInfo<BF16> { using T = __nv_bfloat16; static constexpr const char* kName = "bf16"; static constexpr double kTol = 2e-2; };
template <> struct KindInfo<F16> { using T = __half; static constexpr const char* kName = "f16"; static constexpr double kTol = 5e-3; };
template <> struct KindInfo<TF32> { using T = float; static constexpr const char* kName = "tf32"; static constexpr double kTol = 2e-3; };
template <> struct KindInfo<F32x3> { using T = float; static constexpr const char* kName = "f32x3"; static constexpr double kTol = 1e-5; };

// Host conversions (fj::Convert is device-only).
template <class T> T from_float(float v) { return v; }
template <> __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __half from_float<__half>(float v) { return __float2half_rn(v); }
template <class T> double to_double(T v) { return v; }
template <> double to_double<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> double to_double<__half>(__half v) { return __half2float(v); }

// A GEMM problem, everything compile-time as in generated code. B is [N][K]
// (NK, torch linear weight) or [K][N] (KN, matmul).
template <class Tile_, class Kind_, bool kKN_, int M_, int N_, int K_, long long LDA_, long long LDB_>
struct Problem {
  using Tile = Tile_;
  using Kind = Kind_;
  using T = typename KindInfo<Kind>::T;
  static constexpr bool kKN = kKN_;
  static constexpr int M = M_, N = N_, K = K_;
  static constexpr long long LDA = LDA_, LDB = LDB_;
  using A = fj::MmaRowMajorA<T, M, K, LDA>;
  using B = std::conditional_t<kKN, fj::MmaKNMajorB<T, N, K, LDB>, fj::MmaNKMajorB<T, N, K, LDB>>;
  static constexpr int kTilesM = fj::ceil_div(M, Tile::BM), kTilesN = fj::ceil_div(N, Tile::BN);
  static constexpr int kEpilogueBytes = (fj::MmaFragment<Tile>::kRowSharers + 2) * Tile::BM * 4;  // row reduce
  static constexpr int kSmemBytes = std::max(Tile::smem_bytes(Kind::kElemBytes, kKN), kEpilogueBytes);
  static constexpr long long kElemsA = M * LDA, kElemsB = (kKN ? K : N) * LDB;
};

// One block per output tile; blocks run down groups of kGroupM row tiles so
// that concurrent blocks share A and B tiles in L2.
template <class P>
__global__ void __launch_bounds__(P::Tile::kThreads)
    gemm_kernel(const typename P::T* __restrict__ a, const typename P::T* __restrict__ b, float* __restrict__ c,
                float* __restrict__ rowsum) {
  using Tile = typename P::Tile;
  extern __shared__ __align__(128) char smem[];
  constexpr int kGroupM = 8;
  const int per_group = kGroupM * P::kTilesN, group = blockIdx.x / per_group;
  const int first_m = group * kGroupM, rows = min(P::kTilesM - first_m, kGroupM), r = blockIdx.x % per_group;
  const int m0 = (first_m + r % rows) * Tile::BM, n0 = (r / rows) * Tile::BN;

  fj::MmaFragment<Tile> frag;
  fj::mma_mainloop<Tile, typename P::Kind>(typename P::A{a}, typename P::B{b}, m0, n0, P::K, frag, smem);
  fj::tile_pointwise(frag, m0, n0, P::M, P::N, [&](float v, int m, int n) { c[(long long)m * P::N + n] = v; });
  if constexpr (P::kTilesN == 1)
    if (rowsum)
      fj::tile_row_reduce<fj::SumOp, Tile::BM, Tile::kThreads>(
          frag, m0, P::M, P::N, reinterpret_cast<float*>(smem), [](float v, int, int) { return v; },
          [&](float v, int m) { rowsum[m] = v; });
}

template <class P>
struct DeviceProblem {
  using T = typename P::T;
  std::vector<T> ha, hb;
  T *da = nullptr, *db = nullptr;
  float *dc = nullptr, *drow = nullptr;
  // Operands in [-1, 1]; padding (columns past K or N) is NaN and must never be read.
  explicit DeviceProblem(unsigned seed) : ha(P::kElemsA), hb(P::kElemsB) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (long long i = 0; i < P::kElemsA; ++i) ha[i] = from_float<T>(i % P::LDA < P::K ? u(rng) : NAN);
    const long long kValid = P::kKN ? P::N : P::K;
    for (long long i = 0; i < P::kElemsB; ++i) hb[i] = from_float<T>(i % P::LDB < kValid ? u(rng) : NAN);
    CHECK_CUDA(cudaMalloc(&da, sizeof(T) * P::kElemsA));
    CHECK_CUDA(cudaMalloc(&db, sizeof(T) * P::kElemsB));
    CHECK_CUDA(cudaMalloc(&dc, sizeof(float) * P::M * P::N));
    CHECK_CUDA(cudaMalloc(&drow, sizeof(float) * P::M));
    upload();
    CHECK_CUDA(cudaFuncSetAttribute(gemm_kernel<P>, cudaFuncAttributeMaxDynamicSharedMemorySize, P::kSmemBytes));
  }
  void upload() {  // operands, and NaN-poisoned outputs
    CHECK_CUDA(cudaMemcpy(da, ha.data(), sizeof(T) * P::kElemsA, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(db, hb.data(), sizeof(T) * P::kElemsB, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(dc, 0xff, sizeof(float) * P::M * P::N));
    CHECK_CUDA(cudaMemset(drow, 0xff, sizeof(float) * P::M));
  }
  ~DeviceProblem() { cudaFree(da); cudaFree(db); cudaFree(dc); cudaFree(drow); }
  void launch(bool with_rowsum) {
    gemm_kernel<P><<<P::kTilesM * P::kTilesN, P::Tile::kThreads, P::kSmemBytes>>>(da, db, dc, with_rowsum ? drow : nullptr);
  }
  T& a_at(int m, int k) { return ha[(long long)m * P::LDA + k]; }
  T& b_at(int k, int n) { return P::kKN ? hb[(long long)k * P::LDB + n] : hb[(long long)n * P::LDB + k]; }
  double a(int m, int k) const { return to_double(ha[(long long)m * P::LDA + k]); }
  double b(int k, int n) const { return to_double(P::kKN ? hb[(long long)k * P::LDB + n] : hb[(long long)n * P::LDB + k]); }
  double ref(int m, int n) const {
    double s = 0;
    for (int k = 0; k < P::K; ++k) s += a(m, k) * b(k, n);
    return s;
  }
};

int g_failures = 0;

template <class Tile, class Kind, bool kKN, int M, int N, int K, long long LDA = K, long long LDB = (kKN ? N : K)>
void check(const char* tile_name) {
  using P = Problem<Tile, Kind, kKN, M, N, K, LDA, LDB>;
  DeviceProblem<P> d(M * 131 + N * 17 + K);
  d.launch(true);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> c((size_t)M * N), rowsum(M);
  CHECK_CUDA(cudaMemcpy(c.data(), d.dc, sizeof(float) * c.size(), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(rowsum.data(), d.drow, sizeof(float) * M, cudaMemcpyDeviceToHost));
  double num = 0, den = 0, max_abs = 0, rnum = 0, rden = 0;
  long long nonfinite = 0;
  std::vector<double> brow(K);
  for (int m = 0; m < M; ++m) {
    double rs = 0;
    for (int n = 0; n < N; ++n) {
      const double r = d.ref(m, n), v = c[(size_t)m * N + n];
      if (!std::isfinite(v)) ++nonfinite;
      num += (v - r) * (v - r), den += r * r, rs += r;
      max_abs = std::max(max_abs, std::fabs(v - r));
    }
    rnum += (rowsum[m] - rs) * (rowsum[m] - rs), rden += rs * rs;
  }
  const double rel = std::sqrt(num / std::max(den, 1e-300));
  const bool has_rows = P::kTilesN == 1;
  const double rrel = has_rows ? std::sqrt(rnum / std::max(rden, 1e-300)) : 0.0;
  const double tol = KindInfo<Kind>::kTol;
  const bool ok = nonfinite == 0 && rel <= tol && (!has_rows || rrel <= tol);
  g_failures += !ok;
  std::printf("%-4s %-5s %s %4dx%4dx%4d lda %4lld ldb %4lld %-10s rel_l2 %.2e max_abs %.2e rowsum %s%.2e nonfinite %lld\n",
              ok ? "PASS" : "FAIL", KindInfo<Kind>::kName, kKN ? "KN" : "NK", M, N, K, LDA, LDB, tile_name, rel, max_abs,
              has_rows ? "" : "(n/a) ", rrel, nonfinite);
}

// Inf / NaN operands: outputs must be NaN / the same Inf where fp64 gives
// NaN / Inf (inf * 0 = NaN, inf - inf = NaN), and accurate elsewhere.
template <class Tile, class Kind, bool kKN>
void check_special(const char* tile_name) {
  constexpr int M = 70, N = 40, K = 40;
  using P = Problem<Tile, Kind, kKN, M, N, K, K, kKN ? N : K>;
  using T = typename P::T;
  DeviceProblem<P> d(5);
  d.a_at(1, 2) = from_float<T>(INFINITY), d.b_at(2, 3) = from_float<T>(0.f);  // row 1 +-inf, (1, 3) NaN
  d.a_at(4, 0) = from_float<T>(NAN);                                           // row 4 NaN
  d.a_at(9, 7) = from_float<T>(-INFINITY), d.b_at(11, 5) = from_float<T>(INFINITY);
  d.a_at(20, 11) = from_float<T>(0.f);                                         // (20, 5): 0 * inf
  d.upload();
  d.launch(false);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> c((size_t)M * N);
  CHECK_CUDA(cudaMemcpy(c.data(), d.dc, sizeof(float) * c.size(), cudaMemcpyDeviceToHost));
  int wrong_class = 0, specials = 0;
  double num = 0, den = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const double r = d.ref(m, n), v = c[(size_t)m * N + n];
      if (std::isnan(r) || std::isinf(r)) {
        ++specials;
        wrong_class += std::isnan(r) ? !std::isnan(v) : v != r;
      } else if (!std::isfinite(v)) {
        ++wrong_class;
      } else {
        num += (v - r) * (v - r), den += r * r;
      }
    }
  const double rel = std::sqrt(num / den);
  const bool ok = wrong_class == 0 && rel <= KindInfo<Kind>::kTol;
  g_failures += !ok;
  std::printf("%-4s %-5s %s Inf/NaN operands %-10s %d non-finite outputs expected, %d wrong, rel_l2 (finite) %.2e\n",
              ok ? "PASS" : "FAIL", KindInfo<Kind>::kName, kKN ? "KN" : "NK", tile_name, specials, wrong_class, rel);
}

template <class Tile, class Kind, bool kKN>
void bench(const char* tile_name) {
  constexpr int S = 4096;
  using P = Problem<Tile, Kind, kKN, S, S, S, S, S>;
  DeviceProblem<P> d(7);
  d.launch(false);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  // Spot check: 256 random outputs against fp64.
  std::vector<float> c((size_t)S * S);
  CHECK_CUDA(cudaMemcpy(c.data(), d.dc, sizeof(float) * c.size(), cudaMemcpyDeviceToHost));
  std::mt19937 rng(1);
  double num = 0, den = 0;
  for (int i = 0; i < 256; ++i) {
    const int m = rng() % S, n = rng() % S;
    const double r = d.ref(m, n), v = c[(size_t)m * S + n];
    num += (v - r) * (v - r), den += r * r;
  }
  const double rel = std::sqrt(num / den);
  const bool ok = rel <= KindInfo<Kind>::kTol;  // NaN fails
  g_failures += !ok;
  constexpr int kWarmup = 3, kIters = 20;
  for (int i = 0; i < kWarmup; ++i) d.launch(false);
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start));
  for (int i = 0; i < kIters; ++i) d.launch(false);
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  CHECK_CUDA(cudaGetLastError());
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  ms /= kIters;
  const double tflops = 2.0 * S * S * S / (ms * 1e-3) / 1e12;
  std::printf("%-4s %-5s %s 4096^3 %-14s %8.3f ms %7.1f TFLOP/s  (smem %d B, %d threads, sampled rel_l2 %.2e)\n",
              ok ? "PASS" : "FAIL", KindInfo<Kind>::kName, kKN ? "KN" : "NK", tile_name, ms, tflops, P::kSmemBytes,
              Tile::kThreads, rel);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

using T128 = fj::MmaTile<128, 128, 32, 64, 64, 3>;  // 4 warps, 64x64 warp tiles
using T128s4 = fj::MmaTile<128, 128, 32, 64, 64, 4>;
using T128k16 = fj::MmaTile<128, 128, 16, 64, 64, 4>;
using T64 = fj::MmaTile<64, 64, 32, 32, 32, 4>;     // 4 warps, 32x32 warp tiles
using T128x64 = fj::MmaTile<128, 64, 32, 32, 32, 3>;  // 8 warps

#define BOTH_LAYOUTS(TILE, KIND, M, N, K, LDA, LDB_NK, LDB_KN) \
  check<TILE, KIND, false, M, N, K, LDA, LDB_NK>(#TILE);      \
  check<TILE, KIND, true, M, N, K, LDA, LDB_KN>(#TILE);
#define ALL_KINDS(TILE, M, N, K, LDA, LDB_NK, LDB_KN)      \
  BOTH_LAYOUTS(TILE, BF16, M, N, K, LDA, LDB_NK, LDB_KN)  \
  BOTH_LAYOUTS(TILE, F16, M, N, K, LDA, LDB_NK, LDB_KN)   \
  BOTH_LAYOUTS(TILE, TF32, M, N, K, LDA, LDB_NK, LDB_KN)  \
  BOTH_LAYOUTS(TILE, F32x3, M, N, K, LDA, LDB_NK, LDB_KN)

int main() {
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  if (prop.major < 8) {
    std::printf("mma.sync mainloop needs sm_80+\n");
    return 2;
  }
  // Correctness. Copy paths: 16-bit with odd LD: element-wise; LD*size % 16 != 0:
  // 4-byte cp.async; otherwise 16-byte cp.async (partial chunks when K % 8 != 0).
  ALL_KINDS(T128, 100, 45, 37, 37, 37, 45)        // ragged, one column tile (row sums checked)
  ALL_KINDS(T128, 257, 129, 202, 202, 202, 129)   // 4-byte copies (B KN 16-bit: element-wise)
  ALL_KINDS(T128, 512, 384, 256, 256, 256, 384)   // 16-byte copies, whole tiles, many k tiles
  ALL_KINDS(T128, 300, 200, 99, 104, 104, 208)    // 16-byte copies, padded LD, partial chunks
  ALL_KINDS(T64, 200, 64, 300, 304, 304, 64)      // 32x32 warp tiles, row sums
  ALL_KINDS(T128x64, 131, 64, 72, 72, 72, 64)     // 8 warps (2 along N: 8 row sharers), row sums
  BOTH_LAYOUTS(T128k16, TF32, 300, 200, 99, 104, 104, 208)
  BOTH_LAYOUTS(T128k16, F32x3, 300, 200, 99, 104, 104, 208)
  check_special<T64, BF16, false>("T64");
  check_special<T64, F16, true>("T64");
  check_special<T64, TF32, false>("T64");
  check_special<T64, TF32, true>("T64");
  check_special<T64, F32x3, false>("T64");
  check_special<T64, F32x3, true>("T64");
  std::printf("%s: %d failing correctness checks\n", g_failures ? "FAILED" : "correctness ok", g_failures);

  // Throughput, 4096^3 (dense, 16-byte copies).
  bench<T128s4, BF16, false>("128x128x32 s4");
  bench<T128s4, BF16, true>("128x128x32 s4");
  bench<T128, BF16, false>("128x128x32 s3");
  bench<T128s4, F16, false>("128x128x32 s4");
  bench<T128k16, TF32, false>("128x128x16 s4");
  bench<T128k16, TF32, true>("128x128x16 s4");
  bench<T128, TF32, false>("128x128x32 s3");
  bench<T128, TF32, true>("128x128x32 s3");
  bench<T128k16, F32x3, false>("128x128x16 s4");
  std::printf("%s (%d failures)\n", g_failures ? "FAILED" : "ALL PASSED", g_failures);
  return g_failures ? 1 : 0;
}
