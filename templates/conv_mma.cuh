// fusejit/conv_mma.cuh — conv2d's A operand (the im2col gather of
// conv_simt.cuh's ConvA) as a loader for the mma.sync mainloop of
// gemm_mma.cuh: A[m][k] of one BM x BK tile copied element by element into
// the swizzled k-contiguous shared-memory layout, 0 outside the image, past
// K and for rows the pixel map marks as not ok.
//   fp32 elements: 4-byte cp.async (zero-fill for the 0s), asynchronous like
//                  the B operand's copies
//   16-bit:        loads into registers (all of a thread's loads in flight
//                  together, packed in pairs), then 16-byte shared stores
// Threads split the tile as kRowThreads along m (consecutive threads:
// consecutive pixels, so a warp's loads of one tap are coalesced) by
// kKThreads along k (a warp shares k: its tap is one broadcast).
#pragma once

#include "fusejit/conv_simt.cuh"
#include "fusejit/gemm_mma.cuh"

namespace fj {

template <class T, class S, class Pixels, class Taps = NoTaps<S>>
struct MmaConvA {
  using Elem = T;
  using Gather = ConvA<T, S, Pixels, Taps>;
  static constexpr bool kKContiguous = true;
  static constexpr int K = Gather::K;
  Gather gather;  // x, the pixel map and the group's first input channel

  template <class Layout, int kThreads>
  __device__ __forceinline__ void load(unsigned dst, int m0, int k0, int tid) const {
    constexpr int E = sizeof(T), kPerChunk = 16 / E;
    constexpr int BM = Layout::kRows, BK = Layout::kChunksPerRow * kPerChunk;
    constexpr int kRowThreads = kThreads < BM ? kThreads : BM;
    constexpr int kKThreads = kThreads / kRowThreads, kKPer = BK / kKThreads;
    static_assert(kRowThreads >= 32 && BM % kRowThreads == 0 && BK % kKThreads == 0,
                  "the block must split the tile into warps of one k each");
    const int kl0 = (tid / kRowThreads) * kKPer;  // this thread's first k in the tile
#pragma unroll 1
    for (int r = tid % kRowThreads; r < BM; r += kRowThreads) {
      const typename Gather::Row row = gather.row(m0 + r);
      if constexpr (E == 4) {
#pragma unroll
        for (int i = 0; i < kKPer; ++i) {
          const int kl = kl0 + i;
          long long at;
          const bool ok = element(row, k0 + kl, at);
          mma::cp_async4(dst + Layout::offset(r, kl / kPerChunk) + (kl % kPerChunk) * E, ok ? gather.x + at : gather.x,
                         ok ? 4 : 0);
        }
      } else {  // pairs packed into 32-bit words, stored as whole 16-byte chunks
        static_assert(E == 2 && kKPer % kPerChunk == 0, "16-bit operands: whole chunks per thread");
        const unsigned short* x16 = reinterpret_cast<const unsigned short*>(gather.x);
        unsigned w[kKPer / 2];
#pragma unroll
        for (int i = 0; i < kKPer / 2; ++i) {
          long long at0, at1;
          const unsigned lo = element(row, k0 + kl0 + 2 * i, at0) ? __ldg(x16 + at0) : 0u;
          const unsigned hi = element(row, k0 + kl0 + 2 * i + 1, at1) ? __ldg(x16 + at1) : 0u;
          w[i] = lo | (hi << 16);
        }
#pragma unroll
        for (int c = 0; c < kKPer / kPerChunk; ++c)
          asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(dst + Layout::offset(r, kl0 / kPerChunk + c)),
                       "r"(w[4 * c]), "r"(w[4 * c + 1]), "r"(w[4 * c + 2]), "r"(w[4 * c + 3])
                       : "memory");
      }
    }
  }

 private:
  // Whether A[row][k] lies in the image (else it is 0); `at` its offset in x.
  __device__ __forceinline__ static bool element(const typename Gather::Row& row, int k, long long& at) {
    if (!row.ok || k >= K) return false;
    const int2 tap = Taps::at(k);
    if constexpr (Gather::kPadded) {
      const int ih = row.ih0 + (tap.y >> 16), iw = row.iw0 + (tap.y & 0xffff);
      if ((unsigned)ih >= (unsigned)S::kH || (unsigned)iw >= (unsigned)S::kW) return false;
    }
    at = row.base + tap.x;
    return true;
  }
};

}  // namespace fj
