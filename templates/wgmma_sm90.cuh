// fusejit/wgmma_sm90.cuh — the Hopper (sm_90a) primitives the wgmma
// mainloops use: mbarriers, TMA tile loads (multicast too) and stores,
// wgmma fences, shared-memory matrix descriptors, and one sm90::mma per kind
// and width (wgmma_ops.cuh has the instructions; cluster_sm90.cuh the
// cluster rank, barrier and remote loads).
#pragma once

#include "fusejit/cluster_sm90.cuh"
#include "fusejit/wgmma_ops.cuh"

namespace fj {

// A TMA tensor map (the driver's CUtensorMap: 128 opaque bytes, 64-byte aligned).
struct alignas(64) TmaDescriptor {
  unsigned long long opaque[16];
};

enum class MmaKind { BF16, F16, TF32, F32x3 };

namespace sm90 {

__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
// Counts txCount bytes as arrived on the barrier's current phase (for a copy not made).
__device__ __forceinline__ void mbar_complete_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred ready;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 ready, [%0], %1;\n"
      "@!ready bra WAIT;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// 2-D tile load: box at (c0 along the contiguous dim, c1 rows) -> dst, completing on bar.
__device__ __forceinline__ void tma_load_2d(void* dst, const TmaDescriptor* map, unsigned long long* bar, int c0,
                                            int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar))
      : "memory");
}
// 4-D tile load (conv's NHWC input: c0 channels, then w, h, n), zero-filled
// where the box leaves the tensor (negative coordinates included: padding).
__device__ __forceinline__ void tma_load_4d(void* dst, const TmaDescriptor* map, unsigned long long* bar, int c0,
                                            int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];" ::"r"(smem_addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
      : "memory");
}
// The same box multicast to the blocks of `cta_mask` in the cluster, at the
// same shared-memory offsets, each completing on its own mbarrier there.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const TmaDescriptor* map, unsigned long long* bar,
                                                      int c0, int c1, unsigned short cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3}], [%4], %5;" ::"r"(smem_addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar)), "h"(cta_mask)
      : "memory");
}
// Arrives on the mbarrier at bar's offset in block `cta` of the cluster.
// Default: release at CTA scope, as a local arrival (the mainloop's stage
// reads are wgmma's, already complete; a .release.cluster arrival made the
// 4096^3 bf16 GEMM 1.6x slower on the H100). kReleaseCluster: releasing this
// thread's (and what it synchronized with) shared-memory writes at cluster
// scope, for a peer that then reads them (wgmma_row_cluster.cuh).
template <bool kReleaseCluster = false>
__device__ __forceinline__ void mbar_arrive_cluster(unsigned long long* bar, unsigned cta) {
  if constexpr (kReleaseCluster)
    asm volatile(
        "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}" ::"r"(smem_addr(bar)),
        "r"(cta)
        : "memory");
  else
    asm volatile(
        "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}" ::"r"(smem_addr(bar)),
        "r"(cta)
        : "memory");
}
// Waits for the phase of parity `parity` of this block's bar, acquiring at cluster scope.
__device__ __forceinline__ void mbar_wait_acquire_cluster(unsigned long long* bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred ready;\nWAIT:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 ready, [%0], %1;\n"
      "@!ready bra WAIT;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// 2-D tile store: the dense box at src -> global at (c0 along the contiguous
// dim, c1 rows), clipped to the tensor; one bulk async group per commit.
__device__ __forceinline__ void tma_store_2d(const TmaDescriptor* map, const void* src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(map), "r"(c0),
               "r"(c1), "r"(smem_addr(src))
               : "memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
// Shared-memory matrix descriptor of a K-major tile stored as 128-byte rows
// with the 128-byte swizzle (what TMA writes with CU_TENSOR_MAP_SWIZZLE_128B):
// 8-row groups 1024 bytes apart. The tile must be 1024-byte aligned; a k step
// inside the row adds its byte offset / 16 to the start address.
__device__ __forceinline__ unsigned long long sw128_desc(const void* tile) {
  constexpr unsigned long long kGroupStride = 1024 >> 4, kSwizzle128 = 1;
  return ((smem_addr(tile) & 0x3FFFF) >> 4) | (1ull << 16) | (kGroupStride << 32) | (kSwizzle128 << 62);
}
// The same with 8-row groups `group_stride` bytes apart (a multiple of 128):
// rows that TMA wrote with the swizzle into a 1024-aligned buffer, read from
// any 128-byte row on (the swizzle phase follows the address, so the base
// offset stays 0). conv_wgmma_halo.cuh's A tiles inside an input halo.
__device__ __forceinline__ unsigned long long sw128_desc_strided(const void* first_row, unsigned group_stride) {
  constexpr unsigned long long kSwizzle128 = 1;
  return ((smem_addr(first_row) & 0x3FFFF) >> 4) | (1ull << 16) |
         (static_cast<unsigned long long>(group_stride >> 4) << 32) | (kSwizzle128 << 62);
}
// The same for an N-major tile (B[k][n], 16-bit): columns of 64 n (one
// 128-byte swizzled row per k, what TMA writes for a 64-wide box), `column_bytes`
// apart; within a column, groups of 8 k rows 1024 bytes apart. A k step of 16
// rows adds 2048 bytes (keeping the swizzle pattern's 1024-byte phase).
__device__ __forceinline__ unsigned long long sw128_desc_n_major(const void* tile, unsigned column_bytes) {
  constexpr unsigned long long kGroupStride = 1024 >> 4, kSwizzle128 = 1;
  return ((smem_addr(tile) & 0x3FFFF) >> 4) | (static_cast<unsigned long long>(column_bytes >> 4) << 16) |
         (kGroupStride << 32) | (kSwizzle128 << 62);
}

// acc = acc * (scale_d != 0) + A(64 x kStep) * B(kStep x BN), one wgmma of
// the kind; kTransB: B N-major (16-bit kinds only).
template <MmaKind kKind, int BN, int kTransB = 0>
__device__ __forceinline__ void mma(float (&acc)[2][BN / 4], unsigned long long a, unsigned long long b,
                                    int scale_d = 1) {
  if constexpr (kKind == MmaKind::BF16) {
    if constexpr (BN == 64) mma_bf16_m64n64<kTransB>(acc, a, b, scale_d);
    if constexpr (BN == 128) mma_bf16_m64n128<kTransB>(acc, a, b, scale_d);
    if constexpr (BN == 168) mma_bf16_m64n168<kTransB>(acc, a, b, scale_d);
    if constexpr (BN == 176) mma_bf16_m64n176<kTransB>(acc, a, b, scale_d);
    if constexpr (BN == 192) mma_bf16_m64n192<kTransB>(acc, a, b, scale_d);
    if constexpr (BN == 256) mma_bf16_m64n256<kTransB>(acc, a, b, scale_d);
  } else if constexpr (kKind == MmaKind::F16) {
    if constexpr (BN == 64) mma_f16_m64n64<kTransB>(acc, a, b, scale_d);
    if constexpr (BN == 128) mma_f16_m64n128<kTransB>(acc, a, b, scale_d);
    if constexpr (BN == 168) mma_f16_m64n168<kTransB>(acc, a, b, scale_d);
    if constexpr (BN == 176) mma_f16_m64n176<kTransB>(acc, a, b, scale_d);
    if constexpr (BN == 192) mma_f16_m64n192<kTransB>(acc, a, b, scale_d);
    if constexpr (BN == 256) mma_f16_m64n256<kTransB>(acc, a, b, scale_d);
  } else {
    static_assert(kTransB == 0, "tf32 wgmma reads K-major B only");
    if constexpr (BN == 64) mma_tf32_m64n64(acc, a, b, scale_d);
    if constexpr (BN == 128) mma_tf32_m64n128(acc, a, b, scale_d);
    if constexpr (BN == 168) mma_tf32_m64n168(acc, a, b, scale_d);
    if constexpr (BN == 176) mma_tf32_m64n176(acc, a, b, scale_d);
    if constexpr (BN == 192) mma_tf32_m64n192(acc, a, b, scale_d);
    if constexpr (BN == 256) mma_tf32_m64n256(acc, a, b, scale_d);
  }
}

}  // namespace sm90

}  // namespace fj
