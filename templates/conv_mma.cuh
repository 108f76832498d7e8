// fusejit/conv_mma.cuh — conv2d's A operand (the im2col gather of
// conv_simt.cuh's ConvA) as a loader for the mma.sync mainloop of
// gemm_mma.cuh: A[m][k] of one BM x BK tile copied element by element into
// the swizzled k-contiguous shared-memory layout, 0 outside the image, past
// K and for rows the pixel map marks as not ok.
//   fp32 elements: 4-byte cp.async (ignore-src writes the 0s), asynchronous
//                  like the B operand's copies
//   16-bit:        loads into registers (all of a thread's loads in flight
//                  together, packed in pairs), then 16-byte shared stores
// Threads split the tile as kRowThreads along m (consecutive threads:
// consecutive pixels, so a warp's loads of one tap are coalesced) by
// kKThreads along k (a warp shares k: its tap is one broadcast). Per tile,
// each thread works out its rows once (begin: pixel, row pointer, shared
// offsets, whether every tap of the pixel lies in the image). A k-tile inside
// K for a warp whose pixels are all interior takes the fast path: per element
// a tap, an address and a copy; else each element is also tested (padding,
// K, rows that compute nothing).
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
  struct Cursor {
    static constexpr int E = sizeof(T), kPerChunk = 16 / E;
    static constexpr int BM = Layout::kRows, BK = Layout::kChunksPerRow * kPerChunk;
    static constexpr int kRowThreads = kThreads < BM ? kThreads : BM;
    static constexpr int kKThreads = kThreads / kRowThreads, kKPer = BK / kKThreads;
    static constexpr int kRowsPer = BM / kRowThreads, kChunks = kKPer / kPerChunk;
    static_assert(kRowThreads >= 32 && BM % kRowThreads == 0 && BK % kKThreads == 0 && kKPer % kPerChunk == 0,
                  "the block must split the tile into warps of one k each, whole chunks per thread");
    const T* __restrict__ row_ptr[kRowsPer];  // x at (n, c0, ih0, iw0) of each row (may point before the image)
    int ih0[kRowsPer], iw0[kRowsPer];
    bool ok[kRowsPer];
    bool interior;  // every row ok, with all of its taps inside the image
    unsigned chunk_off[kRowsPer][kChunks];  // shared offsets of this thread's chunks in a stage
    int kl0;                                // this thread's first k in a k-tile

    __device__ __forceinline__ Cursor(const Gather& g, int m0, int tid) {
      kl0 = (tid / kRowThreads) * kKPer;
      interior = true;
#pragma unroll
      for (int j = 0; j < kRowsPer; ++j) {
        const int r = tid % kRowThreads + j * kRowThreads;
        const typename Gather::Row row = g.row(m0 + r);
        row_ptr[j] = g.x + row.base;
        ih0[j] = row.ih0;
        iw0[j] = row.iw0;
        ok[j] = row.ok;
        interior = interior && row.ok && row.ih0 >= 0 && row.ih0 + (S::kKH - 1) * S::kDH < S::kH && row.iw0 >= 0 &&
                   row.iw0 + (S::kKW - 1) * S::kDW < S::kW;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) chunk_off[j][c] = Layout::offset(r, kl0 / kPerChunk + c);
      }
    }

    // Whether A[row j][k] lies in the image (else it is 0); `src` its address.
    __device__ __forceinline__ bool element(int j, int k, int k_end, const T*& src) const {
      const int2 tap = Taps::at(k < K ? k : 0);
      src = row_ptr[j] + tap.x;
      bool in = ok[j] && k < k_end;
      if constexpr (Gather::kPadded) {
        const int ih = ih0[j] + (tap.y >> 16), iw = iw0[j] + (tap.y & 0xffff);
        in = in && (unsigned)ih < (unsigned)S::kH && (unsigned)iw < (unsigned)S::kW;
      }
      return in;
    }

    __device__ __forceinline__ void load(unsigned dst, int k0) const {
      const int k_first = k0 + kl0;
      if (k0 + BK <= K && __all_sync(0xffffffffu, interior)) {  // warp-uniform
#pragma unroll
        for (int j = 0; j < kRowsPer; ++j) {
          if constexpr (E == 4) {
#pragma unroll
            for (int i = 0; i < kKPer; ++i)
              asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst + chunk_off[j][i / kPerChunk] +
                                                                            (i % kPerChunk) * E),
                           "l"(__cvta_generic_to_global(row_ptr[j] + Taps::at(k_first + i).x))
                           : "memory");
          } else {
            unsigned w[kKPer / 2];
            const unsigned short* p = reinterpret_cast<const unsigned short*>(row_ptr[j]);
#pragma unroll
            for (int i = 0; i < kKPer / 2; ++i)
              w[i] = __ldg(p + Taps::at(k_first + 2 * i).x) | (unsigned(__ldg(p + Taps::at(k_first + 2 * i + 1).x)) << 16);
            store_chunks(dst, j, w);
          }
        }
        return;
      }
      const int k_end = K;
#pragma unroll
      for (int j = 0; j < kRowsPer; ++j) {
        if constexpr (E == 4) {
#pragma unroll
          for (int i = 0; i < kKPer; ++i) {
            const T* src;
            const bool in = element(j, k_first + i, k_end, src);
            const unsigned d = dst + chunk_off[j][i / kPerChunk] + (i % kPerChunk) * E;
            asm volatile(
                "{\n.reg .pred skip;\nsetp.eq.u32 skip, %2, 0;\n"
                "cp.async.ca.shared.global [%0], [%1], 4, skip;\n}\n" ::"r"(d),
                "l"(__cvta_generic_to_global(src)), "r"((unsigned)in)
                : "memory");
          }
        } else {  // pairs packed into 32-bit words, stored as whole 16-byte chunks
          static_assert(E == 2, "fp32 or 16-bit operands");
          unsigned w[kKPer / 2];
#pragma unroll
          for (int i = 0; i < kKPer / 2; ++i) {
            const T *s0, *s1;
            const bool in0 = element(j, k_first + 2 * i, k_end, s0);
            const bool in1 = element(j, k_first + 2 * i + 1, k_end, s1);
            const unsigned lo = in0 ? __ldg(reinterpret_cast<const unsigned short*>(s0)) : 0u;
            const unsigned hi = in1 ? __ldg(reinterpret_cast<const unsigned short*>(s1)) : 0u;
            w[i] = lo | (hi << 16);
          }
          store_chunks(dst, j, w);
        }
      }
    }

    // Row j's packed 16-bit elements, as whole 16-byte chunks.
    __device__ __forceinline__ void store_chunks(unsigned dst, int j, const unsigned (&w)[kKPer / 2]) const {
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(dst + chunk_off[j][c]), "r"(w[4 * c]),
                     "r"(w[4 * c + 1]), "r"(w[4 * c + 2]), "r"(w[4 * c + 3])
                     : "memory");
    }
  };

  template <class Layout, int kThreads>
  __device__ __forceinline__ Cursor<Layout, kThreads> begin(int m0, int tid) const {
    return Cursor<Layout, kThreads>(gather, m0, tid);
  }
};

}  // namespace fj
