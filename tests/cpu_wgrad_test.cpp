// The CPU backend's conv2d_weight_grad kernel (compiler/llvm/lower_wgrad.cpp)
// against the fp64 reference: every shared geometry (tests/wgrad_cases.h) in
// fp32 and bf16, alone and with an epilogue; outputs NaN-poisoned, two seeds.
#include <gtest/gtest.h>

#include "compiler/cpu_program.h"
#include "fusejit/engine.h"
#include "runtime/kernel_check.h"
#include "tests/wgrad_cases.h"

namespace fusejit {
namespace {

TEST(CpuWgrad, EveryGeometryMatchesReference) {
  if (!cpu_backend_available()) GTEST_SKIP() << "this build has no LLVM CPU backend";
  Engine engine;
  CompileOptions opts;
  opts.backend = Backend::Cpu;
  CheckOptions check;
  check.time = false;
  int index = 0;
  for (Precision p : {Precision::FP32, Precision::BF16})
    for (const test_util::WgradGeom& geo : test_util::wgrad_geoms())
      for (bool epilogue : {false, true}) {
        const std::string what = std::string(precision_name(p)) + " " + geo.str() + (epilogue ? " + tanh * 2" : "");
        auto g = test_util::wgrad_graph(geo, p, epilogue);
        ASSERT_TRUE(g) << g.error().str();
        auto kernel = engine.compile(*g, opts);
        ASSERT_TRUE(kernel) << what << ": " << kernel.error().str();
        EXPECT_NE((*kernel)->program().plan_text.find("conv2d_weight_grad:"), std::string::npos)
            << (*kernel)->program().plan_text;
        for (uint64_t seed : {1u, 2u}) {
          check.seed = seed * 7919 + static_cast<uint64_t>(++index);
          auto r = check_kernel(**kernel, *g, check);
          ASSERT_TRUE(r) << what << ": " << r.error().str();
          EXPECT_TRUE(r->pass) << what << " (seed " << check.seed << "):\n" << r->summary();
        }
      }
}

}  // namespace
}  // namespace fusejit
