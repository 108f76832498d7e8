// fusejit/gemm_mma.cuh — the sm_80+ tensor-core GEMM mainloop: mma.sync
// (inline PTX) fed by a multi-stage cp.async shared-memory ring and ldmatrix.
//
// C[m][n] = sum_k A[m][k] * B[k][n] for one BM x BN tile, fp32 accumulation.
// Precision kinds (tag types in fj::mma):
//   BF16, F16  operands bf16 / f16 in global memory, m16n8k16
//   TF32       operands fp32, their raw bits to the tensor core (it uses the top
//              19: truncation, as wgmma's TF32; no cvt per fragment), m16n8k8
//   F32x3      3xTF32, fp32-accurate: x = hi + lo, hi = tf32(x), lo = tf32(x - hi);
//              per k tile, s = a_lo*b_hi + a_hi*b_lo + a_hi*b_hi (small terms first)
//              in the tensor core, then acc += s in fp32
// The header never names __half / __nv_bfloat16 (fp32 programs need no
// cuda_fp16.h): operands only need sizeof(Elem) == Kind::kElemBytes.
//
// Shared memory: a kStages ring of A [BM][BK] and B [BN][BK] (NK-major) or
// [BK][BN] (KN-major) tiles. 16-byte chunks are XOR-swizzled per row so
// ldmatrix (.trans for 16-bit KN B) reads are bank-conflict free; fp32 KN B
// (scalar reads: ldmatrix cannot transpose 32-bit) uses padded rows instead.
//
// Loader interface (MmaRowMajorA / MmaNKMajorB / MmaKNMajorB below):
//   using Elem;                          // element type in global memory
//   static constexpr bool kKContiguous;  // smem tile [rows][BK] (true) or [BK][BN]
//   template <class Layout, int kThreads>
//   Cursor begin(int mn0, int thread) const;
//     this thread's part of the block tile at mn0 = m0 or n0 (what it can
//     work out once per tile: row pointers, shared-memory offsets), with
//   void Cursor::load(unsigned smem_dst, int k0) const;
//     starts copying the k-tile at k0 into Layout (an mma::SmemTile at shared
//     address smem_dst), zero outside the problem: cp.async (no commit, no
//     wait) or plain stores.
//
// MmaFragment implements the fragment interface documented in gemm_simt.cuh
// with the mma.sync m16n8 accumulator layout.
#pragma once

#include "fusejit/cp_async.cuh"
#include "fusejit/fj_common.cuh"
#include "fusejit/split_k.cuh"

namespace fj {
namespace mma {

enum Op { kOpBf16, kOpF16, kOpTf32 };
template <Op kOp_, int kElemBytes_, int kK_, bool kSplit_>
struct KindOf {
  static constexpr Op kOp = kOp_;
  static constexpr int kElemBytes = kElemBytes_, kK = kK_;  // kK: k of one mma
  static constexpr bool kSplit = kSplit_;                   // 3xTF32
};
struct BF16 : KindOf<kOpBf16, 2, 16, false> {};
struct F16 : KindOf<kOpF16, 2, 16, false> {};
struct TF32 : KindOf<kOpTf32, 4, 8, false> {};
struct F32x3 : KindOf<kOpTf32, 4, 8, true> {};

__host__ __device__ constexpr bool is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

// Shared-memory tile: kRows rows of kRowBytes bytes, in 16-byte chunks.
// Swizzled (kPadded false): chunk ch of row r sits at ch ^ x(r), so the 8 rows
// an ldmatrix phase reads (same logical chunk) hit 8 different 16-byte bank
// groups. Padded: rows kPadBytes apart from the bank pattern of the previous
// row, for fp32 [k][n] B read by scalar loads (rows t, t+4 of 4 consecutive t,
// 8 consecutive floats each: conflict free when kRowBytes % 128 == 0).
constexpr int kPadBytes = 32;
template <int kRows_, int kRowBytes, bool kPadded>
struct SmemTile {
  static constexpr int kRows = kRows_, kChunksPerRow = kRowBytes / 16;
  static constexpr int kStride = kRowBytes + (kPadded ? kPadBytes : 0), kBytes = kRows * kStride;
  static constexpr int kSpan = kChunksPerRow < 8 ? kChunksPerRow : 8;          // chunks that get XORed
  static constexpr int kRowsPerLine = kChunksPerRow < 8 ? 8 / kChunksPerRow : 1;  // rows per 128 bytes
  static constexpr int kPeriod = kPadded ? 1 : 8;  // rows after which the chunk pattern repeats
  static_assert(kRowBytes % 16 == 0 && is_pow2(kChunksPerRow), "smem rows: a power of two of 16-byte chunks");
  static __device__ __forceinline__ unsigned offset(unsigned r, unsigned ch) {
    return r * kStride + ((kPadded ? ch : ch ^ ((r / kRowsPerLine) % kSpan)) << 4);
  }
};

// ---- PTX wrappers --------------------------------------------------------------
using fj::cp_async16;  // (templates/cp_async.cuh)
using fj::cp_async4;
using fj::cp_async_commit;
using fj::cp_async_wait;
__device__ __forceinline__ void st_shared_u16(unsigned dst, unsigned short v) {
  asm volatile("st.shared.u16 [%0], %1;" ::"r"(dst), "h"(v) : "memory");
}
__device__ __forceinline__ unsigned ld_shared_u32(unsigned src) {
  unsigned v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(src));
  return v;
}
// Four 8x8 b16 matrices; lanes 8j..8j+7 give the row addresses of matrix j.
__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], unsigned src) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(src));
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], unsigned src) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(src));
}
__device__ __forceinline__ unsigned to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
// 3xTF32 split of raw fp32 bits: hi = tf32(x clamped to the largest finite
// tf32), masked to an exact fp32 value; lo = tf32(x - hi), the difference
// exact for finite x. Inf/NaN x: hi is finite and lo carries the Inf/NaN.
__device__ __forceinline__ void split_tf32(unsigned x, unsigned& hi, unsigned& lo) {
  constexpr unsigned kTf32Mask = 0xffffe000u, kMaxTf32Bits = 0x7f7fe000u;  // sign, exponent, 10 mantissa bits
  const float f = __uint_as_float(x), kMax = __uint_as_float(kMaxTf32Bits);
  hi = to_tf32(fminf(fmaxf(f, -kMax), kMax)) & kTf32Mask;  // fmaxf(NaN, c) = c
  lo = to_tf32(f - __uint_as_float(hi));
}

// d (rows g, g, g+8, g+8 x cols 2t, 2t+1 of the 16x8 tile) += a * b, one mma.sync.
#define FJ_MMA_SYNC(shape, type)                                                                          \
  asm("mma.sync.aligned." shape ".row.col.f32." type "." type ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
      "{%0,%1,%2,%3};"                                                                                    \
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                                                            \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
template <Op kOp>
__device__ __forceinline__ void mma_op(float& d0, float& d1, float& d2, float& d3, const unsigned (&a)[4],
                                       const unsigned (&b)[2]) {
  if constexpr (kOp == kOpBf16)
    FJ_MMA_SYNC("m16n8k16", "bf16");
  else if constexpr (kOp == kOpF16)
    FJ_MMA_SYNC("m16n8k16", "f16");
  else
    FJ_MMA_SYNC("m16n8k8", "tf32");
}
#undef FJ_MMA_SYNC

// acc rows of 16-row subtile mi += a (that subtile) * B (NI 8-col subtiles).
template <Op kOp, int kRows, int kCols>
__device__ __forceinline__ void mma_rows(float (&acc)[kRows][kCols], int mi, const unsigned (&a)[4],
                                         const unsigned (&b)[kCols / 2][2]) {
#pragma unroll
  for (int ni = 0; ni < kCols / 2; ++ni)
    mma_op<kOp>(acc[2 * mi][2 * ni], acc[2 * mi][2 * ni + 1], acc[2 * mi + 1][2 * ni], acc[2 * mi + 1][2 * ni + 1],
                a, b[ni]);
}

// acc += A * B for one k step (fragments as loaded: raw fp32 bits for tf32 kinds).
template <class Kind, int MI, int NI>
__device__ __forceinline__ void mma_step(float (&acc)[2 * MI][2 * NI], unsigned (&a)[MI][4], unsigned (&b)[NI][2]) {
  if constexpr (Kind::kSplit) {  // B split up front, A one 16-row subtile at a time (fewer live registers)
    unsigned bl[NI][2];
#pragma unroll
    for (int i = 0; i < NI * 2; ++i) split_tf32(b[i / 2][i % 2], b[i / 2][i % 2], bl[i / 2][i % 2]);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      unsigned al[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) split_tf32(a[mi][q], a[mi][q], al[q]);
      mma_rows<kOpTf32>(acc, mi, al, b);       // a_lo * b_hi
      mma_rows<kOpTf32>(acc, mi, a[mi], bl);   // a_hi * b_lo
      mma_rows<kOpTf32>(acc, mi, a[mi], b);    // a_hi * b_hi
    }
  } else {  // TF32: the raw fp32 bits (the tensor core reads the top 19), as on wgmma
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) mma_rows<Kind::kOp>(acc, mi, a[mi], b);
  }
}

// Copies the Layout::kRows x (chunks * 16 bytes) tile at (r0, c0) of the
// global R x C matrix p[r * LD + c] into Layout at dst; zero outside. Copy
// width: 16-byte cp.async when rows are 16-byte aligned (LD * sizeof(T) % 16
// == 0, base pointer 16-byte aligned: the caller's guarantee), else 4-byte
// cp.async, else (16-bit with odd LD) element-wise loads and stores.
// Thread tid copies chunk tid % CH of rows tid / CH + i * kRowStep.
template <class T, int R, int C, long long LD, class Layout, int kThreads>
__device__ __forceinline__ void copy_tile(const T* __restrict__ p, unsigned dst, int r0, int c0, int tid) {
  constexpr int E = sizeof(T), kPerChunk = 16 / E, CH = Layout::kChunksPerRow;
  constexpr int kCopyBytes = (LD * E) % 16 == 0 ? 16 : (LD * E) % 4 == 0 ? 4 : E;
  static_assert(kThreads % CH == 0, "a tile row must not be wider than the block");
  constexpr int kRowStep = kThreads / CH, kIters = ceil_div(Layout::kRows, kRowStep);
  const int tr = tid / CH, tc = tid % CH;
  int rows_left = R - (r0 + tr);
  const int cols_left = C - (c0 + tc * kPerChunk);
  // Opaque per call: the row tests are redone per k tile (one compare each)
  // rather than hoisted out of the k loop, where they would pin registers.
  asm volatile("" : "+r"(rows_left));
  const T* g = p + (long long)(r0 + tr) * LD + (c0 + tc * kPerChunk);  // dereferenced only in bounds
  const int chunk_bytes = cols_left <= 0 ? 0 : cols_left >= kPerChunk ? 16 : cols_left * E;
  const unsigned s0 = dst + Layout::offset(tr, tc);
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    if (Layout::kRows % kRowStep != 0 && tr + i * kRowStep >= Layout::kRows) break;
    const unsigned s = kRowStep % Layout::kPeriod == 0 ? s0 + i * kRowStep * Layout::kStride
                                                       : dst + Layout::offset(tr + i * kRowStep, tc);
    const T* src = g + i * kRowStep * LD;
    const bool row_ok = i * kRowStep < rows_left;
    if constexpr (kCopyBytes == 16) {
      const int bytes = row_ok ? chunk_bytes : 0;
      cp_async16(s, bytes ? src : p, bytes);
    } else if constexpr (kCopyBytes == 4) {
      constexpr int kPer = 4 / E;
#pragma unroll
      for (int j = 0; j < 16 / 4; ++j) {
        const int l = cols_left - j * kPer;
        const int bytes = !row_ok || l <= 0 ? 0 : l >= kPer ? 4 : l * E;
        cp_async4(s + 4 * j, bytes ? src + j * kPer : p, bytes);
      }
    } else {
      static_assert(E == 2, "element-wise staging is for 16-bit types");
      const unsigned short* s16 = reinterpret_cast<const unsigned short*>(src);
#pragma unroll
      for (int j = 0; j < kPerChunk; ++j)
        st_shared_u16(s + 2 * j, row_ok && j < cols_left ? s16[j] : (unsigned short)0);
    }
  }
}

template <bool B, class X, class Y>
struct Conditional { using type = X; };
template <class X, class Y>
struct Conditional<false, X, Y> { using type = Y; };

}  // namespace mma

// ---- loaders ---------------------------------------------------------------------
// A dense operand stored p[r * LD + c], r < R, c < C (c contiguous): extents
// and leading dimension compile-time, p the run-time base (16-byte aligned:
// the caller guarantees it). kKContiguous: c is k (else r is k).
template <class T, int R, int C, long long LD, bool kKContiguous_>
struct MmaDense {
  using Elem = T;
  static constexpr bool kKContiguous = kKContiguous_;
  const T* __restrict__ p;
  template <class Layout, int kThreads>
  struct Cursor {
    const T* __restrict__ p;
    int mn0, tid;
    __device__ __forceinline__ void load(unsigned dst, int k0) const {
      mma::copy_tile<T, R, C, LD, Layout, kThreads>(p, dst, kKContiguous ? mn0 : k0, kKContiguous ? k0 : mn0, tid);
    }
  };
  template <class Layout, int kThreads>
  __device__ __forceinline__ Cursor<Layout, kThreads> begin(int mn0, int tid) const {
    return {p, mn0, tid};
  }
};
// A[m][k] = p[m * LDA + k] (linear's x, matmul's A).
template <class T, int M, int K, long long LDA>
using MmaRowMajorA = MmaDense<T, M, K, LDA, true>;
// B[k][n] = p[n * LDB + k] (linear's weight, stored [N][K]).
template <class T, int N, int K, long long LDB>
using MmaNKMajorB = MmaDense<T, N, K, LDB, true>;
// B[k][n] = p[k * LDB + n] (matmul's B, stored [K][N]).
template <class T, int N, int K, long long LDB>
using MmaKNMajorB = MmaDense<T, K, N, LDB, false>;

// ---- tile policy and fragment ------------------------------------------------------

// Block tile BM x BN x BK, warp tile WM x WN, kStages-deep cp.async ring.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int kStages_>
struct MmaTile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, kStages = kStages_;
  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN;
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kMI = WM / 16, kNI = WN / 8;  // mma subtiles per warp
  // Dynamic shared memory of the mainloop, in bytes: elem_bytes = Kind::kElemBytes,
  // b_kn = B is KN-major (!BLoader::kKContiguous; fp32 KN rows are padded).
  __host__ __device__ static constexpr int smem_bytes(int elem_bytes, bool b_kn) {
    return kStages * (BM * BK * elem_bytes + (b_kn && elem_bytes == 4 ? BK * (BN * 4 + mma::kPadBytes)
                                                                       : BN * BK * elem_bytes));
  }
  static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must split the block tile");
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile: multiples of 16 x 16");
  static_assert(kThreads <= 1024, "at most 1024 threads");
  static_assert(kStages >= 2, "at least two stages");
  static_assert(mma::is_pow2(BK) && BK >= 8 && BK <= 128, "BK: a power of two in [8, 128]");
};

// Warp w holds rows [wm, wm + WM) and cols [wn, wn + WN); lane (g = lane/4,
// t = lane%4) of it: rows wm + 16*mi + g + {0, 8}, cols wn + 8*ni + 2t + {0, 1}.
// acc[2*mi + h][2*ni + e] is (row wm + 16*mi + 8*h + g, col wn + 8*ni + 2t + e).
template <class Tile>
struct MmaFragment {
  static constexpr int kRows = 2 * Tile::kMI, kCols = 2 * Tile::kNI;
  static constexpr int kRowUnroll = 2;  // the two rows of one 16-row subtile
  static constexpr int kRowSharers = 4 * Tile::kWarpsN;
  static constexpr int kTileRows = Tile::BM, kTileCols = Tile::BN;
  static constexpr int kThreads = Tile::kThreads;
  float acc[kRows][kCols];
  int r0, c0, sharer;

  __device__ __forceinline__ MmaFragment() : MmaFragment(threadIdx.x) {}
  __device__ __forceinline__ explicit MmaFragment(int thread) {
    const int lane = thread % 32, warp = thread / 32, warp_n = warp % Tile::kWarpsN;
    r0 = (warp / Tile::kWarpsN) * Tile::WM + lane / 4;
    c0 = warp_n * Tile::WN + 2 * (lane % 4);
    sharer = warp_n * 4 + lane % 4;
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = 0; j < kCols; ++j) acc[i][j] = 0.f;
  }
  __device__ __forceinline__ int row(int i) const { return r0 + (i / 2) * 16 + (i % 2) * 8; }
  __device__ __forceinline__ int col(int j) const { return c0 + (j / 2) * 8 + j % 2; }
  __device__ __forceinline__ int row_sharer() const { return sharer; }
  // acc of columns [kC0, kC0 + kChunk) to smem[row * ld + col - kC0] (staged epilogues).
  template <int kC0, int kChunk>
  __device__ __forceinline__ void stage_cols(float* smem, int ld) const {
    stage_acc_cols<kC0, kChunk>(*this, smem, ld);
  }
  __device__ __forceinline__ int thread() const { return threadIdx.x; }
  static __device__ __forceinline__ void sync() { __syncthreads(); }
  __device__ __forceinline__ float pick(int g, int q, int j) const { return pick_row_group<kRowUnroll>(acc, g, q, j); }
  __device__ __forceinline__ void set(int g, int q, int j, float v) { set_row_group<kRowUnroll>(acc, g, q, j, v); }
};

// ---- the mainloop ------------------------------------------------------------------

// Accumulates the tile at (m0, n0) over k in [k_begin, k_end) into frag
// (zeroed by its constructor); k_begin a multiple of BK, k tiles past the
// problem's K read as zero. Every thread of the block calls it. smem: dynamic shared
// memory, Tile::smem_bytes(Kind::kElemBytes, !BLoader::kKContiguous) bytes,
// 128-byte aligned (16 is required). On return every thread has passed a
// __syncthreads() after its last smem read and no cp.async is in flight: the
// epilogue may reuse smem.
template <class Tile, class Kind, class ALoader, class BLoader>
__device__ __forceinline__ void mma_mainloop(const ALoader& a, const BLoader& b, int m0, int n0, int k_begin,
                                             int k_end, MmaFragment<Tile>& frag, char* smem) {
  constexpr int E = Kind::kElemBytes, S = Tile::kStages, BK = Tile::BK, BN = Tile::BN, T = Tile::kThreads;
  constexpr int MI = Tile::kMI, NI = Tile::kNI, kStepChunks = 2;  // one k step: 32 bytes of k
  constexpr bool kBKN = !BLoader::kKContiguous;
  constexpr bool kScalarB = kBKN && E == 4;  // fp32 [k][n]: ldmatrix cannot transpose 32-bit
  static_assert(sizeof(typename ALoader::Elem) == E && sizeof(typename BLoader::Elem) == E,
                "operand element size does not match the precision kind");
  static_assert(ALoader::kKContiguous, "A must be k-contiguous");
  static_assert(BK * E >= 32, "BK below one mma k step");
  static_assert(!kScalarB || BN % 32 == 0, "fp32 KN-major B: BN a multiple of 32 (conflict-free padding)");
  using LA = mma::SmemTile<Tile::BM, BK * E, false>;
  using LB = typename mma::Conditional<kBKN, mma::SmemTile<BK, BN * E, kScalarB>,
                                       mma::SmemTile<BN, BK * E, false>>::type;
  static_assert(S * (LA::kBytes + LB::kBytes) == Tile::smem_bytes(E, kBKN), "smem_bytes out of date");
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = (warp / Tile::kWarpsN) * Tile::WM, wn = (warp % Tile::kWarpsN) * Tile::WN;
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(smem)), sb = sa + S * LA::kBytes;
  const int k_tiles = ceil_div(k_end - k_begin, BK);

  constexpr int KS = BK / Kind::kK;  // mma k steps per k tile
  // 3xTF32: one k tile's products summed in the tensor core, then added to
  // acc with FADD. The tensor core's accumulation truncates, so summing all
  // of K there would make the error grow with K (measured: rel L2 1.6e-5 at
  // K = 2304 on conv, over fp32's 1e-5).
  [[maybe_unused]] float tile_sum[2 * MI][2 * NI];
  int write_stage = 0, read_stage = 0;
  const auto a_tile = a.template begin<LA, T>(m0, tid);
  const auto b_tile = b.template begin<LB, T>(n0, tid);
  auto issue = [&](int kt) {  // one commit group per k tile (empty past the end)
    if (kt < k_tiles) {
      a_tile.load(sa + write_stage * LA::kBytes, k_begin + kt * BK);
      b_tile.load(sb + write_stage * LB::kBytes, k_begin + kt * BK);
    }
    mma::cp_async_commit();
    write_stage = write_stage == S - 1 ? 0 : write_stage + 1;
  };
  // Fragments of k step kk of the stage at (as, bs).
  auto load_frags = [&](unsigned as, unsigned bs, int kk, unsigned(&af)[MI][4], unsigned(&bf)[NI][2]) {
    // A, 4 8x8 matrices (rows +0/+8) x (k chunk +0/+1): lane l gives row l%16, chunk l/16.
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
      mma::ldsm_x4(af[mi], as + LA::offset(wm + mi * 16 + lane % 16, kk * kStepChunks + lane / 16));
    if constexpr (kScalarB) {  // b0 = B[k = t][n = g], b1 = B[t + 4][g]
      const int k = kk * Kind::kK + lane % 4;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int n = wn + ni * 8 + lane / 4;
        bf[ni][0] = mma::ld_shared_u32(bs + LB::offset(k, n / 4) + (n % 4) * 4);
        bf[ni][1] = mma::ld_shared_u32(bs + LB::offset(k + 4, n / 4) + (n % 4) * 4);
      }
    } else {
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj) {  // two 8-col subtiles: matrices (n +0/+8) x (k +0/+1)
        unsigned r[4];
        if constexpr (kBKN)  // [k][n], 16-bit: lane l gives k row l%8 + 8*((l/8)%2), n chunk l/16
          mma::ldsm_x4_trans(r, bs + LB::offset(kk * Kind::kK + lane % 8 + ((lane / 8) % 2) * 8,
                                                (wn + nj * 16) / 8 + lane / 16));
        else  // [n][k]: lane l gives n row l%8 + 8*(l/16), k chunk (l/8)%2
          mma::ldsm_x4(r, bs + LB::offset(wn + nj * 16 + lane % 8 + (lane / 16) * 8,
                                          kk * kStepChunks + (lane / 8) % 2));
        bf[2 * nj][0] = r[0], bf[2 * nj][1] = r[1], bf[2 * nj + 1][0] = r[2], bf[2 * nj + 1][1] = r[3];
      }
    }
  };

#pragma unroll
  for (int s = 0; s < S - 1; ++s) issue(s);
#pragma unroll 1
  for (int kt = 0; kt < k_tiles; ++kt) {
    mma::cp_async_wait<S - 2>();  // k tile kt has landed (this thread's copies) ...
    __syncthreads();              // ... everyone's; and the stage of tile kt-1 is free
    issue(kt + S - 1);
    const unsigned as = sa + read_stage * LA::kBytes, bs = sb + read_stage * LB::kBytes;
    read_stage = read_stage == S - 1 ? 0 : read_stage + 1;
    // Fragments double-buffered: step kk+1 is read while step kk's mmas run.
    unsigned af[2][MI][4], bf[2][NI][2];
    load_frags(as, bs, 0, af[0], bf[0]);
    if constexpr (Kind::kSplit) {  // the k-tile's sum starts from 0 in the tensor core
#pragma unroll
      for (int i = 0; i < 2 * MI; ++i)
#pragma unroll
        for (int j = 0; j < 2 * NI; ++j) tile_sum[i][j] = 0.f;
    }
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      if (kk + 1 < KS) load_frags(as, bs, kk + 1, af[(kk + 1) % 2], bf[(kk + 1) % 2]);
      if constexpr (Kind::kSplit)
        mma::mma_step<Kind>(tile_sum, af[kk % 2], bf[kk % 2]);
      else
        mma::mma_step<Kind>(frag.acc, af[kk % 2], bf[kk % 2]);
    }
    if constexpr (Kind::kSplit) {  // ... and is added to acc in fp32, rounded to nearest
#pragma unroll
      for (int i = 0; i < 2 * MI; ++i)
#pragma unroll
        for (int j = 0; j < 2 * NI; ++j) frag.acc[i][j] += tile_sum[i][j];
    }
  }
  mma::cp_async_wait<0>();
  __syncthreads();
}

// The whole K: k in [0, K).
template <class Tile, class Kind, class ALoader, class BLoader>
__device__ __forceinline__ void mma_mainloop(const ALoader& a, const BLoader& b, int m0, int n0, int K,
                                             MmaFragment<Tile>& frag, char* smem) {
  mma_mainloop<Tile, Kind>(a, b, m0, n0, 0, K, frag, smem);
}

}  // namespace fj
