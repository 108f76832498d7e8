// fusejit/epilogue_norm.cuh — a per-sample norm done on a wgmma tile's
// accumulators (pass_fuse_norm_epilogue.cpp): group_norm over a linear's
// [M, C] output (groups of C / G consecutive columns) or layer_norm over its
// last dim, where every group lies inside one column tile.
#pragma once

#include "fusejit/epilogue_staged.cuh"
#include "fusejit/fj_common.cuh"

namespace fj {

// Normalizes each run of kSeg consecutive columns of every tile row (the
// tile's column origin n0 a multiple of kSeg, N too): value(acc, m, n) first
// (the epilogue before the norm), then the run's mean, then the mean of the
// squared deviations from it (two passes in fp32, as the norm kernels), and
// (v - mean) / sqrt(var + eps) goes to store(v, m, n) through shared memory
// kChunk columns at a time (tile_pointwise_staged). A wgmma fragment's row
// lives in one quad of threads, thread columns 8i + 2(t % 4) + {0, 1}: a
// run's sums are each thread's kSeg / 4 values, then two shuffles. Runs past
// N or rows past M are computed on zeros and not stored. smem: as
// tile_pointwise_staged.
template <int kSeg, int kChunk, class Frag, class ValueF, class StoreF>
__device__ __forceinline__ void tile_segment_norm(Frag& frag, int m0, int n0, int M, int N, float eps, float* smem,
                                                  const ValueF& value, const StoreF& store) {
  static_assert(Frag::kRowSharers == 4 && kSeg % 8 == 0 && Frag::kTileCols % kSeg == 0,
                "tile_segment_norm: a wgmma fragment, runs of a multiple of 8 columns that divide the tile");
  constexpr int kRuns = Frag::kTileCols / kSeg, kPer = kSeg / 4;  // a thread's columns of a run, per row
  const auto quad_sum = [](float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
  };
#pragma unroll
  for (int i = 0; i < Frag::kRows; ++i) {
    const int m = m0 + frag.row(i);
#pragma unroll
    for (int s = 0; s < kRuns; ++s) {
      const bool inside = m < M && n0 + s * kSeg < N;  // the whole run (N is a multiple of kSeg)
      float sum = 0.f;
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int j = s * kPer + k;
        frag.acc[i][j] = inside ? value(frag.acc[i][j], m, n0 + frag.col(j)) : 0.f;
        sum += frag.acc[i][j];
      }
      const float mean = quad_sum(sum) / (float)kSeg;
      float m2 = 0.f;
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const float d = frag.acc[i][s * kPer + k] - mean;
        m2 += d * d;
      }
      const float rstd = 1.f / sqrtf(quad_sum(m2) / (float)kSeg + eps);
#pragma unroll
      for (int k = 0; k < kPer; ++k) frag.acc[i][s * kPer + k] = (frag.acc[i][s * kPer + k] - mean) * rstd;
    }
  }
  tile_pointwise_staged<kChunk>(frag, m0, n0, M, N, smem, store);
  Frag::sync();
}

}  // namespace fj
