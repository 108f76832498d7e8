// GPU: the pool1d along N fused into the anchor epilogue (codegen_pool1d_test
// checks the plans) matches the fp64 reference on every mainloop and
// precision: ragged M, floor mode, windows of 2 to 16, batched matmul; and
// the pool passes of pool_pass_cases.h.
#include <gtest/gtest.h>

#include "runtime/cuda_driver.h"
#include "tests/pool1d_cases.h"
#include "tests/pool_pass_cases.h"
#include "tests/reference_check.h"

namespace fusejit {
namespace {

TEST(GpuPool1d, FusedPoolMatchesReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16})
    for (const testing::Pool1dCase& c : testing::pool1d_cases())
      for (const char* config : {"", "mainloop=ffma", "mainloop=mma", "mainloop=wgmma"}) {
        const bool half = p == Precision::BF16 || p == Precision::F16;
        if (std::string(config) == "mainloop=wgmma" && (c.matmul || c.x.back() * (half ? 2 : 4) % 16)) continue;
        if (std::string(config) == "mainloop=ffma" && p != Precision::FP32) continue;
        const std::string label = c.label + " " + std::string(precision_name(p)) + " '" + config + "'";
        auto g = testing::pool1d_chain(p, c);
        ASSERT_TRUE(g) << label << ": " << g.error().str();
        test_util::expect_matches_reference(engine, *g, testing::pool1d_config(c, config), label);
      }
}

// Pools of one value to one shape in one kernel (a pool pass; codegen_pool_pass_test checks the plans), and each
// pool in a kernel of its own (pool_pass=0).
TEST(GpuPool1d, PoolPassMatchesReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16})
    for (testing::PoolPassCase& c : testing::pool_pass_cases(p))
      for (const char* config : {"", "pool_pass=0"}) {
        const std::string label = c.label + " " + std::string(precision_name(p)) + " '" + config + "'";
        ASSERT_TRUE(c.graph) << label << ": " << c.graph.error().str();
        test_util::expect_matches_reference(engine, *c.graph, config, label);
      }
}

}  // namespace
}  // namespace fusejit
