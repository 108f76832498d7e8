// GPU: graphs without an anchor (pointwise programs), the layout ops, erf and
// comparisons on the device against the fp64 reference — the fixed cases of
// tests/layout_cases.h, 200 random pointwise programs, and comparisons with
// NaN operands. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compiler/program.h"
#include "fusejit/engine.h"
#include "fusejit/reference.h"
#include "fusejit/spec.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_check.h"
#include "tests/layout_cases.h"

namespace fusejit {
namespace {

void expect_matches(Engine& engine, const Graph& g, const std::string& what, uint64_t seed = 1) {
  auto kernel = engine.compile(g, {});
  ASSERT_TRUE(kernel) << what << ": " << kernel.error().str() << "\n" << print_graph(g);
  CheckOptions check;
  check.time = false;
  check.seed = seed;
  auto r = check_kernel(**kernel, g, check);
  ASSERT_TRUE(r) << what << ": " << r.error().str();
  EXPECT_TRUE(r->pass) << what << " (" << (*kernel)->name() << "):\n"
                       << r->summary() << print_graph(g) << (*kernel)->program().plan_text;
}

TEST(GpuLayout, FixedCasesMatchReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  for (const testing::LayoutCase& c : testing::layout_cases()) {
    auto g = parse_spec(c.spec, c.name + ".yaml");
    ASSERT_TRUE(g) << c.name << ": " << g.error().str();
    expect_matches(engine, *g, c.name);
  }
}

TEST(GpuLayout, RandomProgramsMatchReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  int failures = 0;
  for (uint64_t seed = 1; seed <= 200 && failures < 5; ++seed) {
    auto g = testing::random_program(seed);
    ASSERT_TRUE(g) << "program " << seed << ": " << g.error().str();
    const int before = ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
    expect_matches(engine, *g, "program " + std::to_string(seed), seed);
    if (::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count() > before) ++failures;
  }
}

// Comparisons with NaN (either side) are 0, as PyTorch's bool; erf of NaN is NaN.
TEST(GpuLayout, ComparisonsWithNaN) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  auto g = parse_spec(R"(
inputs: [{name: a, shape: [2, 8]}, {name: b, shape: [8]}]
ops:
  - {name: gt, op: gt, args: [a, b]}
  - {name: ge, op: ge, args: [a, b]}
  - {name: lt, op: lt, args: [a, b]}
  - {name: le, op: le, args: [a, b]}
  - {name: eq, op: eq, args: [a, b]}
  - {name: e, op: erf, args: [a]}
outputs: [gt, ge, lt, le, eq, e])",
                      "nan.yaml");
  ASSERT_TRUE(g) << g.error().str();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<HostTensor> in = {{TensorType{DType::F32, {2, 8}}, {nan, 1, 2, nan, inf, -inf, 0, 3,  //
                                                                   1, 1, -1, nan, 5, -inf, -0.0f, 0.5f}},
                                {TensorType{DType::F32, {8}}, {1, nan, 2, nan, inf, 0, -0.0f, 1}}};
  auto ref = evaluate_reference(*g, in);
  ASSERT_TRUE(ref) << ref.error().str();
  Engine engine;
  auto kernel = engine.compile(*g, {});
  ASSERT_TRUE(kernel) << kernel.error().str();
  std::vector<DeviceBuffer> buffers;
  std::vector<DevicePtr> ins, outs;
  for (const HostTensor& t : in) {
    std::vector<uint8_t> bytes = to_device_bytes(t);
    auto buf = DeviceBuffer::allocate(bytes.size());
    ASSERT_TRUE(buf.ok() && buf->upload(bytes.data(), bytes.size()).ok());
    ins.push_back(buf->ptr());
    buffers.push_back(buf.take());
  }
  for (size_t o = 0; o < g->outputs.size(); ++o) {
    auto buf = DeviceBuffer::allocate(16 * sizeof(float));
    ASSERT_TRUE(buf.ok() && buf->fill_bytes(0xFF).ok());
    outs.push_back(buf->ptr());
    buffers.push_back(buf.take());
  }
  ASSERT_TRUE((*kernel)->launch(ins, outs).ok());
  ASSERT_TRUE(device_synchronize().ok());
  for (size_t o = 0; o < g->outputs.size(); ++o) {
    std::vector<float> got(16);
    ASSERT_TRUE(buffers[in.size() + o].download(got.data(), got.size() * sizeof(float)).ok());
    for (size_t i = 0; i < 16; ++i) {
      const double want = (*ref)[o][i];
      if (std::isnan(want)) EXPECT_TRUE(std::isnan(got[i])) << g->outputs[o].name << "[" << i << "]: " << got[i];
      else if (o < 5) EXPECT_EQ(got[i], want) << g->outputs[o].name << "[" << i << "]";
      else EXPECT_NEAR(got[i], want, 1e-6) << g->outputs[o].name << "[" << i << "]";
    }
  }
}

}  // namespace
}  // namespace fusejit
