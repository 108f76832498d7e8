// fusejit/fj_ops.cuh — the elementwise op library. One function per op, fp32
// in and out, PyTorch semantics (see docs/codegen.md). Generated epilogue
// node functions call these with their attributes as literals. Only accurate
// math (tanhf, expf, erff, log1pf, ...; reciprocals refined to an ulp): never
// the fast-math intrinsics.
#pragma once

#include "fusejit/fj_common.cuh"

namespace fj {
namespace op {

__device__ __forceinline__ float relu(float x) { return is_nan(x) ? x : (x > 0.f ? x : 0.f); }
__device__ __forceinline__ float leaky_relu(float x, float slope) { return x > 0.f ? x : x * slope; }
__device__ __forceinline__ float gelu_erf(float x) {
  return 0.5f * x * (1.f + erff(x * 0.70710678118654752440f));
}
__device__ __forceinline__ float gelu_tanh(float x) {
  const float k = 0.79788456080286535588f;  // sqrt(2/pi)
  return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
}
// From t = e^-|x|, which never overflows: 1 / (1 + t) for x >= 0, t / (1 + t)
// below (denormal results kept, as expf's), the reciprocal without a division
// branch (fj::recip_refined). Within 3.5 ulps (expf's 2, the reciprocal's 1,
// the product's half; H100: 3.11 at worst over 4M inputs,
// tests/gpu_op_accuracy_test.cpp).
__device__ __forceinline__ float sigmoid(float x) {
  const float t = expf(-fabsf(x));
  const float r = recip_refined(1.f + t);
  return x >= 0.f ? r : t * r;
}
__device__ __forceinline__ float tanh_(float x) { return tanhf(x); }
__device__ __forceinline__ float silu(float x) { return x * sigmoid(x); }
__device__ __forceinline__ float softplus(float x, float beta, float threshold) {
  return x * beta > threshold ? x : log1pf(expf(x * beta)) / beta;
}
__device__ __forceinline__ float mish(float x) { return x * tanhf(softplus(x, 1.f, 20.f)); }
__device__ __forceinline__ float hardsigmoid(float x) { return fminf(fmaxf(x + 3.f, 0.f), 6.f) / 6.f; }
__device__ __forceinline__ float hardswish(float x) { return x * fminf(fmaxf(x + 3.f, 0.f), 6.f) / 6.f; }
// clamp as torch.clamp: NaN stays NaN; bounds may be +-inf.
__device__ __forceinline__ float clamp(float x, float lo, float hi) {
  return is_nan(x) ? x : fminf(fmaxf(x, lo), hi);
}
__device__ __forceinline__ float hardtanh(float x, float lo, float hi) { return clamp(x, lo, hi); }
__device__ __forceinline__ float elu(float x, float alpha) { return x > 0.f ? x : alpha * expm1f(x); }
__device__ __forceinline__ float exp_(float x) { return expf(x); }
__device__ __forceinline__ float log_(float x) { return logf(x); }
__device__ __forceinline__ float abs_(float x) { return fabsf(x); }
__device__ __forceinline__ float neg(float x) { return -x; }
__device__ __forceinline__ float sqrt_(float x) { return sqrtf(x); }
__device__ __forceinline__ float rsqrt_(float x) { return 1.f / sqrtf(x); }
__device__ __forceinline__ float square(float x) { return x * x; }

__device__ __forceinline__ float add(float a, float b) { return a + b; }
__device__ __forceinline__ float sub(float a, float b) { return a - b; }
__device__ __forceinline__ float mul(float a, float b) { return a * b; }
__device__ __forceinline__ float div(float a, float b) { return a / b; }
__device__ __forceinline__ float minimum(float a, float b) { return min_nan(a, b); }
__device__ __forceinline__ float maximum(float a, float b) { return max_nan(a, b); }
__device__ __forceinline__ float pow_(float a, float b) { return powf(a, b); }
__device__ __forceinline__ float erf_(float x) { return erff(x); }
// cast: x rounded to bf16 / f16 (to nearest, ties to even; overflow -> inf,
// NaN stays NaN), as __float2bfloat16_rn / __float2half_rn, and back to float.
// Bit operations and cvt: no cuda_bf16.h / cuda_fp16.h needed.
__device__ __forceinline__ float to_bf16(float x) {
  if (is_nan(x)) return x;
  const unsigned u = __float_as_uint(x);
  return __uint_as_float((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
}
__device__ __forceinline__ float to_f16(float x) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
  return r;
}
// Comparisons: 1 or 0, false where an operand is NaN (PyTorch's bool result).
__device__ __forceinline__ float gt(float a, float b) { return a > b ? 1.f : 0.f; }
__device__ __forceinline__ float ge(float a, float b) { return a >= b ? 1.f : 0.f; }
__device__ __forceinline__ float lt(float a, float b) { return a < b ? 1.f : 0.f; }
__device__ __forceinline__ float le(float a, float b) { return a <= b ? 1.f : 0.f; }
__device__ __forceinline__ float eq(float a, float b) { return a == b ? 1.f : 0.f; }

}  // namespace op
}  // namespace fj
