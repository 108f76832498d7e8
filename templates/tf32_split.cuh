// fusejit/tf32_split.cuh — 3xTF32's operand staging. The tensor core reads an
// fp32 operand x as TF32 by truncation (its top 19 bits: hi = x with the low
// 13 mantissa bits cleared); before the GEMM, this pass writes each operand's
// residual lo = x - hi, rounded to the nearest TF32 value, to a buffer of its
// own. The GEMM then computes hi*hi + hi*lo + lo*hi from x and lo
// (gemm_wgmma.cuh, MmaKind::F32x3). hi and lo share x's sign, so a cross term
// with an infinite operand has the sign of its main term (rounding hi to
// nearest instead would give lo the opposite sign half the time: Inf - Inf).
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

// The residuals of `n4` float4s of x into lo (both 16-byte aligned), over a
// grid-stride loop.
__device__ __forceinline__ void tf32_residuals(const float4* __restrict__ x, float4* __restrict__ lo, long long n4) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
    const float4 v = x[i];
    lo[i] = make_float4(tf32_residual(v.x), tf32_residual(v.y), tf32_residual(v.z), tf32_residual(v.w));
  }
}

}  // namespace fj
