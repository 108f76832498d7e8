// fusejit/conv_wgmma_store.cuh — a wgmma conv tile's NCHW output: computed
// in registers, staged in the output's type in shared memory, stored in runs
// of a channel's pixels.
#pragma once

#include "fusejit/conv_simt.cuh"
#include "fusejit/gemm_wgmma.cuh"

namespace fj {

// Byte offset of (channel c, patch pixel r) in a staged chunk of kChunk
// channels: blocks of 128 bytes of a channel's pixels, a block's channels 128
// bytes apart, a channel's 16-byte units XORed with c % 8 (8 channels of
// 8 pixels, a stmatrix phase, hit 8 different units; a warp reading 32
// consecutive vectors of a channel reads whole 128-byte rows).
template <int kElemBytes, int kChunk>
__device__ __forceinline__ int nchw_staged_at(int c, int r) {
  constexpr int kPer128 = 128 / kElemBytes;
  return (r / kPer128) * (kChunk * 128) + c * 128 + (((r % kPer128) * kElemBytes) ^ ((c % 8) << 4));
}

template <bool kValue>
struct Constant {
  static constexpr bool value = kValue;
};

// Pixels a thread stores at once: the widest of 16 bytes and less that the
// output width and the patch width split into (so that a vector is wholly
// inside or outside the image, and aligned where the output is).
template <class S, int BW, int kElemBytes>
__host__ __device__ constexpr int nchw_store_vec() {
  int v = 16 / kElemBytes;
  while (v > 1 && (S::kOW % v || BW % v)) v /= 2;
  return v;
}

// The epilogue of a wgmma conv tile (Pixels: PatchPixels) whose one output
// is stored NCHW as T: value(acc, m, n) per accumulator (its return for
// pixels outside the image is not stored: it may compute them, at the
// in-bounds coordinates PatchPixels gives them), kChunk channels at a time staged
// as T in `smem` (nchw_staged_at; 16-bit: stmatrix.trans, a row 8 pixels of
// one channel), then stored by runs of a channel's patch-row pixels, a
// vector of nchw_store_vec pixels a thread store (one element where `out` is
// not aligned to it). Channels n0 + c < N of the group starting at channel0.
// smem: kChunk * BM * sizeof(T) bytes.
template <class Pixels, int kChunk, class Frag, class T, class F>
__device__ __forceinline__ void tile_nchw_store(const Frag& frag, int m0, int n0, int N, int channel0,
                                                T* __restrict__ out, char* smem, const F& value) {
  using S = typename Pixels::Shape;
  constexpr int BM = Frag::kTileRows, BW = Pixels::kBW, BH = Pixels::kBH;
  constexpr int kE = sizeof(T), U = Frag::kRowUnroll;
  constexpr int kVec = nchw_store_vec<S, BW, kE>(), kRunVecs = BW / kVec, kRunsPerPass = Frag::kThreads / kRunVecs;
  static_assert(Frag::kThreads % kRunVecs == 0, "whole runs per pass");
  static_assert(BH * BW == BM && BM * kE % 128 == 0, "patches of whole 128-byte blocks");
  static_assert(Frag::kTileCols % kChunk == 0 && kChunk % 16 == 0, "chunks of whole 16-column groups");
  const auto o = Pixels::origin(m0 / BM);
  const int lane = frag.thread() % 32;
#pragma unroll
  for (int c0 = 0; c0 < Frag::kTileCols; c0 += kChunk) {
    if (n0 + c0 >= N) break;  // the same for every thread
    Frag::sync();  // the previous chunk's (or tile's) stores have read the staging
    // The values, then the staging: tiles whose columns all lie inside N skip the per-column check.
    auto stage = [&](auto full) {
#pragma unroll 1
      for (int g = 0; g < Frag::kRows / U; ++g) {
#pragma unroll
        for (int jp = 0; jp < kChunk / 4; jp += 4) {  // 16 columns: two 8-column groups of fragment columns j .. j + 3
          float v[U][4];
#pragma unroll
          for (int q = 0; q < U; ++q) {
            const int m = m0 + frag.row(g * U + q);
#pragma unroll
            for (int jj = 0; jj < 4; ++jj) {
              const int j = c0 / 4 + jp + jj, n = n0 + frag.col(j);
              v[q][jj] = decltype(full)::value || n < N ? value(frag.pick(g, q, j), m, n) : 0.f;
            }
          }
          if constexpr (kE == 2) {  // four 8x8 matrices (rows +0 / +8 x the two groups), each stored transposed
            const int mi = lane / 8;
            const int c = (jp / 2 + mi / 2) * 8 + lane % 8;
            const int r = frag.row(g * U + mi % 2) - lane / 4;  // the matrix's first pixel
            const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(smem + nchw_staged_at<kE, kChunk>(c, r)));
            asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(at),
                         "r"(Convert<T>::pack2(v[0][0], v[0][1])), "r"(Convert<T>::pack2(v[1][0], v[1][1])),
                         "r"(Convert<T>::pack2(v[0][2], v[0][3])), "r"(Convert<T>::pack2(v[1][2], v[1][3])));
          } else {
#pragma unroll
            for (int q = 0; q < U; ++q)
#pragma unroll
              for (int jj = 0; jj < 4; ++jj)
                *reinterpret_cast<T*>(smem + nchw_staged_at<kE, kChunk>(frag.col(c0 / 4 + jp + jj) - c0,
                                                                        frag.row(g * U + q))) = Convert<T>::from_float(v[q][jj]);
          }
        }
      }
    };
    if (n0 + Frag::kTileCols <= N)
      stage(Constant<true>{});
    else
      stage(Constant<false>{});
    Frag::sync();  // the chunk is staged
    // Each thread one vector position x of the runs (kThreads a multiple of the vectors a run), every
    // kRunsPerPass-th run: the output pointer and the staged offset move by constants.
    const int channels = min(kChunk, N - n0 - c0);
    const int x = frag.thread() % kRunVecs, ow = o.ow + x * kVec;
    if (ow >= S::kOW) continue;  // the patch's columns past the image (no barrier until the next chunk)
    T* const first = out + static_cast<long long>(o.n * S::kCout + channel0 + n0 + c0) * (S::kOH * S::kOW) +
                     static_cast<long long>(o.oh) * S::kOW + ow;
    auto runs = [&](auto vectors) {
#pragma unroll 8
      for (int run = frag.thread() / kRunVecs; run < kChunk * BH; run += kRunsPerPass) {
        const int h = run % BH, c = run / BH;
        if (c >= channels || o.oh + h >= S::kOH) continue;
        const char* const src = smem + nchw_staged_at<kE, kChunk>(c, h * BW + x * kVec);
        T* const dst = first + c * (S::kOH * S::kOW) + h * S::kOW;
        if constexpr (decltype(vectors)::value) {
          using V = typename VecOf<kVec * kE>::type;
          *reinterpret_cast<V*>(dst) = *reinterpret_cast<const V*>(src);
        } else {
          using E = typename VecOf<kE>::type;
#pragma unroll
          for (int l = 0; l < kVec; ++l) reinterpret_cast<E*>(dst)[l] = reinterpret_cast<const E*>(src)[l];
        }
      }
    };
    if (aligned_to<kVec * kE>(out))
      runs(Constant<true>{});
    else
      runs(Constant<false>{});
  }
}

}  // namespace fj
