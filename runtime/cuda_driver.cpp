// runtime/cuda_driver.cpp — the Driver API through dlopen("libcuda.so.1").
#include "runtime/cuda_driver.h"

#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace fusejit {
namespace {

// Every entry point used. cuda.h #defines versioned names (cuMemAlloc ->
// cuMemAlloc_v2); the macros below let it pick both the prototype and the
// symbol name, so the two always agree.
#define FJ_DRIVER_FUNCTIONS(X)                                                                  \
  X(cuGetErrorName) X(cuGetErrorString) X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet)            \
  X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain)    \
  X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleUnload)                  \
  X(cuModuleGetFunction) X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree)     \
  X(cuMemsetD8) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuStreamCreate) X(cuStreamDestroy)            \
  X(cuStreamSynchronize) X(cuStreamWaitEvent) X(cuStreamIsCapturing) X(cuEventCreate)          \
  X(cuEventDestroy)                                                                             \
  X(cuEventRecord) X(cuEventSynchronize) X(cuEventQuery) X(cuEventElapsedTime)                \
  X(cuDriverGetVersion)                                                                         \
  X(cuTensorMapEncodeTiled)

#define FJ_STRINGIFY(x) #x
#define FJ_SYMBOL_NAME(x) FJ_STRINGIFY(x)

struct DriverApi {
  void* handle = nullptr;
#define FJ_DECLARE(f) decltype(&::f) f = nullptr;
  FJ_DRIVER_FUNCTIONS(FJ_DECLARE)
#undef FJ_DECLARE
  decltype(&::cuOccupancyMaxActiveClusters) cuOccupancyMaxActiveClusters = nullptr;  // optional (CUDA 12+)
};

Status check(const DriverApi& api, CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return Status::success();
  const char* name = nullptr;
  const char* text = nullptr;
  if (!api.cuGetErrorName || api.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (!api.cuGetErrorString || api.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  std::string msg = std::string(what) + " failed: ";
  msg += name ? name : "CUresult " + std::to_string(static_cast<int>(r));
  if (text) msg += std::string(" (") + text + ")";
  return Error(msg);
}

// Opens `library` and resolves every entry point into `api`.
Status load_api(const std::string& library, DriverApi& api) {
  dlerror();
  api.handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!api.handle) {
    const char* e = dlerror();
    std::string why = e ? e : "dlopen failed";
    if (why.rfind(library + ": ", 0) == 0) why = why.substr(library.size() + 2);
    return Error("no CUDA driver found (" + library + ": " + why + ")");
  }
#define FJ_RESOLVE(f)                                                                     \
  api.f = reinterpret_cast<decltype(api.f)>(dlsym(api.handle, FJ_SYMBOL_NAME(f)));        \
  if (!api.f)                                                                             \
    return Error("the CUDA driver " + library + " lacks " FJ_SYMBOL_NAME(f) " (driver too old?)");
  FJ_DRIVER_FUNCTIONS(FJ_RESOLVE)
#undef FJ_RESOLVE
  api.cuOccupancyMaxActiveClusters =
      reinterpret_cast<decltype(api.cuOccupancyMaxActiveClusters)>(dlsym(api.handle, "cuOccupancyMaxActiveClusters"));
  return Status::success();
}

// cuInit + device count; "no CUDA device" when there is none.
Status init_api(const DriverApi& api, const std::string& library, int& count) {
  CUresult r = api.cuInit(0);
  if (r == CUDA_ERROR_STUB_LIBRARY) {
    return Error("no CUDA driver found (" + library +
                 ": the CUDA toolkit's stub library, not a driver; check LD_LIBRARY_PATH)");
  }
  if (r == CUDA_ERROR_NO_DEVICE) {
    return Error("no CUDA device (" + check(api, r, "cuInit").error().message + ")");
  }
  if (auto s = check(api, r, "cuInit"); !s) return s;
  if (auto s = check(api, api.cuDeviceGetCount(&count), "cuDeviceGetCount"); !s) return s;
  if (count <= 0) return Error("no CUDA device (the driver reports 0 devices)");
  return Status::success();
}

struct DriverState {
  DriverApi api;
  Status status;
  int device_count = 0;
  std::mutex context_mutex;  // guards contexts
  std::vector<CUcontext> contexts;
};

// Created on first use and never destroyed: buffers freed from static
// destructors at exit must still find the table.
DriverState& state() {
  static DriverState* s = [] {
    auto* st = new DriverState;
    st->status = load_api("libcuda.so.1", st->api);
    if (st->status) st->status = init_api(st->api, "libcuda.so.1", st->device_count);
    if (st->status) st->contexts.assign(static_cast<size_t>(st->device_count), nullptr);
    return st;
  }();
  return *s;
}

const DriverApi& api() { return state().api; }

#define FJ_CU(f, ...) check(api(), api().f(__VA_ARGS__), #f)
#define FJ_TRY(expr)                        \
  do {                                      \
    if (Status fj_s_ = (expr); !fj_s_)      \
      return fj_s_.error();                 \
  } while (0)

}  // namespace

Status cuda_init() { return state().status; }
bool gpu_available() { return cuda_init().ok(); }
std::string gpu_unavailable_reason() {
  Status s = cuda_init();
  return s ? "" : s.error().message;
}

Expected<int> device_count() {
  FJ_TRY(cuda_init());
  return state().device_count;
}

Status probe_driver_library(const std::string& library) {
  DriverApi local;
  Status s = load_api(library, local);
  int count = 0;
  if (s) s = init_api(local, library, count);
  if (local.handle) dlclose(local.handle);
  return s;
}

std::string arch_for_compute_capability(int major, int minor) {
  if (major == 9 && minor == 0) return "sm_90a";
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

Expected<DeviceInfo> device_info(int ordinal) {
  FJ_TRY(use_device(ordinal));
  CUdevice dev;
  FJ_TRY(FJ_CU(cuDeviceGet, &dev, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  FJ_TRY(FJ_CU(cuDeviceGetName, name, static_cast<int>(sizeof name) - 1, dev));
  info.name = name;
  FJ_TRY(FJ_CU(cuDeviceGetAttribute, &info.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  FJ_TRY(FJ_CU(cuDeviceGetAttribute, &info.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  FJ_TRY(FJ_CU(cuDeviceGetAttribute, &info.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  FJ_TRY(FJ_CU(cuDeviceGetAttribute, &info.max_shared_per_block_optin,
               CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
  size_t total = 0;
  FJ_TRY(FJ_CU(cuDeviceTotalMem, &total, dev));
  info.total_memory = static_cast<int64_t>(total);
  info.arch = arch_for_compute_capability(info.cc_major, info.cc_minor);
  FJ_TRY(FJ_CU(cuDriverGetVersion, &info.driver_version));
  return info;
}

namespace {
// Set when a launch never finished (CudaEvent::wait_for gave up): every later
// driver call could block behind it (frees and copies synchronize), so none
// is made; destructors leak what they hold, and the process exit frees it.
std::atomic<bool> device_hung{false};
std::string hung_launch;  // written once, before device_hung is set
std::once_flag hung_once;

Status not_abandoned() {
  if (!device_hung.load(std::memory_order_acquire)) return Status::success();
  return Error("cuda: the device still runs " + hung_launch + ", which did not finish; nothing more runs on it in "
               "this process");
}
}  // namespace

Status use_device(int ordinal) {
  FJ_TRY(cuda_init());
  FJ_TRY(not_abandoned());
  DriverState& st = state();
  if (ordinal < 0 || ordinal >= st.device_count) {
    return Error("no CUDA device " + std::to_string(ordinal) + " (the driver reports " +
                 std::to_string(st.device_count) + ")");
  }
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(st.context_mutex);
    CUcontext& slot = st.contexts[static_cast<size_t>(ordinal)];
    if (!slot) {
      CUdevice dev;
      FJ_TRY(FJ_CU(cuDeviceGet, &dev, ordinal));
      FJ_TRY(FJ_CU(cuDevicePrimaryCtxRetain, &slot, dev));
    }
    ctx = slot;
  }
  return FJ_CU(cuCtxSetCurrent, ctx);
}

// ---- modules and launches --------------------------------------------------

Expected<CudaModule> CudaModule::load(const std::vector<char>& cubin, int device) {
  if (cubin.empty()) return Error("cannot load an empty CUBIN");
  FJ_TRY(use_device(device));
  CudaModule m;
  m.device_ = device;
  FJ_TRY(FJ_CU(cuModuleLoadData, &m.module_, cubin.data()));
  return m;
}

CudaModule::CudaModule(CudaModule&& other) noexcept
    : module_(std::exchange(other.module_, nullptr)), device_(other.device_) {}

CudaModule& CudaModule::operator=(CudaModule&& other) noexcept {
  std::swap(module_, other.module_);
  std::swap(device_, other.device_);
  return *this;
}

CudaModule::~CudaModule() {
  if (module_ && use_device(device_)) (void)api().cuModuleUnload(module_);
}

Expected<CUfunction> CudaModule::function(const std::string& name) const {
  if (!module_) return Error("no module loaded");
  CUfunction f = nullptr;
  Status s = FJ_CU(cuModuleGetFunction, &f, module_, name.c_str());
  if (!s) return Error("kernel '" + name + "' not found in the module: " + s.error().message);
  return f;
}

Status set_max_dynamic_shared(CUfunction f, unsigned bytes) {
  FJ_TRY(cuda_init());
  return FJ_CU(cuFuncSetAttribute, f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
               static_cast<int>(bytes));
}

Status allow_non_portable_clusters(CUfunction f) {
  FJ_TRY(cuda_init());
  return FJ_CU(cuFuncSetAttribute, f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
}

Expected<int> max_active_clusters(CUfunction f, int cluster, const std::array<unsigned, 3>& block,
                                  unsigned shared_bytes) {
  FJ_TRY(cuda_init());
  if (!api().cuOccupancyMaxActiveClusters) return Error("the CUDA driver lacks cuOccupancyMaxActiveClusters");
  CUlaunchConfig config{};
  config.gridDimX = static_cast<unsigned>(cluster);
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = block[0];
  config.blockDimY = block[1];
  config.blockDimZ = block[2];
  config.sharedMemBytes = shared_bytes;
  int clusters = 0;
  FJ_TRY(FJ_CU(cuOccupancyMaxActiveClusters, &clusters, f, &config));
  return clusters;
}

Status encode_tensor_map(TensorMapBytes& out, CUdeviceptr base, int elem_bytes, bool bf16, int rank,
                         const int64_t* dims, const int* box, bool swizzle128, const int64_t* extents) {
  static_assert(sizeof(TensorMapBytes) == sizeof(CUtensorMap) && alignof(TensorMapBytes) == alignof(CUtensorMap));
  FJ_TRY(cuda_init());
  if (rank < 2 || rank > 5) return Error("TMA tensor maps here have 2 to 5 dims, not " + std::to_string(rank));
  const int64_t row_bytes = dims[0] * elem_bytes;
  if (base % 16 || row_bytes % 16)
    return Error("TMA needs 16-byte aligned tensors and rows: base address " + std::to_string(base) + ", row of " +
                 std::to_string(row_bytes) + " bytes");
  const CUtensorMapDataType type = elem_bytes == 4 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : bf16          ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                   : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  cuuint64_t sizes[5], strides[4];
  cuuint32_t boxes[5], element_strides[5];
  int64_t stride = elem_bytes;
  for (int d = 0; d < rank; ++d) {
    if (extents && extents[d] > dims[d]) return Error("a TMA extent past its tensor's dim " + std::to_string(d));
    sizes[d] = static_cast<cuuint64_t>(extents && extents[d] > 0 ? extents[d] : dims[d]);
    boxes[d] = static_cast<cuuint32_t>(box[d]);
    element_strides[d] = 1;
    stride *= dims[d];
    if (d + 1 < rank) strides[d] = static_cast<cuuint64_t>(stride);
  }
  return FJ_CU(cuTensorMapEncodeTiled, reinterpret_cast<CUtensorMap*>(&out), type, static_cast<cuuint32_t>(rank),
               reinterpret_cast<void*>(base), sizes, strides, boxes, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
               swizzle128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

Status encode_tensor_map_2d(TensorMapBytes& out, CUdeviceptr base, int elem_bytes, bool bf16, int64_t rows,
                            int64_t cols, int box_rows, int box_cols, bool swizzle128) {
  const int64_t dims[2] = {cols, rows};
  const int box[2] = {box_cols, box_rows};
  return encode_tensor_map(out, base, elem_bytes, bf16, 2, dims, box, swizzle128);
}

Status launch_kernel(CUfunction f, const std::array<unsigned, 3>& grid,
                     const std::array<unsigned, 3>& block, unsigned shared_bytes, CUstream stream,
                     void** params) {
  FJ_TRY(cuda_init());
  for (int i = 0; i < 3; ++i) {
    if (grid[i] == 0 || block[i] == 0) return Error("launch with an empty grid or block");
  }
  return FJ_CU(cuLaunchKernel, f, grid[0], grid[1], grid[2], block[0], block[1], block[2],
               shared_bytes, stream, params, nullptr);
}

// ---- memory -------------------------------------------------------------------

Expected<DeviceBuffer> DeviceBuffer::allocate(size_t bytes, int device) {
  FJ_TRY(use_device(device));
  DeviceBuffer b;
  b.device_ = device;
  b.size_ = bytes;
  FJ_TRY(FJ_CU(cuMemAlloc, &b.ptr_, bytes ? bytes : 1));
  return b;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), size_(std::exchange(other.size_, 0)),
      device_(other.device_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    ptr_ = std::exchange(other.ptr_, 0);
    size_ = std::exchange(other.size_, 0);
    device_ = other.device_;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() {
  if (ptr_ && use_device(device_)) (void)api().cuMemFree(ptr_);
  ptr_ = 0;
  size_ = 0;
}

Status DeviceBuffer::upload(const void* host, size_t bytes) {
  if (bytes > size_) return Error("upload of " + std::to_string(bytes) + " bytes into a buffer of " +
                                  std::to_string(size_));
  FJ_TRY(use_device(device_));
  return bytes ? FJ_CU(cuMemcpyHtoD, ptr_, host, bytes) : Status::success();
}

Status DeviceBuffer::download(void* host, size_t bytes) const {
  if (bytes > size_) return Error("download of " + std::to_string(bytes) +
                                  " bytes from a buffer of " + std::to_string(size_));
  FJ_TRY(use_device(device_));
  return bytes ? FJ_CU(cuMemcpyDtoH, host, ptr_, bytes) : Status::success();
}

Status DeviceBuffer::fill_bytes(unsigned char value) {
  FJ_TRY(use_device(device_));
  return size_ ? FJ_CU(cuMemsetD8, ptr_, value, size_) : Status::success();
}

// ---- streams and events ---------------------------------------------------------

Expected<CudaStream> CudaStream::create(int device) {
  FJ_TRY(use_device(device));
  CudaStream s;
  s.device_ = device;
  FJ_TRY(FJ_CU(cuStreamCreate, &s.stream_, CU_STREAM_NON_BLOCKING));
  return s;
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  std::swap(stream_, other.stream_);
  std::swap(device_, other.device_);
  return *this;
}

CudaStream::~CudaStream() {
  if (stream_ && use_device(device_)) (void)api().cuStreamDestroy(stream_);
}

Expected<CudaEvent> CudaEvent::create(bool timing, int device) {
  FJ_TRY(use_device(device));
  CudaEvent e;
  e.device_ = device;
  FJ_TRY(FJ_CU(cuEventCreate, &e.event_, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING));
  return e;
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)), device_(other.device_) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  std::swap(event_, other.event_);
  std::swap(device_, other.device_);
  return *this;
}

CudaEvent::~CudaEvent() {
  if (event_ && use_device(device_)) (void)api().cuEventDestroy(event_);
}

Status CudaEvent::record(CUstream stream) {
  FJ_TRY(use_device(device_));
  return FJ_CU(cuEventRecord, event_, stream);
}

Status CudaEvent::synchronize() const {
  FJ_TRY(use_device(device_));
  return FJ_CU(cuEventSynchronize, event_);
}

Expected<bool> CudaEvent::wait_for(double seconds) const {
  FJ_TRY(use_device(device_));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (auto pause = std::chrono::microseconds(20);; pause = std::min(pause * 2, std::chrono::microseconds(5000))) {
    const CUresult r = api().cuEventQuery(event_);
    if (r != CUDA_ERROR_NOT_READY) {
      FJ_TRY(check(api(), r, "cuEventQuery"));
      return true;
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(pause);
  }
}

void abandon_device(const std::string& launch) {
  std::call_once(hung_once, [&] {
    hung_launch = launch;
    device_hung.store(true, std::memory_order_release);
  });
}

Expected<float> elapsed_ms(const CudaEvent& start, const CudaEvent& end) {
  FJ_TRY(cuda_init());
  float ms = 0;
  FJ_TRY(FJ_CU(cuEventElapsedTime, &ms, start.get(), end.get()));
  return ms;
}

Status stream_wait_event(CUstream stream, const CudaEvent& event) {
  FJ_TRY(cuda_init());
  return FJ_CU(cuStreamWaitEvent, stream, event.get(), 0);
}

Expected<bool> stream_is_capturing(CUstream stream) {
  FJ_TRY(cuda_init());
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  FJ_TRY(FJ_CU(cuStreamIsCapturing, stream, &status));
  return status != CU_STREAM_CAPTURE_STATUS_NONE;  // active, or invalidated (the capture failed already)
}

Status stream_synchronize(CUstream stream) {
  FJ_TRY(cuda_init());
  FJ_TRY(not_abandoned());
  return FJ_CU(cuStreamSynchronize, stream);
}

Status device_synchronize(int device) {
  FJ_TRY(use_device(device));
  return FJ_CU(cuCtxSynchronize);
}

}  // namespace fusejit
