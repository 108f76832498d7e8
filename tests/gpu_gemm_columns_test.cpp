// GPU: reductions over every row of a linear's or matmul's output, finished
// from per-row-tile column partials (codegen_gemm_columns_test checks the
// plans), match the fp64 reference on each mainloop (the default: wgmma or
// mma.sync; FFMA; mma.sync with split-K) in every precision, and with the
// reduction unfused (fuse_reductions=0). A second launch of the same program
// on fresh inputs matches too (nothing carries over between launches).
#include <gtest/gtest.h>

#include "runtime/cuda_driver.h"
#include "tests/gemm_column_cases.h"
#include "tests/reference_check.h"

namespace fusejit {
namespace {

TEST(GpuGemmColumns, PartialsMatchReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16})
    for (const testing::GemmColumnCase& c : testing::gemm_column_cases())
      for (const char* config : {"", "mainloop=ffma", "mainloop=mma", "mainloop=mma,split_k=3", "fuse_reductions=0"}) {
        if (std::string(config) == "mainloop=ffma" && p != Precision::FP32) continue;
        const std::string label = c.label + " " + std::string(precision_name(p)) + " '" + config + "'";
        auto g = testing::gemm_column_chain(p, c);
        ASSERT_TRUE(g) << label << ": " << g.error().str();
        test_util::expect_matches_reference(engine, *g, config, label);
      }
}

TEST(GpuGemmColumns, EachLaunchStartsAfresh) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  for (const testing::GemmColumnCase& c : testing::gemm_column_cases()) {
    auto g = testing::gemm_column_chain(Precision::BF16, c);
    ASSERT_TRUE(g) << c.label << ": " << g.error().str();
    auto kernel = engine.compile(*g, CompileOptions{});
    ASSERT_TRUE(kernel) << c.label << ": " << kernel.error().str();
    for (uint64_t seed : {5, 6}) {
      CheckOptions check;
      check.time = false;
      check.seed = seed;
      auto r = check_kernel(**kernel, *g, check);
      EXPECT_TRUE(r && r->pass) << c.label << " seed " << seed << ":\n" << (r ? r->summary() : r.error().str());
    }
  }
}

}  // namespace
}  // namespace fusejit
