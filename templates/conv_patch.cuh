// fusejit/conv_patch.cuh — conv2d with few input channels per group on the
// mma.sync tensor cores (gemm_mma.cuh's fragments), its operands read from
// shared memory copies made once:
//   - B, the group's filters for this block's BN output channels (fewer
//     rows when Cout/groups < BN: the rest read a zero chunk), as
//     [n][KH][KW][Cin padded to chunks], copied when the block starts (blocks
//     then loop over pixel tiles: persistent);
//   - per tile (a patch of BH x BW output pixels, PatchPixels), the patch's
//     input HALO, channel-innermost in 16-byte chunks ([cc][HR][HC] chunks):
//     every channel of the group, or with more channels (CCB > 0) a block
//     of CCB chunks at a time, K running block by block.
// The im2col of A is then only ldmatrix row addresses: row m of GEMM k chunk
// q = (tap, cc) is the halo chunk at the pixel's position shifted by the tap.
// No global gather per MMA and no per-element bounds tests: the halo copy
// writes zeros outside the image (padding) and past Cin/groups.
//
// GEMM k order: k = ((cb * kTaps + tap) * kBlockCC + cc) * kPerChunk + e,
// tap = kh * KW + kw, channel ci = (cb * kBlockCC + cc) * kPerChunk + e. Each
// block's K is padded to whole mma k steps (two chunks); a padding chunk's A
// rows read a zero chunk and its B is zero.
//
// Shared memory (bytes from the base): B (BN rows of kBStride chunks, an odd
// stride: ldmatrix's 8 rows hit 8 bank groups), a zero chunk, the halo.
// The epilogue's shared memory starts at kSmemBytes.
//
// HB = 2 (fp32 / tf32 elements, several channel blocks): two halo buffers
// filled by 4-byte cp.async (ignore-src writes the zeros), block cb + 1's copy
// in flight while block cb's mma steps run.
//
// Shape concept as in conv_simt.cuh; Pixels: PatchPixels / PatchPoolPixels.
#pragma once

#include "fusejit/conv_simt.cuh"
#include "fusejit/gemm_mma.cuh"

namespace fj {

template <class Tile, class Kind, class T, class S, int BH, int BW, int CCB = 0, int HB = 1, bool VF = false>
struct ConvPatchMma {
  static constexpr int E = sizeof(T), kPerChunk = 16 / E;
  static constexpr int kCinG = S::kCin / S::kGroups, kCoutG = S::kCout / S::kGroups;
  static constexpr int kCC = (kCinG + kPerChunk - 1) / kPerChunk;  // channel chunks per pixel
  static constexpr int kBlockCC = CCB > 0 && CCB < kCC ? CCB : kCC;  // channel chunks in the halo at a time
  static constexpr int kBlocks = (kCC + kBlockCC - 1) / kBlockCC;
  static constexpr int kTaps = S::kKH * S::kKW;
  static constexpr int kChunks = kTaps * kBlockCC;  // k chunks of a block
  static constexpr int kSteps = (kChunks + 1) / 2;  // mma k steps of two chunks, per block
  static constexpr int kBlockChunks = 2 * kSteps;   // a block's chunks in a B row, padding included
  static constexpr int kBStride = kBlocks * kBlockChunks + 1;  // B row stride in chunks (odd)
  static constexpr int kHR = (BH - 1) * S::kSH + (S::kKH - 1) * S::kDH + 1;  // halo rows
  static constexpr int kHC = (BW - 1) * S::kSW + (S::kKW - 1) * S::kDW + 1;  // halo columns
  // 16-bit halos (and 4-byte ones with VF, single-buffered) are copied kVec pixels a load (a channel's
  // 4 to 16 bytes) from a column aligned down to kVec: kHCS columns stored, the patch at a per-tile
  // column shift (iw0 - aligned start).
  static constexpr int kVec = E == 2 || (VF && !(HB == 2 && kBlocks > 1))
                                  ? (S::kW % 4 == 0 ? 4 : S::kW % 2 == 0 ? 2 : 1)
                                  : 1;
  static constexpr int kHCS = kVec == 1 ? kHC : (kHC + kVec - 1 + kVec - 1) / kVec * kVec;
  static constexpr int kPlane = kHR * kHCS;  // chunks of one channel chunk's plane
  static constexpr int kBRows = Tile::BN < kCoutG ? Tile::BN : kCoutG;  // filters held; rows past them read zeros
  static constexpr int kZeroAt = kBRows * kBStride * 16, kHaloAt = kZeroAt + 16;
  static constexpr int kHaloBytes = kBlockCC * kPlane * 16;
  static constexpr int kBuffers = HB == 2 && E == 4 && kBlocks > 1 ? 2 : 1;  // halo buffers
  static constexpr int kSmemBytes = (kHaloAt + kBuffers * kHaloBytes + 127) / 128 * 128;
  static constexpr int MI = Tile::kMI, NI = Tile::kNI, kThreads = Tile::kThreads;
  // Vector copies: units of kVec pixels of a channel chunk, kUnitRounds a thread for a halo.
  static constexpr int kRowUnits = kHCS / kVec, kUnits = kBlockCC * kHR * kRowUnits;
  static constexpr int kUnitRounds = (kUnits + kThreads - 1) / kThreads;  // a thread's units of a halo
  static constexpr int kWords = kVec * E / 4 > 0 ? kVec * E / 4 : 1;     // 32-bit words of a channel's vector
  // 3xTF32: steps summed in the tensor core before the FADD into acc (as
  // mma_mainloop's k tile of 32 fp32).
  static constexpr int kSplitGroup = 4;
  static_assert(BH * BW == Tile::BM, "a patch fills the tile");
  static_assert(E == Kind::kElemBytes && Kind::kK * E == 32, "one mma k step: two 16-byte chunks");
  static_assert(NI % 2 == 0, "B fragments by pairs of 8-column subtiles");

  const T* __restrict__ x;  // NCHW input
  int c0;                   // the group's first input channel
  unsigned smem;            // shared address of the base

  // Copies the filters of output channels [n0, n0 + BN) of group g (w:
  // [Cout][CinG][KH][KW]) and the zero chunk. Every thread of the block calls
  // it; the first tile's copy ends with a barrier before any read.
  __device__ __forceinline__ ConvPatchMma(const T* __restrict__ x_, const T* __restrict__ w, int g, int n0,
                                          char* smem_raw)
      : x(x_), c0(g * kCinG), smem(static_cast<unsigned>(__cvta_generic_to_shared(smem_raw))) {
    const T* wg = w + (long long)(g * kCoutG) * kCinG * kTaps;
    for (int i = threadIdx.x; i < kBRows * kBStride; i += kThreads) {
      const int n = i / kBStride, q = i % kBStride, cb = q / kBlockChunks, qb = q % kBlockChunks;
      const int tap = qb / kBlockCC, cc = cb * kBlockCC + qb % kBlockCC;
      unsigned short e16[kPerChunk == 8 ? 8 : 1];
      unsigned e32[kPerChunk == 4 ? 4 : 1];
#pragma unroll
      for (int e = 0; e < kPerChunk; ++e) {
        const int ci = cc * kPerChunk + e;
        const bool in = n0 + n < kCoutG && cb < kBlocks && qb < kChunks && ci < kCinG;
        const T* src = wg + ((long long)(n0 + n) * kCinG + ci) * kTaps + tap;
        if constexpr (E == 2)
          e16[e] = in ? __ldg(reinterpret_cast<const unsigned short*>(src)) : (unsigned short)0;
        else
          e32[e] = in ? __ldg(reinterpret_cast<const unsigned*>(src)) : 0u;
      }
      store_chunk(smem + (n * kBStride + q) * 16, e16, e32);
    }
    if (threadIdx.x == 0) asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};" ::"r"(smem + kZeroAt), "r"(0u));
  }

  static __device__ __forceinline__ void store_chunk(unsigned dst, const unsigned short (&e16)[kPerChunk == 8 ? 8 : 1],
                                                     const unsigned (&e32)[kPerChunk == 4 ? 4 : 1]) {
    unsigned v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if constexpr (E == 2)
        v[i] = e16[2 * i] | (unsigned(e16[2 * i + 1]) << 16);
      else
        v[i] = e32[i];
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(dst), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3])
                 : "memory");
  }

  // Byte offset of a block's k chunk q (< kChunks) from a pixel's halo position.
  static __device__ __forceinline__ constexpr unsigned chunk_offset(int q) {
    return ((q % kBlockCC) * kPlane + ((q / kBlockCC) / S::kKW) * S::kDH * kHCS + ((q / kBlockCC) % S::kKW) * S::kDW) *
           16;
  }

  // Accumulates pixel tile `tile` (PatchPixels order) into frag (zeroed by
  // its constructor). Every thread of the block calls it; each channel block
  // begins with a barrier (the previous block's or tile's reads of the halo
  // and the epilogue's shared memory are done), and the last block's halo
  // stays until the next call.
  template <class Pixels>
  __device__ __forceinline__ void accumulate(int tile, MmaFragment<Tile>& frag) const {
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const typename Pixels::Origin o = Pixels::origin(tile);
    const int ih0 = o.oh * S::kSH - S::kPH, iw = o.ow * S::kSW - S::kPW;
    const int iw0 = iw & ~(kVec - 1), shift = iw - iw0;  // the halo's first stored column (aligned), the patch's
    const T* xn = x + ((long long)o.n * S::kCin + c0) * (S::kH * S::kW);

    const int wm = (warp / Tile::kWarpsN) * Tile::WM, wn = (warp % Tile::kWarpsN) * Tile::WN;
    const bool upper = lane >= 16;  // ldmatrix: lanes 16..31 give the second chunk's rows
    unsigned a_at[MI];              // this lane's pixel in the halo
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int r = wm + mi * 16 + lane % 16;
      a_at[mi] = smem + kHaloAt + ((r / BW) * S::kSH * kHCS + (r % BW) * S::kSW + shift) * 16;
    }
    const int b_lane_row = wn + lane % 8 + (lane / 16) * 8;  // this lane's filter row for ldmatrix (+16 per pair)
    const unsigned b_row = smem + (b_lane_row * kBStride + (lane / 8) % 2) * 16;
    auto block_x = [&](int cb) { return xn + (long long)(cb * kBlockCC * kPerChunk) * (S::kH * S::kW); };
    if constexpr (kBuffers == 2) {
      __syncthreads();  // the previous tile's reads of the halo and the epilogue's shared memory are done
      issue_halo(block_x(0), 0, ih0, iw0, 0);
      mma::cp_async_commit();
#pragma unroll 1
      for (int cb = 0; cb < kBlocks; ++cb) {
        if (cb + 1 < kBlocks) {  // into the buffer block cb - 1 read (a barrier ended those reads)
          issue_halo(block_x(cb + 1), cb + 1, ih0, iw0, ((cb + 1) % 2) * kHaloBytes);
          mma::cp_async_commit();
          mma::cp_async_wait<1>();
        } else {
          mma::cp_async_wait<0>();
        }
        __syncthreads();  // block cb's halo has landed, every thread's copies
        accumulate_block(a_at, (cb % 2) * kHaloBytes, b_row + cb * kBlockChunks * 16, b_lane_row, upper, frag);
        if (cb + 1 < kBlocks) __syncthreads();  // its reads are done before block cb + 2 refills the buffer
      }
    } else {
#pragma unroll 1
      for (int cb = 0; cb < kBlocks; ++cb) {
        copy_halo(block_x(cb), cb, ih0, iw0);
        accumulate_block(a_at, 0, b_row + cb * kBlockChunks * 16, b_lane_row, upper, frag);
      }
    }
  }

  // Halo prefetch (vector copies — 16-bit, or 4-byte with VF — of one
  // channel block, a thread's units of a halo in registers): the generated
  // loop keeps a HaloRegs across its pixel tiles — prefetch_halo(first
  // tile), then for each tile accumulate_prefetched(tile, next tile): the
  // registers stored as the tile's halo, the next tile's loads issued, then
  // the mma steps; the loads land during those and the epilogue.
  static constexpr bool kPrefetch = kVec > 1 && kBlocks == 1 && kUnitRounds <= 2 && kBuffers == 1;
  struct HaloRegs {
    unsigned w[kUnitRounds][kPerChunk][kWords];
  };

  template <class Pixels>
  __device__ __forceinline__ void prefetch_halo(int tile, HaloRegs& r) const {
    static_assert(kPrefetch, "halo prefetch: vector copies of one channel block, at most 2 units a thread");
    if (tile >= Pixels::kTiles) return;
    const typename Pixels::Origin o = Pixels::origin(tile);
    const int ih0 = o.oh * S::kSH - S::kPH, iw0 = (o.ow * S::kSW - S::kPW) & ~(kVec - 1);
    const T* xn = x + ((long long)o.n * S::kCin + c0) * (S::kH * S::kW);
    load_units<kUnitRounds>(r.w, threadIdx.x, xn, 0, ih0, iw0,
                            (reinterpret_cast<unsigned long long>(x) & (kVec * E - 1)) == 0);
  }

  template <class Pixels>
  __device__ __forceinline__ void accumulate_prefetched(int tile, int next, HaloRegs& r,
                                                        MmaFragment<Tile>& frag) const {
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const typename Pixels::Origin o = Pixels::origin(tile);
    const int iw = o.ow * S::kSW - S::kPW, shift = iw - (iw & ~(kVec - 1));
    __syncthreads();  // the previous tile's reads of the halo and the epilogue's shared memory are done
    store_units<kUnitRounds>(r.w, tid);
    __syncthreads();
    prefetch_halo<Pixels>(next, r);
    const int wm = (warp / Tile::kWarpsN) * Tile::WM, wn = (warp % Tile::kWarpsN) * Tile::WN;
    unsigned a_at[MI];  // this lane's pixel in the halo
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int rr = wm + mi * 16 + lane % 16;
      a_at[mi] = smem + kHaloAt + ((rr / BW) * S::kSH * kHCS + (rr % BW) * S::kSW + shift) * 16;
    }
    const int b_lane_row = wn + lane % 8 + (lane / 16) * 8;
    accumulate_block(a_at, 0, smem + (b_lane_row * kBStride + (lane / 8) % 2) * 16, b_lane_row, lane >= 16, frag);
  }

 private:
  // Halo chunk i (of a block) of the block's input xb: its channel chunk, its
  // first element's address, and whether its pixel is inside the image.
  struct HaloChunk {
    int cc;
    const T* src;
    bool in;
  };
  __device__ __forceinline__ HaloChunk halo_chunk(const T* __restrict__ xb, int i, int ih0, int iw0) const {
    const int cc = i / kPlane, ih = ih0 + (i % kPlane) / kHCS, iw = iw0 + i % kHCS;
    const bool in = (unsigned)ih < (unsigned)S::kH && (unsigned)iw < (unsigned)S::kW;
    return {cc, xb + (long long)(cc * kPerChunk) * (S::kH * S::kW) + (in ? ih * S::kW + iw : 0), in};
  }

  // Channel block cb's halo, zeros outside the image and past Cin/groups,
  // between two barriers. Each thread loads kCopyBatch chunks before storing
  // any: enough loads in flight to cover the memory latency.
  __device__ __forceinline__ void copy_halo(const T* __restrict__ xb, int cb, int ih0, int iw0) const {
    if constexpr (kVec > 1) {
      if ((reinterpret_cast<unsigned long long>(x) & (kVec * E - 1)) == 0) return copy_halo_vec(xb, cb, ih0, iw0);
    }
    constexpr int kTotal = kBlockCC * kPlane, kRounds = (kTotal + kThreads - 1) / kThreads;
    constexpr int kCopyBatch = kRounds < 8 ? kRounds : 8;
    __syncthreads();
#pragma unroll 1
    for (int base = threadIdx.x; base < kTotal; base += kCopyBatch * kThreads) {
      unsigned short e16[kCopyBatch][kPerChunk == 8 ? 8 : 1];
      unsigned e32[kCopyBatch][kPerChunk == 4 ? 4 : 1];
#pragma unroll
      for (int j = 0; j < kCopyBatch; ++j) {  // consecutive threads: consecutive columns
        const int i = base + j * kThreads;
        const HaloChunk h = halo_chunk(xb, i, ih0, iw0);
#pragma unroll
        for (int e = 0; e < kPerChunk; ++e) {
          const bool ok = i < kTotal && h.in && (cb * kBlockCC + h.cc) * kPerChunk + e < kCinG;
          const T* s = h.src + (long long)e * (S::kH * S::kW);
          if constexpr (E == 2)
            e16[j][e] = ok ? __ldg(reinterpret_cast<const unsigned short*>(s)) : (unsigned short)0;
          else
            e32[j][e] = ok ? __ldg(reinterpret_cast<const unsigned*>(s)) : 0u;
        }
      }
#pragma unroll
      for (int j = 0; j < kCopyBatch; ++j)
        if (base + j * kThreads < kTotal) store_chunk(smem + kHaloAt + (base + j * kThreads) * 16, e16[j], e32[j]);
    }
    __syncthreads();
  }

  // copy_halo kVec pixels a load: each unit (a channel chunk's kVec
  // consecutive halo pixels) loads kPerChunk channel vectors, all of a
  // thread's units in flight together, transposed into kVec chunks (16-bit:
  // by byte permutes). The units' columns are aligned and the image width a
  // multiple of kVec: a vector lies wholly inside the image or outside.

  // Units base, base + kThreads, ... (kB of them) of block cb's halo into w;
  // zeros outside the image, past Cin/groups and past the halo. `aligned`:
  // one vector load a channel, else kVec element loads packed alike.
  template <int kB>
  __device__ __forceinline__ void load_units(unsigned (&w)[kB][kPerChunk][kWords], int base, const T* __restrict__ xb,
                                             int cb, int ih0, int iw0, bool aligned) const {
    using Vec = typename VecOf<kVec * E>::type;
#pragma unroll
    for (int j = 0; j < kB; ++j) {  // consecutive threads: consecutive vectors of a row
      const int u = base + j * kThreads;
      const int cc = u / (kHR * kRowUnits), ih = ih0 + (u / kRowUnits) % kHR, iw = iw0 + (u % kRowUnits) * kVec;
      const bool in = u < kUnits && (unsigned)ih < (unsigned)S::kH && (unsigned)iw < (unsigned)S::kW;
      const T* src = xb + (long long)(cc * kPerChunk) * (S::kH * S::kW) + (in ? ih * S::kW + iw : 0);
#pragma unroll
      for (int e = 0; e < kPerChunk; ++e) {
        const bool ok = in && (cb * kBlockCC + cc) * kPerChunk + e < kCinG;
        const T* at = src + (long long)e * (S::kH * S::kW);
        if (aligned) {
          Vec v{};
          if (ok) v = __ldg(reinterpret_cast<const Vec*>(at));
          if constexpr (kWords == 4) {
            w[j][e][0] = v.x, w[j][e][1] = v.y, w[j][e][2] = v.z, w[j][e][3] = v.w;
          } else if constexpr (kWords == 2) {
            w[j][e][0] = v.x, w[j][e][1] = v.y;
          } else {
            w[j][e][0] = v;
          }
        } else if constexpr (E == 2) {
          const unsigned short* h = reinterpret_cast<const unsigned short*>(at);
#pragma unroll
          for (int k = 0; k < kWords; ++k)
            w[j][e][k] = ok ? __ldg(h + 2 * k) | (unsigned(__ldg(h + 2 * k + 1)) << 16) : 0u;
        } else {
          const unsigned* h = reinterpret_cast<const unsigned*>(at);
#pragma unroll
          for (int k = 0; k < kWords; ++k) w[j][e][k] = ok ? __ldg(h + k) : 0u;
        }
      }
    }
  }

  // The units load_units read, as kVec chunks each (pixel p: channel e's element p).
  template <int kB>
  __device__ __forceinline__ void store_units(const unsigned (&w)[kB][kPerChunk][kWords], int base) const {
#pragma unroll
    for (int j = 0; j < kB; ++j) {
      const int u = base + j * kThreads;
      if (u >= kUnits) continue;
      const unsigned dst = smem + kHaloAt + (u * kVec) * 16;  // units tile the plane: chunk index u * kVec
#pragma unroll
      for (int p = 0; p < kVec; ++p) {
        unsigned c[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) c[i] = chunk_word<E>(w[j], i, p);
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(dst + p * 16), "r"(c[0]), "r"(c[1]),
                     "r"(c[2]), "r"(c[3])
                     : "memory");
      }
    }
  }

  __device__ __forceinline__ void copy_halo_vec(const T* __restrict__ xb, int cb, int ih0, int iw0) const {
    constexpr int kBatch = kUnitRounds < 4 ? kUnitRounds : 4;
    __syncthreads();
#pragma unroll 1
    for (int base = threadIdx.x; base < kUnits; base += kBatch * kThreads) {
      unsigned w[kBatch][kPerChunk][kWords];
      load_units<kBatch>(w, base, xb, cb, ih0, iw0, true);
      store_units<kBatch>(w, base);
    }
    __syncthreads();
  }

  // Channel block cb's halo into the buffer at kHaloAt + buf by 4-byte
  // cp.async (zeros outside the image and past Cin/groups); no commit.
  __device__ __forceinline__ void issue_halo(const T* __restrict__ xb, int cb, int ih0, int iw0, unsigned buf) const {
    static_assert(E == 4, "4-byte cp.async: fp32 / tf32 elements");
    for (int i = threadIdx.x; i < kHaloBytes / 16; i += kThreads) {  // consecutive threads: consecutive columns
      const HaloChunk h = halo_chunk(xb, i, ih0, iw0);
      const unsigned dst = smem + kHaloAt + buf + i * 16;
#pragma unroll
      for (int e = 0; e < kPerChunk; ++e) {
        const bool ok = h.in && (cb * kBlockCC + h.cc) * kPerChunk + e < kCinG;
        mma::cp_async4(dst + 4 * e, ok ? h.src + (long long)e * (S::kH * S::kW) : xb, ok ? 4 : 0);
      }
    }
  }

  // The mma steps of one channel block: A from the halo, B from the block's
  // columns of the filters (b_at: this lane's ldmatrix row there).
  __device__ __forceinline__ void accumulate_block(const unsigned (&a_at)[MI], unsigned buf, unsigned b_at,
                                                   int b_lane_row, bool upper, MmaFragment<Tile>& frag) const {
    auto load_frags = [&](int s, unsigned(&af)[MI][4], unsigned(&bf)[NI][2]) {
      const int q = 2 * s + (upper ? 1 : 0);
      const unsigned off = upper ? chunk_offset(2 * s + 1) : chunk_offset(2 * s);
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) mma::ldsm_x4(af[mi], q < kChunks ? a_at[mi] + buf + off : smem + kZeroAt);
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj) {  // matrices (n +0/+8) x (k chunk +0/+1)
        unsigned r[4];
        const unsigned at = b_at + (nj * 16 * kBStride + 2 * s) * 16;
        if constexpr (kBRows < Tile::BN)
          mma::ldsm_x4(r, b_lane_row + nj * 16 < kBRows ? at : smem + kZeroAt);
        else
          mma::ldsm_x4(r, at);
        bf[2 * nj][0] = r[0], bf[2 * nj][1] = r[1], bf[2 * nj + 1][0] = r[2], bf[2 * nj + 1][1] = r[3];
      }
    };
    [[maybe_unused]] float part[2 * MI][2 * NI];  // 3xTF32: a group of steps, summed in the tensor core
    unsigned af[2][MI][4], bf[2][NI][2];
    load_frags(0, af[0], bf[0]);
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      if (s + 1 < kSteps) load_frags(s + 1, af[(s + 1) % 2], bf[(s + 1) % 2]);
      if constexpr (Kind::kSplit) {
        if (s % kSplitGroup == 0) {
#pragma unroll
          for (int i = 0; i < 2 * MI; ++i)
#pragma unroll
            for (int j = 0; j < 2 * NI; ++j) part[i][j] = 0.f;
        }
        mma::mma_step<Kind>(part, af[s % 2], bf[s % 2]);
        if (s % kSplitGroup == kSplitGroup - 1 || s + 1 == kSteps) {
#pragma unroll
          for (int i = 0; i < 2 * MI; ++i)
#pragma unroll
            for (int j = 0; j < 2 * NI; ++j) frag.acc[i][j] += part[i][j];
        }
      } else {
        mma::mma_step<Kind>(frag.acc, af[s % 2], bf[s % 2]);
      }
    }
  }
};

// A max / avg pool of QH x QW windows over halo-patch tiles, reduced in the
// mma fragment's registers (no shared memory) where each warp's rows hold
// whole windows: PatchPoolPixels patches BW wide (a multiple of 8), QW in
// {1, 2, 4, 8}, the warp tile's rows a multiple of QH * BW. Fragment row i
// of a thread is warp row 8 * i + g (g = lane / 4): a window's QH rows are
// rows i + d * BW / 8 of one thread, its QW columns lanes g .. g + QW - 1 of
// a group (xor shuffles over lane bits 2 ..). value(acc, m, n) first unless
// kRawWindows. The QW lanes of a group then share the stores: each calls
// store(v, [v_min,] m0, w, n) (as tile_pool's) for every QW-th window value.
template <class Windows, int QH, int QW, bool kMax, bool kWithMin, bool kRawWindows, class Tile, class ValueF,
          class StoreF>
__device__ __forceinline__ void patch_pool_in_registers(const MmaFragment<Tile>& frag, int m0, int n0, int N,
                                                        const ValueF& value, const StoreF& store) {
  constexpr int BW = Windows::kBW, RB = BW / 8;  // fragment rows a patch row
  constexpr int kRows = 2 * Tile::kMI, kCols = 2 * Tile::kNI;
  static_assert(BW % 8 == 0 && (QW == 1 || QW == 2 || QW == 4 || QW == 8) && Tile::WM % (QH * BW) == 0 &&
                    BW % QW == 0, "a warp's rows hold whole windows, a window's columns in one lane group");
  constexpr int kKeys = kRows / QH;              // window rows of a thread: key kk = b * RB + r
  constexpr int kEntries = kKeys * kCols;        // window values of a thread (entry = kk * kCols + j)
  constexpr int kShare = kEntries % QW == 0 ? QW : 1;  // lanes of a group that share the stores
  const int lane = threadIdx.x % 32, g = lane / 4, q = g % QW;
  const int wm = frag.r0 - g;  // the warp's first tile row
  float v[kEntries], v_min[kWithMin ? kEntries : 1] = {};
#pragma unroll
  for (int kk = 0; kk < kKeys; ++kk) {
    const int lead = (kk / RB) * QH * RB + kk % RB;  // fragment row of the window's first row
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      float a = kMax ? neg_inf() : 0.f, lo = -neg_inf();
#pragma unroll
      for (int d = 0; d < QH; ++d) {
        const int i = lead + d * RB;
        float x = frag.acc[i][j];
        if constexpr (!kRawWindows) {
          const int n = n0 + frag.col(j);
          x = n < N ? value(x, m0 + frag.row(i), n) : 0.f;
        }
        a = kMax ? max_nan(a, x) : a + x;
        if constexpr (kWithMin) lo = min_nan(lo, x);
      }
#pragma unroll
      for (int s = 4; s < 4 * QW; s *= 2) {  // the window's columns: lanes of the group
        const float o = __shfl_xor_sync(0xffffffffu, a, s);
        a = kMax ? max_nan(a, o) : a + o;
        if constexpr (kWithMin) lo = min_nan(lo, __shfl_xor_sync(0xffffffffu, lo, s));
      }
      v[kk * kCols + j] = kMax ? a : a / float(QH * QW);
      if constexpr (kWithMin) v_min[kk * kCols + j] = lo;
    }
  }
#pragma unroll
  for (int k = 0; k < kEntries / kShare; ++k) {
    if (kShare == 1 && q != 0) break;  // entries do not split evenly: the group's first lane stores them all
    float x = v[k * kShare], x_min = v_min[kWithMin ? k * kShare : 0];
#pragma unroll
    for (int r = 1; r < kShare; ++r) {  // this lane's entry k * kShare + q, by selects (no local memory)
      x = q == r ? v[k * kShare + r] : x;
      if constexpr (kWithMin) x_min = q == r ? v_min[kWithMin ? k * kShare + r : 0] : x_min;
    }
    const int e = k * kShare + (kShare == 1 ? 0 : q), kk = e / kCols, j = e % kCols;
    const int n = n0 + frag.c0 + (j / 2) * 8 + j % 2;
    const int w = (wm / (BW * QH) + kk / RB) * Windows::kWinW + (8 * (kk % RB) + g) / QW;
    if (n < N) {
      if constexpr (kWithMin)
        store(x, x_min, m0, w, n);
      else
        store(x, m0, w, n);
    }
  }
}

}  // namespace fj
