// runtime/cuda_driver.h — the CUDA Driver API, loaded with dlopen at run time.
//
// libcuda is never linked: the first call dlopen()s "libcuda.so.1" and calls
// cuInit. Without a driver every call returns the Error "no CUDA driver found
// (libcuda.so.1: <dlerror>)", without a device "no CUDA device (...)", so the
// library and CLI still load and compile CUBIN on machines without a GPU.
// Every CUresult is checked; errors name the function, cuGetErrorName and
// cuGetErrorString. Calls that need a context make the device's primary
// context current on the calling thread first (retained once, never released).
//
// This header does not include <cuda.h> (the library keeps the CUDA include
// directory private): it repeats cuda.h's handle typedefs, which C++ allows;
// cuda_driver.cpp includes both, so any mismatch fails the build.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "fusejit/error.h"

typedef unsigned long long CUdeviceptr;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUevent_st* CUevent;
typedef struct CUstream_st* CUstream;

namespace fusejit {

// Loads the driver and calls cuInit once per process. OK when >= 1 device.
Status cuda_init();
bool gpu_available();             // cuda_init() succeeded
std::string gpu_unavailable_reason();  // cuda_init()'s message, "" when available
Expected<int> device_count();

// Loads the Driver API from `library` (a soname or path) into a private table,
// resolves every entry point and calls cuInit; never touches the process-wide
// driver. For tests of the loader's error paths.
Status probe_driver_library(const std::string& library);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t total_memory = 0;
  int max_shared_per_block_optin = 0;  // bytes of dynamic + static smem, opt-in
  std::string arch;                    // arch_for_compute_capability()
  int driver_version = 0;              // cuDriverGetVersion: 13000 = CUDA 13.0
};
Expected<DeviceInfo> device_info(int ordinal = 0);

// 9.0 -> "sm_90a" (Hopper-only instructions), otherwise "sm_<major><minor>".
std::string arch_for_compute_capability(int major, int minor);

// Makes the device's primary context current on the calling thread.
Status use_device(int ordinal = 0);

// ---- modules and launches --------------------------------------------------

class CudaModule {
 public:
  static Expected<CudaModule> load(const std::vector<char>& cubin, int device = 0);
  CudaModule() = default;
  CudaModule(CudaModule&& other) noexcept;
  CudaModule& operator=(CudaModule&& other) noexcept;
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;
  ~CudaModule();

  Expected<CUfunction> function(const std::string& name) const;
  int device() const { return device_; }

 private:
  CUmodule module_ = nullptr;
  int device_ = 0;
};

// Allows `bytes` of dynamic shared memory (needed above 48 KB).
Status set_max_dynamic_shared(CUfunction f, unsigned bytes);
// Clusters of more than 8 blocks (H100: up to 16) for f.
Status allow_non_portable_clusters(CUfunction f);

// How many clusters of a kernel compiled with __cluster_dims__(cluster, 1, 1)
// can be resident at once with this block size and dynamic shared memory
// (cuOccupancyMaxActiveClusters); an Error where the driver lacks the call.
Expected<int> max_active_clusters(CUfunction f, int cluster, const std::array<unsigned, 3>& block,
                                  unsigned shared_bytes);

// A TMA tensor map: the driver's CUtensorMap (128 bytes, 128-byte aligned in CUDA 13).
struct alignas(128) TensorMapBytes {
  unsigned long long opaque[16];
};
// Encodes a row-major 2-D tensor map (cuTensorMapEncodeTiled, 128-byte swizzle
// or none, zero fill outside): `rows` x `cols` elements of `elem_bytes` (2 with
// `bf16` for bf16, 2 without for f16, 4 for f32) at `base`, row stride cols *
// elem_bytes, boxes of box_rows x box_cols. The driver demands a 16-byte
// aligned base and row stride; a violation is an Error naming both.
Status encode_tensor_map_2d(TensorMapBytes& out, CUdeviceptr base, int elem_bytes, bool bf16, int64_t rows,
                            int64_t cols, int box_rows, int box_cols, bool swizzle128 = true);
// The same for a dense tensor of `rank` (2..5) dims, dims[0] contiguous
// (strides their running products), boxes of box[0..rank). `extents`
// (optional): where extents[d] > 0, TMA sees only the first extents[d]
// elements of dim d (zeros past them), the strides staying the dense ones.
Status encode_tensor_map(TensorMapBytes& out, CUdeviceptr base, int elem_bytes, bool bf16, int rank,
                         const int64_t* dims, const int* box, bool swizzle128 = true,
                         const int64_t* extents = nullptr);

Status launch_kernel(CUfunction f, const std::array<unsigned, 3>& grid,
                     const std::array<unsigned, 3>& block, unsigned shared_bytes, CUstream stream,
                     void** params);

// ---- memory -------------------------------------------------------------------

// Device memory owned by this object (freed by the destructor; move-only).
class DeviceBuffer {
 public:
  // Allocates max(bytes, 1) bytes so ptr() is never 0.
  static Expected<DeviceBuffer> allocate(size_t bytes, int device = 0);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  CUdeviceptr ptr() const { return ptr_; }
  size_t size() const { return size_; }
  Status upload(const void* host, size_t bytes);        // bytes <= size()
  Status download(void* host, size_t bytes) const;      // bytes <= size()
  Status fill_bytes(unsigned char value);               // every byte

 private:
  void release();
  CUdeviceptr ptr_ = 0;
  size_t size_ = 0;
  int device_ = 0;
};

// ---- streams and events ---------------------------------------------------------

class CudaStream {  // a non-blocking stream (move-only)
 public:
  static Expected<CudaStream> create(int device = 0);
  CudaStream() = default;
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream();
  CUstream get() const { return stream_; }

 private:
  CUstream stream_ = nullptr;
  int device_ = 0;
};

class CudaEvent {  // move-only
 public:
  static Expected<CudaEvent> create(bool timing = true, int device = 0);
  CudaEvent() = default;
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  ~CudaEvent();

  CUevent get() const { return event_; }
  Status record(CUstream stream);
  Status synchronize() const;
  // synchronize(), giving up after `seconds`: true when the work before the
  // event finished, false when the time ran out first (a hung kernel?).
  Expected<bool> wait_for(double seconds) const;

 private:
  CUevent event_ = nullptr;
  int device_ = 0;
};

Expected<float> elapsed_ms(const CudaEvent& start, const CudaEvent& end);
Status stream_wait_event(CUstream stream, const CudaEvent& event);
// Whether work enqueued on `stream` goes into a CUDA graph being captured.
Expected<bool> stream_is_capturing(CUstream stream);
Status stream_synchronize(CUstream stream);
// After a launch that never finished (`launch` names it): every later call on
// the device fails at once instead of blocking behind it, and destructors
// leak what they hold (the process exit frees it). For good: a context cannot
// stop a running kernel.
void abandon_device(const std::string& launch);
Status device_synchronize(int device = 0);

}  // namespace fusejit
