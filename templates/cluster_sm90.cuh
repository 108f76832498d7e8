// fusejit/cluster_sm90.cuh — thread block clusters (sm_90): a block's rank,
// the cluster-wide barrier and loads from a peer block's shared memory. Small
// on purpose: mma.sync kernels that cluster (conv_spatial_cluster.cuh) include
// it without the wgmma headers.
#pragma once

namespace fj::sm90 {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// This block's rank in its cluster.
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Every thread of every block of the cluster (barrier.cluster; release / acquire).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The float at p's offset in block `cta`'s shared memory.
__device__ __forceinline__ float ld_shared_cluster(const float* p, unsigned cta) {
  float v;
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %1, %2;\nld.shared::cluster.f32 %0, [remote];\n}"
      : "=f"(v)
      : "r"(smem_addr(p)), "r"(cta)
      : "memory");
  return v;
}

}  // namespace fj::sm90
