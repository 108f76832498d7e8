// GPU tests of the runtime with a hand-written Program (no codegen): load,
// launch in order through scratch, big dynamic shared memory, argument errors.
// Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "compiler/program.h"
#include "runtime/cuda_driver.h"
#include "runtime/loaded_program.h"
#include "runtime/nvrtc_compiler.h"

namespace fusejit {
namespace {

constexpr int kN = 5000;

// out = (2 x + 1) + y, in two kernels through a scratch buffer; plus a
// kernel that reverses each 16K-element block through 64 KB of dynamic smem.
const char* kSource = R"(
extern "C" __global__ void fj_test_scale(const float* x, float* tmp) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 5000) tmp[i] = 2.0f * x[i] + 1.0f;
}
extern "C" __global__ void fj_test_add(const float* tmp, const float* y, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 5000) out[i] = tmp[i] + y[i];
}
extern "C" __global__ void fj_test_reverse(const float* x, float* out) {
  extern __shared__ float tile[];
  const int n = 16384;
  const float* src = x + blockIdx.x * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) tile[i] = src[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[blockIdx.x * n + i] = tile[n - 1 - i];
}
)";

Program two_step_program() {
  Program p;
  p.name = "fj_test_two_step";
  p.source = kSource;
  unsigned blocks = (kN + 255) / 256;
  p.launches.push_back({"fj_test_scale", {blocks, 1, 1}, {256, 1, 1}, 0,
                        {{BufferKind::Input, 0}, {BufferKind::Scratch, 0}}});
  p.launches.push_back({"fj_test_add", {blocks, 1, 1}, {256, 1, 1}, 0,
                        {{BufferKind::Scratch, 0}, {BufferKind::Input, 1}, {BufferKind::Output, 0}}});
  p.scratch.push_back({kN * 4, "f32[5000] 2x+1"});
  return p;
}

class GpuRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
    auto info = device_info(0);
    ASSERT_TRUE(info.ok()) << info.error().message;
    arch_ = info->arch;
  }
  std::vector<char> compile(const Program& p) {
    NvrtcOptions opts;
    opts.arch = arch_;
    auto r = compile_to_cubin(p.source, p.name, opts);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? r->cubin : std::vector<char>{};
  }
  DeviceBuffer upload(const std::vector<float>& host) {
    auto b = DeviceBuffer::allocate(host.size() * sizeof(float));
    EXPECT_TRUE(b.ok()) << b.error().message;
    EXPECT_TRUE(b->upload(host.data(), host.size() * sizeof(float)).ok());
    return b.take();
  }
  std::vector<float> download(const DeviceBuffer& b) {
    std::vector<float> host(b.size() / sizeof(float));
    Status s = b.download(host.data(), b.size());
    EXPECT_TRUE(s.ok()) << s.error().message;
    return host;
  }
  std::string arch_;
};

std::vector<float> ramp(int n, float scale, float offset) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 97) + offset;
  return v;
}

TEST_F(GpuRuntime, DeviceInfoIsSane) {
  auto info = device_info(0);
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->name.empty());
  EXPECT_GT(info->sm_count, 0);
  EXPECT_GT(info->total_memory, 0);
  EXPECT_GE(info->cc_major, 7);
  EXPECT_EQ(info->arch, arch_for_compute_capability(info->cc_major, info->cc_minor));
}

TEST_F(GpuRuntime, RunsLaunchesInOrderThroughScratch) {
  Program p = two_step_program();
  auto lp = LoadedProgram::load(p, compile(p), 2, 1);
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  auto x = ramp(kN, 0.5f, -3.f), y = ramp(kN, -0.25f, 1.f);
  DeviceBuffer dx = upload(x), dy = upload(y), dout = upload(std::vector<float>(kN, 0.f));
  ASSERT_TRUE(dout.fill_bytes(0xFF).ok());  // NaN poison
  Status s = (*lp)->run({dx.ptr(), dy.ptr()}, {dout.ptr()}, nullptr);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(stream_synchronize(nullptr).ok());
  auto out = download(dout);
  for (int i = 0; i < kN; ++i) ASSERT_EQ(out[i], (2.f * x[i] + 1.f) + y[i]) << i;
}

TEST_F(GpuRuntime, ConcurrentRunsOnTwoStreamsShareScratchSafely) {
  Program p = two_step_program();
  auto lp = LoadedProgram::load(p, compile(p), 2, 1);
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  auto s1 = CudaStream::create(), s2 = CudaStream::create();
  ASSERT_TRUE(s1.ok() && s2.ok());
  auto x1 = ramp(kN, 1.f, 0.f), x2 = ramp(kN, -1.f, 5.f), y = ramp(kN, 0.f, 0.f);
  DeviceBuffer dx1 = upload(x1), dx2 = upload(x2), dy = upload(y);
  DeviceBuffer o1 = upload(std::vector<float>(kN)), o2 = upload(std::vector<float>(kN));
  std::vector<std::thread> threads;
  std::vector<Status> results(2);
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 50 && results[t].ok(); ++rep) {
        results[t] = t == 0 ? (*lp)->run({dx1.ptr(), dy.ptr()}, {o1.ptr()}, s1->get())
                            : (*lp)->run({dx2.ptr(), dy.ptr()}, {o2.ptr()}, s2->get());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(stream_synchronize(s1->get()).ok());
  ASSERT_TRUE(stream_synchronize(s2->get()).ok());
  auto out1 = download(o1), out2 = download(o2);
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(out1[i], 2.f * x1[i] + 1.f) << i;
    ASSERT_EQ(out2[i], 2.f * x2[i] + 1.f) << i;
  }
}

TEST_F(GpuRuntime, LargeDynamicSharedMemory) {
  Program p;
  p.name = "fj_test_reverse";
  p.source = kSource;
  const unsigned smem = 16384 * 4;  // 64 KB: needs the opt-in attribute
  p.launches.push_back({"fj_test_reverse", {3, 1, 1}, {256, 1, 1}, smem,
                        {{BufferKind::Input, 0}, {BufferKind::Output, 0}}});
  auto lp = LoadedProgram::load(p, compile(p), 1, 1);
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  auto x = ramp(3 * 16384, 1.f, 0.f);
  DeviceBuffer dx = upload(x), dout = upload(std::vector<float>(x.size()));
  auto start = CudaEvent::create(), end = CudaEvent::create();
  ASSERT_TRUE(start.ok() && end.ok());
  ASSERT_TRUE(start->record(nullptr).ok());
  Status s = (*lp)->run({dx.ptr()}, {dout.ptr()}, nullptr);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(end->record(nullptr).ok());
  ASSERT_TRUE(end->synchronize().ok());
  auto ms = elapsed_ms(*start, *end);
  ASSERT_TRUE(ms.ok()) << ms.error().message;
  EXPECT_GE(*ms, 0.f);
  auto out = download(dout);
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < 16384; ++i) ASSERT_EQ(out[b * 16384 + i], x[b * 16384 + 16383 - i]);
}

TEST_F(GpuRuntime, BadArgumentsAreErrorsNotCrashes) {
  Program p = two_step_program();
  auto lp = LoadedProgram::load(p, compile(p), 2, 1);
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  DeviceBuffer d = upload(std::vector<float>(kN));
  Status s = (*lp)->run({d.ptr()}, {d.ptr()}, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("expects 2 inputs and 1 outputs, got 1 and 1"), std::string::npos)
      << s.error().message;
  s = (*lp)->run({d.ptr(), d.ptr()}, {}, nullptr);
  EXPECT_FALSE(s.ok());
  s = (*lp)->run({d.ptr(), 0}, {d.ptr()}, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("input 1 is a null device pointer"), std::string::npos);
}

TEST_F(GpuRuntime, BadProgramsFailToLoad) {
  Program p = two_step_program();
  std::vector<char> cubin = compile(p);
  auto wrong_count = LoadedProgram::load(p, cubin, 1, 1);  // launch 1 reads input 1
  ASSERT_FALSE(wrong_count.ok());
  EXPECT_NE(wrong_count.error().message.find("input 1 out of range"), std::string::npos)
      << wrong_count.error().message;

  Program missing = p;
  missing.launches[0].kernel = "fj_test_nope";
  auto no_kernel = LoadedProgram::load(missing, cubin, 2, 1);
  ASSERT_FALSE(no_kernel.ok());
  EXPECT_NE(no_kernel.error().message.find("fj_test_nope"), std::string::npos);

  auto garbage = LoadedProgram::load(p, std::vector<char>(64, 'x'), 2, 1);
  EXPECT_FALSE(garbage.ok());

  Program empty = p;
  empty.launches.clear();
  EXPECT_FALSE(LoadedProgram::load(empty, cubin, 2, 1).ok());
}

TEST_F(GpuRuntime, DeviceBufferBounds) {
  auto b = DeviceBuffer::allocate(64);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(b->fill_bytes(0xFF).ok());
  std::vector<unsigned char> host(64, 0);
  ASSERT_TRUE(b->download(host.data(), 64).ok());
  for (unsigned char c : host) ASSERT_EQ(c, 0xFF);
  std::vector<char> big(65);
  EXPECT_FALSE(b->upload(big.data(), big.size()).ok());
  EXPECT_FALSE(b->download(big.data(), big.size()).ok());
  DeviceBuffer moved = b.take();
  EXPECT_NE(moved.ptr(), 0u);
}

}  // namespace
}  // namespace fusejit
