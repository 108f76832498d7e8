// fusejit/cp_async.cuh — sm_80+ asynchronous global -> shared copies (cp.async)
// shared by the mma.sync mainloop, the conv halo / dW copies and the GEMV loop.
#pragma once

namespace fj {

// Copies `bytes` (<= 16 / 4) from global src to shared dst, zero-filling the rest.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(__cvta_generic_to_global(src)),
               "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async4(unsigned dst, const void* src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(__cvta_generic_to_global(src)),
               "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most kPending of this thread's committed groups are in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

}  // namespace fj
