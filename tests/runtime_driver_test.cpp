// The Driver API loader: clean errors without a driver or a device.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "fusejit/engine.h"
#include "runtime/cuda_driver.h"
#include "runtime/nvrtc_compiler.h"

namespace fusejit {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// What this machine has, found independently of the code under test.
enum class Machine { NoDriver, NoDevice, Gpu };
Machine probe_machine() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return Machine::NoDriver;
  dlclose(h);
  return gpu_available() ? Machine::Gpu : Machine::NoDevice;
}

TEST(RuntimeDriver, ArchForComputeCapability) {
  EXPECT_EQ(arch_for_compute_capability(9, 0), "sm_90a");
  EXPECT_EQ(arch_for_compute_capability(8, 0), "sm_80");
  EXPECT_EQ(arch_for_compute_capability(8, 6), "sm_86");
  EXPECT_EQ(arch_for_compute_capability(8, 9), "sm_89");
  EXPECT_EQ(arch_for_compute_capability(10, 0), "sm_100");
  EXPECT_EQ(arch_for_compute_capability(12, 0), "sm_120");
}

TEST(RuntimeDriver, MissingLibraryIsACleanError) {
  Status s = probe_driver_library("libfusejit-no-such-driver.so.1");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(starts_with(s.error().message, "no CUDA driver found (libfusejit-no-such-driver.so.1: "))
      << s.error().message;
  EXPECT_NE(s.error().message.find("cannot open shared object file"), std::string::npos)
      << s.error().message;
}

TEST(RuntimeDriver, EveryEntryPointResolvesInTheToolkitStub) {
  // The toolkit's stub libcuda exports the whole API but fails cuInit with
  // CUDA_ERROR_STUB_LIBRARY: loading it proves every symbol name we dlsym
  // exists, and the stub must read as "no driver".
  std::string stub;
  for (const char* p : {"/usr/local/cuda/lib64/stubs/libcuda.so",
                        "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so"}) {
    if (std::filesystem::exists(p)) stub = p;
  }
  if (stub.empty()) GTEST_SKIP() << "no CUDA toolkit stub libcuda.so here";
  Status s = probe_driver_library(stub);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message.find("lacks"), std::string::npos) << s.error().message;
  EXPECT_TRUE(starts_with(s.error().message, "no CUDA driver found (" + stub + ": "))
      << s.error().message;
  EXPECT_NE(s.error().message.find("stub"), std::string::npos) << s.error().message;
}

TEST(RuntimeDriver, ProcessWideDriverMatchesTheMachine) {
  switch (probe_machine()) {
    case Machine::NoDriver: {
      std::string want = "no CUDA driver found (libcuda.so.1: ";
      ASSERT_FALSE(gpu_available());
      EXPECT_TRUE(starts_with(gpu_unavailable_reason(), want)) << gpu_unavailable_reason();
      auto count = device_count();
      ASSERT_FALSE(count.ok());
      EXPECT_TRUE(starts_with(count.error().message, want));
      // Every GPU entry point fails the same way instead of crashing.
      auto buffer = DeviceBuffer::allocate(16);
      ASSERT_FALSE(buffer.ok());
      EXPECT_TRUE(starts_with(buffer.error().message, want));
      auto module = CudaModule::load({'\x7f', 'E', 'L', 'F'});
      ASSERT_FALSE(module.ok());
      EXPECT_TRUE(starts_with(module.error().message, want));
      EXPECT_FALSE(use_device(0).ok());
      EXPECT_FALSE(device_info(0).ok());
      EXPECT_FALSE(CudaEvent::create().ok());
      EXPECT_FALSE(stream_synchronize(nullptr).ok());
      break;
    }
    case Machine::NoDevice:
      ASSERT_FALSE(gpu_available());
      // A driver without devices, or the toolkit's stub found as libcuda.so.1.
      EXPECT_TRUE(starts_with(gpu_unavailable_reason(), "no CUDA device") ||
                  starts_with(gpu_unavailable_reason(), "no CUDA driver found (libcuda.so.1: the CUDA toolkit's stub"))
          << gpu_unavailable_reason();
      EXPECT_FALSE(DeviceBuffer::allocate(16).ok());
      break;
    case Machine::Gpu: {
      ASSERT_TRUE(gpu_available());
      EXPECT_EQ(gpu_unavailable_reason(), "");
      auto count = device_count();
      ASSERT_TRUE(count.ok());
      EXPECT_GE(*count, 1);
      Status s = use_device(*count);  // one past the last
      ASSERT_FALSE(s.ok());
      EXPECT_TRUE(starts_with(s.error().message, "no CUDA device " + std::to_string(*count)));
      break;
    }
  }
}

TEST(RuntimeDriver, EngineCompileWithoutGpuIsACleanError) {
  if (gpu_available()) GTEST_SKIP() << "a GPU is present";
  Engine engine;
  Graph g;  // never reaches codegen: the device check comes first
  auto k = engine.compile(g);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().message, gpu_unavailable_reason());
  auto arch = Engine::device_arch();
  EXPECT_FALSE(arch.ok());
  EXPECT_EQ(engine.cache_stats().compiles, 0u);
}

// wait_for gives up on a launch that outlasts its limit (kernel_check's guard
// against hung kernels: it then reports the kernel and abandons the device);
// the launch itself goes on and finishes.
TEST(GpuRuntimeDriver, WaitForGivesUpOnALongLaunch) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  auto arch = Engine::device_arch();
  ASSERT_TRUE(arch) << arch.error().str();
  const std::string source = R"(
extern "C" __global__ void fj_spin(long long cycles, int* done) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  *done = 1;
})";
  auto cubin = compile_to_cubin(source, "fj_spin", {*arch, false, {}});
  ASSERT_TRUE(cubin) << cubin.error().str();
  auto module = CudaModule::load(cubin->cubin);
  ASSERT_TRUE(module) << module.error().str();
  auto f = module->function("fj_spin");
  ASSERT_TRUE(f) << f.error().str();
  auto done = DeviceBuffer::allocate(sizeof(int));
  ASSERT_TRUE(done) << done.error().str();
  ASSERT_TRUE(done->fill_bytes(0));
  long long cycles = 4'000'000'000LL;  // ~2 s at 2 GHz
  CUdeviceptr flag = done->ptr();
  void* params[] = {&cycles, &flag};
  ASSERT_TRUE(launch_kernel(*f, {1, 1, 1}, {1, 1, 1}, 0, nullptr, params));
  auto event = CudaEvent::create(false);
  ASSERT_TRUE(event) << event.error().str();
  ASSERT_TRUE(event->record(nullptr));
  auto early = event->wait_for(0.2);
  ASSERT_TRUE(early) << early.error().str();
  EXPECT_FALSE(*early) << "2 s of spinning done in 0.2 s?";
  auto later = event->wait_for(60);
  ASSERT_TRUE(later) << later.error().str();
  EXPECT_TRUE(*later) << "the launch finishes in its own time";
  int value = 0;
  ASSERT_TRUE(done->download(&value, sizeof value));
  EXPECT_EQ(value, 1);
}

}  // namespace
}  // namespace fusejit
