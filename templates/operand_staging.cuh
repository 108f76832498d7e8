// fusejit/operand_staging.cuh — what a kernel launched before a wgmma GEMM
// writes for it (LaunchSpec::operand_staging):
// - 3xTF32 residuals. The tensor core reads an fp32 operand x as TF32 by
//   truncation (its top 19 bits: hi = x with the low 13 mantissa bits
//   cleared); this pass writes each operand's residual lo = x - hi, rounded
//   to the nearest TF32 value, to a buffer of its own, and the GEMM computes
//   hi*hi + hi*lo + lo*hi from x and lo (gemm_wgmma.cuh, MmaKind::F32x3). hi
//   and lo share x's sign, so a cross term with an infinite operand has the
//   sign of its main term (rounding hi to nearest instead would give lo the
//   opposite sign half the time: Inf - Inf = NaN).
// - fp32 B [K, N] transposed to [N, K]: wgmma's TF32 reads K-major B only.
#pragma once

#include "fusejit/fj_common.cuh"

namespace fj {

// x minus x truncated to TF32 (exact: both share x's exponent), rounded to
// the nearest TF32 value (rounding keeps its sign; error 2^-22 |x|). Where it
// is 0 (x is a TF32 value: 0, small integers) or x is +-Inf, the residual is
// the smallest normal float with x's sign instead: a cross term Inf * lo then
// has the sign that Inf * x has (never Inf * 0 = NaN where PyTorch gives
// +-Inf), at a cost of |other operand| * 2^-126 per product. NaN stays NaN.
__device__ __forceinline__ float tf32_residual(float x) {
  const float hi = __uint_as_float(__float_as_uint(x) & 0xffffe000u);
  unsigned lo;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(lo) : "f"(x - hi));  // NaN for +-Inf: replaced below
  return (__uint_as_float(lo) == 0.f || fabsf(x) == inf()) ? copysignf(1.17549435e-38f, x) : __uint_as_float(lo);
}

// The residuals of `n4` float4s of x into lo (both 16-byte aligned): block
// `block` of `blocks` takes every blocks-th run of blockDim.x float4s.
__device__ __forceinline__ void tf32_residuals(const float4* __restrict__ x, float4* __restrict__ lo, long long n4,
                                               int block, int blocks) {
  const long long stride = static_cast<long long>(blocks) * blockDim.x;
  for (long long i = static_cast<long long>(block) * blockDim.x + threadIdx.x; i < n4; i += stride) {
    const float4 v = x[i];
    lo[i] = make_float4(tf32_residual(v.x), tf32_residual(v.y), tf32_residual(v.z), tf32_residual(v.w));
  }
}

// B [K][N] -> bt [N][K] (wgmma's TF32 reads K-major B only) and, with
// kResidual, each element's residual into lo [N][K]; 32 x 32 tiles through
// shared memory (both sides coalesced), block `block` of `blocks` taking every
// blocks-th tile. 256 threads.
template <bool kResidual>
__device__ __forceinline__ void transpose_b(const float* __restrict__ b, float* __restrict__ bt,
                                            float* __restrict__ lo, int K, int N, int block, int blocks) {
  __shared__ float tile[32][33];  // +1: conflict-free columns
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  const int n_tiles = (N + 31) / 32, tiles = n_tiles * ((K + 31) / 32);
  for (int t = block; t < tiles; t += blocks) {
    const int k0 = (t / n_tiles) * 32, n0 = (t % n_tiles) * 32;
#pragma unroll
    for (int j = ty; j < 32; j += 8)
      if (k0 + j < K && n0 + tx < N) tile[j][tx] = b[static_cast<long long>(k0 + j) * N + n0 + tx];
    __syncthreads();
#pragma unroll
    for (int j = ty; j < 32; j += 8) {
      if (n0 + j < N && k0 + tx < K) {
        const long long at = static_cast<long long>(n0 + j) * K + k0 + tx;
        const float v = tile[tx][j];
        bt[at] = v;
        if constexpr (kResidual) lo[at] = tf32_residual(v);
      }
    }
    __syncthreads();
  }
}

}  // namespace fj
