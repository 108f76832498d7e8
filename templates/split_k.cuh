// fusejit/split_k.cuh — split-K across blocks (mma.sync and SIMT mainloops):
// kSplits blocks (blockIdx.z = split) accumulate one output tile over K
// ranges of whole k tiles. Each stores its accumulators to `partials`
// ([tile][split][accumulator][thread] floats: coalesced) and counts itself in
// counters[tile]; the last to arrive sums every split's accumulators in split
// order (the same sum whichever block is last: deterministic), resets the
// counter to 0 for the next launch, and returns true: it runs the epilogue.
// counters start at zero (zeroed scratch). Every thread of the block calls
// it; `smem` (4 bytes of shared memory the mainloop no longer uses) carries
// the arrival count to the block. Works on any fragment with the interface of
// gemm_simt.cuh's header (acc[kRows][kCols], kThreads).
#pragma once

#include "fusejit/fj_common.cuh"

namespace fj {

template <int kSplits, class Frag>
__device__ __forceinline__ bool split_k_gather(Frag& frag, float* __restrict__ partials, int* __restrict__ counters,
                                               int tile, int split, char* smem) {
  constexpr int kAcc = Frag::kRows * Frag::kCols, T = Frag::kThreads;
  // Splits whose loads issue together (one L2 round trip a group, not a split), within ~64 registers.
  constexpr int kGroup = kAcc >= 64 ? 1 : (64 / kAcc < kSplits ? 64 / kAcc : kSplits);
  const int tid = threadIdx.x;
  float* mine = partials + ((long long)tile * kSplits + split) * kAcc * T + tid;
#pragma unroll
  for (int i = 0; i < kAcc; ++i) mine[i * T] = frag.acc[i / Frag::kCols][i % Frag::kCols];
  volatile int& arrived = *reinterpret_cast<int*>(smem);
  __threadfence();  // this block's partials are visible before it is counted
  __syncthreads();
  if (tid == 0) arrived = atomicAdd(counters + tile, 1);
  __syncthreads();
  const bool last = arrived == kSplits - 1;
  __syncthreads();  // everyone has read it: the epilogue may reuse smem
  if (!last) return false;
  __threadfence();  // the other blocks' partials, counted before us, are visible
  // kGroup splits' loads at a time, then their sums in split order: every sum from 0 in split order.
  const float* all = partials + (long long)tile * kSplits * kAcc * T + tid;
#pragma unroll
  for (int i = 0; i < kAcc; ++i) frag.acc[i / Frag::kCols][i % Frag::kCols] = 0.f;
#pragma unroll 1
  for (int s0 = 0; s0 < kSplits; s0 += kGroup) {
    float v[kGroup][kAcc];
#pragma unroll
    for (int g = 0; g < kGroup; ++g)
#pragma unroll
      for (int i = 0; i < kAcc; ++i)
        v[g][i] = s0 + g < kSplits ? __ldcg(all + ((long long)(s0 + g) * kAcc + i) * T) : 0.f;
#pragma unroll
    for (int g = 0; g < kGroup; ++g)
      if (s0 + g < kSplits)
#pragma unroll
        for (int i = 0; i < kAcc; ++i) frag.acc[i / Frag::kCols][i % Frag::kCols] += v[g][i];
  }
  if (tid == 0) counters[tile] = 0;
  return true;
}

}  // namespace fj
