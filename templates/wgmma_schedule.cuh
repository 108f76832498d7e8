// fusejit/wgmma_schedule.cuh — which work the persistent wgmma blocks take
// (gemm_wgmma.cuh's wgmma_mainloop): output tiles in grouped rasterization,
// optionally split along K.
//
// A unit of work is a tile's whole K or, with split-K, one of `splits` K
// ranges (whole k-tiles) of a tile. Block b takes units b, b + gridDim.x, ...
// Units of one split tile are adjacent, so they run on different blocks at
// once. Tiles before SplitK::first stay whole (split-K for the last, partial
// wave only; first = 0: every tile split, for grids too small to fill the
// GPU). The unit that finishes a split tile last sums every range's
// accumulators in range order (deterministic, whoever is last) and runs the
// epilogue; the others return without one.
#pragma once

namespace fj {

// Output tiles in grouped rasterization: `group` row tiles sweep all column
// tiles together, so the blocks running at once share A and B in L2.
struct TileCoord {
  int m, n;
};
struct TileOrder {
  int m_tiles, n_tiles, group;
  __device__ __forceinline__ int count() const { return m_tiles * n_tiles; }
  __device__ __forceinline__ TileCoord at(int i) const {
    const int per_group = group * n_tiles;
    const int first_m = (i / per_group) * group;
    const int rows = min(m_tiles - first_m, group);
    const int r = i % per_group;
    return {first_m + r % rows, r / rows};
  }
};

// Split-K: tiles [first, count) are computed as `splits` K ranges each.
// partials: [split tile][range][accumulator][fragment thread] floats (each
// range's fragment, coalesced); counters: one per split tile, zeroed before
// the first launch and reset to zero by the tile's last unit.
struct SplitK {
  int first = 0, splits = 1;
  float* partials = nullptr;
  int* counters = nullptr;
};

// One unit: tile `tile` (an index of the TileOrder) over k-tiles [kt0, kt1);
// range -1 for a whole tile.
struct WorkUnit {
  int tile, kt0, kt1, range;
};

struct WgmmaWork {
  TileOrder order;
  SplitK split;
  int k_tiles;
  __device__ __forceinline__ bool splitting() const { return split.splits > 1 && split.first < order.count(); }
  __device__ __forceinline__ int count() const {
    return splitting() ? split.first + (order.count() - split.first) * split.splits : order.count();
  }
  // Ranges of ceil(k_tiles / splits) k-tiles; the planner picks splits so that none is empty.
  __device__ __forceinline__ WorkUnit unit(int u) const {
    if (!splitting() || u < split.first) return {u, 0, k_tiles, -1};
    const int r = u - split.first, range = r % split.splits;
    const int per = (k_tiles + split.splits - 1) / split.splits;
    return {split.first + r / split.splits, range * per, min(k_tiles, (range + 1) * per), range};
  }
};

// Called by every thread of the unit's fragment after its K range (Frag:
// WgmmaFragment; `arrived` a shared int of this fragment's threads alone).
// Stores the range's accumulators and counts the unit; returns false except
// in the tile's last unit, whose fragment then holds the sum of every range
// and which runs the epilogue.
template <class Frag>
__device__ __forceinline__ bool split_k_gather(Frag& frag, const SplitK& sk, const WorkUnit& w, volatile int* arrived) {
  constexpr int kAcc = Frag::kRows * Frag::kCols, T = Frag::kThreads;
  const int t = frag.thread(), tile = w.tile - sk.first;
  float* const mine = sk.partials + ((long long)tile * sk.splits + w.range) * kAcc * T + t;
#pragma unroll
  for (int i = 0; i < Frag::kRows; ++i)
#pragma unroll
    for (int j = 0; j < Frag::kCols; ++j) __stcg(mine + (i * Frag::kCols + j) * T, frag.acc[i][j]);
  __threadfence();  // this unit's partials are visible before it is counted
  Frag::sync();
  if (t == 0) *arrived = atomicAdd(sk.counters + tile, 1);
  Frag::sync();
  // (The next write of *arrived comes after the next gather's first sync:
  // every thread has read it by then.)
  if (*arrived != sk.splits - 1) return false;
  __threadfence();  // the other units' partials, counted before ours, are visible
  // Range by range (each range's loads issue together: one L2 round trip
  // per range, not per accumulator), every sum from 0 in range order.
  const float* const all = sk.partials + (long long)tile * sk.splits * kAcc * T + t;
#pragma unroll
  for (int i = 0; i < Frag::kRows; ++i)
#pragma unroll
    for (int j = 0; j < Frag::kCols; ++j) frag.acc[i][j] = 0.f;
#pragma unroll 1
  for (int s = 0; s < sk.splits; ++s)
#pragma unroll
    for (int i = 0; i < Frag::kRows; ++i)
#pragma unroll
      for (int j = 0; j < Frag::kCols; ++j) frag.acc[i][j] += __ldcg(all + ((long long)s * kAcc + i * Frag::kCols + j) * T);
  if (t == 0) sk.counters[tile] = 0;
  return true;
}

}  // namespace fj
