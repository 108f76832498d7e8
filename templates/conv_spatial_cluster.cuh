// fusejit/conv_spatial_cluster.cuh — a reduction over a conv's output pixels
// (global_avg_pool; sum / mean / max / min over H, W) finished inside the
// halo-patch conv kernel on sm_90 (pass_spatial_cluster.cpp). The kCluster
// blocks of a cluster take one image's pixel tiles in turn (block `rank`:
// tiles rank, rank + kCluster, ...). Each folds its tiles' per-channel values
// (tile_col_partials' store) into a shared-memory column of its own, always
// by the same thread; after its last tile, block 0 combines the kCluster
// folds of each channel in rank order through distributed shared memory and
// calls finish(v, n): the same order every run, and nothing but the outputs
// written.
#pragma once

#include "fusejit/cluster_sm90.cuh"

namespace fj {

// The block's fold: BN floats of static shared memory (the same offset in
// every block of the cluster), set to Op's identity. The first tile's
// epilogue starts after the mainloop's __syncthreads.
template <class Op, int BN>
__device__ __forceinline__ float* begin_column_fold() {
  __shared__ float fold[BN];
  for (int c = threadIdx.x; c < BN; c += blockDim.x) fold[c] = Op::identity();
  return fold;
}

// After the block's last tile: the cluster's folds written (barrier.cluster,
// release / acquire), block 0 combines column c of every block in rank order
// and calls finish(v, n0 + c) for the columns below N; the second barrier
// keeps the others' shared memory until block 0 has read it. Every thread of
// every block of the cluster calls it.
template <class Op, int BN, int kCluster, class FinishF>
__device__ __forceinline__ void finish_column_fold(const float* fold, int n0, int N, const FinishF& finish) {
  static_assert(kCluster >= 1 && kCluster <= 16, "clusters of up to 16 blocks (over 8: non-portable)");
  sm90::cluster_sync();
  if (sm90::cluster_rank() == 0)
    for (int c = threadIdx.x; c < BN; c += blockDim.x) {
      if (n0 + c >= N) continue;
      float v = fold[c];
#pragma unroll
      for (int q = 1; q < kCluster; ++q) v = Op::combine(v, sm90::ld_shared_cluster(&fold[c], q));
      finish(v, n0 + c);
    }
  sm90::cluster_sync();
}

}  // namespace fj
