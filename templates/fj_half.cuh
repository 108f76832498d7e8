// fusejit/fj_half.cuh — f16 and bf16 storage types for fusejit kernels
// (cuda_fp16.h / cuda_bf16.h, which NVRTC ships). Generated programs include
// it only when some tensor is 16-bit: the headers are large and slow to parse.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "fusejit/fj_common.cuh"

namespace fj {

template <>
struct Convert<__half> {
  static __device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half from_float(float v) { return __float2half_rn(v); }
  // a and b as one register, a in the low half (one conversion of both)
  static __device__ __forceinline__ unsigned pack2(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const unsigned*>(&h);
  }
};
template <>
struct Convert<__nv_bfloat16> {
  static __device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
  static __device__ __forceinline__ unsigned pack2(float a, float b) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const unsigned*>(&h);
  }
};

// Elements i and i + 1 (i even): one conversion of both, one 4-byte store.
__device__ __forceinline__ void store_pair_from_float(__half* __restrict__ p, long long i, float a, float b) {
  *reinterpret_cast<__half2*>(p + i) = __floats2half2_rn(a, b);
}
__device__ __forceinline__ void store_pair_from_float(__nv_bfloat16* __restrict__ p, long long i, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p + i) = __floats2bfloat162_rn(a, b);
}

}  // namespace fj
