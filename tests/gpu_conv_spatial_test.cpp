// GPU: reductions over a conv's output pixels finished from per-image tile
// partials (codegen_conv_spatial_test checks the plans) match the fp64
// reference on the FFMA and mma.sync mainloops in every precision, and with
// the reduction unfused (fuse_reductions=0).
#include <gtest/gtest.h>

#include "runtime/cuda_driver.h"
#include "tests/conv_spatial_cases.h"
#include "tests/reference_check.h"

namespace fusejit {
namespace {

TEST(GpuConvSpatial, PartialsMatchReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16})
    for (const testing::ConvSpatialCase& c : testing::conv_spatial_cases())
      for (const char* config : {"", "mainloop=ffma", "mainloop=mma", "fuse_reductions=0"}) {
        if (std::string(config) == "mainloop=ffma" && p != Precision::FP32) continue;
        const std::string label = c.label + " " + std::string(precision_name(p)) + " '" + config + "'";
        auto g = testing::conv_spatial_chain(p, c);
        ASSERT_TRUE(g) << label << ": " << g.error().str();
        test_util::expect_matches_reference(engine, *g, config, label);
      }
}

}  // namespace
}  // namespace fusejit
