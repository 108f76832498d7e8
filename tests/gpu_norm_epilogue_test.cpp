// GPU: the group / layer norms done in the wgmma epilogue (on by default;
// tests/norm_epilogue_cases.h: ragged M, a ragged column tile, with and
// without affine, every precision mode), cooperative and ping-pong tiles,
// against the fp64 reference at each mode's tolerance with NaN-poisoned
// outputs (check_kernel). Skipped without a CUDA device.
#include <gtest/gtest.h>

#include "fusejit/engine.h"
#include "runtime/cuda_driver.h"
#include "tests/norm_epilogue_cases.h"
#include "tests/reference_check.h"

namespace fusejit {
namespace {

TEST(GpuNormEpilogue, MatchesReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  const auto cases = testing_norm::norm_epilogue_cases({Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16});
  for (const char* config : {"", "wgmma_schedule=pingpong"}) {
    for (const auto& c : cases) {
      ASSERT_TRUE(c.graph) << c.label << ": " << c.graph.error().str();
      if (std::string(config).find("pingpong") != std::string::npos && c.graph->precision == Precision::FP32) continue;
      test_util::expect_matches_reference(engine, *c.graph, config, c.label);
    }
  }
}

}  // namespace
}  // namespace fusejit
