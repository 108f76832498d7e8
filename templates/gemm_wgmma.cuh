// fusejit/gemm_wgmma.cuh — the Hopper (sm_90a) tensor-core GEMM mainloop.
//
// C[m][n] = sum_k A[m][k] * B[k][n] for one BM x BN output tile. A is
// K-major (x[M][K]); B is K-major (linear's W[N][K]) or, for 16-bit kinds,
// N-major (matmul's B[K][N]: kBNMajor, read by wgmma's transposed-B mode).
// Warp-specialized:
//   warpgroup 0        producer: one thread issues TMA loads of A and B
//                      k-tiles into a kStages ring (128-byte swizzle)
//   warpgroups 1..C    consumers, one of two schedules:
//     cooperative      C = BM / 64: each runs wgmma on its 64 rows x BN of
//                      every tile and keeps those fp32 accumulators
//     ping-pong        C = 2, BM = 64 or 128 (BN <= 128): consumer c takes
//                      every other tile of the block whole (BM / 64 wgmmas
//                      per k step); one runs its mainloop while the other
//                      runs its epilogue (the tensor core stays busy), their
//                      mainloops ordered by the `turn` mbarriers
// synchronized by mbarriers: full[s] (TMA bytes landed) and empty[s] (every
// consumer warp done reading stage s). TMA zero-fills rows and k outside the
// tensor, so any M, N, K works; the tensor maps (runtime-encoded, passed as
// __grid_constant__ parameters) need 16-byte aligned rows.
//
// Precision kinds (MmaKind): BF16 / F16 (k16 steps), TF32 (k8 steps, fp32
// operands: the tensor core reads their top 19 bits), F32x3 (3xTF32,
// fp32-accurate): the producer also loads each operand's TF32 residual lo
// (written by the staging kernel of operand_staging.cuh before the GEMM, tiled
// like the operand; hi is the operand itself, read as TF32), and consumers
// accumulate the k-tile's lo*hi + hi*lo terms, then its hi*hi terms, in the
// tensor core and add that to the fp32 accumulators with FADD (the tensor
// core's own long accumulation truncates: its error would grow with K).
//
// 2-CTA clusters (kClusterM = 2, not 3xTF32): the two
// blocks of a cluster take vertically adjacent tiles of one column (rows
// 2p and 2p + 1 of the tile grid), so they share B's k-tiles: each block's
// producer loads its own A and half of B, multicast to both blocks' stage
// (TMA .multicast::cluster); empty[s] counts the consumer warps of both
// blocks (remote arrivals through mapa), so neither producer refills a
// stage that the other block still reads. Half the B traffic from L2.
// Ping-pong too: both blocks run the same units in the same order, so a
// stage's readers are the same-numbered consumer of each block.
//
// Swap-AB (kSwapAB, tf32, cooperative): B [K][N] N-major, C^T = B^T A^T with
// B^T from registers (wgmma_swap_ab.cuh); BM output rows are the wgmma's N,
// BN = 64 per consumer.
//
// Persistent: each block loops over output tiles (wgmma_mainloop, with the
// operand loads as a policy: wgmma_gemm's here, conv2d's in conv_wgmma.cuh); the producer
// fills the ring for the next tile while the consumers run the epilogue.
// The accumulator fragment (WgmmaFragment) has the interface documented in
// gemm_simt.cuh; only consumer threads hold one, so the epilogue runs on
// them (Frag::sync() is a named barrier over the consumers).
#pragma once

#include "fusejit/fj_common.cuh"
#include "fusejit/wgmma_fragment.cuh"
#include "fusejit/wgmma_schedule.cuh"
#include "fusejit/wgmma_sm90.cuh"
#include "fusejit/wgmma_swap_ab.cuh"

namespace fj {

// Tile policy. BK covers one 128-byte swizzle row of K. kBNMajor_: B is
// stored [K][N] (N contiguous), loaded as BN / 64 boxes of 64 n x BK k.
// kPingPong_: the ping-pong schedule (two consumers, a whole tile each:
// BM / 64 wgmmas per k step, so BM x BN / 128 accumulators per thread).
// kClusterM_: 2 for 2-CTA clusters sharing B (the kernel is compiled with
// __cluster_dims__(2, 1, 1)); K-major B's tensor map box then has
// kClusterBoxRows rows: BN / 2, or BN / 3 where that is not whole 8-row
// swizzle atoms (168: boxes of 56, two from block 0, one from block 1).
// kSwapAB_: tf32 with B [K][N] (N-major) as wgmma's register operand
// (wgmma_swap_ab.cuh): BN / 32 boxes of 32 n x BK k per stage.
// kBRows_: B's rows a stage holds (0: BN; 64: a swap-AB dW whose consumers
// share one box of x; 128: two such boxes, wgrad_swap_ab.cuh).
// kClusterN_: clusters of kClusterN_ blocks along N (2..8; compiled with
// __cluster_dims__(kClusterN_, 1, 1)): block `rank` takes column tile rank of
// each unit's row tile, no operand shared; the epilogue exchanges row
// partials between them (wgmma_row_cluster.cuh).
template <int BM_, int BN_, int kStages_, MmaKind kKind_, bool kBNMajor_ = false, bool kPingPong_ = false,
          int kClusterM_ = 1, bool kSwapAB_ = false, int kBRowBytes_ = 128, int kBRows_ = 0, int kClusterN_ = 1>
struct WgmmaTile {
  static constexpr int BM = BM_, BN = BN_, kStages = kStages_;
  static constexpr MmaKind kKind = kKind_;
  static constexpr bool kBNMajor = kBNMajor_, kPingPong = kPingPong_, kSwapAB = kSwapAB_;
  static constexpr int kClusterM = kClusterM_, kClusterN = kClusterN_;
  static constexpr int kElemBytes = (kKind == MmaKind::BF16 || kKind == MmaKind::F16) ? 2 : 4;
  static constexpr int BK = 128 / kElemBytes;
  static constexpr int kNStep = BN;  // columns between tiles' first (less where a derived Tile overlaps them)
  static constexpr int kStepK = 32 / kElemBytes;  // K of one wgmma
  static constexpr int kConsumers = kPingPong ? 2 : (kSwapAB ? BN : BM) / 64;
  static constexpr int kMHalves = kPingPong ? BM / 64 : 1;  // 64-row wgmmas per consumer and k step
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kConsumerThreads = 128 * kConsumers;
  static constexpr int kTileThreads = kPingPong ? 128 : kConsumerThreads;  // the threads of one tile's fragment
  // One operand tile of a stage; kBRowBytes_: a swap-AB dW's B rows of x are wider than 128 bytes
  // (wgrad_swap_ab.cuh: a tap's shifted pixels and up to 3 before them; 12 for a kernel row's taps).
  static constexpr int kBRowBytes = kBRowBytes_, kBRows = kBRows_ ? kBRows_ : BN;
  static constexpr int kBytesA = BM * 128, kBytesB = kBRows * kBRowBytes;
  // Tiles per operand and stage: F32x3 loads the residuals too.
  static constexpr int kOperandCopies = kKind == MmaKind::F32x3 ? 2 : 1;
  // Shared memory of the ring; the kernel's dynamic shared memory adds the
  // epilogue's and 1 KiB of slack to align the ring.
  static constexpr int kRingBytes = kStages * kOperandCopies * (kBytesA + kBytesB);
  // Registers per thread after setmaxnreg (producer / consumers).
  // Three consumers (the swap-AB dW's 192 columns): 128 x 40 + 384 x 152 of the 64K.
  static constexpr int kProducerRegs = kConsumers == 3 ? 40 : 56;
  static constexpr int kConsumerRegs = kConsumers == 1 ? 232 : kConsumers == 2 ? 224 : 152;
  static_assert(kSwapAB || BM == 64 || BM == 128, "BM: 64 or 128 (one or two consumer warpgroups)");
  static_assert(kSwapAB || BN == 64 || BN == 128 || BN == 168 || BN == 176 || BN == 192 || BN == 256,
                "BN: 64, 128, 168, 176, 192 or 256");
  static_assert(!kSwapAB || ((BN == 64 || BN == 128 || (BN == 192 && kBRowBytes != 128 && BM <= 128)) &&
                             (BM == 64 || BM == 128 || BM == 176 || BM == 192 || BM == 256)),
                "swap-AB: BN 64 or 128 (the consumers' wgmma rows; the dW: 192, BM at most 128), BM 64, 128, 176, "
                "192 or 256");
  static_assert(kBRows == BN || (kSwapAB && kBRowBytes != 128 && (kBRows == 64 || (kBRows == 128 && BN == 192))),
                "a shared B box (or two: flattened grad planes): the swap-AB dW's x");
  static_assert(!kSwapAB || ((kKind == MmaKind::TF32 || kKind == MmaKind::F32x3) && !kPingPong && kClusterM == 1 &&
                             !kBNMajor),
                "swap-AB: tf32 or 3xTF32, the cooperative schedule, no clusters");
  static_assert(!kSwapAB || kKind != MmaKind::F32x3 || BM <= 128, "3xTF32 swap-AB: BM at most 128 (two accumulators)");
  static_assert(kBRowBytes == 128 || (kSwapAB && kKind == MmaKind::TF32 && kBRowBytes > 128 && kBRowBytes % 32 == 16),
                "B rows wider than 128 bytes: the tf32 swap-AB dW's (16 bytes past a multiple of 32: conflict-free)");
  static_assert(!kBNMajor || BN % 64 == 0, "N-major B: whole 64-column boxes");
  static constexpr int kClusterBoxRows = kClusterM == 1 ? BN : (BN / kClusterM) % 8 == 0 ? BN / kClusterM : BN / 3;
  static_assert(kClusterM == 1 || (kClusterBoxRows % 8 == 0 && BN % kClusterBoxRows == 0),
                "2-CTA clusters: B's boxes are whole 8-row swizzle atoms");
  static_assert(kStages >= 2, "at least two stages");
  static_assert(!kBNMajor || kElemBytes == 2, "N-major B: bf16 / f16 only (tf32 wgmma reads K-major B)");
  static_assert(!kPingPong || kKind != MmaKind::F32x3, "ping-pong: not 3xTF32");
  static_assert(!kPingPong || BM == 64 || BN <= 128 || BN == 168,
                "ping-pong 128-row tiles: at most 128 columns, or 168 (registers)");
  static_assert(kClusterM == 1 || kClusterM == 2, "clusters of 1 or 2 blocks");
  static_assert(kClusterM == 1 || kKind != MmaKind::F32x3, "2-CTA clusters: not 3xTF32");
  static_assert(kClusterM == 1 || !kBNMajor || BN >= 128, "2-CTA clusters, N-major B: at least two 64-column boxes");
  static_assert(kClusterN >= 1 && kClusterN <= 8 && (kClusterN == 1 || (kClusterM == 1 && !kSwapAB)),
                "clusters along N: 2 to 8 blocks, no M clusters, no swap-AB");
  static_assert(kClusterN == 1 || !kPingPong || BM == 64, "clusters along N, ping-pong: 64-row tiles");
  // N-major B: one column of 64 n (swap-AB: 32 n) x BK k (128-byte rows) per TMA box.
  static constexpr int kBColumnBytes = BK * 128;
  static_assert(kRingBytes + 1024 <= 227 * 1024, "shared memory over the sm_90 limit");
};

// The accumulator fragment of a tile's consumers.
template <bool kSwap, class Swapped, class Plain>
struct PickFragment {
  using type = Plain;
};
template <class Swapped, class Plain>
struct PickFragment<true, Swapped, Plain> {
  using type = Swapped;
};
template <class Tile>
using WgmmaFragmentOf = typename PickFragment<Tile::kSwapAB, WgmmaSwapFragment<Tile>, WgmmaFragment<Tile>>::type;

// The dynamic shared memory base rounded up to 1024 bytes (the kernel asks for 1 KiB of slack).
__device__ __forceinline__ char* align_smem_1024(char* p) {
  const unsigned a = sm90::smem_addr(p);
  return p + ((1024 - (a & 1023)) & 1023);
}

// The operands' tensor maps: A, B and, for F32x3, their TF32 residuals
// (operand_staging.cuh), tiled like A and B.
struct GemmMaps {
  const TmaDescriptor* a;
  const TmaDescriptor* b;
  const TmaDescriptor* a_lo = nullptr;
  const TmaDescriptor* b_lo = nullptr;
};

// Where one stage's operand tiles go (the residuals' for F32x3 only).
struct StageTiles {
  void* a;
  void* b;
  void* a_lo;
  void* b_lo;
};

// Operand loading policy of wgmma_mainloop: the GEMM's. k-tile kt of output
// tile c is A's box at (kt * BK, c.m * BM) and B's at (kt * BK, c.n * kNStep)
// (N-major B: BN / 64 boxes of 64 n). conv_wgmma.cuh has the conv's.
template <class Tile>
struct GemmOperands {
  static constexpr bool kProducesA = false;  // A by TMA (ConvNchwOperands: by the producer's threads)
  GemmMaps maps;
  int K;
  __device__ __forceinline__ int k_tiles() const { return (K + Tile::BK - 1) / Tile::BK; }
  __device__ __forceinline__ void load(const StageTiles& st, unsigned long long* bar, int kt, TileCoord c,
                                       unsigned rank = 0) const {
    constexpr int BK = Tile::BK;
    sm90::tma_load_2d(st.a, maps.a, bar, kt * BK, c.m * Tile::BM);
    if constexpr (Tile::kSwapAB) {
#pragma unroll
      for (int j = 0; j < Tile::BN / 32; ++j)
        sm90::tma_load_2d(static_cast<char*>(st.b) + j * Tile::kBColumnBytes, maps.b, bar, c.n * Tile::kNStep + 32 * j,
                          kt * BK);
    } else if constexpr (Tile::kClusterM > 1) {  // this block's share of B, multicast to the cluster
      constexpr unsigned short kAll = (1u << Tile::kClusterM) - 1;
      if constexpr (Tile::kBNMajor) {
#pragma unroll
        for (int j = 0; j < Tile::BN / 64; ++j)
          if (j % Tile::kClusterM == static_cast<int>(rank))
            sm90::tma_load_2d_multicast(static_cast<char*>(st.b) + j * Tile::kBColumnBytes, maps.b, bar,
                                        c.n * Tile::kNStep + 64 * j, kt * BK, kAll);
      } else {  // boxes of kClusterBoxRows rows, box j from block j % kClusterM
        constexpr int kRows = Tile::kClusterBoxRows;
#pragma unroll
        for (int j = 0; j < Tile::BN / kRows; ++j)
          if (j % Tile::kClusterM == static_cast<int>(rank))
            sm90::tma_load_2d_multicast(static_cast<char*>(st.b) + j * kRows * 128, maps.b, bar, kt * BK,
                                        c.n * Tile::kNStep + j * kRows, kAll);
      }
    } else if constexpr (Tile::kBNMajor) {
#pragma unroll
      for (int j = 0; j < Tile::BN / 64; ++j)
        sm90::tma_load_2d(static_cast<char*>(st.b) + j * Tile::kBColumnBytes, maps.b, bar, c.n * Tile::kNStep + 64 * j,
                          kt * BK);
    } else {
      sm90::tma_load_2d(st.b, maps.b, bar, kt * BK, c.n * Tile::kNStep);
    }
    if constexpr (Tile::kKind == MmaKind::F32x3) {
      sm90::tma_load_2d(st.a_lo, maps.a_lo, bar, kt * BK, c.m * Tile::BM);
      if constexpr (Tile::kSwapAB) {
#pragma unroll
        for (int j = 0; j < Tile::BN / 32; ++j)
          sm90::tma_load_2d(static_cast<char*>(st.b_lo) + j * Tile::kBColumnBytes, maps.b_lo, bar,
                            c.n * Tile::kNStep + 32 * j, kt * BK);
      } else {
        sm90::tma_load_2d(st.b_lo, maps.b_lo, bar, kt * BK, c.n * Tile::kNStep);
      }
    }
  }
};

// The tensor maps' descriptors into the producer's cache.
__device__ __forceinline__ void prefetch_maps(const GemmMaps& maps) {
  if (maps.a) asm volatile("prefetch.tensormap [%0];" ::"l"(maps.a) : "memory");
  asm volatile("prefetch.tensormap [%0];" ::"l"(maps.b) : "memory");
  if (maps.a_lo) asm volatile("prefetch.tensormap [%0];" ::"l"(maps.a_lo) : "memory");
  if (maps.b_lo) asm volatile("prefetch.tensormap [%0];" ::"l"(maps.b_lo) : "memory");
}

// Registers after setmaxnreg: the tile's, or those of operands whose producer threads write A themselves.
template <class Tile, class Operands, bool = Operands::kProducesA>
struct MainloopRegs {
  static constexpr int kProducer = Tile::kProducerRegs, kConsumer = Tile::kConsumerRegs;
};
template <class Tile, class Operands>
struct MainloopRegs<Tile, Operands, true> {
  static constexpr int kProducer = Operands::kProducerRegs, kConsumer = Operands::kConsumerRegs;
};

// Clusters along N (kClusterN > 1): each block's per-row partials of its tile,
// in a slot of static shared memory (the same offset in every block of the
// cluster), and barriers that the other blocks arrive on once theirs are
// written; slot and barrier alternate by the unit's parity
// (wgmma_row_cluster.cuh). One exchange per consumer tile (kCopies: 2 for
// ping-pong, whose consumers take alternate units; every block of a cluster
// takes the same units in the same order, so consumer c meets consumer c).
// The mainloop initializes the barriers before the cluster's first sync.
template <int BM>
struct RowExchange {
  float partial[2][BM];
  unsigned long long ready[2];
};
template <int BM, int kCopies>
__device__ __forceinline__ RowExchange<BM>& row_exchange(int consumer) {
  __shared__ __align__(8) RowExchange<BM> x[kCopies];
  return x[consumer];
}

// The persistent mainloop: block b computes units b, b + gridDim.x, ... of
// the work (wgmma_schedule.cuh: the tiles of `order`, each over the
// operands' k-tiles or, with split-K, over ranges of them; Operands:
// k_tiles(), maps, and load(stage tiles, full barrier, kt, tile), as
// GemmOperands; or, with kProducesA, load_a / store_a run by all 128
// producer threads and load_b, as ConvNchwOperands), calling epilogue(frag, m0, n0, n_tile) on the consumer
// threads after each whole tile (split-K: after a tile's last unit). The
// producer runs ahead across units (the ring fills for the next one during
// the epilogue); the stage ring and its phases continue from unit to unit.
// `ring` is the 1024-aligned dynamic shared memory (align_smem_1024); the
// epilogue must not touch it. Stage s holds A's tile at a_ring + s * kBytesA
// and B's at b_ring + s * kBytesB; F32x3's residual tiles sit likewise in
// a_lo_ring and b_lo_ring.
template <class Tile, class Operands, class Epilogue>
__device__ __forceinline__ void wgmma_mainloop(const Operands& ops, const TileOrder& order, const SplitK& split,
                                               char* ring, const Epilogue& epilogue) {
  constexpr int S = Tile::kStages, BK = Tile::BK;
  constexpr int kA = Tile::kBytesA, kB = Tile::kBytesB;
  constexpr bool kSplit = Tile::kKind == MmaKind::F32x3;
  constexpr int kCluster = Tile::kClusterM;
  constexpr int kBlocks = Tile::kClusterM * Tile::kClusterN;  // blocks per cluster
  // full: TMA landed; empty: consumers done with a stage; turn[c]
  // (ping-pong): every warp of the other consumer has started the last k-tile
  // of its tile. (Per warp: one thread's arrival let a lagging warp of this
  // consumer reach its wait after the next phase had completed too, so its
  // parity never matched: an H100 hang with 1 k-tile a tile.)
  __shared__ __align__(8) unsigned long long full[S], empty[S], turn[2];
  __shared__ int arrived[2];  // split_k_gather's, per fragment (ping-pong: per consumer)
  constexpr int kStageReaders = Tile::kPingPong ? 1 : Tile::kConsumers;  // consumer warpgroups per stage
  char* a_ring = ring;
  char* b_ring = ring + S * kA;
  char* a_lo_ring = ring + S * (kA + kB);  // F32x3 only
  char* b_lo_ring = a_lo_ring + S * kA;
  using Frag = WgmmaFragmentOf<Tile>;
  Frag frag;  // before the role split (see tile_sum)
  const int warpgroup = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);  // warp-uniform
  // Operands::kProducesA: the producer warpgroup's threads write A themselves (ConvNchwOperands); full[s]
  // then also waits for each producer thread's arrival after its stores.
  constexpr bool kThreadsA = Operands::kProducesA;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      sm90::mbar_init(&full[s], kThreadsA ? 1 + 128 : 1);
      sm90::mbar_init(&empty[s], kStageReaders * 4 * kCluster);  // one arrival per reading warp of the cluster
    }
    for (int b = 0; b < 2; ++b) sm90::mbar_init(&turn[b], 4);  // one arrival per warp of a consumer
    if constexpr (Tile::kClusterN > 1)  // one arrival from each other block of the cluster
      for (int c = 0; c < WgmmaFragment<Tile>::kConsumerTiles; ++c)
        for (int b = 0; b < 2; ++b)
          sm90::mbar_init(&row_exchange<Tile::BM, WgmmaFragment<Tile>::kConsumerTiles>(c).ready[b],
                          Tile::kClusterN - 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if constexpr (kBlocks > 1)
    sm90::cluster_sync();  // every block's barriers exist before the first multicast or remote arrival
  else
    __syncthreads();
  // Clusters: a unit of work is a pair of vertically adjacent tiles; block
  // `rank` takes row 2p + rank (past the last row for odd row counts: it
  // loads and computes zeros for its partner's sake and stores nothing).
  // Clusters along N: a unit is a row tile's kClusterN column tiles, block `rank` takes column tile rank.
  const unsigned rank = kBlocks > 1 ? sm90::cluster_rank() : 0;
  constexpr int kClusterN = Tile::kClusterN;
  const TileOrder units =
      kCluster > 1    ? TileOrder{(order.m_tiles + kCluster - 1) / kCluster, order.n_tiles, max(order.group / kCluster, 1)}
      : kClusterN > 1 ? TileOrder{order.m_tiles, (order.n_tiles + kClusterN - 1) / kClusterN, order.group}
                      : order;
  const WgmmaWork work{units, split, ops.k_tiles()};
  const int first_unit = blockIdx.x / kBlocks, unit_stride = gridDim.x / kBlocks;
  auto tile_at = [&](int tile) {
    TileCoord c = units.at(tile);
    if constexpr (kClusterN > 1)
      c.n = c.n * kClusterN + static_cast<int>(rank);
    else
      c.m = c.m * kCluster + static_cast<int>(rank);
    return c;
  };

  if constexpr (kThreadsA) {
    if (warpgroup == 0) {  // producer: 128 threads write A (kLookahead k-tiles ahead in registers), thread 0 B
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(MainloopRegs<Tile, Operands>::kProducer));
      if (threadIdx.x == 0) prefetch_maps(ops.maps);
      constexpr int L = Operands::kLookahead;  // k-tiles whose A values are in flight (1 or 2)
      static_assert(L == 1 || L == 2, "one or two k-tiles of loads in flight");
      typename Operands::Pending pending[L];  // k-tiles it .. it + L - 1, loaded during the waits for their stages
      int u = first_unit, kt = u < work.count() ? work.unit(u).kt0 : 0;  // the k-tile to store
      int lu = u, lkt = kt;                                               // the next k-tile to load
      auto advance = [&](int& unit, int& k) {  // the next k-tile: this unit's, else the next unit's first
        if (++k == work.unit(unit).kt1) {
          unit += unit_stride;
          if (unit < work.count()) k = work.unit(unit).kt0;
        }
      };
#pragma unroll
      for (int i = 0; i < L; ++i)
        if (lu < work.count()) {
          ops.load_a(pending[i], lkt, tile_at(work.unit(lu).tile));
          advance(lu, lkt);
        }
      auto step = [&](int it, typename Operands::Pending& p) {
        const TileCoord c = tile_at(work.unit(u).tile);
        const int s = it % S;
        if (it >= S) sm90::mbar_wait(&empty[s], ((it / S) & 1) ^ 1);
        if (threadIdx.x == 0) {
          sm90::mbar_expect_tx(&full[s], kB * Tile::kOperandCopies);
          ops.load_b(b_ring + s * kB, b_lo_ring + s * kB, &full[s], kt, c);
        }
        ops.store_a(p, a_ring + s * kA, a_lo_ring + s * kA);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the stores, visible to wgmma
        sm90::mbar_arrive(&full[s]);                                   // (release: after them)
        advance(u, kt);
        if (lu < work.count()) {  // its registers take the k-tile L ahead
          ops.load_a(p, lkt, tile_at(work.unit(lu).tile));
          advance(lu, lkt);
        }
      };
      for (int it = 0; u < work.count(); ++it) {
        if constexpr (L == 2) {
          if (it % 2)
            step(it, pending[1]);
          else
            step(it, pending[0]);
        } else {
          step(it, pending[0]);
        }
      }
      return;
    }
  } else if (warpgroup == 0) {  // producer: one thread loads every k-tile of every tile of this block
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Tile::kProducerRegs));
    if (threadIdx.x == 0) {
      prefetch_maps(ops.maps);
      int it = 0;  // k-tiles loaded so far
      for (int u = first_unit; u < work.count(); u += unit_stride) {
        const WorkUnit w = work.unit(u);
        const TileCoord c = tile_at(w.tile);
        for (int kt = w.kt0; kt < w.kt1; ++kt, ++it) {
          const int s = it % S;
          if (it >= S) sm90::mbar_wait(&empty[s], ((it / S) & 1) ^ 1);
          sm90::mbar_expect_tx(&full[s], (kA + kB) * Tile::kOperandCopies);  // clusters: B half from each block
          const StageTiles st{a_ring + s * kA, b_ring + s * kB, a_lo_ring + s * kA, b_lo_ring + s * kB};
          if constexpr (kCluster > 1)
            ops.load(st, &full[s], kt, c, rank);
          else
            ops.load(st, &full[s], kt, c);
        }
      }
    }
    if constexpr (kBlocks > 1) {  // stay until the partners no longer write, arrive or read here
      __syncwarp();
      sm90::cluster_sync();
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(MainloopRegs<Tile, Operands>::kConsumer));
  const int consumer = warpgroup - 1;
  const int rows_off = Tile::kPingPong ? 0 : consumer * 64 * 128;  // this warpgroup's 64 rows of A
  const bool warp_leader = threadIdx.x % 32 == 0;
  constexpr int kSteps = BK / Tile::kStepK;
  constexpr int kStepBytes16 = 32 >> 4;  // one k step along a K-major row, in descriptor units
  // ... and down an N-major B column (kStepK rows of 128 bytes)
  constexpr int kBStep16 = Tile::kBNMajor ? (Tile::kStepK * 128) >> 4 : kStepBytes16;
  constexpr int kHalfA16 = (64 * 128) >> 4;  // 64 rows further down A
  // Stage s is free again for this block's producer (and, in a cluster, the partner's multicast).
  auto release = [&](int s) {
    if (!warp_leader) return;
    sm90::mbar_arrive(&empty[s]);
    if constexpr (kCluster > 1) sm90::mbar_arrive_cluster(&empty[s], rank ^ 1u);
  };
  int it = 0;     // k-tiles consumed so far (by this block)
  int local = 0;  // this block's units so far
#pragma unroll 1
  for (int u = first_unit; u < work.count(); u += unit_stride, ++local) {
    const WorkUnit w = work.unit(u);
    if constexpr (Tile::kPingPong) {
      if (local % 2 != consumer) {  // the other consumer's unit
        it += w.kt1 - w.kt0;
        continue;
      }
      // Mainloops in unit order: the other consumer has reached its last
      // k-tile of unit local - 1, so every full[] phase up to it - 1 has
      // completed and the parity waits below cannot alias an older phase.
      if (local > 0) sm90::mbar_wait(&turn[consumer], ((local - 1) / 2) & 1);
    }
#pragma unroll
    for (int i = 0; i < Frag::kRows; ++i)
#pragma unroll
      for (int j = 0; j < Frag::kCols; ++j) frag.acc[i][j] = 0.f;
    if constexpr (kSplit && Tile::kSwapAB) {
      swap_ab_k_tiles_3xtf32<Tile>(frag, StageRing{a_ring, b_ring, a_lo_ring, b_lo_ring}, full, empty, w.kt0, w.kt1, it,
                                   consumer);
    } else if constexpr (kSplit) {
      // Stage it holds A and B (hi, read as TF32) and their residuals (lo).
      // The k-tile's sum is added to acc in fp32 before the next k-tile
      // starts. The tensor core truncates its fp32 sums: the small cross
      // terms go first, so that only the hi*hi steps add to a large sum.
#pragma unroll 1
      for (int kt = w.kt0; kt < w.kt1; ++kt, ++it) {
        const int s = it % S;
        sm90::mbar_wait(&full[s], (it / S) & 1);
        const unsigned long long a_hi = sm90::sw128_desc(a_ring + s * kA + rows_off);
        const unsigned long long b_hi = sm90::sw128_desc(b_ring + s * kB);
        const unsigned long long a_lo = sm90::sw128_desc(a_lo_ring + s * kA + rows_off);
        const unsigned long long b_lo = sm90::sw128_desc(b_lo_ring + s * kB);
        sm90::wgmma_fence();
#pragma unroll
        for (int k = 0; k < kSteps; ++k) {
          const int d = k * kStepBytes16;
          sm90::mma<MmaKind::TF32, Tile::BN>(frag.tile_sum, a_lo + d, b_hi + d, k > 0);  // k-tile sum starts fresh
          sm90::mma<MmaKind::TF32, Tile::BN>(frag.tile_sum, a_hi + d, b_lo + d);
        }
#pragma unroll
        for (int k = 0; k < kSteps; ++k)
          sm90::mma<MmaKind::TF32, Tile::BN>(frag.tile_sum, a_hi + k * kStepBytes16, b_hi + k * kStepBytes16);
        sm90::wgmma_commit();
        sm90::wgmma_wait<0>();
        if (warp_leader) sm90::mbar_arrive(&empty[s]);
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int j = 0; j < Tile::BN / 4; ++j) frag.acc[i][j] += frag.tile_sum[i][j];  // fp32, nearest
      }
    } else if constexpr (Tile::kSwapAB) {
      if constexpr (SwapLoadsX<Operands>::value)  // a dW's x rows into registers (wgrad_swap_ab.cuh)
        swap_ab_k_tiles<Tile>(frag, StageRing{a_ring, b_ring, nullptr, nullptr}, full, w.kt0, w.kt1, it, release,
                              ops.register_loader(tile_at(w.tile), consumer));
      else
        swap_ab_k_tiles<Tile>(frag, StageRing{a_ring, b_ring, nullptr, nullptr}, full, w.kt0, w.kt1, it, release,
                              SwapLoadsB<Tile>(consumer));
    } else {
#pragma unroll 1
      for (int kt = w.kt0; kt < w.kt1; ++kt, ++it) {
        const int s = it % S;
        sm90::mbar_wait(&full[s], (it / S) & 1);
        if constexpr (Tile::kPingPong)
          if (kt == w.kt1 - 1 && warp_leader) sm90::mbar_arrive(&turn[1 - consumer]);
        const unsigned long long a_desc = sm90::sw128_desc(a_ring + s * kA + rows_off);
        const unsigned long long b_desc = Tile::kBNMajor
                                              ? sm90::sw128_desc_n_major(b_ring + s * kB, Tile::kBColumnBytes)
                                              : sm90::sw128_desc(b_ring + s * kB);
        sm90::wgmma_fence();
#pragma unroll
        for (int k = 0; k < kSteps; ++k)
#pragma unroll
          for (int h = 0; h < Tile::kMHalves; ++h)  // 64 rows (A: 64 x 128 bytes) per wgmma
            sm90::mma<Tile::kKind, Tile::BN, Tile::kBNMajor>(frag.half(h), a_desc + h * kHalfA16 + k * kStepBytes16,
                                                             b_desc + k * kBStep16);
        sm90::wgmma_commit();
        sm90::wgmma_wait<1>();  // the previous k-tile's wgmmas are done: release its stage
        if (kt > w.kt0) release((it - 1) % S);
      }
      sm90::wgmma_wait<0>();
      release((it - 1) % S);
    }
    if (w.range >= 0 && !split_k_gather(frag, split, w, &arrived[frag.consumer()])) continue;  // not the tile's last range
    const TileCoord c = tile_at(w.tile);
    if (kCluster == 1 || c.m < order.m_tiles) epilogue(frag, c.m * Tile::BM, c.n * Tile::kNStep, c.n);
    __syncwarp();  // whole warps for the next unit's .sync.aligned wgmmas, however the epilogue branched
  }
  if constexpr (kBlocks > 1) sm90::cluster_sync();  // the partners' last remote arrivals (and reads) are done
}

// The GEMM: A [M][K] and B (K-major [N][K] or N-major [K][N]) over k in [0, K).
template <class Tile, class Epilogue>
__device__ __forceinline__ void wgmma_gemm(const GemmMaps& maps, int K, const TileOrder& order, const SplitK& split,
                                           char* ring, const Epilogue& epilogue) {
  wgmma_mainloop<Tile>(GemmOperands<Tile>{maps, K}, order, split, ring, epilogue);
}

}  // namespace fj
