// GPU: reductions over a conv's output pixels finished from per-image tile
// partials (codegen_conv_spatial_test checks the plans) match the fp64
// reference on the FFMA and mma.sync mainloops in every precision, and with
// the reduction unfused (fuse_reductions=0) or its sums in a fixed order
// (atomic_partials=0); on sm_90 halo patches, also finished in the conv
// kernel by clusters over each image's tiles (spatial_cluster=auto, =8).
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
      for (const char* config : {"", "mainloop=ffma", "mainloop=mma", "fuse_reductions=0", "atomic_partials=0",
                                 "spatial_cluster=auto", "mainloop=mma,spatial_cluster=auto",
                                 "mainloop=mma,spatial_cluster=8"}) {
        if (std::string(config) == "mainloop=ffma" && p != Precision::FP32) continue;
        const std::string label = c.label + " " + std::string(precision_name(p)) + " '" + config + "'";
        auto g = testing::conv_spatial_chain(p, c);
        ASSERT_TRUE(g) << label << ": " << g.error().str();
        test_util::expect_matches_reference(engine, *g, config, label);
      }
}

// Nothing carries over from one launch to the next: the atomic sums (pass_spatial_atomics.cpp, the default)
// are zeroed by the finish kernel, and the in-kernel cluster finish (pass_spatial_cluster.cpp, spatial_cluster=auto
// on sm_90 halo patches) keeps its folds in shared memory. A second and third launch of the same loaded program, on
// fresh inputs, match the reference too (a sum left behind would add to the next).
TEST(GpuConvSpatial, SumsStartFromZeroEachLaunch) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  int clusters = 0;
  for (const char* config : {"", "mainloop=mma,spatial_cluster=auto"})
    for (Precision p : {Precision::FP32, Precision::BF16})
      for (const testing::ConvSpatialCase& c : testing::conv_spatial_cases()) {
        const bool atomics = std::string(config).empty();
        if (atomics && (c.op == "max" || c.op == "min")) continue;
        const std::string label = c.label + " " + std::string(precision_name(p)) + " '" + config + "'";
        auto g = testing::conv_spatial_chain(p, c);
        ASSERT_TRUE(g) << label << ": " << g.error().str();
        CompileOptions options;
        options.config = config;
        auto kernel = engine.compile(*g, options);
        ASSERT_TRUE(kernel) << label << ": " << kernel.error().str();
        const std::string& plan = (*kernel)->program().plan_text;
        if (atomics) ASSERT_NE(plan.find("atomic sums"), std::string::npos) << plan;
        clusters += plan.find("finished in the conv kernel: clusters of") != std::string::npos;
        for (uint64_t seed : {1, 2, 3}) {
          CheckOptions check;
          check.time = false;
          check.seed = seed;
          auto r = check_kernel(**kernel, *g, check);
          EXPECT_TRUE(r && r->pass) << label << ", launch with seed " << seed << ":\n"
                                    << (r ? r->summary() : r.error().str());
        }
      }
  auto info = device_info(0);
  ASSERT_TRUE(info) << info.error().str();
  if (info->cc_major >= 9) EXPECT_GE(clusters, 8);  // the halo-patch cases on sm_90 (all but the strided), each precision
}

}  // namespace
}  // namespace fusejit
