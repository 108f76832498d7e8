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
// - conv2d's x in NHWC and w as [Cout][KH][KW][Cin] (conv_wgmma.cuh), with
//   their residuals for 3xTF32.
// - a dW's grad with its rows padded to a TMA stride (pad_rows).
#pragma once

#include "fusejit/fj_common.cuh"

namespace fj {

// x minus x truncated to TF32 (exact: both share x's exponent), rounded to
// the nearest TF32 value (rounding keeps its sign; error 2^-22 |x|). Where it
// is 0 for a nonzero x (a TF32 value: small integers, powers of two) or x is
// +-Inf, the residual is the smallest normal float with x's sign instead: a
// cross term Inf * lo then has the sign that Inf * x has (never Inf * 0 = NaN
// where PyTorch gives +-Inf), at a cost of |other operand| * 2^-126 per
// product. x = +-0 keeps lo = 0: Inf * 0 is NaN in PyTorch too (the main
// term hi * hi gives it), and a zero operand gives an exactly zero product
// (a zero gradient, zeros of ReLU). NaN stays NaN.
__device__ __forceinline__ float tf32_residual(float x) {
  const float hi = __uint_as_float(__float_as_uint(x) & 0xffffe000u);
  unsigned lo;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(lo) : "f"(x - hi));  // NaN for +-Inf: replaced below
  if (x == 0.f) return 0.f;
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

// The tiles of a batched [batches][R][C] -> [batches][C][R] transpose, kTileR
// x kTileC each, numbered batch-major then row tile then column tile.
template <int kTileR, int kTileC>
struct BatchedTiles {
  struct Tile {
    long long base;  // the batch's first element
    int r0, c0;      // the tile's first row and column
  };
  int c_tiles, per_batch;
  long long batch_elems, count;
  __device__ __forceinline__ BatchedTiles(int batches, int R, int C)
      : c_tiles((C + kTileC - 1) / kTileC),
        per_batch(c_tiles * ((R + kTileR - 1) / kTileR)),
        batch_elems(static_cast<long long>(R) * C),
        count(static_cast<long long>(batches) * per_batch) {}
  __device__ __forceinline__ Tile operator[](long long t) const {
    const int rem = static_cast<int>(t % per_batch);
    return {(t / per_batch) * batch_elems, (rem / c_tiles) * kTileR, (rem % c_tiles) * kTileC};
  }
};

// src [batches][R][C] -> dst [batches][C][R] (T: float or 16-bit) and, with
// kResidual (fp32), each element's residual into lo, laid out as dst. Tiles
// of 32 rows x 64 columns through shared memory (both sides coalesced; each
// thread has 8 loads in flight before the barrier), block `block` of
// `blocks` taking every blocks-th tile. 256 threads. Uses:
// - fp32 B [K][N] -> [N][K] (wgmma's TF32 reads K-major B only): one batch;
// - conv2d: w [Cout][Cin][KH*KW] -> [Cout][KH*KW][Cin], x [N][Cin][H*W] ->
//   NHWC (conv_wgmma.cuh).
template <bool kResidual, class T>
__device__ __forceinline__ void transpose_batched(const T* __restrict__ src, T* __restrict__ dst,
                                                  float* __restrict__ lo, int batches, int R, int C, int block,
                                                  int blocks) {
  static_assert(!kResidual || sizeof(T) == 4, "residuals of fp32 operands");
  constexpr int kTileR = 32, kTileC = 64;
  __shared__ T tile[kTileR][kTileC + 1];  // +1: conflict-free columns
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;  // 8 warps
  const BatchedTiles<kTileR, kTileC> tiles(batches, R, C);
  for (long long t = block; t < tiles.count; t += blocks) {
    const auto [base, r0, c0] = tiles[t];
#pragma unroll
    for (int j = ty; j < kTileR; j += 8)
#pragma unroll
      for (int h = 0; h < kTileC; h += 32)
        if (r0 + j < R && c0 + h + tx < C) tile[j][h + tx] = src[base + static_cast<long long>(r0 + j) * C + c0 + h + tx];
    __syncthreads();
#pragma unroll
    for (int j = ty; j < kTileC; j += 8) {
      if (c0 + j < C && r0 + tx < R) {
        const long long at = base + static_cast<long long>(c0 + j) * R + r0 + tx;
        const T v = tile[tx][j];
        dst[at] = v;
        if constexpr (kResidual) lo[at] = tf32_residual(v);
      }
    }
    __syncthreads();
  }
}

// VS raw 16-bit values (in the low halves of h) as one vector, the first lowest.
template <int VS>
__device__ __forceinline__ typename VecOf<2 * VS>::type pack16(const unsigned (&h)[VS]) {
  if constexpr (VS == 1) return static_cast<unsigned short>(h[0]);
  else if constexpr (VS == 2) return h[0] | h[1] << 16;
  else if constexpr (VS == 4) return make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
  else return make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}

// transpose_batched for 16-bit elements with wide accesses: 64 x 64 tiles,
// VL consecutive elements of a src row per load (C % VL == 0 and src
// aligned to VL elements: the caller checks), VS of a src column per store
// (R % VS == 0), so 8 threads write one 128-byte run of a dst row (an NHWC
// pixel's 64 channels) and a thread moves 16 bytes where transpose_batched
// moves 2. Shared memory is XOR-swizzled in 16-byte chunks (chunk k of row r
// at k ^ (r / VS % 8)): the loads' row chunks and the stores' column reads
// (VS-row groups at one column) are both conflict-free. 256 threads.
// kPrefetch: a block's next tile is loaded into registers right after the
// current one reaches shared memory, so its loads are in flight while the
// current tile's stores run (staging_prefetch=1).
template <int VL, int VS, bool kPrefetch = false, class T>
__device__ __forceinline__ void transpose16_wide(const T* __restrict__ src, T* __restrict__ dst, int batches, int R,
                                                 int C, int block, int blocks) {
  static_assert(sizeof(T) == 2 && VL >= 1 && VL <= 8 && VS >= 1 && VS <= 8, "16-bit, at most 16-byte vectors");
  using LoadV = typename VecOf<2 * VL>::type;
  using StoreV = typename VecOf<2 * VS>::type;
  constexpr int kTile = 64, kRowVecs = kTile / VL, kColVecs = kTile / VS;
  constexpr int kLoads = (kTile * kRowVecs + 255) / 256;  // a thread's loads of one tile
  __shared__ __align__(16) T tile[kTile][kTile];
  const auto at = [](int r, int c) { return (((c >> 3) ^ ((r / VS) & 7)) << 3) | (c & 7); };
  const BatchedTiles<kTile, kTile> tiles(batches, R, C);
  // A thread's loads of tile t into v (rows past R / columns past C: skipped, as the stores skip them).
  auto load = [&](long long t, LoadV (&v)[kLoads]) {
    const auto [base, r0, c0] = tiles[t];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int i = threadIdx.x + j * 256, r = i / kRowVecs, c = (i % kRowVecs) * VL;
      if (i < kTile * kRowVecs && r0 + r < R && c0 + c < C)
        v[j] = *reinterpret_cast<const LoadV*>(src + base + static_cast<long long>(r0 + r) * C + c0 + c);
    }
  };
  auto stage = [&](long long t, const LoadV (&v)[kLoads]) {
    const auto [base, r0, c0] = tiles[t];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int i = threadIdx.x + j * 256, r = i / kRowVecs, c = (i % kRowVecs) * VL;
      if (i < kTile * kRowVecs && r0 + r < R && c0 + c < C) *reinterpret_cast<LoadV*>(&tile[r][at(r, c)]) = v[j];
    }
  };
  LoadV v[kLoads];
  if constexpr (kPrefetch) {
    if (block < tiles.count) load(block, v);
  }
  for (long long t = block; t < tiles.count; t += blocks) {
    const auto [base, r0, c0] = tiles[t];
    if constexpr (kPrefetch) {
      stage(t, v);
      __syncthreads();
      if (t + blocks < tiles.count) load(t + blocks, v);  // in flight during this tile's stores
    } else {
#pragma unroll
      for (int i = threadIdx.x; i < kTile * kRowVecs; i += 256) {
        const int r = i / kRowVecs, c = (i % kRowVecs) * VL;
        if (r0 + r < R && c0 + c < C)
          *reinterpret_cast<LoadV*>(&tile[r][at(r, c)]) =
              *reinterpret_cast<const LoadV*>(src + base + static_cast<long long>(r0 + r) * C + c0 + c);
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = threadIdx.x; i < kTile * kColVecs; i += 256) {
      const int c = i / kColVecs, r = (i % kColVecs) * VS;
      if (c0 + c < C && r0 + r < R) {
        unsigned h[VS];  // the column's VS elements as raw 16-bit values
#pragma unroll
        for (int j = 0; j < VS; ++j) h[j] = reinterpret_cast<const unsigned short&>(tile[r + j][at(r + j, c)]);
        *reinterpret_cast<StoreV*>(dst + base + static_cast<long long>(c0 + c) * R + r0 + r) = pack16<VS>(h);
      }
    }
    __syncthreads();
  }
}

// src [rows][kCols units] -> dst [rows][kPitch units], the padding zeros (U: a 2-, 4- or 8-byte unit dividing
// both rows). Grid-stride over dst's units: writes are whole lines, reads nearly so; block `block` of `blocks`.
template <class U, int kCols, int kPitch>
__device__ __forceinline__ void pad_rows(const U* __restrict__ src, U* __restrict__ dst, long long rows, int block,
                                         int blocks) {
  const long long n = rows * kPitch, stride = static_cast<long long>(blocks) * blockDim.x;
  for (long long i = static_cast<long long>(block) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const long long r = i / kPitch;
    const int c = static_cast<int>(i - r * kPitch);
    dst[i] = c < kCols ? src[r * kCols + c] : U(0);
  }
}

}  // namespace fj
