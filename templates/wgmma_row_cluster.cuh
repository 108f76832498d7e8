// fusejit/wgmma_row_cluster.cuh — a row reduction over an N that spans a
// cluster of column tiles (WgmmaTile kClusterN > 1: the blocks of a cluster
// take the column tiles of the same row tiles), finished through distributed
// shared memory and broadcast back over each block's tile: the anchor's output
// never leaves the cluster (KernelPlan::wide with a cluster tail,
// pass_fuse_row_cluster.cpp).
//
// Per unit, each block reduces its tile's rows (tile_row_combine), writes the
// partials to its exchange slot (row_exchange, gemm_wgmma.cuh) and arrives on
// every other block's `ready` barrier (release at cluster scope); once all the
// others have arrived on its own (acquire at cluster scope) it combines the
// kClusterN partials of each row in rank order, reading the others' slots with
// ld.shared::cluster: every block gets the same value, deterministically.
// Slot and barrier alternate by the unit's parity: a block writes slot p again
// two units later, after every other block has arrived for the unit between,
// which each does only once it has read slot p. The mainloop's last cluster
// sync keeps every block resident until the others' reads are done.
#pragma once

#include "fusejit/epilogue.cuh"
#include "fusejit/gemm_wgmma.cuh"

namespace fj {

// Writes this block's value row(r) of each tile row r into exchange slot
// `slot`, arrives on every other block's `ready` barrier (release at cluster
// scope) and waits until all the others have arrived on its own (acquire):
// then every block's slot holds this unit's values.
template <int BM, int kThreads, int kClusterN, class Frag, class RowF>
__device__ __forceinline__ void publish_rows(const Frag& frag, RowExchange<BM>& x, int slot, unsigned parity,
                                             const RowF& row) {
  for (int r = frag.thread(); r < BM; r += kThreads) x.partial[slot][r] = row(r);
  Frag::sync();  // the slot is written
  const unsigned rank = sm90::cluster_rank();
  if (frag.thread() == 0) {
    asm volatile("fence.acq_rel.cluster;" ::: "memory");
    for (unsigned q = 0; q < kClusterN; ++q)
      if (q != rank) sm90::mbar_arrive_cluster<true>(&x.ready[slot], q);
  }
  sm90::mbar_wait_acquire_cluster(&x.ready[slot], parity);  // every other block's slot is written
}

// tile_row_broadcast (epilogue.cuh) over the cluster's column tiles: the row
// values combine every block's partial; row(v, m, store) in every block, with
// `store` (the row-shaped outputs, stored once) in block 0 only, returns the
// value apply(acc, r, m, n) gets at every element of this block's tile. `round` counts the units this thread's block has done
// (each consumer thread keeps it, starting at 0). smem: (S + 2) * BM floats,
// then the staging's, as tile_row_broadcast.
template <class Op, bool kMean, int kChunk, int BM, int kThreads, int kClusterN, class Frag, class ValueF, class RowF,
          class ApplyF>
__device__ __forceinline__ void tile_row_broadcast_cluster(const Frag& frag, int m0, int n0, int M, int N, float* smem,
                                                           int& round, const ValueF& value, const RowF& row,
                                                           const ApplyF& apply) {
  static_assert(!Op::kLogSumExp, "tile_row_broadcast_cluster: sum, max, min (a mean: kMean)");
  static_assert(kClusterN >= 2 && kClusterN <= 8, "clusters of 2 to 8 blocks along N");
  RowExchange<BM>& x = row_exchange<BM, Frag::kConsumerTiles>(frag.consumer());
  const int slot = round & 1;
  const unsigned parity = (round >> 1) & 1;
  ++round;
  tile_row_combine<Op, BM, kThreads>(frag, m0, n0, M, N, smem, value);  // ends with Frag::sync()
  float* total = smem + Frag::kRowSharers * BM;
  publish_rows<BM, kThreads, kClusterN>(frag, x, slot, parity, [&](int r) { return total[r]; });
  const unsigned rank = sm90::cluster_rank();
  for (int r = frag.thread(); r < BM; r += kThreads) {
    if (m0 + r >= M) continue;
    float a = Op::identity();
#pragma unroll
    for (int q = 0; q < kClusterN; ++q)
      a = Op::combine(a, q == static_cast<int>(rank) ? x.partial[slot][r]
                                                     : sm90::ld_shared_cluster(&x.partial[slot][r], q));
    total[r] = row(kMean ? a / (float)N : a, m0 + r, rank == 0);
  }
  Frag::sync();
  tile_pointwise_staged<kChunk>(frag, m0, n0, M, N, total + 2 * BM,
                                [&](float acc, int m, int n) { apply(acc, total[m - m0], m, n); });
}

// Softmax (kLog: log_softmax) of value(acc, m, n) along rows that span the
// cluster's column tiles: each block's log-sum-exp of its tile's rows
// (tile_row_combine: max + log of the sum of exp(v - max)) goes through the
// exchange as tile_row_broadcast_cluster's partials; every block combines the
// kClusterN of a row in rank order into the row's L = M + log(sum_q exp(l_q -
// M)), M the largest, then store(v, m, n) gets exp(value - L) (log: value -
// L) at each element of its tile, staged kChunk columns at a time. The
// anchor's output never leaves the cluster. A row holding +inf or NaN gives
// NaN, an all -inf row NaN, as PyTorch's. smem as tile_row_broadcast_cluster.
template <bool kLog, int kChunk, int BM, int kThreads, int kClusterN, class Frag, class ValueF, class StoreF>
__device__ __forceinline__ void tile_row_softmax_cluster(const Frag& frag, int m0, int n0, int M, int N, float* smem,
                                                         int& round, const ValueF& value, const StoreF& store) {
  static_assert(kClusterN >= 2 && kClusterN <= 8, "clusters of 2 to 8 blocks along N");
  RowExchange<BM>& x = row_exchange<BM, Frag::kConsumerTiles>(frag.consumer());
  const int slot = round & 1;
  const unsigned parity = (round >> 1) & 1;
  ++round;
  tile_row_combine<LogSumExpOp, BM, kThreads>(frag, m0, n0, M, N, smem, value);  // ends with Frag::sync()
  float* total = smem + Frag::kRowSharers * BM;
  const float* row_max = total + BM;
  // this tile's log-sum-exp of row r: -inf for a row of -inf (log 0), NaN for one with +inf (its sum is 0)
  publish_rows<BM, kThreads, kClusterN>(frag, x, slot, parity, [&](int r) { return row_max[r] + logf(total[r]); });
  const unsigned rank = sm90::cluster_rank();
  for (int r = frag.thread(); r < BM; r += kThreads) {
    if (m0 + r >= M) continue;
    float l[kClusterN];
    float mx = neg_inf();
#pragma unroll
    for (int q = 0; q < kClusterN; ++q) {
      l[q] = q == static_cast<int>(rank) ? x.partial[slot][r] : sm90::ld_shared_cluster(&x.partial[slot][r], q);
      mx = max_nan(mx, l[q]);
    }
    float s = 0.f;
#pragma unroll
    for (int q = 0; q < kClusterN; ++q) s += expf(l[q] - mx);
    total[r] = is_finite(mx) ? mx + logf(s) : mx;  // -inf: every element NaN below, as NaN
  }
  Frag::sync();
  tile_pointwise_staged<kChunk>(frag, m0, n0, M, N, total + 2 * BM, [&](float acc, int m, int n) {
    const float d = value(acc, m, n) - total[m - m0];
    store(kLog ? d : expf(d), m, n);
  });
}

}  // namespace fj
