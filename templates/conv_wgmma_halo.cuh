// fusejit/conv_wgmma_halo.cuh — conv2d (stride 1, groups 1) on wgmma with the
// filter resident in shared memory and one TMA box of input halo per patch.
//
// conv_wgmma.cuh loads, for every k-tile (tap, channel block), a patch-sized
// box of x and a BN x BK tile of w: every tile reads its A KH*KW times and the
// whole filter once, all from L2 (H200, seed 1 bf16: 5.6 GB of L2 traffic for
// 0.27 GB of x). Here each block keeps one column tile: it loads that column
// tile's filter once ([Cout][KH][KW][Cin] rows, kTaps * kCBlocks k-tiles of
// BN x 128 bytes), then per patch and channel block ONE 4-D box of the NHWC
// input holding the patch's halo ((BH + (KH-1)DH) x (BW + (KW-1)DW) pixels of
// 128 bytes, swizzled). The A tile of tap (kh, kw) is a window of that halo:
// a wgmma's 64 rows are 8 groups of 8 pixels, consecutive in a halo row, so
// the patch is BW = 8 pixels wide (group g: halo row g + kh, SBO one halo row)
// or a multiple of 64 (a wgmma's rows inside one output row, SBO 1024 bytes);
// the descriptor starts at the window's first pixel (sw128_desc_strided).
//
// Warp-specialized as gemm_wgmma.cuh's cooperative schedule: warpgroup 0's
// thread 0 loads (the filter once, then halos into a ring of kStages buffers);
// with kNchw, warpgroup 0's 128 threads write each halo from NCHW x instead
// (fill_halo_nchw: 16-byte loads of a channel's pixels, transposed in
// registers, swizzled 16-byte stores; no NHWC copy of x);
// consumer warpgroup c holds rows 64c.. of each tile (WgmmaFragment) and runs
// every tap's wgmmas on a halo buffer, then the epilogue. Not 3xTF32 (the
// residuals would double the filter), not ping-pong, no clusters.
// kBStages > 0 (a filter too large to keep): B is streamed instead, the taps'
// k-tiles of each channel block through a ring of kBStages (thread 0 issues
// them after each halo, in the order the consumers take them). Ping-pong
// tiles: the two consumers take alternate patches (a whole tile each, its
// halos and B k-tiles read by it alone), their mainloops in patch order
// (turn barriers), so one's epilogue overlaps the other's wgmmas.
#pragma once

#include "fusejit/conv_wgmma.cuh"

namespace fj {

template <class Tile, class S, class Pixels, int BH, int BW, int kHaloStages, bool kNchw_ = false,
          int kBStages_ = 0>
struct ConvHalo {
  static_assert(S::kSH == 1 && S::kSW == 1 && S::kGroups == 1, "halo boxes: stride 1, one group");
  static_assert(S::kCin % Tile::BK == 0, "whole 128-byte channel blocks");
  static_assert(Tile::kKind != MmaKind::F32x3 && Tile::kClusterM == 1 && !Tile::kSwapAB && !Tile::kBNMajor,
                "halo conv: tf32 / bf16 / f16, no clusters, K-major filter rows");
  static_assert(BH * BW == Tile::BM, "a patch fills the tile");
  static_assert(BW == 8 || BW % 64 == 0, "a wgmma's 64 rows: 8 output rows of 8 pixels, or one output row");
  static_assert(kHaloStages >= 1, "at least one halo buffer");
  using Shape = S;          // the conv's shape constants
  using PixelMap = Pixels;  // the tiles' patches (PatchPixels)
  static constexpr bool kNchw = kNchw_;
  static constexpr int kCBlocks = S::kCin / Tile::BK, kTaps = S::kKH * S::kKW;
  static constexpr int kHaloH = BH + (S::kKH - 1) * S::kDH, kHaloW = BW + (S::kKW - 1) * S::kDW;
  // kNchw: halo rows start at an input column aligned down to kVec pixels (one 16-byte load of a channel); a
  // patch's first input column (a multiple of BW, less the padding) sits kShift pixels into its row.
  static constexpr int kVec = Tile::BK / 8;  // pixels in 16 bytes of a channel: 8 (16-bit) or 4 (fp32)
  static constexpr int kShift = kNchw ? (kVec - S::kPW % kVec) % kVec : 0;
  static constexpr int kHaloWS = kNchw ? (kShift + kHaloW + kVec - 1) / kVec * kVec : kHaloW;  // stored row
  static_assert(!kNchw || (BW % kVec == 0 && S::kW % kVec == 0), "NCHW halos: whole 16-byte vectors of a row");
  static constexpr int kHaloBoxBytes = kHaloH * kHaloW * 128;  // what one TMA box brings
  static constexpr int kHaloBytes = (kHaloH * kHaloWS * 128 + 1023) / 1024 * 1024;
  static constexpr int kBStages = kBStages_;  // 0: the filter resident; else B's ring
  static constexpr bool kStreamB = kBStages > 0;
  static constexpr int kFilterBytes = (kStreamB ? kBStages : kTaps * kCBlocks) * Tile::kBytesB;
  static constexpr int kStages = kHaloStages;
  static constexpr int kRingBytes = kFilterBytes + kStages * kHaloBytes;
  static constexpr unsigned kGroupStride = BW == 8 ? kHaloWS * 128 : 1024;  // between a wgmma's 8-row groups
  // Registers after setmaxnreg: kNchw's producer threads hold their units' loads (up to 96 registers of them;
  // the consumers keep 176, or 232 alone).
  static constexpr int kProducerRegs = kNchw ? 152 : Tile::kProducerRegs;
  static constexpr int kConsumerRegs = kNchw && Tile::kConsumers == 2 ? 176 : Tile::kConsumerRegs;
  static_assert(kRingBytes + 1024 <= 227 * 1024, "shared memory over the sm_90 limit");
  // Bytes from a halo buffer to the first A row of consumer c at tap `tap`.
  static __device__ __forceinline__ int a_offset(int c, int tap) {
    const int r0 = c * 64;  // the consumer's first row of the tile
    return ((r0 / BW + (tap / S::kKW) * S::kDH) * kHaloWS + kShift + r0 % BW + (tap % S::kKW) * S::kDW) * 128;
  }

  // kNchw: producer thread t (of 128) writes its units of channel block cb's halo of patch `o` (as the 4-D TMA box
  // would: pixel-major rows of 128 bytes, 16-byte chunk j at j ^ (row % 8), zeros outside the image). A unit is
  // kVec pixels x one chunk's channels: kPer loads of 16 bytes, a kPer x kVec transpose in registers, kVec
  // stores. Lanes take the 8 chunks of a pixel group (conflict-free stores), then the row's groups. Where a
  // thread's units fit in registers (kHeldUnits), all their loads are issued before the buffer is free
  // (load_units, then store_units after the empty barrier): they land while the consumers finish the buffer.
  static constexpr int kPer = kVec;  // channels in a 16-byte chunk (a unit is kPer x kVec)
  static constexpr int kGroups = kHaloWS / kVec, kUnits = kHaloH * kGroups * 8;
  static constexpr int kThreadUnits = (kUnits + 127) / 128;
  static constexpr bool kHeld = kNchw && kThreadUnits * kPer * 4 <= 96;  // registers of the loads in flight
  static constexpr int kHeldUnits = kHeld ? kThreadUnits : 1;
  struct Unit {
    int row0, j;  // its first stored pixel and its chunk
  };
  template <class T>
  static __device__ __forceinline__ void load_unit(uint4 (&v)[kPer], Unit& u, const T* __restrict__ x,
                                                   const typename Pixels::Origin& o, int cb, int unit) {
    static_assert(sizeof(T) * Tile::BK == 128 && sizeof(T) * kPer == 16, "a channel block: 128 bytes, 16-byte chunks");
    const int j = unit % 8, grp = (unit / 8) % kGroups, hr = unit / (8 * kGroups);
    const int ih = o.oh - S::kPH + hr, iw = o.ow - S::kPW - kShift + grp * kVec;  // the first stored column
    const bool in = o.n < S::kBatch && (unsigned)ih < (unsigned)S::kH && (unsigned)iw < (unsigned)S::kW;
    // Outside the image the address stays x's first pixels (a load hoisted above `in` still reads inside x).
    const T* src = x + (in ? ((static_cast<long long>(o.n) * S::kCin + cb * Tile::BK + j * kPer) * S::kH + ih) * S::kW + iw
                           : 0);
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      v[i] = in ? __ldg(reinterpret_cast<const uint4*>(src + static_cast<long long>(i) * S::kH * S::kW))
                : make_uint4(0u, 0u, 0u, 0u);
    u = Unit{hr * kHaloWS + grp * kVec, j};  // row0 % 8 == 0 or 4
  }
  static __device__ __forceinline__ void store_unit(char* buf, const uint4 (&v)[kPer], const Unit& u) {
    const unsigned (&rows)[kPer][4] = *reinterpret_cast<const unsigned (*)[kPer][4]>(v);  // channel i's words
    constexpr int E = 16 / kPer;  // element bytes
#pragma unroll
    for (int p = 0; p < kVec; ++p) {
      const uint4 out = make_uint4(chunk_word<E>(rows, 0, p), chunk_word<E>(rows, 1, p), chunk_word<E>(rows, 2, p),
                                   chunk_word<E>(rows, 3, p));
      const int row = u.row0 + p;
      *reinterpret_cast<uint4*>(buf + row * 128 + ((u.j ^ (row % 8)) * 16)) = out;
    }
  }
  // A thread's units held in registers (kHeld): loads, then (after the buffer is free) stores.
  struct Held {
    uint4 v[kHeldUnits][kPer];
    Unit u[kHeldUnits];
  };
  template <class T>
  static __device__ __forceinline__ void load_units(Held& h, const T* __restrict__ x,
                                                    const typename Pixels::Origin& o, int cb, int t) {
#pragma unroll
    for (int k = 0; k < kHeldUnits; ++k)
      if (t + 128 * k < kUnits) load_unit(h.v[k], h.u[k], x, o, cb, t + 128 * k);
  }
  static __device__ __forceinline__ void store_units(char* buf, const Held& h, int t) {
#pragma unroll
    for (int k = 0; k < kHeldUnits; ++k)
      if (t + 128 * k < kUnits) store_unit(buf, h.v[k], h.u[k]);
  }
  // Otherwise one unit at a time, after the buffer is free.
  template <class T>
  static __device__ __forceinline__ void fill_halo_nchw(char* buf, const T* __restrict__ x,
                                                        const typename Pixels::Origin& o, int cb, int t) {
#pragma unroll 1
    for (int unit = t; unit < kUnits; unit += 128) {
      uint4 v[kPer];
      Unit u;
      load_unit(v, u, x, o, cb, unit);
      store_unit(buf, v, u);
    }
  }
};

// The persistent conv: block b keeps column tile b % n_tiles (its filter
// resident) and takes patches b / n_tiles, + lanes, ... (lanes = blocks per
// column tile; blocks past lanes * n_tiles exit at once). Calls
// epilogue(frag, m0, n0, n_tile) on the consumers after each patch, as
// wgmma_mainloop does. `ring` is 1024-aligned; the epilogue's shared memory
// starts at ring + Halo::kRingBytes.
template <class Tile, class Halo, class T, class Epilogue>
__device__ __forceinline__ void conv_halo_mainloop(const GemmMaps& maps, const TileOrder& order, char* ring,
                                                   const T* __restrict__ x, const Epilogue& epilogue) {
  using S = typename Halo::Shape;
  using Pixels = typename Halo::PixelMap;
  constexpr int HS = Halo::kStages, BK = Tile::BK, kB = Tile::kBytesB;
  constexpr int BS = Halo::kStreamB ? Halo::kBStages : 1;
  __shared__ __align__(8) unsigned long long filter_full, full[HS], empty[HS], b_full[BS], b_empty[BS], turn[2];
  constexpr int kReaders = Tile::kPingPong ? 4 : Tile::kConsumers * 4;  // warps that release a halo or B stage
  const int lanes = gridDim.x / order.n_tiles;
  if (static_cast<int>(blockIdx.x) >= lanes * order.n_tiles) return;  // no whole column of blocks
  const int n_tile = blockIdx.x % order.n_tiles, first_m = blockIdx.x / order.n_tiles;
  char* const filter = ring;
  char* const halo = ring + Halo::kFilterBytes;
  WgmmaFragment<Tile> frag;
  const int warpgroup = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);  // warp-uniform
  if (threadIdx.x == 0) {
    sm90::mbar_init(&filter_full, 1);
    for (int s = 0; s < HS; ++s) {
      sm90::mbar_init(&full[s], Halo::kNchw ? 128 : 1);  // kNchw: each producer thread's arrival
      sm90::mbar_init(&empty[s], kReaders);  // one arrival per reading consumer warp
    }
    for (int s = 0; s < BS; ++s) {  // kStreamB: B's ring
      sm90::mbar_init(&b_full[s], 1);
      sm90::mbar_init(&b_empty[s], kReaders);
    }
    for (int c = 0; c < 2; ++c) sm90::mbar_init(&turn[c], 4);  // ping-pong: mainloops in patch order (a warp each)
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {  // producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Halo::kProducerRegs));
    int b_it = 0;  // kStreamB: B k-tiles issued (thread 0)
    auto load_filter = [&] {  // thread 0: the whole filter once (resident), or nothing yet (streamed)
      prefetch_maps(maps);
      if constexpr (!Halo::kStreamB) {
        sm90::mbar_expect_tx(&filter_full, Halo::kFilterBytes);
        for (int kt = 0; kt < Halo::kTaps * Halo::kCBlocks; ++kt)
          sm90::tma_load_2d(filter + kt * kB, maps.b, &filter_full, kt * BK, n_tile * Tile::BN);
      }
    };
    auto stream_b = [&](int cb) {  // thread 0, kStreamB: channel block cb's taps, after its halo
      if constexpr (Halo::kStreamB) {
        for (int tap = 0; tap < Halo::kTaps; ++tap, ++b_it) {
          const int bs = b_it % BS;
          if (b_it >= BS) sm90::mbar_wait(&b_empty[bs], ((b_it / BS) & 1) ^ 1);
          sm90::mbar_expect_tx(&b_full[bs], kB);
          sm90::tma_load_2d(filter + bs * kB, maps.b, &b_full[bs], (tap * Halo::kCBlocks + cb) * BK,
                            n_tile * Tile::BN);
        }
      }
    };
    if constexpr (Halo::kNchw) {  // thread 0 loads the filter; every thread writes its share of each halo
      if (threadIdx.x == 0) load_filter();
      int it = 0;  // halos written so far
      for (int m = first_m; m < order.m_tiles; m += lanes) {
        const typename Pixels::Origin o = Pixels::origin(m);
        for (int cb = 0; cb < Halo::kCBlocks; ++cb, ++it) {
          const int s = it % HS, t = static_cast<int>(threadIdx.x);
          if constexpr (Halo::kHeld) {  // the loads in flight while the consumers still read the buffer
            typename Halo::Held held;
            Halo::load_units(held, x, o, cb, t);
            if (it >= HS) sm90::mbar_wait(&empty[s], ((it / HS) & 1) ^ 1);
            Halo::store_units(halo + s * Halo::kHaloBytes, held, t);
          } else {
            if (it >= HS) sm90::mbar_wait(&empty[s], ((it / HS) & 1) ^ 1);
            Halo::fill_halo_nchw(halo + s * Halo::kHaloBytes, x, o, cb, t);
          }
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the stores, visible to the wgmmas
          sm90::mbar_arrive(&full[s]);
          if (threadIdx.x == 0) stream_b(cb);
        }
      }
      return;
    }
    if (threadIdx.x == 0) {
      load_filter();
      int it = 0;  // halo boxes loaded so far
      for (int m = first_m; m < order.m_tiles; m += lanes) {
        const typename Pixels::Origin o = Pixels::origin(m);
        for (int cb = 0; cb < Halo::kCBlocks; ++cb, ++it) {
          const int s = it % HS;
          if (it >= HS) sm90::mbar_wait(&empty[s], ((it / HS) & 1) ^ 1);
          sm90::mbar_expect_tx(&full[s], Halo::kHaloBoxBytes);
          sm90::tma_load_4d(halo + s * Halo::kHaloBytes, maps.a, &full[s], cb * BK, o.ow - S::kPW, o.oh - S::kPH, o.n);
          stream_b(cb);
        }
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Halo::kConsumerRegs));
  const int consumer = warpgroup - 1;
  const bool warp_leader = threadIdx.x % 32 == 0;
  constexpr int kSteps = BK / Tile::kStepK;
  constexpr bool kPP = Tile::kPingPong;
  auto release = [&](unsigned long long* bar) {
    if (warp_leader) sm90::mbar_arrive(bar);
  };
  // Bytes from a halo buffer to the A rows of 64-row wgmma h: cooperative, the consumer's rows of the tile;
  // ping-pong, rows 64h of its own tile.
  auto a_rows = [&](int h, int tap) { return Halo::a_offset(kPP ? h : consumer, tap); };
  if constexpr (!Halo::kStreamB) sm90::mbar_wait(&filter_full, 0);
  int it = 0, b_it = 0, local = 0;  // halos and B k-tiles consumed so far (by the block); its patches so far
#pragma unroll 1
  for (int m = first_m; m < order.m_tiles; m += lanes, ++local) {
    if constexpr (kPP) {
      if (local % 2 != consumer) {  // the other consumer's patch
        it += Halo::kCBlocks;
        if constexpr (Halo::kStreamB) b_it += Halo::kCBlocks * Halo::kTaps;
        continue;
      }
      if (local > 0) sm90::mbar_wait(&turn[consumer], ((local - 1) / 2) & 1);  // the other one reached its last halo
    }
#pragma unroll
    for (int i = 0; i < WgmmaFragment<Tile>::kRows; ++i)
#pragma unroll
      for (int j = 0; j < Tile::BN / 4; ++j) frag.acc[i][j] = 0.f;
#pragma unroll 1
    for (int cb = 0; cb < Halo::kCBlocks; ++cb, ++it) {
      const int s = it % HS;
      sm90::mbar_wait(&full[s], (it / HS) & 1);
      // Ping-pong: the other consumer's mainloop may start once every warp of this one has seen every full phase of
      // this patch complete (its last halo; streamed, its last B k-tile below): no parity wait can alias a phase.
      if constexpr (kPP && !Halo::kStreamB)
        if (cb == Halo::kCBlocks - 1 && threadIdx.x % 32 == 0) sm90::mbar_arrive(&turn[1 - consumer]);
      const unsigned long long a0 = sm90::sw128_desc_strided(halo + s * Halo::kHaloBytes, Halo::kGroupStride);
      if constexpr (Halo::kStreamB) {  // B through its ring: each tap's k-tile in turn
#pragma unroll 1
        for (int tap = 0; tap < Halo::kTaps; ++tap, ++b_it) {
          const int bs = b_it % BS;
          sm90::mbar_wait(&b_full[bs], (b_it / BS) & 1);
          if constexpr (kPP)
            if (cb == Halo::kCBlocks - 1 && tap == Halo::kTaps - 1 && threadIdx.x % 32 == 0)
              sm90::mbar_arrive(&turn[1 - consumer]);
          const unsigned long long b0 = sm90::sw128_desc(filter + bs * kB);
          sm90::wgmma_fence();
#pragma unroll
          for (int k = 0; k < kSteps; ++k)
#pragma unroll
            for (int h = 0; h < Tile::kMHalves; ++h)
              sm90::mma<Tile::kKind, Tile::BN>(frag.half(h), a0 + ((a_rows(h, tap) + 32 * k) >> 4),
                                               b0 + ((32 * k) >> 4));
          sm90::wgmma_commit();
          sm90::wgmma_wait<1>();  // the previous tap's wgmmas are done: release its B stage
          if (tap > 0) release(&b_empty[(b_it - 1) % BS]);
        }
        sm90::wgmma_wait<0>();  // this channel block's wgmmas are done: its last B stage and its halo
        release(&b_empty[(b_it - 1) % BS]);
        release(&empty[s]);
      } else {
        const unsigned long long b0 = sm90::sw128_desc(filter + cb * kB);
        sm90::wgmma_fence();
#pragma unroll
        for (int tap = 0; tap < Halo::kTaps; ++tap)
#pragma unroll
          for (int k = 0; k < kSteps; ++k)
#pragma unroll
            for (int h = 0; h < Tile::kMHalves; ++h)
              sm90::mma<Tile::kKind, Tile::BN>(frag.half(h), a0 + ((a_rows(h, tap) + 32 * k) >> 4),
                                               b0 + ((tap * Halo::kCBlocks * kB + 32 * k) >> 4));
        sm90::wgmma_commit();
        if constexpr (HS == 1) {  // the next box goes to this buffer: free it now
          sm90::wgmma_wait<0>();
          release(&empty[s]);
        } else {
          sm90::wgmma_wait<1>();  // the previous channel block's wgmmas are done: release its buffer
          if (cb > 0) release(&empty[(it - 1) % HS]);
        }
      }
    }
    if constexpr (!Halo::kStreamB && HS > 1) {
      sm90::wgmma_wait<0>();
      release(&empty[(it - 1) % HS]);
    }
    epilogue(frag, m * Tile::BM, n_tile * Tile::BN, n_tile);
    __syncwarp();  // whole warps for the next patch's wgmmas (as in wgmma_mainloop)
  }
}

}  // namespace fj
