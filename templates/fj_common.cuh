// fusejit/fj_common.cuh — basic device helpers shared by every fusejit kernel:
// element-type conversion for f32 (all arithmetic is fp32 in registers;
// fj_half.cuh adds f16/bf16), infinities,
// and NaN-propagating min/max (PyTorch semantics).
//
// Works under NVRTC (no host standard headers) and under nvcc.
#pragma once

namespace fj {

// ---- channel chunks ----------------------------------------------------------
// Word i of pixel p's 16-byte chunk of channels, from rows of the channels' pixels (`rows[c][q]`: channel c's
// pixels 2q, 2q+1 in 16-bit, pixel q in 4-byte elements): channels 2i, 2i+1 (16-bit) or i. Halo copies from NCHW
// x into channel-innermost chunks transpose with it (conv_patch.cuh, conv_wgmma_halo.cuh).
template <int E, class Rows>
__device__ __forceinline__ unsigned chunk_word(const Rows& rows, int i, int p) {
  if constexpr (E == 2)
    return __byte_perm(rows[2 * i][p / 2], rows[2 * i + 1][p / 2], p % 2 ? 0x7632 : 0x5410);
  else
    return rows[i][p];
}

// ---- element types -----------------------------------------------------------
// Tensors are stored as float, or (with fusejit/fj_half.cuh) __half or
// __nv_bfloat16; kernels load every element as float and store results in
// the destination's type (rounded to nearest even). Convert<T> is
// specialized per storage type.
template <class T>
struct Convert;
template <>
struct Convert<float> {
  static __device__ __forceinline__ float to_float(float v) { return v; }
  static __device__ __forceinline__ float from_float(float v) { return v; }
};

// Reads element `i` of a tensor, as float. A plain load, not __ldg: the
// compiler may hoist an __ldg above the bounds check that guards it (seen with
// NVRTC 13), reading past the end of a tensor; a plain load it may not. Loads
// of const __restrict__ data still go through the read-only path.
template <class T>
__device__ __forceinline__ float load_as_float(const T* __restrict__ p, long long i) {
  return Convert<T>::to_float(p[i]);
}
template <class T>
__device__ __forceinline__ void store_from_float(T* __restrict__ p, long long i, float v) {
  p[i] = Convert<T>::from_float(v);
}

// Whether p is aligned to kBytes.
template <int kBytes, class T>
__device__ __forceinline__ bool aligned_to(const T* p) {
  return reinterpret_cast<unsigned long long>(p) % kBytes == 0;
}

// An unsigned integer type of kBytes (2, 4, 8 or 16: a vector access of raw bits).
template <int kBytes>
struct VecOf;
template <> struct VecOf<2> { using type = unsigned short; };
template <> struct VecOf<4> { using type = unsigned; };
template <> struct VecOf<8> { using type = uint2; };
template <> struct VecOf<16> { using type = uint4; };

// kV consecutive elements as one access of kV * sizeof(T) bytes (at most 16).
template <int kV, class T>
struct alignas(kV * sizeof(T)) Lanes {
  T v[kV];
};

// Elements i .. i + kV - 1 as floats, read in one access: p + i must be
// aligned to kV elements (the caller checks the base, i is a multiple of kV).
template <int kV, class T>
__device__ __forceinline__ void load_lanes_as_float(const T* __restrict__ p, long long i, float (&out)[kV]) {
  static_assert(kV * sizeof(T) <= 16, "at most a 16-byte access");
  const Lanes<kV, T> r = *reinterpret_cast<const Lanes<kV, T>*>(p + i);
#pragma unroll
  for (int l = 0; l < kV; ++l) out[l] = Convert<T>::to_float(r.v[l]);
}
template <int kV, class T>
__device__ __forceinline__ void store_lanes_from_float(T* __restrict__ p, long long i, const float (&in)[kV]) {
  static_assert(kV * sizeof(T) <= 16, "at most a 16-byte access");
  Lanes<kV, T> r;
#pragma unroll
  for (int l = 0; l < kV; ++l) r.v[l] = Convert<T>::from_float(in[l]);
  *reinterpret_cast<Lanes<kV, T>*>(p + i) = r;
}

// Elements i and i + 1 (i even) in one store of both (fj_half.cuh: 16-bit).
__device__ __forceinline__ void store_pair_from_float(float* __restrict__ p, long long i, float a, float b) {
  *reinterpret_cast<float2*>(p + i) = make_float2(a, b);
}

// ---- special values ----------------------------------------------------------
__device__ __forceinline__ float inf() { return __int_as_float(0x7f800000); }
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float quiet_nan() { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ bool is_nan(float v) { return v != v; }

// torch.maximum / torch.minimum / max-pool / max-reduction: NaN wins (sm_80+:
// one max.NaN / min.NaN instruction, which returns the canonical NaN).
__device__ __forceinline__ float max_nan(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a > b || is_nan(a)) ? a : b;
#endif
}
__device__ __forceinline__ float min_nan(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a < b || is_nan(a)) ? a : b;
#endif
}

// 1 / d for |d| in [2^-126, 2^126] (NaN stays NaN) without the IEEE
// division's special-case branch, which splits an unrolled epilogue into one
// basic block an element so that nothing overlaps their latency chains:
// rcp.approx and one Newton step, within about an ulp.
__device__ __forceinline__ float recip_refined(float d) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return fmaf(r, fmaf(-d, r, 1.f), r);
}

// exp(d) for d <= 0 (a value minus its row's maximum) by one ex2.approx of
// d * log2(e): about 2 ulps near 0, where the terms of a sum of exponentials
// whose largest is 1 matter; results below 2^-126 (d < about -87.3) flush to
// 0, and the product's rounding adds |d| * 2^-24 relative. -inf gives 0, NaN
// stays NaN. For the sums of log-sum-exp and softmax partials, not for
// values stored one by one.
__device__ __forceinline__ float exp_nonpositive(float d) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d * 1.44269504088896341f));
  return r;
}

// *p += v as a reduction in L2 (red.global.add.f32, relaxed, no value
// returned), its line marked evict-last: a few kilobytes of sums that every
// tile adds into (a conv's pixel sums, pass_spatial_atomics.cpp) stay in L2
// while the operands stream past, instead of going back to DRAM. (Before
// sm_80, which has no L2 cache hints: a plain atomicAdd.)
__device__ __forceinline__ void red_add_keep_in_l2(float* p, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  asm volatile("red.global.add.L2::cache_hint.f32 [%0], %1, %2;" ::"l"(p), "f"(v), "l"(policy) : "memory");
#else
  atomicAdd(p, v);
#endif
}

// Ceiling division for tile counts.
__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// acc[g * kRowUnroll + q][j] for a run-time row group g (the fragments' pick / set): epilogues roll their
// loop over row groups (less code) while the fragment stays in registers (selects between kRows / kRowUnroll
// candidates, no local memory).
template <int kRowUnroll, int kRows, int kCols>
__device__ __forceinline__ float pick_row_group(const float (&acc)[kRows][kCols], int g, int q, int j) {
  float v = acc[q][j];
#pragma unroll
  for (int h = 1; h < kRows / kRowUnroll; ++h) v = g == h ? acc[h * kRowUnroll + q][j] : v;
  return v;
}
template <int kRowUnroll, int kRows, int kCols>
__device__ __forceinline__ void set_row_group(float (&acc)[kRows][kCols], int g, int q, int j, float v) {
#pragma unroll
  for (int h = 0; h < kRows / kRowUnroll; ++h) acc[h * kRowUnroll + q][j] = g == h ? v : acc[h * kRowUnroll + q][j];
}

// Accumulators of columns [kC0, kC0 + kChunk) to smem[row * ld + col - kC0],
// element by element: Frag::stage_cols for fragments whose acc[i][j] sits
// at (row(i), col(j)) (SIMT, mma.sync).
template <int kC0, int kChunk, class Frag>
__device__ __forceinline__ void stage_acc_cols(const Frag& f, float* smem, int ld) {
#pragma unroll
  for (int i = 0; i < Frag::kRows; ++i)
#pragma unroll
    for (int j = 0; j < Frag::kCols; ++j)
      if (f.col(j) >= kC0 && f.col(j) < kC0 + kChunk) smem[f.row(i) * ld + f.col(j) - kC0] = f.acc[i][j];
}

}  // namespace fj
