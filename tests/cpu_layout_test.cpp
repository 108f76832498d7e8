// The CPU backend on graphs without an anchor (pointwise programs) and on the
// layout ops, erf and comparisons: the fixed cases of tests/layout_cases.h and
// 200 random pointwise programs against the fp64 reference (fresh seeded
// inputs, NaN-poisoned outputs, the precision's tolerance), and comparisons
// with NaN operands (false, as PyTorch's bool). Skipped without LLVM.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compiler/cpu_program.h"
#include "compiler/program.h"
#include "fusejit/engine.h"
#include "fusejit/reference.h"
#include "fusejit/spec.h"
#include "runtime/kernel_check.h"
#include "tests/layout_cases.h"

namespace fusejit {
namespace {

Engine& engine() {
  static Engine e;
  return e;
}

CompileOptions cpu() {
  CompileOptions o;
  o.backend = Backend::Cpu;
  return o;
}

void expect_matches(const Graph& g, const std::string& what) {
  auto kernel = engine().compile(g, cpu());
  ASSERT_TRUE(kernel) << what << ": " << kernel.error().str() << "\n" << print_graph(g);
  CheckOptions check;
  check.time = false;
  auto r = check_kernel(**kernel, g, check);
  ASSERT_TRUE(r) << what << ": " << r.error().str();
  EXPECT_TRUE(r->pass) << what << " (" << (*kernel)->name() << "):\n"
                       << r->summary() << print_graph(g) << (*kernel)->program().plan_text;
}

TEST(CpuLayout, FixedCasesMatchReference) {
  if (!cpu_backend_available()) GTEST_SKIP() << "this build has no LLVM CPU backend";
  for (const testing::LayoutCase& c : testing::layout_cases()) {
    auto g = parse_spec(c.spec, c.name + ".yaml");
    ASSERT_TRUE(g) << c.name << ": " << g.error().str();
    expect_matches(*g, c.name);
  }
}

TEST(CpuLayout, RandomProgramsMatchReference) {
  if (!cpu_backend_available()) GTEST_SKIP() << "this build has no LLVM CPU backend";
  int failures = 0;
  for (uint64_t seed = 1; seed <= 200 && failures < 5; ++seed) {
    auto g = testing::random_program(seed);
    ASSERT_TRUE(g) << "program " << seed << ": " << g.error().str();
    const int before = ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
    expect_matches(*g, "program " + std::to_string(seed));
    if (::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count() > before) ++failures;
  }
}

// Comparisons with NaN (either side) are 0; erf keeps NaN and saturates at ±inf.
TEST(CpuLayout, ComparisonsWithNaN) {
  if (!cpu_backend_available()) GTEST_SKIP() << "this build has no LLVM CPU backend";
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
  auto kernel = engine().compile(*g, cpu());
  ASSERT_TRUE(kernel) << kernel.error().str();
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<DevicePtr> ins, outs;
  for (const HostTensor& t : in) bytes.push_back(to_device_bytes(t));
  for (auto& b : bytes) ins.push_back(reinterpret_cast<DevicePtr>(b.data()));
  std::vector<std::vector<float>> results(g->outputs.size(), std::vector<float>(16, 7.0f));
  for (auto& r : results) outs.push_back(reinterpret_cast<DevicePtr>(r.data()));
  ASSERT_TRUE((*kernel)->launch(ins, outs));
  for (size_t o = 0; o < results.size(); ++o)
    for (size_t i = 0; i < 16; ++i) {
      const double want = (*ref)[o][i];
      const float got = results[o][i];
      if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << g->outputs[o].name << "[" << i << "]: " << got;
      else if (o < 5) EXPECT_EQ(got, want) << g->outputs[o].name << "[" << i << "]";
      else EXPECT_NEAR(got, want, 1e-6) << g->outputs[o].name << "[" << i << "]";
    }
  // Hand-checked: a NaN on either side gives 0 for every comparison.
  EXPECT_EQ(results[0][0], 0.0f);  // gt(nan, 1)
  EXPECT_EQ(results[1][1], 0.0f);  // ge(1, nan)
  EXPECT_EQ(results[4][3], 0.0f);  // eq(nan, nan)
  EXPECT_EQ(results[4][14], 1.0f);  // eq(-0, -0)
  EXPECT_EQ(results[1][4], 1.0f);  // ge(inf, inf)
  EXPECT_EQ(results[5][4], 1.0f);  // erf(inf)
}

}  // namespace
}  // namespace fusejit
