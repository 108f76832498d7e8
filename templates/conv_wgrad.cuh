// fusejit/conv_wgrad.cuh — conv2d's weight gradient (conv2d_weight_grad,
// torch.nn.grad.conv2d_weight) as an implicit GEMM, with loaders for the
// mma.sync mainloop (gemm_mma.cuh) and the SIMT one (gemm_simt.cuh). Per group g:
//   M = Cout / groups   N = (Cin / groups) * KH * KW   K = kBatch * OH * OW
//   A[m][k] = grad[img][g*CoutG + m][oh][ow]                               k = (img*OH + oh)*OW + ow
//   B[k][n] = x[img][g*CinG + ci][oh*SH - PH + kh*DH][ow*SW - PW + kw*DW]   n = (ci*KH + kh)*KW + kw
// (0 in the padding); C[m][n] is dW[g*CoutG + m][ci][kh][kw]. Both operands
// are k-contiguous: A's rows are grad's channel planes, read in place (no
// transposed copy); B's rows are the rows of im2col(x), made by the loader's
// addresses (no im2col buffer).
// k past K is copied as zeros (no test where K is whole k tiles); rows past M
// (A) are zeros unless M is whole row tiles; rows past N (B) copy row 0's tap:
// they only feed output columns past N, which are never stored. (H100, seed 3's dW,
// [64 x 72] over K = 8.26M: this orientation, 64x128 tiles, 3.81 ms fp32 /
// 1.34 tf32 / 1.13 bf16; x's rows as M with 128x64 tiles and the mma of rows
// past M skipped per warp: 5.34 / 1.57 / 1.21; rows past M, N left uncopied
// instead of zeroed: 4.32 / 1.53 / 1.14, zeroed again: 3.79 / 1.33 / 1.12.)
// S: the conv's shape (conv_simt.cuh's concept: kBatch kCin kH kW kCout kKH
// kKW kSH kSW kPH kPW kDH kDW kGroups kOH kOW).
#pragma once

#include "fusejit/conv_simt.cuh"
#include "fusejit/gemm_mma.cuh"

namespace fj {

template <class S>
struct WgradDims {
  static constexpr int kPix = S::kOH * S::kOW;                      // output pixels of an image
  static constexpr int M = S::kCout / S::kGroups;                   // grad's channels of a group
  static constexpr int N = S::kCin / S::kGroups * S::kKH * S::kKW;  // im2col rows (ci, kh, kw) of a group
  static constexpr int K = S::kBatch * kPix;
  static constexpr long long kGradImage = (long long)S::kCout * kPix;  // grad's elements per image
  static constexpr long long kXImage = (long long)S::kCin * S::kH * S::kW;
  static constexpr bool kPadded = S::kPH > 0 || S::kPW > 0;
  // Offset of output pixel k's window origin in x (relative to the channel), and the origin.
  struct Origin {
    long long off;
    int ih0, iw0;
  };
  static __device__ __forceinline__ Origin origin(int k) {
    const int img = k / kPix, pix = k - img * kPix;
    const int oh = pix / S::kOW, ow = pix - oh * S::kOW;
    Origin o;
    o.ih0 = oh * S::kSH - S::kPH;
    o.iw0 = ow * S::kSW - S::kPW;
    o.off = img * kXImage + (long long)o.ih0 * S::kW + o.iw0;
    return o;
  }
  // Offset of pixel k in grad (relative to the channel plane).
  static __device__ __forceinline__ long long grad_offset(int k) {
    const int img = k / kPix;
    return img * kGradImage + (k - img * kPix);
  }
  // Whether tap (dh, dw) (packed as NoTaps: (kh*DH << 16) | kw*DW) of origin o lies in the image.
  static __device__ __forceinline__ bool inside(const Origin& o, int packed) {
    if constexpr (!kPadded) return true;
    const int ih = o.ih0 + (packed >> 16), iw = o.iw0 + (packed & 0xffff);
    return (unsigned)ih < (unsigned)S::kH && (unsigned)iw < (unsigned)S::kW;
  }
};

// ---- mma.sync loaders (gemm_mma.cuh's loader interface) -----------------------------

// A: grad at the group's first channel. Thread tid copies chunk tid % CH of
// rows tid / CH + i * kRowStep. Copies of kCopyBytes: the widest (16, 8, 4
// bytes) that an image's plane is a multiple of (so no copy straddles two
// images and every copy is aligned); 16-bit planes of odd size element-wise.
template <class T, class S>
struct MmaWgradGrad {
  using Elem = T;
  using D = WgradDims<S>;
  static constexpr bool kKContiguous = true;
  const T* __restrict__ grad;

  template <class Layout, int kThreads>
  struct Cursor {
    static constexpr int E = sizeof(T), kPerChunk = 16 / E, CH = Layout::kChunksPerRow;
    static constexpr int kCopyBytes = (D::kPix * E) % 16 == 0 ? 16 : (D::kPix * E) % 8 == 0 ? 8
                                      : (D::kPix * E) % 4 == 0 ? 4 : E;
    static constexpr int kCopies = 16 / kCopyBytes, kPerCopy = kCopyBytes / E;
    static_assert(kThreads % CH == 0, "a tile row must not be wider than the block");
    static constexpr int kRowStep = kThreads / CH, kIters = ceil_div(Layout::kRows, kRowStep);
    // Whole k tiles and whole row tiles: no test (the splits are whole k tiles too).
    static constexpr bool kWhole = D::K % (CH * kPerChunk) == 0 && D::M % Layout::kRows == 0;
    const T* __restrict__ grad;  // at this thread's first row
    int rows_left;               // rows of the problem from this thread's first one
    int tr, tc;                  // its first row and its chunk in the tile

    __device__ __forceinline__ Cursor(const T* __restrict__ g, int m0, int tid) {
      tr = tid / CH;
      tc = tid % CH;
      grad = g + (long long)(m0 + tr) * D::kPix;
      rows_left = D::M - (m0 + tr);
    }
    __device__ __forceinline__ void load(unsigned dst, int k0) const {
#pragma unroll
      for (int c = 0; c < kCopies; ++c) {
        const int k = k0 + tc * kPerChunk + c * kPerCopy;
        const long long off = D::grad_offset(kWhole || k < D::K ? k : 0);
#pragma unroll
        for (int i = 0; i < kIters; ++i) {
          const int r = i * kRowStep;
          if (Layout::kRows % kRowStep != 0 && tr + r >= Layout::kRows) break;
          const unsigned s = dst + c * kCopyBytes +
                             (kRowStep % Layout::kPeriod == 0 ? Layout::offset(tr, tc) + r * Layout::kStride
                                                              : Layout::offset(tr + r, tc));
          const bool ok = kWhole || (r < rows_left && k < D::K);
          const T* src = ok ? grad + (long long)r * D::kPix + off : grad;
          if constexpr (kCopyBytes == 16) {
            mma::cp_async16(s, src, ok ? 16 : 0);
          } else if constexpr (kCopyBytes == 8) {
            asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(s), "l"(__cvta_generic_to_global(src)),
                         "r"(ok ? 8 : 0) : "memory");
          } else if constexpr (kCopyBytes == 4) {
            mma::cp_async4(s, src, ok ? 4 : 0);
          } else {  // 16-bit planes of odd size: a plain load and a shared store per element
            mma::st_shared_u16(s, ok ? *reinterpret_cast<const unsigned short*>(src) : (unsigned short)0);
          }
        }
      }
    }
  };
  template <class Layout, int kThreads>
  __device__ __forceinline__ Cursor<Layout, kThreads> begin(int m0, int tid) const {
    return Cursor<Layout, kThreads>(grad, m0, tid);
  }
};

// B: x at the group's first channel. A warp copies 32 consecutive k (fp32) or
// pairs of k (16-bit) of one row n: consecutive output pixels, so its loads
// are coalesced along ow. Each thread keeps its rows' tap offsets (Taps: a
// constant table or divisions) and works out one (or two) pixels per k tile.
// fp32: 4-byte cp.async (ignore-src writes the 0s); 16-bit: every row's
// loads in flight together, then 4-byte shared stores of the pairs.
template <class T, class S, class Taps = NoTaps<S>>
struct MmaWgradCols {
  using Elem = T;
  using D = WgradDims<S>;
  static constexpr bool kKContiguous = true;
  const T* __restrict__ x;

  template <class Layout, int kThreads>
  struct Cursor {
    static constexpr int E = sizeof(T), kPer = 4 / E;  // consecutive k per thread: one 4-byte word
    static constexpr int BK = Layout::kChunksPerRow * (16 / E), kKThreads = BK / kPer;
    static_assert(kThreads % kKThreads == 0, "whole rows of k per group of threads");
    static constexpr int kRowStep = kThreads / kKThreads, kIters = ceil_div(Layout::kRows, kRowStep);
    // Rows i and i + kPhases of a thread share the swizzle pattern: kPhases shared offsets per thread.
    static_assert(kRowStep % Layout::kPeriod == 0 || Layout::kPeriod % kRowStep == 0, "swizzle phases");
    static constexpr int kPhases = kRowStep % Layout::kPeriod == 0 ? 1 : Layout::kPeriod / kRowStep;
    static constexpr int kOffsets = kPhases < kIters ? kPhases : kIters;
    // K a whole number of k tiles (and the splits whole k tiles): no k past K, no test.
    static constexpr bool kWholeK = D::K % BK == 0;
    const T* __restrict__ x;
    int tap[kIters];     // x offset of row n's tap (rows past N: row 0's, their columns never stored); -2: past the tile
    int packed[kIters];  // (kh*DH << 16) | kw*DW, for the padding test
    int kl;              // this thread's first k in a k tile
    unsigned soff[kOffsets];  // shared offsets of its word in rows 0 .. kOffsets - 1 of its rows

    __device__ __forceinline__ unsigned smem_at(unsigned dst, int i) const {
      return dst + soff[i % kOffsets] + (i / kOffsets) * (kOffsets * kRowStep * Layout::kStride);
    }
    __device__ __forceinline__ Cursor(const T* __restrict__ p, int n0, int tid) : x(p) {
      const int tr = tid / kKThreads;
      kl = (tid % kKThreads) * kPer;
#pragma unroll
      for (int i = 0; i < kOffsets; ++i) soff[i] = Layout::offset(tr + i * kRowStep, kl * E / 16) + (kl * E) % 16;
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const int n = n0 + tr + i * kRowStep;
        const int2 t = Taps::at(n < D::N ? n : 0);
        tap[i] = tr + i * kRowStep >= Layout::kRows ? -2 : t.x;
        packed[i] = t.y;
      }
    }
    __device__ __forceinline__ void load(unsigned dst, int k0) const {
      if constexpr (E == 4) {
        const int k = k0 + kl;
        const bool k_ok = kWholeK || k < D::K;
        const typename D::Origin o = D::origin(k_ok ? k : 0);
        const T* base = x + o.off;  // this thread's pixel; each row adds its tap
#pragma unroll
        for (int i = 0; i < kIters; ++i) {
          if (Layout::kRows % kRowStep != 0 && tap[i] == -2) continue;  // past the tile
          if constexpr (kWholeK && !D::kPadded) {
            mma::cp_async4(smem_at(dst, i), base + tap[i], 4);
          } else {
            const bool in = k_ok && D::inside(o, packed[i]);
            mma::cp_async4(smem_at(dst, i), in ? base + tap[i] : x, in ? 4 : 0);
          }
        }
      } else {
        static_assert(E == 2, "fp32 or 16-bit operands");
        const int ka = k0 + kl, kb = ka + 1;
        const bool ka_ok = kWholeK || ka < D::K, kb_ok = kWholeK || kb < D::K;
        const typename D::Origin oa = D::origin(ka_ok ? ka : 0), ob = D::origin(kb_ok ? kb : 0);
        const unsigned short* p = reinterpret_cast<const unsigned short*>(x);
        unsigned w[kIters];
#pragma unroll
        for (int i = 0; i < kIters; ++i) {
          const bool ina = tap[i] >= 0 && ka_ok && D::inside(oa, packed[i]);
          const bool inb = tap[i] >= 0 && kb_ok && D::inside(ob, packed[i]);
          const unsigned lo = ina ? p[oa.off + tap[i]] : 0u, hi = inb ? p[ob.off + tap[i]] : 0u;
          w[i] = lo | (hi << 16);
        }
#pragma unroll
        for (int i = 0; i < kIters; ++i) {
          if (Layout::kRows % kRowStep != 0 && tap[i] == -2) continue;  // past the tile
          asm volatile("st.shared.b32 [%0], %1;" ::"r"(smem_at(dst, i)), "r"(w[i])
                       : "memory");
        }
      }
    }
  };
  template <class Layout, int kThreads>
  __device__ __forceinline__ Cursor<Layout, kThreads> begin(int n0, int tid) const {
    return Cursor<Layout, kThreads>(x, n0, tid);
  }
};

// B from x in NHWC (the staging kernel's copy), kKContiguous false: the
// tile is [BK pixels][BN columns], columns n = (kh*KW + kw) * CinG + ci, so
// a 16-byte chunk of a row is kPerChunk channels of one tap at one pixel:
// one cp.async (zero-filled in the padding and past N) where the NCHW
// gather needs 4 (fp32) or 8 element loads (16-bit). Each thread keeps its
// chunk's tap and channel and works out the pixels of its rows per k tile.
// Needs CinG % (16 / sizeof(T)) == 0 and x 16-byte aligned (scratch).
template <class T, class S>
struct MmaWgradNhwc {
  using Elem = T;
  using D = WgradDims<S>;
  static constexpr bool kKContiguous = false;
  static constexpr int kCinG = S::kCin / S::kGroups;
  static constexpr long long kImage = (long long)S::kH * S::kW * S::kCin;  // x's elements per image
  const T* __restrict__ x;  // x in NHWC at the group's first channel

  template <class Layout, int kThreads>
  struct Cursor {
    static constexpr int E = sizeof(T), kPerChunk = 16 / E, CH = Layout::kChunksPerRow;
    static_assert(kCinG % kPerChunk == 0, "a 16-byte chunk must hold channels of one tap");
    static_assert(kThreads % CH == 0, "a tile row must not be wider than the block");
    static constexpr int kRowStep = kThreads / CH, kIters = ceil_div(Layout::kRows, kRowStep);
    static constexpr bool kWholeK = D::K % Layout::kRows == 0;  // the splits are whole k tiles too
    const T* __restrict__ x;  // at this thread's chunk: its channels, its tap's offset
    int dh, dw;               // the tap's offsets in x (kh * DH, kw * DW)
    bool col_ok;              // column < N
    int tr, tc;               // its first row (pixel) of a k tile, its chunk of a row
    unsigned soff;            // shared offset of its chunk in row tr

    __device__ __forceinline__ Cursor(const T* __restrict__ p, int n0, int tid) {
      tr = tid / CH;
      tc = tid % CH;
      const int n = n0 + tc * kPerChunk;
      col_ok = n < D::N;
      const int tap = col_ok ? n / kCinG : 0, ci = col_ok ? n % kCinG : 0;
      dh = (tap / S::kKW) * S::kDH;
      dw = (tap % S::kKW) * S::kDW;
      x = p + ci + ((long long)dh * S::kW + dw) * S::kCin;
      soff = Layout::offset(tr, tc);
    }
    __device__ __forceinline__ void load(unsigned dst, int k0) const {
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const int r = tr + i * kRowStep;
        if (Layout::kRows % kRowStep != 0 && r >= Layout::kRows) break;
        const unsigned s = dst + (kRowStep % Layout::kPeriod == 0 ? soff + i * kRowStep * Layout::kStride
                                                                   : Layout::offset(r, tc));
        const int k = k0 + r;
        const bool k_ok = kWholeK || k < D::K;
        const int kk = k_ok ? k : 0, img = kk / D::kPix, pix = kk - img * D::kPix;
        const int oh = pix / S::kOW, ow = pix - oh * S::kOW;
        const int ih0 = oh * S::kSH - S::kPH, iw0 = ow * S::kSW - S::kPW;
        bool in = col_ok && k_ok;
        if constexpr (D::kPadded)
          in = in && (unsigned)(ih0 + dh) < (unsigned)S::kH && (unsigned)(iw0 + dw) < (unsigned)S::kW;
        const T* src = x + img * kImage + ((long long)ih0 * S::kW + iw0) * S::kCin;
        mma::cp_async16(s, in ? src : x, in ? 16 : 0);
      }
    }
  };
  template <class Layout, int kThreads>
  __device__ __forceinline__ Cursor<Layout, kThreads> begin(int n0, int tid) const {
    return Cursor<Layout, kThreads>(x, n0, tid);
  }
};

// ---- SIMT loaders (gemm_simt.cuh's loader interface) ------------------------------

template <class T, class S, class Taps = NoTaps<S>>
struct WgradCols {
  using D = WgradDims<S>;
  static constexpr bool kKContiguous = true;
  const T* __restrict__ x;  // at the group's first channel
  struct Row {
    int tap, packed;
    bool ok;
  };
  __device__ __forceinline__ Row col(int n) const {
    const int2 t = Taps::at(n < D::N ? n : 0);
    return {t.x, t.y, n < D::N};
  }
  __device__ __forceinline__ float load(const Row& c, int k) const {
    if (!c.ok || k >= D::K) return 0.f;
    const typename D::Origin o = D::origin(k);
    return D::inside(o, c.packed) ? load_as_float(x, o.off + c.tap) : 0.f;
  }
};

template <class T, class S>
struct WgradGrad {
  using D = WgradDims<S>;
  static constexpr bool kKContiguous = true;
  const T* __restrict__ grad;  // at the group's first channel
  struct Row {
    const T* ptr;
    bool ok;
  };
  __device__ __forceinline__ Row row(int m) const { return {grad + (long long)(m < D::M ? m : 0) * D::kPix, m < D::M}; }
  __device__ __forceinline__ float load(const Row& r, int k) const {
    return r.ok && k < D::K ? load_as_float(r.ptr, D::grad_offset(k)) : 0.f;
  }
};

}  // namespace fj
