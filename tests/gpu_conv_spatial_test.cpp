// GPU: reductions over a conv's output pixels finished from per-image tile
// partials (codegen_conv_spatial_test checks the plans) match the fp64
// reference on the FFMA and mma.sync mainloops in every precision, and with
// the reduction unfused (fuse_reductions=0) or its sums in a fixed order
// (atomic_partials=0).
#include <gtest/gtest.h>

#include "compiler/program.h"
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
      for (const char* config : {"", "mainloop=ffma", "mainloop=mma", "fuse_reductions=0", "atomic_partials=0"}) {
        if (std::string(config) == "mainloop=ffma" && p != Precision::FP32) continue;
        const std::string label = c.label + " " + std::string(precision_name(p)) + " '" + config + "'";
        auto g = testing::conv_spatial_chain(p, c);
        ASSERT_TRUE(g) << label << ": " << g.error().str();
        test_util::expect_matches_reference(engine, *g, config, label);
      }
}

// The atomic sums (pass_spatial_atomics.cpp) are zeroed by the finish kernel: a second and third launch of the
// same loaded program, on fresh inputs, match the reference too (a sum left behind would add to the next).
TEST(GpuConvSpatial, AtomicSumsStartFromZeroEachLaunch) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  for (Precision p : {Precision::FP32, Precision::BF16})
    for (const testing::ConvSpatialCase& c : testing::conv_spatial_cases()) {
      if (c.op == "max" || c.op == "min") continue;
      const std::string label = c.label + " " + std::string(precision_name(p));
      auto g = testing::conv_spatial_chain(p, c);
      ASSERT_TRUE(g) << label << ": " << g.error().str();
      auto kernel = engine.compile(*g, CompileOptions{});
      ASSERT_TRUE(kernel) << label << ": " << kernel.error().str();
      ASSERT_NE((*kernel)->program().plan_text.find("atomic sums"), std::string::npos) << (*kernel)->program().plan_text;
      for (uint64_t seed : {1, 2, 3}) {
        CheckOptions check;
        check.time = false;
        check.seed = seed;
        auto r = check_kernel(**kernel, *g, check);
        EXPECT_TRUE(r && r->pass) << label << ", launch with seed " << seed << ":\n"
                                  << (r ? r->summary() : r.error().str());
      }
    }
}

}  // namespace
}  // namespace fusejit
